//! merge-to-head: bring a branch's commits into the host's checked-out branch.
//! Fast-forward when possible, else a merge commit; the checkout is "safe",
//! so a file the user changed locally is never overwritten.

use git2::build::CheckoutBuilder;
use git2::{BranchType, Commit, Repository, Signature};

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The target already contains the branch.
    UpToDate,
    FastForward(String),
    MergeCommit(String),
    /// The branch conflicts with the target in these paths; nothing changed.
    Conflicted(Vec<String>),
}

fn err(what: &str, e: git2::Error) -> Error {
    Error::Other(anyhow::anyhow!("merge-to-head: {what}: {}", e.message()))
}

/// Merge, or report the conflicting paths without changing anything.
pub fn merge_into_head(repo: &Repository, branch: &str) -> Result<MergeOutcome> {
    let head = repo.head().map_err(|e| err("read HEAD", e))?;
    let target_name = head.shorthand().unwrap_or("HEAD").to_string();
    let ours = head.peel_to_commit().map_err(|e| err("read HEAD", e))?;
    let theirs = repo
        .find_branch(branch, BranchType::Local)
        .and_then(|b| b.get().peel_to_commit())
        .map_err(|e| err("read branch", e))?;
    // Gate on "ahead of the target", not on "committed this run".
    if ours.id() == theirs.id()
        || repo
            .graph_descendant_of(ours.id(), theirs.id())
            .unwrap_or(false)
    {
        return Ok(MergeOutcome::UpToDate);
    }
    let refname = head.name().unwrap_or("HEAD").to_string();
    if repo
        .graph_descendant_of(theirs.id(), ours.id())
        .unwrap_or(false)
    {
        checkout(repo, &theirs, &target_name, branch)?;
        repo.reference(
            &refname,
            theirs.id(),
            true,
            &format!("sanddune: fast-forward to {branch}"),
        )
        .map_err(|e| err("update target branch", e))?;
        return Ok(MergeOutcome::FastForward(theirs.id().to_string()));
    }
    let mut index = repo
        .merge_commits(&ours, &theirs, None)
        .map_err(|e| err("merge", e))?;
    if index.has_conflicts() {
        let conflicts = index.conflicts().map_err(|e| err("read conflicts", e))?;
        let mut paths: Vec<String> = conflicts
            .filter_map(|c| c.ok())
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|entry| String::from_utf8_lossy(&entry.path).into_owned())
            .collect();
        paths.dedup();
        return Ok(MergeOutcome::Conflicted(paths));
    }
    let tree_id = index
        .write_tree_to(repo)
        .map_err(|e| err("write tree", e))?;
    let tree = repo.find_tree(tree_id).map_err(|e| err("write tree", e))?;
    let sig = repo
        .signature()
        .or_else(|_| Signature::now("sanddune", "sanddune@localhost"))
        .map_err(|e| err("signature", e))?;
    let message = format!("Merge branch '{branch}' into {target_name}");
    let merge_id = repo
        .commit(None, &sig, &sig, &message, &tree, &[&ours, &theirs])
        .map_err(|e| err("commit", e))?;
    let merge = repo.find_commit(merge_id).map_err(|e| err("commit", e))?;
    checkout(repo, &merge, &target_name, branch)?;
    repo.reference(&refname, merge_id, true, &message)
        .map_err(|e| err("update target branch", e))?;
    Ok(MergeOutcome::MergeCommit(merge_id.to_string()))
}

fn checkout(repo: &Repository, commit: &Commit, target: &str, branch: &str) -> Result<()> {
    repo.checkout_tree(commit.as_object(), Some(CheckoutBuilder::new().safe()))
        .map_err(|e| {
            Error::Agent(format!(
                "cannot update `{target}`: {} (local changes in the way?); the agent's commits are kept on `{branch}`",
                e.message()
            ))
        })
}
