//! Worktrees under `.sanddune/worktrees/`: where an agent's branch is checked
//! out on the host, and how its commits come back to the target branch.
//! The only module that changes the user's git repository.
//!
//! A managed worktree is `.sanddune/worktrees/<name>`: `run-<run id>` for
//! merge-to-head, [`worktree_name`] of the branch for the branch strategy.
//! Opening one takes its [`WorktreeLock`] first, then reuses the worktree if
//! it already exists for the same branch. Every change to git metadata
//! (branches, worktrees, merges into the target branch) happens under one
//! lock per repository, so parallel runs never race on git's lock files.
//! Decisions: ADR 0005.

mod agent_git;
mod copy;
mod diff;
mod lock;
mod merge;
mod pack;
mod push;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use git2::build::CheckoutBuilder;
use git2::{BranchType, Repository, WorktreeAddOptions, WorktreePruneOptions};

use crate::error::{Error, Result};
use lock::GitLock;

pub use agent_git::{AgentGitDir, SHARED_OBJECTS, TakenBack};
pub use copy::DEFAULT_COPY_TIMEOUT;
pub use diff::DiffStat;
pub use lock::{LockHolder, WorktreeLock};
pub use merge::{FinishedMerge, MergeOutcome};
pub use pack::{History, Pack};
pub use push::{PushTo, Pushed};

/// Where managed worktrees and their lock files live, under the repository
/// root.
pub const WORKTREES_DIR: &str = ".sanddune/worktrees";

/// Where run logs live, under the repository root.
pub const LOGS_DIR: &str = ".sanddune/logs";

/// The managed worktree name of a branch-strategy branch: `feature/x` is
/// `feature-x`. Two branches with one name (`a/b`, `a-b`) cannot both have a
/// worktree: the second is refused, naming the first.
pub fn worktree_name(branch: &str) -> String {
    branch.replace('/', "-")
}

/// The git repository a run works on.
pub struct Repo {
    repo: Repository,
    root: PathBuf,
}

/// A managed worktree, the branch checked out in it, and its lock: until
/// [`Repo::close_worktree`] or drop, no other run can open the worktree.
/// Dropping it without closing releases the lock and leaves the worktree.
#[derive(Debug)]
pub struct Worktree {
    pub name: String,
    pub path: PathBuf,
    pub branch: String,
    /// The branch's commit when the worktree was opened (after a
    /// fast-forward, if any).
    pub base: String,
    /// The branch exists only for this run (merge-to-head).
    pub temporary: bool,
    pub origin: WorktreeOrigin,
    lock: WorktreeLock,
    /// The repository's common git dir, where its git lock lives.
    git_dir: PathBuf,
}

impl Worktree {
    pub fn lock(&self) -> &WorktreeLock {
        &self.lock
    }

    /// Fast-forward the branch to `head`, the tip of a git bundle of the
    /// commits made since the branch's tip (an isolated sandbox's sync out).
    /// False when `head` does not descend from the branch (the agent
    /// rewrote synced commits); the branch is then unchanged.
    ///
    /// Under the repository's git lock like every other change to git
    /// metadata: without it, one of 64 parallel runs' fetches failed about
    /// one CI run in three ("bad object refs/heads/sanddune/run-…").
    /// `<name>.sync` beside the worktree names `head` until the branch has
    /// it: if the run dies in between, `sanddune gc` puts it on a branch,
    /// once the git commands it left running are done.
    pub fn fast_forward_from_bundle(&self, bundle: &Path, head: &str) -> Result<bool> {
        let pending = pending_sync_path(self.path.parent().unwrap_or(&self.path), &self.name);
        let git = GitLock::acquire(&self.git_dir)?;
        write_pending_sync(&pending, head)?;
        let bundle = bundle.to_str().ok_or_else(|| {
            Error::Other(anyhow::anyhow!(
                "a bundle path that is not UTF-8: {}",
                bundle.display()
            ))
        })?;
        git_locked(&self.path, &["fetch", "-q", bundle, "HEAD"], &git)?;
        let merged = git_locked(
            &self.path,
            &["merge", "-q", "--ff-only", "FETCH_HEAD"],
            &git,
        );
        let _ = std::fs::remove_file(&pending);
        Ok(merged.is_ok())
    }

    /// Check out the files of a worktree made without them
    /// ([`Repo::add_worktree_without_files`]) before anything is written
    /// into it or it is kept for a person; nothing for one that has them.
    pub fn write_files(&self) -> Result<()> {
        let _git = GitLock::acquire(&self.git_dir)?;
        write_skipped_files(&self.path)
    }

    /// A private directory for one sync's files, in the repository's git
    /// dir: on the repository's own disk, not on a `/tmp` that may be
    /// memory. Removed when dropped.
    pub fn sync_tempdir(&self) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix("sanddune-sync-")
            .tempdir_in(&self.git_dir)
            .map_err(|e| {
                Error::Other(anyhow::anyhow!(
                    "create a sync directory in {}: {e}",
                    self.git_dir.display()
                ))
            })
    }

    /// Write into the directory `out` the pack, with its index, that a
    /// sandbox with nothing needs for `tip` of this worktree's branch, with
    /// `history` of it (see [`History`]).
    pub fn pack_branch(&self, tip: &str, history: History, out: &Path) -> Result<Pack> {
        pack::pack_branch(&self.path, tip, history, out)
    }

    /// Write to `out` a thin pack of what `tip` has that `have`, a commit
    /// the sandbox holds, lacks; returns its size. An error unless `tip`
    /// descends from `have`.
    pub fn pack_since(&self, tip: &str, have: &str, out: &Path) -> Result<u64> {
        let repo = Repository::open(&self.path).map_err(|e| git_err("open worktree", e))?;
        let oid = |s: &str| git2::Oid::from_str(s).map_err(|e| git_err("read a commit", e));
        let (tip_id, have_id) = (oid(tip)?, oid(have)?);
        if !repo
            .graph_descendant_of(tip_id, have_id)
            .map_err(|e| git_err("compare commits", e))?
        {
            return Err(Error::Agent(format!(
                "branch `{}` moved from {} to {} on the host, which does not descend from it: the sandbox cannot follow a rewritten branch; close it and start a new one",
                self.branch,
                &have[..have.len().min(10)],
                &tip[..tip.len().min(10)]
            )));
        }
        pack::pack_since(&self.path, tip, have, out)
    }
}

fn pending_sync_path(worktrees_dir: &Path, name: &str) -> PathBuf {
    worktrees_dir.join(format!("{name}.sync"))
}

