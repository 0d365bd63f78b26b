//! Work an agent left uncommitted. After the last iteration the host asks
//! the sandbox for `git status`; what was not there before the run is
//! reported in the run result. An isolated sandbox's changes are brought
//! out onto the host worktree as a patch, so with every kind of sandbox
//! they end up in a worktree that is kept, never lost with the sandbox.

use super::sync::sandbox_sh;
use crate::error::Result;
use crate::plugin::sandbox::Sandbox;
use crate::worktree::{Worktree, git};

/// `git status --porcelain` in the sandbox's worktree, one entry a line.
pub async fn status(sandbox: &mut Sandbox) -> Result<Vec<String>> {
    let out = sandbox_sh(sandbox, "git status --porcelain".into()).await?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect())
}

/// [`status`], and the sandbox user's home (none if `HOME` is unset) from
/// the same exec: session capture needs it, and each exec is a round trip
/// (tens of milliseconds in a container).
pub async fn status_and_home(sandbox: &mut Sandbox) -> Result<(Vec<String>, Option<String>)> {
    let script = "printf '%s\\n' \"$HOME\"; git status --porcelain";
    let out = sandbox_sh(sandbox, script.into()).await?;
    let mut lines = out.stdout.lines();
    let home = lines.next().filter(|h| !h.is_empty()).map(String::from);
    let status = lines
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect();
    Ok((status, home))
}

/// The entries of `after` that were not in `before`.
pub fn new_entries(before: &[String], after: Vec<String>) -> Vec<String> {
    after.into_iter().filter(|e| !before.contains(e)).collect()
}

/// Apply the isolated sandbox's uncommitted changes (tracked and untracked
/// files) to the host worktree, which is at the same commit after sync.
/// The sandbox's own files and index are left as they were.
pub async fn bring_out(sandbox: &mut Sandbox, worktree: &Worktree) -> Result<()> {
    let inside = format!(
        "{}/.git/sanddune-uncommitted.patch",
        sandbox.worktree_path()
    );
    sandbox_sh(
        sandbox,
        "git add -A && git diff --cached --binary HEAD > .git/sanddune-uncommitted.patch; status=$?; git reset -q; exit $status".into(),
    )
    .await?;
    let tmp = tempfile::tempdir().map_err(|e| crate::error::Error::Other(e.into()))?;
    let patch = tmp.path().join("uncommitted.patch");
    sandbox.copy_file_out(&inside, &patch).await?;
    sandbox_sh(sandbox, "rm -f .git/sanddune-uncommitted.patch".into()).await?;
    git(
        &worktree.path,
        &["apply", patch.to_str().unwrap_or_default()],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_run_added_counts() {
        let before = vec![" M README.md".to_string()];
        let after = vec![" M README.md".to_string(), "?? notes.txt".to_string()];
        assert_eq!(new_entries(&before, after), vec!["?? notes.txt"]);
        assert!(new_entries(&before, before.clone()).is_empty());
    }
}
