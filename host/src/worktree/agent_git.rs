//! The agent's own git dir, for a sandbox that shares host paths (docker,
//! podman): the repository's git dir is never writable from the sandbox
//! (ADR 0025).
//!
//! The sandbox sees the worktree's files as they are on the host, but where
//! git looks for the worktree's git dir it finds the agent git dir instead:
//! its own `HEAD`, refs, index and a config sanddune writes, with the
//! repository's objects shared read-only through `objects/info/alternates`.
//! The agent commits there with a plain `git commit`. The host takes its
//! commits back the way it takes an isolated sandbox's: it reads the run's
//! branch and the objects the agent wrote, never following a symlink and
//! checking every object's hash, keeps them only if they descend from what
//! it last took back, and fast-forwards the branch. Nothing the agent
//! writes is ever run, followed or read as git config on the host.
//!
//! On the host the agent git dir is `<git dir>/sanddune-agent/<id>/git`,
//! beside a `.git` file (`dot-git`) that is laid read-only over a linked
//! worktree's own, what `gc` needs to know of the run (`run.json`), and a
//! lock held while a run uses it: `gc` brings back the last commits of the
//! ones whose lock is free (a killed run's) and removes them.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

use super::lock::GitLock;
use super::{Repo, git_err, same_path};
use crate::error::{Error, Result};
use crate::own_dir::OwnDir;

/// Under the repository's common git dir, which no sandbox can write.
const AGENT_GIT_DIRS: &str = "sanddune-agent";

/// In an agent git dir parked for a warm container.
const PARKED: &str = "parked";

/// Where the repository's objects appear inside the agent git dir (a
/// read-only mount the sandbox provider's capability adds).
pub const SHARED_OBJECTS: &str = "sanddune-objects";

/// The most one object, a ref file or all of the agent's packs may take.
const OBJECT_CAP: u64 = 1 << 30;
const REFS_CAP: u64 = 64 << 20;
const PACKS_CAP: u64 = 8 << 30;

/// One sandbox's agent git dir, owned by the host for as long as the
/// sandbox lives. See the module docs.
#[derive(Debug)]
pub struct AgentGitDir {
    /// `<git dir>/sanddune-agent/<id>`.
    home: PathBuf,
    /// The repository's common git dir.
    common: PathBuf,
    /// The worktree (the repository root under head).
    worktree: PathBuf,
    /// Where git in the sandbox looks for the worktree's git dir: the
    /// host path of the worktree's own (the sandbox sees the worktree at
    /// its host path).
    target: PathBuf,
    /// The index of the worktree on the host, kept in step with the branch.
    host_index: PathBuf,
    /// Whether the worktree is linked (its `.git` is a file).
    linked: bool,
    branch: String,
    /// The branch's tip when the agent got it or when its commits last
    /// came back.
    synced: Oid,
    /// The submodules' `.git` entries in the worktree as the run found
    /// them: the agent must not leave one of its own for the user's git.
    submodules: Vec<(PathBuf, DotGit)>,
    /// Held while the sandbox may use the directory; `gc` removes only
    /// agent git dirs whose lock it can take.
    _lock: File,
}

/// What a submodule's `.git` in the worktree is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DotGit {
    Absent,
    /// A `.git` file (git's own: `gitdir: ../.git/modules/NAME`).
    File(Vec<u8>),
    /// Anything else: a directory, a symlink.
    Other,
}

impl DotGit {
    fn of(path: &Path) -> Self {
        match std::fs::symlink_metadata(path) {
            Err(_) => Self::Absent,
            Ok(m) if m.file_type().is_file() => std::fs::read(path).map_or(Self::Other, Self::File),
            Ok(_) => Self::Other,
        }
    }
}

/// What [`AgentGitDir::take_back`] brought back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenBack {
    pub from: String,
    pub to: String,
    /// Objects copied into the repository.
    pub objects: usize,
}

