//! Work an agent left uncommitted. After the last iteration the host reads
//! the worktree's `git status`; what was not there before the run is
//! reported in the run result. An isolated sandbox's changes are brought
//! out onto the host worktree as a patch, so with every kind of sandbox
//! they end up in a worktree that is kept, never lost with the sandbox.

use std::path::Path;

use super::sync::sandbox_sh;
use crate::error::Result;
use crate::plugin::sandbox::Sandbox;
use crate::worktree::{Worktree, git, status_porcelain};

/// `git status --porcelain` of the sandbox's worktree, one entry a line.
/// A bind-mount sandbox's worktree is the host's own (`host`), so it is read
/// there: an exec would be a round trip into the sandbox (tens of
/// milliseconds in a container) for the same files.
pub async fn status(sandbox: &mut Sandbox, host: Option<&Path>) -> Result<Vec<String>> {
    match host {
        Some(worktree) => status_porcelain(worktree),
        None => Ok(entries(
            &sandbox_sh(sandbox, "git status --porcelain".into())
                .await?
                .stdout,
        )),
    }
}

/// [`status`], and for an isolated sandbox the sandbox user's home (none if
/// `HOME` is unset) from the same exec: session capture needs it, and each
/// exec is a round trip. A bind-mount sandbox's home is left to the agent's
/// exec (see the invoker).
pub async fn status_and_home(
    sandbox: &mut Sandbox,
    host: Option<&Path>,
) -> Result<(Vec<String>, Option<String>)> {
    if host.is_some() {
        return Ok((status(sandbox, host).await?, None));
    }
    let script = "printf '%s\\n' \"$HOME\"; git status --porcelain";
    let out = sandbox_sh(sandbox, script.into()).await?;
    let (home, status) = out.stdout.split_once('\n').unwrap_or((&out.stdout, ""));
    Ok((
        entries(status),
        Some(home.to_string()).filter(|h| !h.is_empty()),
    ))
}

fn entries(porcelain: &str) -> Vec<String> {
    porcelain
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect()
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