/// Write a pending sync's record in `.sanddune/worktrees`, which a head
/// run's agent can write: whatever is at its name (an earlier record, or a
/// link planted to a file of the user's) is removed, never written through.
fn write_pending_sync(pending: &Path, head: &str) -> Result<()> {
    use std::io::Write;
    let (Some(dir), Some(name)) = (
        pending.parent(),
        pending.file_name().and_then(|n| n.to_str()),
    ) else {
        return Err(Error::Other(anyhow::anyhow!(
            "no pending sync path: {}",
            pending.display()
        )));
    };
    let dir = crate::own_dir::OwnDir::open(dir, 2, true)?;
    if dir.kind(name).is_some() {
        dir.remove(name)
            .map_err(|e| Error::Other(anyhow::anyhow!("remove {}: {e}", pending.display())))?;
    }
    dir.create_new(name)
        .and_then(|mut f| f.write_all(head.as_bytes()))
        .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", pending.display())))
}

/// How [`Repo::add_worktree`] came by the worktree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorktreeOrigin {
    /// Created now (and its branch, if the branch did not exist).
    Created,
    /// It existed for this branch and is used as it was: with uncommitted
    /// work, level with or ahead of the target branch, diverged from it, or
    /// the host's HEAD is detached.
    Reused,
    /// It existed, was clean, and its branch was behind the target branch:
    /// fast-forwarded from commit `from` to the target.
    FastForwarded { from: String },
}

/// A worktree git knows of (`git worktree list`).
struct Registered {
    name: String,
    path: PathBuf,
    /// Its directory and admin files exist.
    valid: bool,
    /// The branch its HEAD names; none when detached or unreadable.
    branch: Option<String>,
}

/// Run the git CLI in `dir`, for what libgit2 cannot do (bundles). Returns
/// its trimmed stdout.
///
/// Never with automatic maintenance: a `fetch` or `merge` would otherwise
/// start `git gc --auto` (detached) on the user's repository once enough
/// packs pile up (every synced bundle is one), and that gc's `git worktree
/// prune` and repack run outside sanddune's git lock, racing the worktree
/// removals of parallel runs (found by 64 runs at once). The user's own git
/// commands still run it, between runs.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    run_git(&mut git_command(dir, args), args)
}

/// [`git`], with the git lock shared with the command and its helpers
/// ([`GitLock::share_with`]).
fn git_locked(dir: &Path, args: &[&str], lock: &GitLock) -> Result<String> {
    let mut cmd = git_command(dir, args);
    lock.share_with(&mut cmd);
    run_git(&mut cmd, args)
}

fn git_command(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "maintenance.auto=false", "-c", "gc.auto=0"])
        // Nor a daemon: one started under a shared git lock would hold it.
        .args(["-c", "core.fsmonitor=false"])
        // The worktree is the agent's writing: sanddune's own git calls run
        // no hook and never enter a submodule, whose git dir the agent may
        // have planted (`-c` reaches every git that this one starts).
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "submodule.recurse=false",
        ])
        .args([
            "-c",
            "diff.ignoreSubmodules=all",
            "-c",
            "status.submoduleSummary=false",
        ])
        .args(args);
    cmd
}

/// `git status --porcelain` in `dir`, one entry a line. Untracked files
/// are listed as by default whatever the user's `status.showUntrackedFiles`:
/// a new file left uncommitted must not go unreported.
pub fn status_porcelain(dir: &Path) -> Result<Vec<String>> {
    let args = ["status", "--porcelain", "--untracked-files=normal"];
    // Untrimmed: an entry may begin with a space (` M file`).
    let out = run_git_untrimmed(&mut git_command(dir, &args), &args)?;
    Ok(out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect())
}

fn run_git(cmd: &mut std::process::Command, args: &[&str]) -> Result<String> {
    run_git_untrimmed(cmd, args).map(|out| out.trim().to_string())
}

fn run_git_untrimmed(cmd: &mut std::process::Command, args: &[&str]) -> Result<String> {
    let out = cmd.output().map_err(|e| {
        Error::input(format!(
            "cannot run git (is it installed and on PATH?): {e}"
        ))
    })?;
    if !out.status.success() {
        return Err(Error::Other(anyhow::anyhow!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git_err(what: &str, e: git2::Error) -> Error {
    Error::Other(anyhow::anyhow!("{what}: {}", e.message()))
}

/// Whether a new worktree gets its files now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Files {
    Written,
    Deferred,
}

/// `git worktree add` of `branch` at `path` with an index and no files:
/// every entry is marked skip-worktree, so git sees the worktree clean and
/// merges into it write only what they change. Call under the git lock.
fn add_worktree_without_files(root: &Path, name: &str, branch: &str, path: &Path) -> Result<()> {
    let path_str = path.to_str().ok_or_else(|| {
        Error::input(format!(
            "a worktree path that is not UTF-8: {}",
            path.display()
        ))
    })?;
    // git names the worktree's admin dir after the path's last component,
    // which is `name`.
    debug_assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(name));
    git(
        root,
        &["worktree", "add", "-q", "--no-checkout", path_str, branch],
    )?;
    // The index is made aside and renamed into place: until it is there,
    // gc knows the worktree as one killed while git made it.
    let admin = PathBuf::from(git(path, &["rev-parse", "--absolute-git-dir"])?);
    let aside = admin.join("index.sanddune");
    git_bytes(path, &["read-tree", "HEAD"], &[], Some(&aside))?;
    set_skip_worktree(path, true, Some(&aside))?;
    std::fs::rename(&aside, admin.join("index"))
        .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", admin.display())))
}

/// Mark (or unmark) every index entry of the worktree skip-worktree.
fn set_skip_worktree(path: &Path, skip: bool, index: Option<&Path>) -> Result<()> {
    let listed = git_bytes(path, &["ls-files", "-z"], &[], index)?;
    let flag = if skip {
        "--skip-worktree"
    } else {
        "--no-skip-worktree"
    };
    git_bytes(
        path,
        &["update-index", "-z", flag, "--stdin"],
        &listed,
        index,
    )
    .map(drop)
}

/// Check out the files of a worktree made without them (nothing for one
/// that has them): clear the skip-worktree marks and write the files the
/// index has and the disk lacks. Files already there are left alone.
fn write_skipped_files(path: &Path) -> Result<()> {
    let listed = git(path, &["ls-files", "-t"])?;
    if !listed.lines().any(|l| l.starts_with("S ")) {
        return Ok(());
    }
    set_skip_worktree(path, false, None)?;
    // What is missing now reads as deleted: restore exactly that.
    let deleted = git_bytes(path, &["ls-files", "-z", "--deleted"], &[], None)?;
    if deleted.is_empty() {
        return Ok(());
    }
    git_bytes(path, &["checkout-index", "-z", "--stdin"], &deleted, None).map(drop)
}

/// Run git in `dir` with `input` on its stdin (and `index` as its index
/// file, when given); its raw stdout.
fn git_bytes(dir: &Path, args: &[&str], input: &[u8], index: Option<&Path>) -> Result<Vec<u8>> {
    use std::io::Write;
    use std::process::Stdio;
    let mut cmd = git_command(dir, args);
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Error::input(format!(
                "cannot run git (is it installed and on PATH?): {e}"
            ))
        })?;
    // Written from a thread: git may fill its stdout before reading all.
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let done = child
        .wait_with_output()
        .map_err(|e| Error::Other(anyhow::anyhow!("git {}: {e}", args.join(" "))))?;
    let written = writer.join().unwrap_or(Ok(()));
    if !done.status.success() || written.is_err() {
        return Err(Error::Other(anyhow::anyhow!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&done.stderr).trim()
        )));
    }
    Ok(done.stdout)
}

