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

/// A provider that keeps snapshots (since 0.8, ADR 0038): a file written
/// before `keep` is there after it (in the sandbox that may have taken the
/// first one's place) and in a sandbox created from the snapshot;
/// `remove-snapshot` removes it, and again without an error.
pub(super) async fn snapshot(provider: &SandboxProvider, spec: &SandboxSpec) -> Checked {
    const FILE: &str = "conformance-kept.txt";
    let token = format!("kept-{}", super::unique());
    let mut sandbox = provider
        .create(spec)
        .await
        .map_err(|e| format!("create: {e}"))?;
    let checked = async {
        sandbox
            .write_file(FILE, token.as_bytes())
            .await
            .map_err(|e| format!("write-file: {e}"))?;
        let id = sandbox
            .keep("sanddune-conformance")
            .await
            .map_err(|e| format!("keep: {e}"))?;
        let after = sandbox
            .read_file(FILE)
            .await
            .map_err(|e| format!("the sandbox is not usable after keep (read-file: {e})"))?;
        ensure!(
            after == token.as_bytes(),
            "after keep {FILE} held {after:?}"
        );
        let from = SandboxSpec {
            run_id: format!("conformance-{}", super::unique()),
            snapshot: Some(id.clone()),
            ..spec.clone()
        };
        let mut later = provider
            .create(&from)
            .await
            .map_err(|e| format!("create from snapshot {id}: {e}"))?;
        let read = later.read_file(FILE).await;
        let _ = later.close().await;
        let read = read.map_err(|e| format!("a sandbox created from snapshot {id}: {e}"))?;
        ensure!(
            read == token.as_bytes(),
            "a sandbox created from snapshot {id} held {read:?} in {FILE}"
        );
        for time in ["", " again"] {
            provider
                .remove_snapshot(spec, &id)
                .await
                .map_err(|e| format!("remove-snapshot{time}: {e}"))?;
        }
        Ok(format!("kept {id}, started a sandbox from it, removed it"))
    }
    .await;
    let _ = sandbox.close().await;
    checked
}
