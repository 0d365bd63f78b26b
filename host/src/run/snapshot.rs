//! A run's side of a prepared snapshot (ADR 0035): what the set-up wrote
//! in the worktree goes into the container before it is kept, and comes
//! back out when a later sandbox starts from it. The engine's side (the
//! key, the commit) is `capability::containers::snapshot`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use super::log::RunLog;
use crate::capability::containers::snapshot::STASH;
use crate::error::{Error, Result};
use crate::plugin::api::{Command, ExecRequest};
use crate::plugin::sandbox::Sandbox;
use crate::worktree::git;

/// What the log says when `snapshot=auto` has no set-up to keep.
pub(super) const NOTHING_TO_KEEP: &str =
    "snapshot=auto: no set-up runs in the sandbox (no sandbox hooks), so there is nothing to keep";

/// The worktree's untracked and ignored paths, as git lists them (a new
/// directory as one entry): taken before the set-up, what it did not
/// write.
pub(super) fn untracked(worktree: &Path) -> Result<BTreeSet<String>> {
    let out = git(worktree, &["ls-files", "--others", "--directory", "-z"])?;
    Ok(out
        .split('\0')
        .map(|p| p.trim_end_matches('/'))
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect())
}

/// `sh -c script` in the sandbox with `args` as `$0`, `$1`, ...: never
/// quoted into the script.
fn script(script: &str, args: &[&str], sudo: bool) -> ExecRequest {
    let mut argv = vec!["sh".to_string(), "-c".into(), script.into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    ExecRequest {
        command: Command::Argv(argv),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo,
        timeout_ms: Some(600_000),
    }
}

async fn run(sandbox: &mut Sandbox, what: &str, request: ExecRequest) -> Result<()> {
    let out = sandbox.exec(request, |_| {}).await?;
    if out.exit_code == 0 {
        return Ok(());
    }
    Err(Error::Plugin(format!(
        "{what} exited with code {}: {}",
        out.exit_code,
        out.stderr.trim()
    )))
}

/// Copy what the snapshot kept of the worktree back into it, as the
/// sandbox's user (whose files they are): nothing is written as root in a
/// worktree the agent's commits shaped.
pub(super) async fn restore(sandbox: &mut Sandbox, worktree: &Path) -> Result<()> {
    let worktree = worktree.display().to_string();
    let copy = r#"if [ -d "$1" ]; then cp -pPR "$1"/. "$0"/; fi"#;
    run(
        sandbox,
        "restoring the snapshot's worktree files",
        script(copy, &[&worktree, STASH], false),
    )
    .await
}

/// Keep the sandbox, its set-up done, as its snapshot: what the set-up
/// added to the worktree (untracked paths not in `before`) is copied into
/// the container first. Says in the log what it kept; a failure is a
/// warning, never the run's.
pub(super) async fn keep(
    sandbox: &mut Sandbox,
    worktree: &Path,
    before: &BTreeSet<String>,
    log: &RunLog,
) {
    let start = Instant::now();
    let kept = async {
        let added: Vec<String> = untracked(worktree)?.difference(before).cloned().collect();
        if !added.is_empty() {
            let wt = worktree.display().to_string();
            // The stash belongs to the worktree's owner, who copies into it.
            let make = r#"mkdir -p "$1" && chown "$(stat -c %u:%g "$0")" "$1""#;
            run(
                sandbox,
                "making the snapshot's stash",
                script(make, &[&wt, STASH], true),
            )
            .await?;
            let copy = r#"dest=$1; shift; cd "$0" && cp -pPR --parents -- "$@" "$dest"/"#;
            let mut args = vec![wt.as_str(), STASH];
            args.extend(added.iter().map(String::as_str));
            run(
                sandbox,
                "copying the set-up's worktree files",
                script(copy, &args, false),
            )
            .await?;
        }
        let kept = sandbox.keep_snapshot(!added.is_empty()).await?;
        Ok::<_, Error>((kept, added))
    };
    match kept.await {
        Ok((kept, added)) => {
            let files = if added.is_empty() {
                String::new()
            } else {
                format!(" with {} from the worktree", added.join(", "))
            };
            log.line(&format!(
                "snapshot: kept the prepared sandbox as {}{files} ({} MB, {:.1} s); a later run with the same set-up and inputs starts from it",
                kept.image,
                kept.size / 1_000_000,
                start.elapsed().as_secs_f64()
            ));
        }
        Err(e) => log.line(&format!(
            "warning: snapshot: the prepared sandbox was not kept: {e}"
        )),
    }
}