impl Repo {
    /// The repository containing `cwd`, which must have at least one commit.
    pub fn discover(cwd: &Path) -> Result<Self> {
        let repo = Repository::discover(cwd).map_err(|_| {
            Error::input(format!(
                "{} is not inside a git repository: run sanddune in a repository (git init && git commit) or pass --cwd",
                cwd.display()
            ))
        })?;
        let root = repo
            .workdir()
            .ok_or_else(|| Error::input("the repository is bare: sanddune needs a working tree"))?
            .to_path_buf();
        if repo.head().is_err() {
            return Err(Error::input(format!(
                "the repository at {} has no commits yet: commit once before running an agent",
                root.display()
            )));
        }
        // Worktrees of a worktree would nest confusingly: always use the main one.
        let root = if repo.is_worktree() {
            repo.commondir()
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(root)
        } else {
            root
        };
        let repo = Repository::open(&root).map_err(|e| git_err("open repository", e))?;
        Ok(Self { repo, root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The common git dir that every worktree's `.git` file points into.
    pub fn git_dir(&self) -> PathBuf {
        self.repo.commondir().to_path_buf()
    }

    /// The host's current branch: the target branch of a run.
    pub fn current_branch(&self) -> Result<String> {
        let head = self.repo.head().map_err(|e| git_err("read HEAD", e))?;
        if !head.is_branch() {
            return Err(Error::input(
                "HEAD is detached: check out the branch the agent's commits should land on",
            ));
        }
        Ok(head.shorthand().unwrap_or("HEAD").to_string())
    }

    /// Open the managed worktree `.sanddune/worktrees/<name>` on `branch`,
    /// locked for the caller. If it already exists for `branch` it is reused
    /// with whatever work it holds (a clean one whose branch is behind the
    /// target branch is fast-forwarded first); otherwise it is created, and
    /// `branch` with it from HEAD when absent. Refused: an invalid branch,
    /// the host's checked-out branch, a worktree in use by another run, a
    /// directory there that is not a worktree of this repository or holds
    /// another branch, and a branch checked out in another worktree.
    pub fn add_worktree(&self, name: &str, branch: &str, temporary: bool) -> Result<Worktree> {
        self.open_worktree(name, branch, temporary, Files::Written)
    }

    /// [`Repo::add_worktree`] for a run whose agent works on a copy of the
    /// branch elsewhere (an isolated sandbox) and no host step needs the
    /// files: a new worktree gets its index but no files (every entry
    /// skip-worktree, so git sees it clean), which costs a fraction of a
    /// checkout on a big tree. Commits still land on its branch the usual
    /// way; [`Worktree::write_files`] checks the files out when someone
    /// needs them after all. A reused worktree is as [`Repo::add_worktree`]
    /// leaves it.
    pub fn add_worktree_without_files(
        &self,
        name: &str,
        branch: &str,
        temporary: bool,
    ) -> Result<Worktree> {
        self.open_worktree(name, branch, temporary, Files::Deferred)
    }

    fn open_worktree(
        &self,
        name: &str,
        branch: &str,
        temporary: bool,
        files: Files,
    ) -> Result<Worktree> {
        if git2::Branch::name_is_valid(branch).ok() != Some(true) {
            return Err(Error::input(format!(
                "`{branch}` is not a valid branch name"
            )));
        }
        // Lock files sit next to worktrees as `<name>.lock`; git refuses
        // branch names ending in `.lock`, so no worktree is named like one.
        if name.is_empty() || name.starts_with('.') || name.contains('/') || name.ends_with(".lock")
        {
            return Err(Error::input(format!(
                "`{name}` cannot name a worktree: use a plain directory name"
            )));
        }
        let dir = self.root.join(WORKTREES_DIR);
        {
            let _git = GitLock::acquire(&self.git_dir())?;
            self.exclude_sanddune_dirs()?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::Other(anyhow::anyhow!("create {}: {e}", dir.display())))?;
        let lock = WorktreeLock::acquire(&dir, name, branch, &self.git_dir())?;
        let path = dir.join(name);
        let _git = GitLock::acquire(&self.git_dir())?;
        let origin = if self.claim(name, branch, &path)? {
            // One a killed run left without files gets them: whoever
            // reuses it may need them.
            write_skipped_files(&path)?;
            self.fast_forward_if_behind(&path, branch)?
        } else {
            self.create_worktree(name, branch, &path, files)?;
            WorktreeOrigin::Created
        };
        Ok(Worktree {
            name: name.to_string(),
            base: self.branch_head(branch)?,
            path,
            branch: branch.to_string(),
            temporary,
            origin,
            lock,
            git_dir: self.git_dir(),
        })
    }

    /// What `path` is: true for a worktree of `branch` to reuse, false when
    /// free for a new one, an error when it is in the way.
    fn claim(&self, name: &str, branch: &str, path: &Path) -> Result<bool> {
        let registered = self.registered_worktrees()?;
        let at_path = |r: &&Registered| same_path(&r.path, path);
        if std::fs::symlink_metadata(path).is_ok() {
            return match registered.iter().filter(|r| r.valid).find(at_path) {
                Some(r) if r.branch.as_deref() == Some(branch) => Ok(true),
                Some(r) => Err(Error::input(format!(
                    "the worktree {} has {} checked out, not `{branch}`: finish the work there and `git worktree remove {}`, or use another branch name",
                    path.display(),
                    r.branch
                        .as_deref()
                        .map_or("a detached HEAD".to_string(), |b| format!("branch `{b}`")),
                    path.display()
                ))),
                None => Err(Error::input(format!(
                    "{} exists but is not a git worktree of this repository: move it away or delete it, then run again",
                    path.display()
                ))),
            };
        }
        // Registrations whose directory was deleted by hand would block
        // `git worktree add` under the same name.
        for r in registered
            .iter()
            .filter(|r| !r.valid && (r.name == name || same_path(&r.path, path)))
        {
            let wt = self
                .repo
                .find_worktree(&r.name)
                .map_err(|e| git_err("find worktree", e))?;
            wt.prune(None)
                .map_err(|e| git_err("prune a stale worktree", e))?;
        }
        let valid = || registered.iter().filter(|r| r.valid);
        if let Some(r) = valid().find(|r| r.branch.as_deref() == Some(branch)) {
            return Err(Error::input(format!(
                "branch `{branch}` is checked out in the worktree {}: finish the work there and `git worktree remove` it, or use another branch",
                r.path.display()
            )));
        }
        if let Some(r) = valid().find(|r| r.name == name) {
            return Err(Error::input(format!(
                "a git worktree named `{name}` already exists at {}: remove it (`git worktree remove`) or use another branch name",
                r.path.display()
            )));
        }
        Ok(false)
    }

    fn registered_worktrees(&self) -> Result<Vec<Registered>> {
        let names = self
            .repo
            .worktrees()
            .map_err(|e| git_err("list worktrees", e))?;
        Ok(names
            .iter()
            .filter_map(|name| name.ok().flatten())
            .filter_map(|name| self.repo.find_worktree(name).ok())
            .map(|wt| {
                let valid = wt.validate().is_ok() && wt.path().exists();
                let branch = valid
                    .then(|| Repository::open_from_worktree(&wt).ok())
                    .flatten()
                    .and_then(|r| {
                        r.find_reference("HEAD")
                            .ok()?
                            .symbolic_target()
                            .ok()??
                            .strip_prefix("refs/heads/")
                            .map(str::to_string)
                    });
                Registered {
                    name: wt.name().ok().flatten().unwrap_or_default().to_string(),
                    path: wt.path().to_path_buf(),
                    valid,
                    branch,
                }
            })
            .collect())
    }

    fn create_worktree(&self, name: &str, branch: &str, path: &Path, files: Files) -> Result<()> {
        let branch_ref = match self.repo.find_branch(branch, BranchType::Local) {
            Ok(b) => {
                if b.is_head() {
                    return Err(Error::input(format!(
                        "branch `{branch}` is checked out in the host repository; pick another branch for the agent"
                    )));
                }
                b
            }
            Err(_) => {
                let head = self
                    .repo
                    .head()
                    .and_then(|h| h.peel_to_commit())
                    .map_err(|e| git_err("read HEAD", e))?;
                self.repo
                    .branch(branch, &head, false)
                    .map_err(|e| git_err("create branch", e))?
            }
        };
        if files == Files::Deferred {
            return add_worktree_without_files(&self.root, name, branch, path);
        }
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(branch_ref.get()));
        self.repo
            .worktree(name, path, Some(&opts))
            .map_err(|e| git_err(&format!("create worktree for `{branch}`"), e))?;
        Ok(())
    }

    /// Bring a reused worktree's branch up to the target branch when that is
    /// a pure fast-forward of a clean worktree; anything else is left as it
    /// is, so no work in it is lost.
    fn fast_forward_if_behind(&self, path: &Path, branch: &str) -> Result<WorktreeOrigin> {
        let head = self.repo.head().map_err(|e| git_err("read HEAD", e))?;
        let target_name = head.shorthand().unwrap_or("HEAD").to_string();
        if !head.is_branch() {
            tracing::info!(worktree = %path.display(), "reusing the worktree as it is: the host's HEAD is detached");
            return Ok(WorktreeOrigin::Reused);
        }
        let target = head.peel_to_commit().map_err(|e| git_err("read HEAD", e))?;
        let ours = git2::Oid::from_str(&self.branch_head(branch)?)
            .map_err(|e| git_err("read branch", e))?;
        let behind = ours != target.id()
            && self
                .repo
                .graph_descendant_of(target.id(), ours)
                .map_err(|e| git_err("compare branches", e))?;
        if !behind {
            let diverged = ours != target.id()
                && !self
                    .repo
                    .graph_descendant_of(ours, target.id())
                    .map_err(|e| git_err("compare branches", e))?;
            if diverged {
                tracing::info!(worktree = %path.display(), branch, target = %target_name, "reusing the worktree as it is: its branch and the target branch have diverged");
            }
            return Ok(WorktreeOrigin::Reused);
        }
        if dirty(path)? {
            tracing::info!(worktree = %path.display(), branch, target = %target_name, "reusing the worktree as it is: it has uncommitted changes, so it is not fast-forwarded");
            return Ok(WorktreeOrigin::Reused);
        }
        let wt = Repository::open(path).map_err(|e| git_err("open worktree", e))?;
        let commit = wt
            .find_commit(target.id())
            .map_err(|e| git_err("read target", e))?;
        wt.checkout_tree(commit.as_object(), Some(CheckoutBuilder::new().safe()))
            .map_err(|e| git_err("fast-forward the reused worktree", e))?;
        wt.find_reference(&format!("refs/heads/{branch}"))
            .and_then(|mut r| {
                r.set_target(
                    target.id(),
                    &format!("sanddune: fast-forward reused worktree to {target_name}"),
                )
            })
            .map_err(|e| git_err("fast-forward the reused worktree", e))?;
        tracing::info!(worktree = %path.display(), branch, target = %target_name, "fast-forwarded the reused worktree to the target branch");
        Ok(WorktreeOrigin::FastForwarded {
            from: ours.to_string(),
        })
    }

    /// Copy `paths` from the repository into the same relative place in
    /// `worktree` (copyToWorktree), replacing what is there, within
    /// `timeout` ([`DEFAULT_COPY_TIMEOUT`] unless the caller sets one).
    /// Relative paths resolve against the repository root; absolute ones
    /// must be inside it. Every path is checked before anything is copied;
    /// an item cut off by the timeout or an error is removed, not left half
    /// copied. It blocks: in async code call it inside
    /// `tokio::task::block_in_place`.
    pub fn copy_to_worktree(
        &self,
        worktree: &Worktree,
        paths: &[PathBuf],
        timeout: Duration,
    ) -> Result<()> {
        copy::copy_to_worktree(&self.root, &worktree.path, paths, timeout)
    }

    /// Keep worktrees and logs out of the user's `git status`, without
    /// touching a tracked file (`.git/info/exclude` is local).
    pub fn exclude_sanddune_dirs(&self) -> Result<()> {
        let exclude = self.git_dir().join("info/exclude");
        let current = std::fs::read_to_string(&exclude).unwrap_or_default();
        let mut add = String::new();
        for pattern in ["/.sanddune/worktrees/", "/.sanddune/logs/"] {
            if !current.lines().any(|l| l.trim() == pattern) {
                add.push_str(pattern);
                add.push('\n');
            }
        }
        if add.is_empty() {
            return Ok(());
        }
        let mut text = current;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&add);
        // Replaced in one rename: a reader (git) never sees half a file.
        let dir = exclude.parent().unwrap();
        std::fs::create_dir_all(dir)
            .and_then(|_| tempfile::NamedTempFile::new_in(dir))
            .and_then(|mut tmp| {
                std::io::Write::write_all(&mut tmp, text.as_bytes())?;
                tmp.persist(&exclude).map_err(|e| e.error)
            })
            .map(drop)
            .map_err(|e| Error::Other(anyhow::anyhow!("update {}: {e}", exclude.display())))
    }

    /// The commit a branch points at.
    pub fn branch_head(&self, branch: &str) -> Result<String> {
        let b = self
            .repo
            .find_branch(branch, BranchType::Local)
            .map_err(|e| git_err("find branch", e))?;
        Ok(b.get()
            .peel_to_commit()
            .map_err(|e| git_err("read branch", e))?
            .id()
            .to_string())
    }

    /// Commits on `branch` since `base`, oldest first.
    pub fn commits_since(&self, base: &str, branch: &str) -> Result<Vec<String>> {
        let head = self.branch_head(branch)?;
        let mut walk = self
            .repo
            .revwalk()
            .map_err(|e| git_err("walk commits", e))?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .map_err(|e| git_err("walk commits", e))?;
        walk.push(git2::Oid::from_str(&head).map_err(|e| git_err("walk commits", e))?)
            .map_err(|e| git_err("walk commits", e))?;
        walk.hide(git2::Oid::from_str(base).map_err(|e| git_err("walk commits", e))?)
            .map_err(|e| git_err("walk commits", e))?;
        walk.map(|oid| {
            oid.map(|o| o.to_string())
                .map_err(|e| git_err("walk commits", e))
        })
        .collect()
    }

    /// True when the worktree has changes or untracked files.
    pub fn is_dirty(&self, worktree: &Worktree) -> Result<bool> {
        dirty(&worktree.path)
    }

    /// Merge `branch` into the host's checked-out branch (merge-to-head).
    /// Serialized with every other git-metadata change on this repository:
    /// parallel runs merging into one target take turns.
    pub fn merge_into_head(&self, branch: &str) -> Result<MergeOutcome> {
        match self.try_merge_into_head(branch)? {
            MergeOutcome::Conflicted(_) => Err(Error::Agent(format!(
                "the agent's branch `{branch}` conflicts with `{}`; its commits are kept on `{branch}`: merge it by hand",
                self.current_branch()?
            ))),
            done => Ok(done),
        }
    }

    /// [`Repo::merge_into_head`], with a conflict as an outcome (its paths;
    /// nothing changed) rather than an error: the merge queue goes on from it.
    pub fn try_merge_into_head(&self, branch: &str) -> Result<MergeOutcome> {
        let _git = GitLock::acquire(&self.git_dir())?;
        merge::merge_into_head(&self.repo, branch)
    }

    /// Finish the merge-to-head a killed run began, if one did (`sanddune
    /// gc`; the next merge does it too).
    pub fn finish_interrupted_merge(&self) -> Result<Option<FinishedMerge>> {
        let _git = GitLock::acquire(&self.git_dir())?;
        merge::finish_interrupted(&self.repo)
    }

    /// Give a worktree back: remove it if clean (and its branch when
    /// temporary and not `keep_branch`), keep it if dirty; release its lock
    /// either way. Returns the kept path. The value is spent afterwards:
    /// drop it.
    pub fn close_worktree(
        &self,
        worktree: &Worktree,
        keep_branch: bool,
    ) -> Result<Option<PathBuf>> {
        let (kept, removed) = self.close_worktree_later(worktree, keep_branch)?;
        if let Some(removed) = removed {
            removed.delete()?;
        }
        Ok(kept)
    }

    /// [`Self::close_worktree`], with a clean worktree's files moved out
    /// of the way instead of deleted: the worktree is gone for git and its
    /// name free at once, and [`Removed::delete`], which takes as long as
    /// the tree is big, can come later.
    pub fn close_worktree_later(
        &self,
        worktree: &Worktree,
        keep_branch: bool,
    ) -> Result<(Option<PathBuf>, Option<Removed>)> {
        if worktree.path.exists() && self.is_dirty(worktree)? {
            let kept = self.name_kept_worktree(&worktree.name, &worktree.branch)?;
            worktree.lock.release()?;
            return Ok((Some(kept), None));
        }
        let removed = {
            let _git = GitLock::acquire(&self.git_dir())?;
            let removed = self.remove_worktree_later(&worktree.name, &worktree.path)?;
            if worktree.temporary
                && !keep_branch
                && let Ok(mut b) = self.repo.find_branch(&worktree.branch, BranchType::Local)
            {
                b.delete()
                    .map_err(|e| git_err("delete temporary branch", e))?;
            }
            removed
        };
        worktree.lock.release()?;
        Ok((None, removed))
    }
}

/// Where a removed worktree's files wait to be deleted, beside the
/// worktrees: `.removed-<name>.<n>.<pid>` (no branch's worktree name
/// begins with a dot; the process is judged alive as a worktree lock's is). [`Removed::delete`] deletes them; `sanddune gc`
/// deletes those whose process is gone.
#[must_use = "delete() deletes the removed worktree's files"]
#[derive(Debug)]
pub struct Removed(PathBuf);

const REMOVED_PREFIX: &str = ".removed-";

impl Removed {
    /// Delete the files, following no link.
    pub fn delete(self) -> Result<()> {
        remove_dir(&self.0)
    }

