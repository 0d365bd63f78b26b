//! Worktrees under `.sanddune/worktrees/`: where an agent's branch is checked
//! out on the host, and how its commits come back to the target branch.
//! The only module that changes the user's git repository.

mod copy;
mod lock;
mod merge;

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{BranchType, Repository, StatusOptions, WorktreeAddOptions, WorktreePruneOptions};

use crate::error::{Error, Result};
use lock::GitLock;

pub use copy::DEFAULT_COPY_TIMEOUT;
pub use merge::MergeOutcome;

/// The git repository a run works on.
pub struct Repo {
    repo: Repository,
    root: PathBuf,
}

/// A worktree sanddune created, and the branch checked out in it.
#[derive(Clone, Debug)]
pub struct Worktree {
    pub name: String,
    pub path: PathBuf,
    pub branch: String,
    /// The branch's commit when the worktree was created.
    pub base: String,
    /// The branch exists only for this run (merge-to-head).
    pub temporary: bool,
}

/// Run the git CLI in `dir`, for what libgit2 cannot do (bundles). Returns
/// its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| {
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
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn git_err(what: &str, e: git2::Error) -> Error {
    Error::Other(anyhow::anyhow!("{what}: {}", e.message()))
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

    /// Create a worktree at `.sanddune/worktrees/<name>` on `branch`, creating
    /// the branch from HEAD when it does not exist.
    pub fn add_worktree(&self, name: &str, branch: &str, temporary: bool) -> Result<Worktree> {
        if git2::Branch::name_is_valid(branch).ok() != Some(true) {
            return Err(Error::input(format!(
                "`{branch}` is not a valid branch name"
            )));
        }
        let dir = self.root.join(".sanddune/worktrees");
        let path = dir.join(name);
        let _git = GitLock::acquire(&self.git_dir())?;
        if path.exists() {
            return Err(Error::input(format!(
                "a worktree already exists at {} (kept from an earlier run?): inspect it, then `git worktree remove {}`, or choose another branch",
                path.display(),
                path.display()
            )));
        }
        self.exclude_sanddune_dirs()?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::Other(anyhow::anyhow!("create {}: {e}", dir.display())))?;
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
        let base = branch_ref
            .get()
            .peel_to_commit()
            .map_err(|e| git_err("read branch", e))?
            .id()
            .to_string();
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(branch_ref.get()));
        self.repo
            .worktree(name, &path, Some(&opts))
            .map_err(|e| git_err(&format!("create worktree for `{branch}`"), e))?;
        Ok(Worktree {
            name: name.to_string(),
            path,
            branch: branch.to_string(),
            base,
            temporary,
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
    fn exclude_sanddune_dirs(&self) -> Result<()> {
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
        let repo = Repository::open(&worktree.path).map_err(|e| git_err("open worktree", e))?;
        let mut opts = StatusOptions::new();
        opts.include_untracked(true).include_ignored(false);
        let statuses = repo
            .statuses(Some(&mut opts))
            .map_err(|e| git_err("worktree status", e))?;
        Ok(!statuses.is_empty())
    }

    /// Merge `branch` into the host's checked-out branch (merge-to-head).
    /// Serialized with every other git-metadata change on this repository:
    /// parallel runs merging into one target take turns.
    pub fn merge_into_head(&self, branch: &str) -> Result<MergeOutcome> {
        let _git = GitLock::acquire(&self.git_dir())?;
        merge::merge_into_head(&self.repo, branch)
    }

    /// Remove a clean worktree (and its branch when temporary); keep a dirty
    /// one. Returns the kept path.
    pub fn close_worktree(
        &self,
        worktree: &Worktree,
        keep_branch: bool,
    ) -> Result<Option<PathBuf>> {
        if worktree.path.exists() && self.is_dirty(worktree)? {
            return Ok(Some(worktree.path.clone()));
        }
        let _git = GitLock::acquire(&self.git_dir())?;
        let wt = self
            .repo
            .find_worktree(&worktree.name)
            .map_err(|e| git_err("find worktree", e))?;
        let mut opts = WorktreePruneOptions::new();
        opts.valid(true).working_tree(true);
        wt.prune(Some(&mut opts))
            .map_err(|e| git_err("remove worktree", e))?;
        if worktree.temporary
            && !keep_branch
            && let Ok(mut b) = self.repo.find_branch(&worktree.branch, BranchType::Local)
        {
            b.delete()
                .map_err(|e| git_err("delete temporary branch", e))?;
        }
        Ok(None)
    }
}