impl Repo {
    /// Make an agent git dir for a sandbox on `worktree` (the repository
    /// root, or one of its managed worktrees) that works on `branch`, which
    /// must be checked out there. `id` names it (unique per sandbox).
    pub fn agent_git_dir(&self, worktree: &Path, branch: &str, id: &str) -> Result<AgentGitDir> {
        if let Ok(format) = self
            .repo
            .config()
            .and_then(|c| c.get_string("extensions.objectformat"))
            && format != "sha1"
        {
            return Err(Error::input(format!(
                "the repository uses {format} object ids; a sandbox that shares host paths needs a sha1 repository"
            )));
        }
        let common = self.git_dir();
        let at_root = same_path(worktree, &self.root);
        let own = if at_root {
            common.clone()
        } else {
            let wt = Repository::open(worktree).map_err(|e| git_err("open the worktree", e))?;
            wt.path().to_path_buf()
        };
        let home = common.join(AGENT_GIT_DIRS).join(id);
        let err = |what: &str, e: std::io::Error| {
            Error::Other(anyhow::anyhow!("{what} in {}: {e}", home.display()))
        };
        std::fs::create_dir_all(home.parent().expect("a parent"))
            .map_err(|e| err("create the agent git dir", e))?;
        // One parked for a warm container (`park`) is this run's to use: its
        // directories are that container's mounts, so they stay and their
        // contents are written anew.
        let parked = std::fs::symlink_metadata(home.join(PARKED)).is_ok_and(|m| m.is_file());
        if !parked {
            std::fs::create_dir(&home).map_err(|e| err("create the agent git dir", e))?;
        }
        let lock = lock_file(&home.join("lock")).map_err(|e| err("lock", e))?;
        if parked {
            empty_dir(&home.join("git")).map_err(|e| err("empty the parked agent git dir", e))?;
            std::fs::remove_file(home.join(PARKED)).map_err(|e| err("adopt", e))?;
        }
        let tip = self
            .repo
            .find_branch(branch, git2::BranchType::Local)
            .and_then(|b| b.get().peel_to_commit())
            .map_err(|e| git_err("read the branch", e))?
            .id();
        let git = home.join("git");
        self.write_agent_git_dir(&git, &own, branch, tip)
            .map_err(|e| err("write the agent git dir", e))?;
        if !parked {
            std::fs::create_dir(home.join("empty")).map_err(|e| err("create", e))?;
        }
        let record = Record {
            branch: branch.to_string(),
            worktree: worktree.to_path_buf(),
            own: own.clone(),
            linked: !at_root,
        };
        std::fs::write(
            home.join("run.json"),
            serde_json::to_vec(&record).expect("serializable"),
        )
        .map_err(|e| err("write the run's record", e))?;
        if !at_root {
            std::fs::write(home.join("dot-git"), format!("gitdir: {}\n", own.display()))
                .map_err(|e| err("write the .git file", e))?;
        }
        Ok(AgentGitDir {
            home,
            common,
            worktree: worktree.to_path_buf(),
            target: if at_root {
                worktree.join(".git")
            } else {
                own.clone()
            },
            host_index: own.join("index"),
            linked: !at_root,
            branch: branch.to_string(),
            submodules: submodule_dot_gits(&self.repo, tip, worktree),
            synced: tip,
            _lock: lock,
        })
    }

