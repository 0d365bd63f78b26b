//! A sandbox's life: create, lanes through attach, find, and close.

use super::support::{exec, setup, shell};
use super::{Checked, Ctx};
use crate::plugin::sandbox::{SandboxKind, SandboxProvider, SandboxSpec};

pub(super) fn create(ctx: &Ctx) -> Checked {
    let wt = ctx.sandbox.worktree_path();
    ensure!(
        wt.starts_with('/'),
        "worktree-path must be absolute, got {wt:?}"
    );
    if ctx.kind == SandboxKind::BindMount {
        // The host side of a bind mount is the worktree the kit made.
        ensure!(
            ctx.host_worktree.join(".git").exists(),
            "create removed the host worktree"
        );
    }
    Ok(format!("worktree-path {wt}"))
}

/// The host attaches lanes to run hooks side by side: a lane sees the same
/// sandbox, and closing it leaves the sandbox up.
pub(super) async fn attach(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p at && printf main > at/from-main").await?;
    let mut lane = ctx
        .sandbox
        .lane()
        .await
        .map_err(|e| format!("attach: {e}"))?;
    let seen = lane.exec(shell("cat at/from-main"), |_| {}).await;
    let _ = lane.close().await;
    let seen = seen.map_err(|e| format!("exec in the lane: {e}"))?;
    ensure!(
        seen.stdout == "main\n",
        "the lane does not see the sandbox's files: `cat at/from-main` gave {:?}",
        seen.stdout
    );
    let after = exec(ctx, shell("cat at/from-main")).await?;
    ensure!(
        after.stdout == "main\n",
        "closing the lane tore the sandbox down"
    );
    Ok(String::new())
}

/// `find` (0.3) for the run, which has one sandbox: while it is open, one
/// state, or none from a provider whose sandboxes cannot outlive the
/// host's process; once it is closed, none. (A found state need not equal
/// the sandbox's own: it only has to reach the sandbox for `close`.) None
/// before 0.3.
pub(super) async fn find(
    provider: &SandboxProvider,
    spec: &SandboxSpec,
    open: bool,
) -> Option<Result<String, String>> {
    let found = match provider.find(spec).await {
        Ok(None) => return None,
        Ok(Some(found)) => found,
        Err(e) => return Some(Err(format!("find: {e}"))),
    };
    Some(match (open, found.len()) {
        (true, 0) => Ok("finds nothing: its sandboxes do not outlive the host's process".into()),
        (true, 1) | (false, 0) => Ok(String::new()),
        (true, _) => Err(format!(
            "find returned {} states for a run with one sandbox: {found:?}",
            found.len()
        )),
        (false, _) => Err(format!(
            "find still returns {found:?} for the run after its sandbox was closed"
        )),
    })
}

pub(super) async fn close(ctx: &mut Ctx) -> Checked {
    ctx.sandbox
        .close()
        .await
        .map_err(|e| format!("close: {e}"))?;
    ctx.sandbox
        .close_again()
        .await
        .map_err(|e| format!("a second close must succeed too: {e}"))?;
    if ctx.kind == SandboxKind::BindMount {
        ensure!(
            ctx.host_worktree.join("README.md").exists(),
            "closing a bind-mount sandbox removed the host worktree"
        );
    }
    Ok(String::new())
}
