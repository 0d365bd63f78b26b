//! How workflow outcomes read, in the progress lines, the live view and
//! the summary: an item's status, a best-of candidate's, and a branch's
//! landing.

use crate::workflow::best_of::CandidateStatus;
use crate::workflow::{ItemStatus, Landing};

/// A landing in full, as the merge queue's line says it.
pub fn landing(l: &Landing) -> String {
    match l {
        Landing::Landed { commit } => format!("landed ({})", &commit[..commit.len().min(10)]),
        Landing::UpToDate => "up to date (nothing ahead of the target)".into(),
        Landing::Conflicted { paths } => format!(
            "CONFLICT in {}; the queue stops here, the branch keeps its commits",
            paths.join(", ")
        ),
        Landing::Failed { error } => format!("failed: {error}"),
        Landing::Pending => "pending (the queue stopped before it)".into(),
    }
}

pub fn status_word(status: ItemStatus) -> &'static str {
    match status {
        ItemStatus::Succeeded => "succeeded",
        ItemStatus::Failed => "failed",
        ItemStatus::Aborted => "aborted",
        ItemStatus::NotStarted => "not started",
    }
}

/// A landing in one word, for a table cell.
pub fn landing_word(l: &Landing) -> &'static str {
    match l {
        Landing::Landed { .. } => "landed",
        Landing::UpToDate => "up to date",
        Landing::Conflicted { .. } => "conflicted",
        Landing::Failed { .. } => "failed",
        Landing::Pending => "pending",
    }
}

/// A best-of candidate's status, for a table cell.
pub fn candidate_word(status: CandidateStatus) -> &'static str {
    match status {
        CandidateStatus::Passed => "passed",
        CandidateStatus::CheckFailed => "check failed",
        CandidateStatus::NoCommits => "no commits",
        CandidateStatus::Failed => "failed",
        CandidateStatus::TimedOut => "timed out",
        CandidateStatus::Aborted => "aborted",
    }
}