    /// The files of a new agent git dir at `git`: a repository of its own
    /// whose objects are the repository's (`alternates`), whose branches
    /// and tags are a copy, whose index and excludes are the worktree's,
    /// with the repository's hooks (they run in the sandbox) and a config
    /// of sanddune's (the repository's may hold credentials).
    fn write_agent_git_dir(
        &self,
        git: &Path,
        own: &Path,
        branch: &str,
        tip: Oid,
    ) -> std::io::Result<()> {
        let common = self.git_dir();
        for dir in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
            "hooks",
            SHARED_OBJECTS,
        ] {
            std::fs::create_dir_all(git.join(dir))?;
        }
        std::fs::write(git.join("HEAD"), format!("ref: refs/heads/{branch}\n"))?;
        let mut config = String::from(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
        );
        // A hooks path in the tracked tree (husky, pre-commit) keeps working.
        if let Ok(path) = self
            .repo
            .config()
            .and_then(|c| c.get_string("core.hooksPath"))
        {
            config.push_str(&format!("\thooksPath = {}\n", config_value(&path)));
        }
        std::fs::write(git.join("config"), config)?;
        std::fs::write(
            git.join("objects/info/alternates"),
            format!("../{SHARED_OBJECTS}\n"),
        )?;
        let mut packed = String::from("# pack-refs with: peeled sorted\n");
        let mut refs: Vec<(String, Oid)> = self
            .repo
            .references()
            .map_err(std::io::Error::other)?
            .flatten()
            .filter_map(|r| Some((r.name().ok()?.to_string(), r.target()?)))
            .filter(|(name, _)| name.starts_with("refs/heads/") || name.starts_with("refs/tags/"))
            .collect();
        refs.sort();
        for (name, oid) in refs {
            packed.push_str(&format!("{oid} {name}\n"));
        }
        std::fs::write(git.join("packed-refs"), packed)?;
        let loose = git.join("refs/heads").join(branch);
        std::fs::create_dir_all(loose.parent().expect("a parent"))?;
        std::fs::write(loose, format!("{tip}\n"))?;
        for (from, to) in [
            (own.join("index"), "index"),
            (common.join("info/exclude"), "info/exclude"),
            (common.join("shallow"), "shallow"),
        ] {
            if from.is_file() {
                std::fs::copy(&from, git.join(to))?;
            }
        }
        if let Ok(hooks) = std::fs::read_dir(common.join("hooks")) {
            for hook in hooks.flatten() {
                let name = hook.file_name();
                let is_file = hook.file_type().map(|t| t.is_file()).unwrap_or(false);
                if is_file && !name.to_string_lossy().ends_with(".sample") {
                    std::fs::copy(hook.path(), git.join("hooks").join(name))?;
                }
            }
        }
        Ok(())
    }

    /// Remove the agent git dir parked for the warm container of run `id`
    /// (see [`AgentGitDir::park`]), if no run took it over.
    pub fn remove_parked_agent_git_dir(&self, id: &str) {
        let home = self.git_dir().join(AGENT_GIT_DIRS).join(id);
        if home.join(PARKED).exists() {
            let _ = std::fs::remove_dir_all(home);
        }
    }

    /// The agent git dirs no run holds (their run was killed): what their
    /// agent committed after the run's last take-back lands on the run's
    /// branch when it fast-forwards, else is kept as a branch
    /// `sanddune/rescued-<id>`; then the directory goes. What was done, a
    /// line each.
    pub fn recover_stale_agent_git_dirs(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.git_dir().join(AGENT_GIT_DIRS)) else {
            return vec![];
        };
        let mut done = vec![];
        for entry in entries.flatten() {
            let home = entry.path();
            if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            // A warm container's: the pool's sweep decides (`run::pool`).
            if home.join(PARKED).exists() {
                continue;
            }
            let Ok(lock) = lock_file(&home.join("lock")) else {
                continue;
            };
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                continue;
            }
            let id = entry.file_name().to_string_lossy().into_owned();
            match self.recover(&home, &id, lock) {
                Ok(Some(line)) => done.push(line),
                Ok(None) => {}
                Err(e) => done.push(format!("agent git dir {id}: {e}")),
            }
            match std::fs::remove_dir_all(&home) {
                Ok(()) => done.push(format!("removed the agent git dir of dead run {id}")),
                Err(e) => done.push(format!("cannot remove {}: {e}", home.display())),
            }
        }
        done
    }

    /// Bring a dead run's last commits back from its agent git dir.
    fn recover(&self, home: &Path, id: &str, lock: File) -> Result<Option<String>> {
        let Ok(bytes) = std::fs::read(home.join("run.json")) else {
            return Ok(None);
        };
        let record: Record = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Other(anyhow::anyhow!("its record: {e}")))?;
        let landed = self.branch_head(&record.branch).ok();
        let mut dir = AgentGitDir {
            home: home.to_path_buf(),
            common: self.git_dir(),
            worktree: record.worktree.clone(),
            target: record.own.clone(),
            host_index: record.own.join("index"),
            linked: record.linked,
            branch: record.branch.clone(),
            synced: landed
                .as_deref()
                .and_then(|s| Oid::from_str(s).ok())
                .unwrap_or(Oid::ZERO_SHA1),
            submodules: vec![],
            _lock: lock,
        };
        if landed.is_some()
            && let Ok(Some(taken)) = dir.take_back()
        {
            return Ok(Some(format!(
                "brought a dead run's commits onto {} ({}..{})",
                record.branch,
                &taken.from[..12],
                &taken.to[..12]
            )));
        }
        // The branch is gone, or the commits do not fast-forward it.
        let git = dir.git_dir();
        let root = OwnDir::open(&git, 0, false).map_err(|e| untrusted(&git, &e))?;
        let Some(tip) = read_branch(&root, &record.branch).map_err(|e| untrusted(&git, &e))? else {
            return Ok(None);
        };
        if self.repo.find_commit(tip).is_ok() && landed.as_deref() == Some(&tip.to_string()) {
            return Ok(None);
        }
        import(&self.git_dir(), &root, tip, &home.join("packs")).map_err(|_| {
            Error::Agent(format!(
                "the commits of dead run {id} cannot be read safely"
            ))
        })?;
        let name = format!("sanddune/rescued-{id}");
        self.repo
            .branch(
                &name,
                &self.repo.find_commit(tip).map_err(|e| git_err("read", e))?,
                false,
            )
            .map_err(|e| git_err("keep the commits", e))?;
        Ok(Some(format!(
            "kept a dead run's commits as branch {name} (they do not fast-forward {})",
            record.branch
        )))
    }
}

/// What `gc` needs of a run's agent git dir once the run is dead.
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    branch: String,
    worktree: PathBuf,
    /// The worktree's own git dir on the host.
    own: PathBuf,
    linked: bool,
}

impl AgentGitDir {
    /// The agent git dir on the host.
    pub fn git_dir(&self) -> PathBuf {
        self.home.join("git")
    }

    /// Where the sandbox must see [`AgentGitDir::git_dir`]: the path the
    /// worktree's `.git` names.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// An empty directory, to lay over what the sandbox must not see.
    pub fn empty_dir(&self) -> PathBuf {
        self.home.join("empty")
    }

