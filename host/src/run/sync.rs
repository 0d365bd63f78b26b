//! Repository sync for isolated sandbox providers, driven by the host over
//! the provider's generic operations (exec, copy-file-in, copy-file-out):
//! a git bundle of the branch goes in, bundles of new commits come out and
//! are fast-forwarded into the host worktree. Providers never implement sync.

use crate::error::{Error, Result};
use crate::plugin::sandbox::{Command, ExecOutput, ExecRequest, Sandbox};
use crate::worktree::{Worktree, git};

/// A shell script in the sandbox's worktree; a non-zero exit is an error.
pub(super) async fn sandbox_sh(sandbox: &mut Sandbox, script: String) -> Result<ExecOutput> {
    let request = ExecRequest {
        command: Command::Shell(script.clone()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(600_000),
    };
    let out = sandbox.exec(request, |_| {}).await?;
    if out.exit_code != 0 {
        return Err(Error::Plugin(format!(
            "in sandbox `{}`, `{script}` exited {}: {}",
            sandbox.provider_name(),
            out.exit_code,
            out.stderr.trim()
        )));
    }
    Ok(out)
}

/// Quote for `sh`.
pub(super) fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Put the worktree's branch into the sandbox at its `worktree-path`.
pub async fn sync_in(sandbox: &mut Sandbox, worktree: &Worktree) -> Result<()> {
    let tmp = tempfile::tempdir().map_err(|e| Error::Other(e.into()))?;
    let bundle = tmp.path().join("in.bundle");
    git(
        &worktree.path,
        &[
            "bundle",
            "create",
            "-q",
            bundle.to_str().unwrap(),
            &worktree.branch,
        ],
    )?;
    let wt = sandbox.worktree_path().to_string();
    sandbox_sh(sandbox, format!("git init -q {}", q(&wt))).await?;
    let inside = format!("{wt}/.git/sanddune-in.bundle");
    sandbox.copy_file_in(&bundle, &inside).await?;
    let b = q(&worktree.branch);
    sandbox_sh(
        sandbox,
        format!("git fetch -q .git/sanddune-in.bundle {b} && git checkout -q -B {b} FETCH_HEAD && rm -f .git/sanddune-in.bundle"),
    )
    .await?;
    Ok(())
}

/// Bring commits made in the sandbox since `synced` into the host worktree.
/// Returns the sandbox's HEAD, the next `synced`.
pub async fn sync_out(sandbox: &mut Sandbox, worktree: &Worktree, synced: &str) -> Result<String> {
    let head = sandbox_sh(sandbox, "git rev-parse HEAD".into())
        .await?
        .stdout
        .trim()
        .to_string();
    if head == synced {
        return Ok(head);
    }
    sandbox_sh(
        sandbox,
        format!("git bundle create -q .git/sanddune-out.bundle {synced}..HEAD"),
    )
    .await?;
    let tmp = tempfile::tempdir().map_err(|e| Error::Other(e.into()))?;
    let bundle = tmp.path().join("out.bundle");
    let inside = format!("{}/.git/sanddune-out.bundle", sandbox.worktree_path());
    sandbox.copy_file_out(&inside, &bundle).await?;
    if !worktree.fast_forward_from_bundle(&bundle, &head)? {
        return Err(Error::Agent(format!(
            "the agent rewrote commits that were already synced; its work stays in sandbox `{}`",
            sandbox.provider_name()
        )));
    }
    Ok(head)
}