    /// Whether `file_name` is a removed worktree of a process that is gone.
    fn orphaned(file_name: &str) -> bool {
        file_name
            .strip_prefix(REMOVED_PREFIX)
            .and_then(|rest| rest.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse().ok())
            .is_some_and(|pid| !lock::process_alive(pid))
    }
}

/// What `sanddune gc` did with a worktree whose run crashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Orphan {
    /// It was clean: removed. Its branch stays unless it was a temporary
    /// branch with nothing the current branch lacks.
    Removed { name: String, branch: String },
    /// It has uncommitted work: kept, only its stale lock removed.
    Kept { path: PathBuf, branch: String },
}

impl Repo {
    /// Worktrees left by crashed runs: their lock names a process that is
    /// gone (a run that ended normally leaves no lock). Worktrees of live
    /// runs and worktrees kept on purpose are not touched.
    pub fn gc_worktrees(&self) -> Result<Vec<Orphan>> {
        let dir = self.root.join(WORKTREES_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(vec![]);
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".lock"))
            else {
                continue;
            };
            let Some(holder) = lock::read_holder(&path, &self.git_dir()) else {
                continue; // not ours: add_worktree reports it when used
            };
            // When the run began: git lock files made since are its own.
            let began = std::fs::symlink_metadata(&path).and_then(|m| m.modified());
            // Taking the lock reclaims it only from a dead process.
            let Ok(lock) = WorktreeLock::acquire(&dir, name, &holder.branch, &self.git_dir())
            else {
                continue;
            };
            if let Ok(began) = began
                && let Err(e) = self.clear_orphan_git_locks(name, &holder.branch, began)
            {
                // Still an orphan for the next gc, once this process is gone.
                lock.leave();
                return Err(e);
            }
            let wt_path = dir.join(name);
            // A worktree git cannot open, or without an index yet, was
            // killed while being created (its `.git` file is written
            // before the checkout, and before any agent runs in it):
            // nothing of the run's is in it.
            let kept = match Repository::open(&wt_path) {
                Ok(repo) if repo.path().join("index").exists() => dirty(&wt_path)?,
                _ => false,
            };
            self.recover_synced(name, &holder.branch, kept)?;
            if kept {
                found.push(Orphan::Kept {
                    path: self.name_kept_worktree(name, &holder.branch)?,
                    branch: holder.branch,
                });
            } else {
                self.remove_orphan(name, &holder.branch)?;
                found.push(Orphan::Removed {
                    name: name.to_string(),
                    branch: holder.branch,
                });
            }
            lock.release()?;
        }
        Ok(found)
    }

    /// The git lock files a run killed inside a git write left: its
    /// branch's ref and reflog locks (libgit2 deleting or moving it), and
    /// its worktree's `index.lock` and `HEAD.lock`. Each would fail the
    /// branch's removal here, or the user's next commit in a kept worktree
    /// (found by kill -9 at seeded points).
    fn clear_orphan_git_locks(&self, name: &str, branch: &str, began: SystemTime) -> Result<()> {
        // A forged lock's branch must not steer the paths below.
        if !git2::Reference::is_valid_name(&format!("refs/heads/{branch}")) {
            return Ok(());
        }
        let _git = GitLock::acquire(&self.git_dir())?;
        let common = self.git_dir();
        let admin = common.join("worktrees").join(name);
        let what = format!("collect the orphaned worktree `{name}`");
        let locks = [
            common.join(format!("refs/heads/{branch}.lock")),
            common.join(format!("logs/refs/heads/{branch}.lock")),
            admin.join("index.lock"),
            admin.join("HEAD.lock"),
        ];
        lock::clear_stale_git_locks(&locks, began, &what)
    }

    /// [`Self::remove_worktree`], with the working tree moved aside to be
    /// deleted later (see [`Removed`]) when it can be; removed in place
    /// when it cannot. Call under the git lock.
    fn remove_worktree_later(&self, name: &str, path: &Path) -> Result<Option<Removed>> {
        let dir = self.root.join(WORKTREES_DIR);
        let own = dir.join(name);
        if path != own || crate::own_dir::linked(&own, 3) {
            // Refused, naming it, by the removal in place.
            return self.remove_worktree(name, path).map(|()| None);
        }
        static NTH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nth = NTH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let aside = dir.join(format!(
            "{REMOVED_PREFIX}{name}.{nth}.{}",
            std::process::id()
        ));
        if std::fs::rename(&own, &aside).is_err() {
            return self.remove_worktree(name, path).map(|()| None);
        }
        // The working tree is gone for git now: prune its admin dir only.
        let admin = self.git_dir().join("worktrees").join(name);
        let pruned = self.repo.find_worktree(name).and_then(|wt| {
            let mut opts = WorktreePruneOptions::new();
            opts.valid(true).working_tree(false);
            wt.prune(Some(&mut opts))
        });
        if let Err(e) = pruned {
            tracing::debug!("libgit2 could not prune worktree {name}: {e}; removing it");
            remove_dir(&admin)?;
        }
        Ok(Some(Removed(aside)))
    }

    /// The files of removed worktrees whose process is gone (killed
    /// between moving them aside and deleting them). Returns how many.
    pub fn gc_removed_worktrees(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(self.root.join(WORKTREES_DIR)) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(Removed::orphaned))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| remove_dir(&e.path()).is_ok())
            .count()
    }

    /// Remove a worktree: git's admin dir, then the working tree. Call
    /// under the git lock. A `git worktree prune` of another process (the
    /// user's `git gc --auto`) does not take that lock: it may delete the
    /// admin dir while libgit2 is deleting it, which is the same outcome.
    fn remove_worktree(&self, name: &str, path: &Path) -> Result<()> {
        // Only the directory sanddune made, through no link: not wherever a
        // `.git/worktrees/<name>/gitdir` file says (libgit2 deletes that).
        let own = self.root.join(WORKTREES_DIR).join(name);
        if path != own || crate::own_dir::linked(&own, 3) {
            return Err(Error::Other(anyhow::anyhow!(
                "refusing to remove {}: it is not the directory sanddune made at {} (or a link is in its path)",
                path.display(),
                own.display()
            )));
        }
        let admin = self.git_dir().join("worktrees").join(name);
        let pruned = match self.repo.find_worktree(name) {
            Ok(wt) => {
                // libgit2 deletes the working tree its admin dir names only
                // when that is ours; otherwise ours is removed below.
                let ours = wt.path() == path;
                let mut opts = WorktreePruneOptions::new();
                opts.valid(true).working_tree(ours);
                wt.prune(Some(&mut opts)).map(|()| ours)
            }
            Err(e) => Err(e),
        };
        match pruned {
            Ok(true) => Ok(()),
            Ok(false) => remove_dir(path),
            // Pruned by someone else, broken by a kill while git created it
            // (libgit2 cannot prune what it cannot read), or an admin file
            // a killed sync left half-written (`shallow`, found by kill -9
            // at seeded points): remove what is left, as prune would have.
            Err(e) => {
                tracing::debug!("libgit2 could not prune worktree {name}: {e}; removing it");
                remove_dir(&admin)?;
                remove_dir(path)
            }
        }
    }

    /// A run killed while fetching its sandbox's new commits into the
    /// worktree (isolated providers' sync), or before fast-forwarding its
    /// branch to them, left them reachable from nothing: the branch would
    /// then be dropped as merged and the commits lost (found by kill -9 at
    /// random points). Its `<name>.sync` names them: put them on the branch
    /// (a clean worktree is removed next anyway), or, beside a kept dirty
    /// worktree, on `<branch>-recovered`. (Killed before the fetch wrote
    /// them, they are only in the dead sandbox.)
    fn recover_synced(&self, name: &str, branch: &str, kept: bool) -> Result<()> {
        // First the lock: git commands the dead run left behind may still
        // be writing the commits (GitLock::share_with).
        let _git = GitLock::acquire(&self.git_dir())?;
        let pending = pending_sync_path(&self.root.join(WORKTREES_DIR), name);
        let fetched = std::fs::read_to_string(&pending)
            .ok()
            .and_then(|sha| git2::Oid::from_str(sha.trim()).ok())
            .filter(|oid| self.repo.find_commit(*oid).is_ok());
        let _ = std::fs::remove_file(&pending);
        match fetched {
            Some(fetched) => self.place_recovered(fetched, branch, kept),
            None => Ok(()),
        }
    }

    /// Put `commit` (commits a dead run's sandbox made) on `branch` when it
    /// is ahead of it and the branch's worktree goes; beside a kept dirty
    /// worktree, or when the branch moved elsewhere, on `<branch>-recovered`.
    /// Call under the git lock.
    fn place_recovered(&self, commit: git2::Oid, branch: &str, kept: bool) -> Result<()> {
        let tip = self
            .repo
            .find_branch(branch, BranchType::Local)
            .and_then(|b| b.get().peel_to_commit())
            .map(|c| c.id())
            .ok();
        let ahead = match tip {
            Some(tip) if tip == commit => return Ok(()),
            Some(tip) if self.repo.graph_descendant_of(tip, commit).unwrap_or(false) => {
                return Ok(()); // the branch has it already
            }
            Some(tip) => self.repo.graph_descendant_of(commit, tip).unwrap_or(false),
            None => true,
        };
        let target = if kept || !ahead {
            format!("refs/heads/{branch}-recovered")
        } else {
            format!("refs/heads/{branch}")
        };
        self.repo
            .reference(
                &target,
                commit,
                true,
                "sanddune gc: commits a sandbox made before its run died",
            )
            .map_err(|e| git_err("recover a sandbox's commits", e))?;
        tracing::info!(%branch, %commit, "recovered commits a crashed run's sandbox made");
        Ok(())
    }

    /// Store the commits in `bundle` (a dead run's sandbox's, from `base`
    /// to its HEAD) and put them on `branch`, whose worktree is `worktree`:
    /// while that worktree's orphaned lock is there, as its pending sync,
    /// which [`Repo::gc_worktrees`] finishes next; otherwise now (on
    /// `<branch>-recovered` if the worktree is still there). Returns
    /// the bundle's HEAD.
    pub fn recover_sandbox_commits(
        &self,
        worktree: &Path,
        branch: &str,
        bundle: &Path,
    ) -> Result<String> {
        let git = GitLock::acquire(&self.git_dir())?;
        let bundle = bundle.to_str().ok_or_else(|| {
            Error::Other(anyhow::anyhow!(
                "a bundle path that is not UTF-8: {}",
                bundle.display()
            ))
        })?;
        // `unbundle` stores the objects and leaves the user's FETCH_HEAD.
        let listed = git_locked(&self.root, &["bundle", "unbundle", bundle], &git)?;
        let head = listed
            .lines()
            .find_map(|l| l.strip_suffix(" HEAD"))
            .ok_or_else(|| Error::Other(anyhow::anyhow!("the sandbox's bundle has no HEAD")))?
            .to_string();
        let commit =
            git2::Oid::from_str(&head).map_err(|e| git_err("read the bundle's HEAD", e))?;
        let dir = self.root.join(WORKTREES_DIR);
        let name = worktree.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if dir.join(format!("{name}.lock")).exists() {
            write_pending_sync(&pending_sync_path(&dir, name), &head)?;
        } else {
            // A worktree still there has the branch checked out: moving the
            // branch under it would make it look changed.
            self.place_recovered(commit, branch, worktree.exists())?;
        }
        Ok(head)
    }

    fn remove_orphan(&self, name: &str, branch: &str) -> Result<()> {
        let _git = GitLock::acquire(&self.git_dir())?;
        self.remove_worktree(name, &self.root.join(WORKTREES_DIR).join(name))?;
        let head = self
            .repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map(|c| c.id());
        if let (true, Ok(head), Ok(mut b)) = (
            branch.starts_with("sanddune/run-"),
            head,
            self.repo.find_branch(branch, BranchType::Local),
        ) && let Ok(tip) = b.get().peel_to_commit()
            && (head == tip.id()
                || self
                    .repo
                    .graph_descendant_of(head, tip.id())
                    .unwrap_or(false))
        {
            b.delete()
                .map_err(|e| git_err("delete temporary branch", e))?;
        }
        Ok(())
    }

    /// Bring the worktree `name` that a warm container was made on (ADR
    /// 0037) to the host's HEAD for the run that claimed it: its files
    /// checked out at HEAD's commit, then its temporary branch set there.
    /// Refused when it has changes: nothing but the pool wrote it.
    pub fn reset_pooled_worktree(&self, name: &str, branch: &str) -> Result<()> {
        let path = self.root.join(WORKTREES_DIR).join(name);
        let _git = GitLock::acquire(&self.git_dir())?;
        let head = self
            .repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(|e| git_err("read HEAD", e))?;
        if self.branch_head(branch)? == head.id().to_string() {
            return Ok(());
        }
        if dirty(&path)? {
            return Err(Error::input(format!(
                "the warm container's worktree {} has changes nobody should have made",
                path.display()
            )));
        }
        let wt = Repository::open(&path).map_err(|e| git_err("open the worktree", e))?;
        let commit = wt
            .find_commit(head.id())
            .map_err(|e| git_err("read HEAD", e))?;
        wt.checkout_tree(commit.as_object(), Some(CheckoutBuilder::new().force()))
            .map_err(|e| git_err("check out HEAD in the warm worktree", e))?;
        wt.find_reference(&format!("refs/heads/{branch}"))
            .and_then(|mut r| r.set_target(head.id(), "sanddune: a warm worktree brought to HEAD"))
            .map_err(|e| git_err("check out HEAD in the warm worktree", e))?;
        Ok(())
    }

    /// Put `branch` in the worktree `name` of a warm container that a
    /// branch run claimed (ADR 0037). The worktree holds the slot's clean
    /// temporary branch `temporary`. `branch` is made at HEAD when it does
    /// not exist, as for any branch run; its commit is checked out, the
    /// worktree's HEAD names it, and the temporary branch goes. Refused
    /// where a branch run's own worktree would be refused or reused:
    /// `branch` checked out anywhere, or its worktree there already.
    pub fn switch_pooled_worktree(&self, name: &str, temporary: &str, branch: &str) -> Result<()> {
        if git2::Branch::name_is_valid(branch).ok() != Some(true) {
            return Err(Error::input(format!(
                "`{branch}` is not a valid branch name"
            )));
        }
        if let Some(own) = self.branch_worktree_there(branch) {
            return Err(Error::input(format!(
                "the branch's worktree {} is there, and is reused with its work",
                own.display()
            )));
        }
        let dir = self.root.join(WORKTREES_DIR);
        let _git = GitLock::acquire(&self.git_dir())?;
        let head = self.repo.head().map_err(|e| git_err("read HEAD", e))?;
        let holders = self.registered_worktrees()?;
        if head.is_branch() && head.shorthand().ok() == Some(branch)
            || holders
                .iter()
                .any(|r| r.valid && r.branch.as_deref() == Some(branch))
        {
            return Err(Error::input(format!(
                "branch `{branch}` is checked out elsewhere"
            )));
        }
        let path = dir.join(name);
        if dirty(&path)? {
            return Err(Error::input(format!(
                "the warm container's worktree {} has changes nobody should have made",
                path.display()
            )));
        }
        let commit = match self.repo.find_branch(branch, BranchType::Local) {
            Ok(b) => b.get().peel_to_commit(),
            Err(_) => head.peel_to_commit().and_then(|c| {
                self.repo.branch(branch, &c, false)?;
                Ok(c)
            }),
        }
        .map_err(|e| git_err(&format!("read or create branch `{branch}`"), e))?
        .id();
        let wt = Repository::open(&path).map_err(|e| git_err("open the worktree", e))?;
        let switch = |e| git_err(&format!("switch the warm worktree to `{branch}`"), e);
        let commit = wt.find_commit(commit).map_err(switch)?;
        wt.checkout_tree(commit.as_object(), Some(CheckoutBuilder::new().safe()))
            .map_err(switch)?;
        wt.set_head(&format!("refs/heads/{branch}"))
            .map_err(switch)?;
        if let Ok(mut b) = self.repo.find_branch(temporary, BranchType::Local) {
            b.delete()
                .map_err(|e| git_err("delete temporary branch", e))?;
        }
        Ok(())
    }

    /// The worktree a run on `branch` reuses (`.sanddune/worktrees/<name>`),
    /// if anything is there: a warm container's worktree is not put on
    /// that branch then (checked before a claim, and again at the switch).
    pub fn branch_worktree_there(&self, branch: &str) -> Option<PathBuf> {
        let own = self.root.join(WORKTREES_DIR).join(worktree_name(branch));
        std::fs::symlink_metadata(&own).is_ok().then_some(own)
    }

    /// Open the worktree `name` of a warm container a run claimed, which
    /// [`Repo::reset_pooled_worktree`] or [`Repo::switch_pooled_worktree`]
    /// made ready with `branch`, locked for the run, as its new worktree
    /// (`temporary`: a merge-to-head run's, whose branch goes after it).
    /// Made by the pool with its files, it needs none of a reused one's
    /// steps.
    pub fn open_claimed_worktree(
        &self,
        name: &str,
        branch: &str,
        temporary: bool,
    ) -> Result<Worktree> {
        let dir = self.root.join(WORKTREES_DIR);
        let lock = WorktreeLock::acquire(&dir, name, branch, &self.git_dir())?;
        let path = dir.join(name);
        let holds = self
            .registered_worktrees()?
            .iter()
            .any(|r| r.valid && same_path(&r.path, &path) && r.branch.as_deref() == Some(branch));
        if !holds {
            return Err(Error::input(format!(
                "the warm container's worktree {} does not hold `{branch}`",
                path.display()
            )));
        }
        Ok(Worktree {
            name: name.to_string(),
            base: self.branch_head(branch)?,
            path,
            branch: branch.to_string(),
            temporary,
            origin: WorktreeOrigin::Created,
            lock,
            git_dir: self.git_dir(),
        })
    }

    /// Where a kept worktree stays: a branch run's is named by its branch,
    /// so the next run on the branch reuses it. One a branch run took from
    /// a warm container (`run-<id>`) moves there, unless something else
    /// is; every other stays where it is.
    fn name_kept_worktree(&self, name: &str, branch: &str) -> Result<PathBuf> {
        let dir = self.root.join(WORKTREES_DIR);
        let here = dir.join(name);
        let own = worktree_name(branch);
        if own == name
            || !name.starts_with("run-")
            || branch == format!("sanddune/{name}")
            || std::fs::symlink_metadata(dir.join(&own)).is_ok()
        {
            return Ok(here);
        }
        let _git = GitLock::acquire(&self.git_dir())?;
        let there = dir.join(&own);
        std::fs::rename(&here, &there).map_err(|e| {
            Error::Other(anyhow::anyhow!(
                "move {} to {}: {e}",
                here.display(),
                there.display()
            ))
        })?;
        // What git moving it would write: where its admin dir's worktree is.
        let gitdir = self.git_dir().join("worktrees").join(name).join("gitdir");
        std::fs::write(&gitdir, format!("{}\n", there.join(".git").display()))
            .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", gitdir.display())))?;
        Ok(there)
    }

    /// Remove the worktree `name` of a warm container no run claimed, and
    /// its temporary branch, which holds nothing of anyone's.
    pub fn remove_pooled_worktree(&self, name: &str, branch: &str) -> Result<()> {
        let _git = GitLock::acquire(&self.git_dir())?;
        self.remove_worktree(name, &self.root.join(WORKTREES_DIR).join(name))?;
        if let Ok(mut b) = self.repo.find_branch(branch, BranchType::Local) {
            b.delete()
                .map_err(|e| git_err("delete temporary branch", e))?;
        }
        Ok(())
    }
}

/// Remove a directory tree that may already be gone.
fn remove_dir(path: &Path) -> Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Other(anyhow::anyhow!(
            "remove worktree {}: {e}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// True when the worktree has changes or untracked files. Git's own
/// status: libgit2's does not honour skip-worktree entries, which a
/// worktree made without files has.
fn dirty(worktree: &Path) -> Result<bool> {
    Ok(!status_porcelain(worktree)?.is_empty())
}

/// One place on disk, however it is spelled (a symlinked temp dir, `..`).
fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_sync_is_never_written_through_a_planted_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let marker = outside.path().join("bashrc");
        std::fs::write(&marker, "the user's").unwrap();
        let dir = root.path().join(WORKTREES_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let pending = pending_sync_path(&dir, "feat");
        std::os::unix::fs::symlink(&marker, &pending).unwrap();
        write_pending_sync(&pending, "abc123").unwrap();
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "the user's");
        assert!(!pending.is_symlink());
        assert_eq!(std::fs::read_to_string(&pending).unwrap(), "abc123");
        // An earlier record is replaced.
        write_pending_sync(&pending, "def456").unwrap();
        assert_eq!(std::fs::read_to_string(&pending).unwrap(), "def456");
    }
}