    /// The worktree the agent works in.
    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// A linked worktree's `.git` file, to lay read-only over the
    /// worktree's own in the sandbox (so the agent cannot point the host's
    /// git elsewhere); none under head.
    pub fn git_file(&self) -> Option<PathBuf> {
        self.linked.then(|| self.home.join("dot-git"))
    }

    /// Bring the commits the agent made on its branch since the last call
    /// into the repository: its objects, checked, then the branch
    /// fast-forwarded (and the worktree's index with it). `None` when the
    /// branch did not move. An agent that rewrote commits already brought
    /// back, or a branch that moved on the host meanwhile, is an error, and
    /// the branch stays where it was.
    pub fn take_back(&mut self) -> Result<Option<TakenBack>> {
        self.keep_submodules_as_found()?;
        let git = self.git_dir();
        let root = OwnDir::open(&git, 0, false).map_err(|e| untrusted(&git, &e))?;
        let Some(tip) = read_branch(&root, &self.branch).map_err(|e| untrusted(&git, &e))? else {
            return Ok(None);
        };
        if tip == self.synced {
            return Ok(None);
        }
        let scratch = self.home.join("packs");
        let objects = import(&self.common, &root, tip, &scratch).map_err(|e| match e {
            Imported::Git(e) => git_err("store the agent's objects", e),
            Imported::Io(e) => untrusted(&git, &e),
            Imported::Corrupt(what) => Error::Agent(format!(
                "the agent's commits on {} cannot be taken back: {what}",
                self.branch
            )),
        })?;
        let repo =
            Repository::open_bare(&self.common).map_err(|e| git_err("open the repository", e))?;
        let descends = repo
            .graph_descendant_of(tip, self.synced)
            .map_err(|e| git_err("compare commits", e))?;
        if !descends {
            return Err(Error::Agent(format!(
                "the agent moved {} to {tip}, which does not descend from {}: it rewrote commits already on the branch, so they do not land (its commit is kept in the repository: `git branch <name> {tip}`)",
                self.branch, self.synced
            )));
        }
        if let Some(path) = added_submodule(&repo, self.synced, tip)? {
            return Err(Error::Agent(format!(
                "the agent added a submodule at `{path}` on {}: its git dir would be the agent's, run by your next `git status`, so its commits ({tip}) do not land (add submodules yourself)",
                self.branch
            )));
        }
        let _git = GitLock::acquire(&self.common)?;
        let name = format!("refs/heads/{}", self.branch);
        repo.reference_matching(&name, tip, true, self.synced, "sanddune: the agent's commits")
            .map_err(|e| {
                Error::Agent(format!(
                    "{} moved on the host while the agent worked, so its commits ({tip}) do not land there: {}",
                    self.branch,
                    e.message()
                ))
            })?;
        // The files are already the agent's; the index follows the branch.
        let tree = repo
            .find_commit(tip)
            .and_then(|c| c.tree())
            .map_err(|e| git_err("read the agent's commit", e))?;
        // (A dead run's worktree may be gone: then so is its index.)
        if self.host_index.is_file() {
            let mut index =
                git2::Index::open(&self.host_index).map_err(|e| git_err("open the index", e))?;
            index
                .read_tree(&tree)
                .and_then(|()| index.write())
                .map_err(|e| git_err("update the index", e))?;
        }
        let from = std::mem::replace(&mut self.synced, tip);
        Ok(Some(TakenBack {
            from: from.to_string(),
            to: tip.to_string(),
            objects,
        }))
    }

    /// Remove the agent git dir (after a last [`AgentGitDir::take_back`]).
    pub fn remove(self) {
        if let Err(e) = std::fs::remove_dir_all(&self.home) {
            tracing::warn!(dir = %self.home.display(), "cannot remove the agent git dir: {e}");
        }
    }

    /// Leave the directory for the run that will claim the warm container
    /// it was made for (ADR 0037): gc passes it by until the pool's own
    /// sweep removes it, and `agent_git_dir` with its id takes it over.
    pub fn park(self) -> std::io::Result<()> {
        std::fs::write(self.home.join(PARKED), b"")
    }
}

/// Remove everything in a parked agent git dir but the directory where the
/// container mounted the repository's objects: removed on the host, it
/// would be unmounted in the container.
fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == SHARED_OBJECTS {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

impl AgentGitDir {
    /// A submodule whose `.git` the agent replaced gets git's own back (or
    /// none, if it had none), and the run fails naming it: the user's next
    /// `git status` would run what the agent's git dir says.
    fn keep_submodules_as_found(&self) -> Result<()> {
        let mut replaced = vec![];
        for (path, found) in &self.submodules {
            let dot_git = self.worktree.join(path).join(".git");
            if DotGit::of(&dot_git) == *found {
                continue;
            }
            replaced.push(path.display().to_string());
            let _ = match std::fs::symlink_metadata(&dot_git) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot_git),
                Ok(_) => std::fs::remove_file(&dot_git),
                Err(_) => Ok(()),
            };
            if let DotGit::File(bytes) = found {
                std::fs::write(&dot_git, bytes).map_err(|e| {
                    Error::Other(anyhow::anyhow!("restore {}: {e}", dot_git.display()))
                })?;
            }
        }
        if replaced.is_empty() {
            return Ok(());
        }
        Err(Error::Agent(format!(
            "the agent replaced the git dir of submodule {}: restored, and its commits do not land",
            replaced.join(", ")
        )))
    }
}

