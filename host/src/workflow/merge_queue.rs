//! The merge queue: finished branches land on the target branch (the host's
//! checked-out branch) one at a time, in the order given. A branch is
//! merged only when it is ahead of the target; the queue stops at the first
//! conflict (or any other failure to merge) and leaves the rest pending.

use serde::Serialize;

use crate::error::Result;
use crate::worktree::{MergeOutcome, Repo};

/// What became of one branch in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Landing {
    /// Merged: fast-forward or a merge commit.
    Landed { commit: String },
    /// Not ahead of the target: nothing to land.
    UpToDate,
    /// Conflicts with the target in these paths; its commits stay on it.
    Conflicted { paths: Vec<String> },
    /// Its work failed before the queue, or merging it failed.
    Failed { error: String },
    /// The queue stopped before it.
    Pending,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedBranch {
    pub branch: String,
    #[serde(flatten)]
    pub landing: Landing,
}

/// Land `branches` in order. An `Err` entry is a branch whose work failed:
/// reported as failed, and the queue goes on past it.
pub fn land(
    repo: &Repo,
    branches: Vec<(String, Result<(), String>)>,
    mut on_landing: impl FnMut(&QueuedBranch),
) -> Vec<QueuedBranch> {
    let mut stopped = false;
    let mut report = Vec::with_capacity(branches.len());
    for (branch, work) in branches {
        let landing = match work {
            Err(error) => Landing::Failed { error },
            Ok(()) if stopped => Landing::Pending,
            Ok(()) => {
                let landing = land_one(repo, &branch);
                stopped = matches!(landing, Landing::Conflicted { .. } | Landing::Failed { .. });
                landing
            }
        };
        let queued = QueuedBranch { branch, landing };
        on_landing(&queued);
        report.push(queued);
    }
    report
}

fn land_one(repo: &Repo, branch: &str) -> Landing {
    let ahead = repo.current_branch().and_then(|target| {
        let base = repo.branch_head(&target)?;
        Ok(!repo.commits_since(&base, branch)?.is_empty())
    });
    match ahead {
        Ok(false) => return Landing::UpToDate,
        Err(e) => {
            return Landing::Failed {
                error: e.to_string(),
            };
        }
        Ok(true) => {}
    }
    match repo.try_merge_into_head(branch) {
        Ok(MergeOutcome::FastForward(commit) | MergeOutcome::MergeCommit(commit)) => {
            Landing::Landed { commit }
        }
        Ok(MergeOutcome::UpToDate) => Landing::UpToDate,
        Ok(MergeOutcome::Conflicted(paths)) => Landing::Conflicted { paths },
        Err(e) => Landing::Failed {
            error: e.to_string(),
        },
    }
}
