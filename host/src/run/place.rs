//! The place an agent works: the worktree a strategy makes for its branch
//! (or the repository itself under head), made ready by copyToWorktree and
//! the onWorktreeReady hooks, and released at the end (kept when dirty).
//! Also the run log, which lives in the repository.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::SandboxOptions;
use super::hook_runner::{self, HookLog};
use super::log::{LogMode, RunLog};
use super::strategy::{BranchStrategy, source_branch};
use crate::capability::containers::GitShield;
use crate::error::{Error, Result};
use crate::hooks::HostHook;
use crate::plugin::sandbox::{SandboxKind, SandboxProvider};
use crate::worktree::{
    AgentGitDir, LOGS_DIR, Removed, Repo, SHARED_OBJECTS, WORKTREES_DIR, Worktree, WorktreeOrigin,
    worktree_name,
};

/// The run log; in file mode under `.sanddune/logs/`, kept out of the
/// user's `git status`.
pub(super) fn open_log(repo: &Repo, mode: &LogMode, name: Option<&str>) -> Result<RunLog> {
    if matches!(mode, LogMode::File | LogMode::FileQuiet) {
        repo.exclude_sanddune_dirs()?;
    }
    RunLog::open(mode, &repo.root().join(LOGS_DIR), name)
}

/// Where the agent's branch is checked out on the host, and what the run
/// does with it at the end.
#[derive(Clone, Debug)]
pub(super) struct Place {
    pub root: PathBuf,
    /// None under head: the agent works in the repository itself. Shared
    /// by a worktree handle and the sandboxes on it; the worktree lock goes
    /// with the last of them.
    pub worktree: Option<Arc<Worktree>>,
    /// The source branch.
    pub branch: String,
    /// The target branch: the host's branch when the place was made.
    pub target: String,
    pub strategy: BranchStrategy,
    pub run_id: String,
}

impl Place {
    pub fn path(&self) -> &Path {
        match &self.worktree {
            Some(wt) => &wt.path,
            None => &self.root,
        }
    }

    pub fn repo(&self) -> Result<Repo> {
        Repo::discover(&self.root)
    }

    /// The agent git dir `id` for a sandbox whose containers share the
    /// worktree (ADR 0025), and the shield its containers get; none for
    /// other providers.
    pub fn agent_git_dir(
        &self,
        provider: &SandboxProvider,
        id: &str,
    ) -> Result<(Option<AgentGitDir>, Option<GitShield>)> {
        let caps = provider.capabilities();
        if provider.info().kind == SandboxKind::Isolated || !(caps.containers || caps.jail) {
            return Ok((None, None));
        }
        let repo = self.repo()?;
        let dir = repo.agent_git_dir(self.path(), &self.branch, id)?;
        let shield = GitShield {
            git_dir: repo.git_dir(),
            agent_git_dir: dir.git_dir(),
            target: dir.target().to_path_buf(),
            git_file: dir
                .git_file()
                .map(|file| (file, dir.worktree().join(".git"))),
            shared_objects: SHARED_OBJECTS.to_string(),
            hidden: self.hidden_under_head(),
            empty_dir: dir.empty_dir(),
        };
        Ok((Some(dir), Some(shield)))
    }

    /// Under head the worktree is the repository root, which holds
    /// sanddune's own directories: other runs' worktrees (whose `.git`
    /// files the agent could point elsewhere) and the logs. The sandbox
    /// sees them empty.
    fn hidden_under_head(&self) -> Vec<PathBuf> {
        if self.worktree.is_some() {
            return vec![];
        }
        [WORKTREES_DIR, LOGS_DIR]
            .iter()
            .map(|dir| self.root.join(dir))
            // Only what is there: a mount over a missing path would make
            // it, as root, in your repository.
            .filter(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()))
            .collect()
    }
}

pub(super) fn hook_log(log: &RunLog) -> HookLog {
    let log = log.clone();
    Arc::new(move |label: &str, line: &str| log.line(&format!("{label}: {line}")))
}