/// The `.git` entry of every submodule of `tip`'s tree in `worktree` (none
/// without a `.gitmodules`, so a repository without submodules pays
/// nothing).
fn submodule_dot_gits(repo: &Repository, tip: Oid, worktree: &Path) -> Vec<(PathBuf, DotGit)> {
    let Ok(tree) = repo.find_commit(tip).and_then(|c| c.tree()) else {
        return vec![];
    };
    if tree.get_name(".gitmodules").is_none() {
        return vec![];
    }
    let mut found = vec![];
    let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Commit)
            && let Ok(name) = entry.name()
        {
            let path = PathBuf::from(dir).join(name);
            let state = DotGit::of(&worktree.join(&path).join(".git"));
            found.push((path, state));
        }
        git2::TreeWalkResult::Ok
    });
    found
}

/// The first path where `tip`'s tree has a submodule that `base`'s has not.
fn added_submodule(repo: &Repository, base: Oid, tip: Oid) -> Result<Option<String>> {
    let tree = |oid| repo.find_commit(oid).and_then(|c| c.tree());
    let (old, new) = (tree(base), tree(tip));
    let (old, new) = (
        old.map_err(|e| git_err("read a commit", e))?,
        new.map_err(|e| git_err("read a commit", e))?,
    );
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(|e| git_err("compare trees", e))?;
    Ok(diff
        .deltas()
        .find(|d| {
            d.new_file().mode() == git2::FileMode::Commit
                && d.old_file().mode() != git2::FileMode::Commit
        })
        .and_then(|d| d.new_file().path().map(|p| p.display().to_string())))
}

fn untrusted(git: &Path, e: &dyn std::fmt::Display) -> Error {
    Error::Agent(format!(
        "the agent's git dir ({}) cannot be read safely: {e}",
        git.display()
    ))
}

/// A git config value, quoted so that nothing in it is read as syntax.
fn config_value(value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}

fn lock_file(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    // SAFETY: flock on a descriptor this function owns. A new directory's
    // lock is free; one of another run's is not, and gc skips it.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file)
}

/// The commit the agent's branch names: its loose ref, else its line in
/// `packed-refs` (after `git gc`). A symbolic ref or garbage is refused.
fn read_branch(root: &OwnDir, branch: &str) -> std::io::Result<Option<Oid>> {
    let name = format!("refs/heads/{branch}");
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    if let Some(bytes) = root.read_below(&name, 4096)? {
        let text = String::from_utf8_lossy(&bytes);
        return Oid::from_str(text.trim())
            .map(Some)
            .map_err(|_| bad(format!("{name} holds no commit id")));
    }
    let Some(packed) = root.read_below("packed-refs", REFS_CAP)? else {
        return Ok(None);
    };
    for line in String::from_utf8_lossy(&packed).lines() {
        if let Some((id, r)) = line.split_once(' ')
            && r == name
        {
            return Oid::from_str(id)
                .map(Some)
                .map_err(|_| bad(format!("packed-refs names no commit id for {name}")));
        }
    }
    Ok(None)
}

enum Imported {
    Git(git2::Error),
    Io(std::io::Error),
    Corrupt(String),
}

impl From<git2::Error> for Imported {
    fn from(e: git2::Error) -> Self {
        Self::Git(e)
    }
}

impl From<std::io::Error> for Imported {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// Copy every object reachable from `tip` that the repository at `common`
/// lacks from the agent git dir into it; how many. Each object is read
/// loose, else from a copy of the agent's packs (made in `scratch`), and
/// its id checked against its content. They are gathered in memory and
/// stored as one pack only when the walk is complete, so the repository
/// never holds an object whose closure it lacks.
fn import(
    common: &Path,
    root: &OwnDir,
    tip: Oid,
    scratch: &Path,
) -> std::result::Result<usize, Imported> {
    let repo = Repository::open_bare(common)?;
    let odb = repo.odb()?;
    let mempack = odb.add_new_mempack_backend(1000)?;
    let mut packs: Option<git2::Odb<'static>> = None;
    let mut todo = vec![tip];
    let mut seen = HashSet::new();
    let mut copied = 0;
    while let Some(oid) = todo.pop() {
        // What the repository had before, it has all that it points to.
        if !seen.insert(oid) || odb.exists(oid) {
            continue;
        }
        let (kind, data) = match read_loose(root, oid)? {
            Some(object) => object,
            None => {
                if packs.is_none() {
                    packs = Some(copy_packs(root, scratch)?);
                }
                read_packed(packs.as_ref().expect("just set"), oid)?
            }
        };
        odb.write(kind, &data)?;
        copied += 1;
        match kind {
            ObjectType::Commit => {
                let commit = repo.find_commit(oid)?;
                todo.push(commit.tree_id());
                todo.extend(commit.parent_ids());
            }
            ObjectType::Tree => {
                // Submodule entries name commits of another repository.
                let tree = repo.find_tree(oid)?;
                todo.extend(
                    tree.iter()
                        .filter(|e| e.kind() != Some(ObjectType::Commit))
                        .map(|e| e.id()),
                );
            }
            ObjectType::Tag => todo.push(repo.find_tag(oid)?.target_id()),
            _ => {}
        }
    }
    let mut pack = git2::Buf::new();
    mempack.dump(&repo, &mut pack)?;
    if copied > 0 {
        let mut writer = odb.packwriter()?;
        std::io::Write::write_all(&mut writer, &pack)?;
        writer.commit()?;
    }
    let _ = std::fs::remove_dir_all(scratch);
    Ok(copied)
}

/// A loose object of the agent git dir, inflated and checked against its
/// id. `None` when it is not there as a loose object.
fn read_loose(
    root: &OwnDir,
    oid: Oid,
) -> std::result::Result<Option<(ObjectType, Vec<u8>)>, Imported> {
    let hex = oid.to_string();
    let path = format!("objects/{}/{}", &hex[..2], &hex[2..]);
    let Some(compressed) = root.read_below(&path, OBJECT_CAP)? else {
        return Ok(None);
    };
    let corrupt = |why: &str| Imported::Corrupt(format!("its object {oid} is corrupt ({why})"));
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&compressed[..])
        .take(OBJECT_CAP + 64)
        .read_to_end(&mut raw)
        .map_err(|_| corrupt("not zlib"))?;
    let nul = raw
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| corrupt("no header"))?;
    let header = std::str::from_utf8(&raw[..nul]).map_err(|_| corrupt("bad header"))?;
    let (kind, size) = header
        .split_once(' ')
        .ok_or_else(|| corrupt("bad header"))?;
    let size = size.parse::<usize>().ok();
    let kind = match kind {
        "commit" => ObjectType::Commit,
        "tree" => ObjectType::Tree,
        "blob" => ObjectType::Blob,
        "tag" => ObjectType::Tag,
        _ => return Err(corrupt("unknown type")),
    };
    let data = raw.split_off(nul + 1);
    if size != Some(data.len()) {
        return Err(corrupt("wrong size"));
    }
    checked(oid, kind, data).map(Some)
}

/// `data` if its id is `oid`.
fn checked(
    oid: Oid,
    kind: ObjectType,
    data: Vec<u8>,
) -> std::result::Result<(ObjectType, Vec<u8>), Imported> {
    if Oid::hash_object(kind, &data)? != oid {
        return Err(Imported::Corrupt(format!(
            "its object {oid} is corrupt (its content has another id)"
        )));
    }
    Ok((kind, data))
}

/// An object of the agent's packs (see [`copy_packs`]), checked.
fn read_packed(
    packs: &git2::Odb<'_>,
    oid: Oid,
) -> std::result::Result<(ObjectType, Vec<u8>), Imported> {
    let object = packs.read(oid).map_err(|_| {
        Imported::Corrupt(format!(
            "object {oid} is in neither the agent's git dir nor the repository"
        ))
    })?;
    checked(oid, object.kind(), object.data().to_vec())
}