/// Make the place: the worktree (if the strategy has one; with its files
/// unless `files` is false, see `SandboxPlan::host_needs_files`),
/// copyToWorktree, then the onWorktreeReady `hooks`. A failure removes
/// what it made. `claimed`: the run took a warm sandbox made for run `id`
/// (ADR 0037), whose container mounts the worktree `run-<id>`.
pub(super) async fn prepare_place(
    repo: &Repo,
    (strategy, id, claimed): (BranchStrategy, &str, bool),
    o: &SandboxOptions,
    hooks: &[HostHook],
    files: bool,
    log: &RunLog,
) -> Result<Place> {
    let target = repo.current_branch()?;
    let branch = source_branch(&strategy, &target, id);
    let add = |name: &str, branch: &str, temporary: bool| {
        if files {
            repo.add_worktree(name, branch, temporary)
        } else {
            repo.add_worktree_without_files(name, branch, temporary)
        }
    };
    let worktree = match &strategy {
        BranchStrategy::Head => None,
        BranchStrategy::MergeToHead if claimed => {
            Some(repo.open_claimed_worktree(&format!("run-{id}"), &branch, true)?)
        }
        BranchStrategy::MergeToHead => Some(add(&format!("run-{id}"), &branch, true)?),
        // Moved to the branch's name if it is kept (`Repo::close_worktree_later`).
        BranchStrategy::Branch(b) if claimed => {
            Some(repo.open_claimed_worktree(&format!("run-{id}"), b, false)?)
        }
        BranchStrategy::Branch(b) => Some(add(&worktree_name(b), b, false)?),
    };
    let place = Place {
        root: repo.root().to_path_buf(),
        worktree: worktree.map(Arc::new),
        branch,
        target,
        strategy,
        run_id: id.to_string(),
    };
    if let Some(wt) = &place.worktree {
        log.status(&match &wt.origin {
            WorktreeOrigin::Created => format!("worktree created: {}", wt.path.display()),
            WorktreeOrigin::Reused => format!(
                "worktree reused with its work: {} (it was kept by an earlier run)",
                wt.path.display()
            ),
            WorktreeOrigin::FastForwarded { from } => format!(
                "worktree reused: {}, fast-forwarded from {} to {}",
                wt.path.display(),
                &from[..from.len().min(10)],
                place.target
            ),
        });
    }
    let ready = async {
        if let Some(wt) = place.worktree.clone()
            && !o.copy_to_worktree.is_empty()
        {
            log.status("copying into the worktree");
            let (root, paths, timeout) = (
                place.root.clone(),
                o.copy_to_worktree.clone(),
                o.timeouts.copy_to_worktree,
            );
            // Copies block; keep them off the async workers.
            tokio::task::spawn_blocking(move || {
                Repo::discover(&root)?.copy_to_worktree(&wt, &paths, timeout)
            })
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("the copy task failed: {e}")))??;
        }
        if !hooks.is_empty() {
            log.status("running host.onWorktreeReady hooks");
        }
        hook_runner::run_on_worktree_ready(hooks, place.path(), &o.abort, &hook_log(log)).await
    };
    if let Err(e) = ready.await {
        if let Some(wt) = &place.worktree {
            let _ = release_worktree(repo, wt, false);
        }
        return Err(e);
    }
    Ok(place)
}

/// Remove a worktree unless it is dirty (then its path is returned). A
/// temporary branch goes after a merge or when nothing was committed on
/// it; otherwise it is the user's work and stays.
pub(super) fn release_worktree(repo: &Repo, wt: &Worktree, merged: bool) -> Result<Option<String>> {
    let (kept, removed) = release_worktree_later(repo, wt, merged)?;
    if let Some(removed) = removed {
        removed.delete()?;
    }
    Ok(kept)
}

/// [`release_worktree`], leaving a removed worktree's files to be deleted
/// later (`Removed`).
pub(super) fn release_worktree_later(
    repo: &Repo,
    wt: &Worktree,
    merged: bool,
) -> Result<(Option<String>, Option<Removed>)> {
    let committed = repo
        .commits_since(&wt.base, &wt.branch)
        .map(|c| !c.is_empty())
        .unwrap_or(true);
    let keep_branch = !wt.temporary || (!merged && committed);
    let (kept, removed) = repo.close_worktree_later(wt, keep_branch)?;
    Ok((kept.map(|p| p.display().to_string()), removed))
}