/// The agent git dir's packs (`.pack` and `.idx`, read without following
/// a symlink, within a budget) copied into `scratch/pack`, opened as an
/// object store of their own: no alternates, nothing else of the agent's.
fn copy_packs(root: &OwnDir, scratch: &Path) -> std::result::Result<git2::Odb<'static>, Imported> {
    let into = scratch.join("pack");
    std::fs::create_dir_all(&into)?;
    let mut budget = PACKS_CAP;
    for name in root.names_below("objects/pack")? {
        if !(name.ends_with(".pack") || name.ends_with(".idx")) {
            continue;
        }
        let from = root.open_below(&format!("objects/pack/{name}"))?;
        let mut to = File::create(into.join(&name))?;
        let copied = std::io::copy(&mut from.take(budget + 1), &mut to)?;
        budget = budget
            .checked_sub(copied)
            .ok_or_else(|| Imported::Corrupt(format!("its packs are over {PACKS_CAP} bytes")))?;
    }
    let odb = git2::Odb::new()?;
    let path = scratch.to_str().ok_or_else(|| {
        Imported::Corrupt(format!(
            "a scratch path that is not UTF-8: {}",
            scratch.display()
        ))
    })?;
    odb.add_disk_alternate(path)?;
    Ok(odb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// git as the agent runs it in the sandbox: on the agent git dir, in
    /// the worktree, with no config but the agent git dir's.
    fn agent_git(dir: &AgentGitDir, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir.worktree())
            .env("GIT_DIR", dir.git_dir())
            .env("GIT_WORK_TREE", dir.worktree())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Agent")
            .env("GIT_AUTHOR_EMAIL", "agent@example.com")
            .env("GIT_COMMITTER_NAME", "Agent")
            .env("GIT_COMMITTER_EMAIL", "agent@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A repository with one commit, and an agent git dir on its root.
    fn setup() -> (tempfile::TempDir, Repo, AgentGitDir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.name", "U"],
            &["config", "user.email", "u@example.com"],
            &["config", "http.extraheader", "AUTHORIZATION: bearer s3cret"],
        ] {
            super::super::git(root, args).unwrap();
        }
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        super::super::git(root, &["add", "a.txt"]).unwrap();
        super::super::git(root, &["commit", "-q", "-m", "initial"]).unwrap();
        let repo = Repo::discover(root).unwrap();
        // Alternates are read as the sandbox will see them: make the
        // shared objects appear where the mount would put them.
        let dir = repo.agent_git_dir(root, "main", "t1").unwrap();
        std::fs::remove_dir(dir.git_dir().join(SHARED_OBJECTS)).unwrap();
        std::os::unix::fs::symlink(
            repo.git_dir().join("objects"),
            dir.git_dir().join(SHARED_OBJECTS),
        )
        .unwrap();
        (tmp, repo, dir)
    }

    fn commit_file(dir: &AgentGitDir, name: &str) -> String {
        std::fs::write(dir.worktree().join(name), name).unwrap();
        agent_git(dir, &["add", name]);
        agent_git(dir, &["commit", "-q", "-m", name]);
        agent_git(dir, &["rev-parse", "HEAD"])
    }

    #[test]
    fn the_agent_git_dir_holds_no_host_config_and_its_commits_land() {
        let (_tmp, repo, mut dir) = setup();
        let config = std::fs::read_to_string(dir.git_dir().join("config")).unwrap();
        assert!(!config.contains("s3cret"), "{config}");
        assert_eq!(
            agent_git(&dir, &["status", "--porcelain"]),
            "",
            "the index is the worktree's"
        );
        let first = commit_file(&dir, "b.txt");
        let second = commit_file(&dir, "c.txt");
        let taken = dir.take_back().unwrap().unwrap();
        assert_eq!(taken.to, second);
        assert_eq!(taken.objects, 6, "two commits, two trees, two blobs");
        assert_eq!(repo.branch_head("main").unwrap(), second);
        assert_eq!(
            repo.commits_since(&taken.from, "main").unwrap(),
            vec![first, second]
        );
        // The host's index follows: its status is clean.
        assert_eq!(
            super::super::git(repo.root(), &["status", "--porcelain"]).unwrap(),
            ""
        );
        assert!(dir.take_back().unwrap().is_none(), "nothing new");
    }

    #[test]
    fn packed_objects_and_refs_come_back_too() {
        let (_tmp, repo, mut dir) = setup();
        let tip = commit_file(&dir, "b.txt");
        agent_git(&dir, &["gc", "-q"]);
        assert!(
            !dir.git_dir().join("refs/heads/main").exists(),
            "packed by gc"
        );
        dir.take_back().unwrap().unwrap();
        assert_eq!(repo.branch_head("main").unwrap(), tip);
    }

    #[test]
    fn a_symlinked_object_or_ref_is_refused_and_nothing_lands() {
        let (tmp, repo, mut dir) = setup();
        let base = repo.branch_head("main").unwrap();
        let tip = commit_file(&dir, "b.txt");
        let secret = tmp.path().join("secret");
        std::fs::write(&secret, "not an object").unwrap();
        let blob = agent_git(&dir, &["rev-parse", "HEAD:b.txt"]);
        let object = dir
            .git_dir()
            .join(format!("objects/{}/{}", &blob[..2], &blob[2..]));
        std::fs::remove_file(&object).unwrap();
        std::os::unix::fs::symlink(&secret, &object).unwrap();
        let err = dir.take_back().unwrap_err().to_string();
        assert!(err.contains("cannot be read safely"), "{err}");
        assert_eq!(repo.branch_head("main").unwrap(), base);
        assert!(
            Repository::open(repo.root())
                .unwrap()
                .find_commit(Oid::from_str(&tip).unwrap())
                .is_err(),
            "no partial import"
        );

        let reference = dir.git_dir().join("refs/heads/main");
        std::fs::remove_file(&reference).unwrap();
        std::os::unix::fs::symlink(&secret, &reference).unwrap();
        assert!(
            dir.take_back()
                .unwrap_err()
                .to_string()
                .contains("cannot be read safely")
        );
    }

    #[test]
    fn a_rewritten_commit_does_not_land_and_the_branch_stays() {
        let (_tmp, repo, mut dir) = setup();
        let base = repo.branch_head("main").unwrap();
        let first = commit_file(&dir, "b.txt");
        dir.take_back().unwrap();
        agent_git(&dir, &["reset", "-q", "--hard", &base]);
        let rewritten = commit_file(&dir, "c.txt");
        let err = dir.take_back().unwrap_err().to_string();
        assert!(err.contains("rewrote commits"), "{err}");
        assert!(
            err.contains(&rewritten),
            "names the commit to rescue: {err}"
        );
        assert_eq!(repo.branch_head("main").unwrap(), first);
    }

    #[test]
    fn a_submodule_the_agent_adds_does_not_land() {
        let (_tmp, repo, mut dir) = setup();
        let base = repo.branch_head("main").unwrap();
        let gitlink = format!("160000,{base},sub");
        agent_git(&dir, &["update-index", "--add", "--cacheinfo", &gitlink]);
        agent_git(&dir, &["commit", "-q", "-m", "a submodule"]);
        let err = dir.take_back().unwrap_err().to_string();
        assert!(err.contains("added a submodule at `sub`"), "{err}");
        assert_eq!(repo.branch_head("main").unwrap(), base);
    }

    #[test]
    fn a_submodules_git_dir_the_agent_replaces_is_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let sub = tmp.path().join("sub");
        for dir in [&sub, &root] {
            std::fs::create_dir(dir).unwrap();
            for args in [
                &["init", "-q", "-b", "main"][..],
                &["config", "user.name", "U"],
                &["config", "user.email", "u@example.com"],
                &["commit", "-q", "--allow-empty", "-m", "initial"],
            ] {
                super::super::git(dir, args).unwrap();
            }
        }
        super::super::git(
            &root,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                sub.to_str().unwrap(),
                "sub",
            ],
        )
        .unwrap();
        super::super::git(&root, &["commit", "-q", "-m", "the submodule"]).unwrap();
        let repo = Repo::discover(&root).unwrap();
        let mut dir = repo.agent_git_dir(&root, "main", "t1").unwrap();
        let dot_git = root.join("sub/.git");
        let git_own = std::fs::read(&dot_git).unwrap();
        // The agent's own git dir where the submodule's was.
        std::fs::remove_file(&dot_git).unwrap();
        std::fs::create_dir(&dot_git).unwrap();
        std::fs::write(
            dot_git.join("config"),
            "[core]\n\tfsmonitor = touch /tmp/pwned\n",
        )
        .unwrap();
        let err = dir.take_back().unwrap_err().to_string();
        assert!(
            err.contains("replaced the git dir of submodule sub"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&dot_git).unwrap(),
            git_own,
            "git's own is back"
        );
        assert!(dir.take_back().unwrap().is_none(), "and the run can go on");
    }

    /// What gc did, once it could: a git another test thread is starting
    /// holds a copy of the lock until it execs.
    fn recovered(repo: &Repo) -> Vec<String> {
        for _ in 0..200 {
            let done = repo.recover_stale_agent_git_dirs();
            if !done.is_empty() {
                return done;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        vec![]
    }

    #[test]
    fn gc_brings_a_dead_runs_last_commits_back_and_removes_only_dirs_no_run_holds() {
        let (_tmp, repo, dir) = setup();
        let tip = commit_file(&dir, "b.txt");
        let held = dir.git_dir();
        assert!(
            repo.recover_stale_agent_git_dirs().is_empty(),
            "the run holds it"
        );
        assert!(held.exists());
        drop(dir); // as a killed run's
        let done = recovered(&repo);
        assert!(
            done[0].starts_with("brought a dead run's commits onto main"),
            "{done:?}"
        );
        assert_eq!(repo.branch_head("main").unwrap(), tip);
        assert!(!held.exists());
    }

    #[test]
    fn gc_keeps_a_dead_runs_commits_that_do_not_fast_forward_as_a_branch() {
        let (_tmp, repo, dir) = setup();
        let tip = commit_file(&dir, "b.txt");
        // The user committed on the branch meanwhile.
        std::fs::write(repo.root().join("u.txt"), "u").unwrap();
        super::super::git(repo.root(), &["add", "u.txt"]).unwrap();
        super::super::git(repo.root(), &["commit", "-q", "-m", "the user's"]).unwrap();
        drop(dir);
        let done = recovered(&repo);
        assert!(
            done[0].contains("as branch sanddune/rescued-t1"),
            "{done:?}"
        );
        assert_eq!(repo.branch_head("sanddune/rescued-t1").unwrap(), tip);
    }
}
