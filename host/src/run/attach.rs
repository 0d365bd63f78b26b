//! `sanddune attach`: a shell on the user's terminal inside a live run's
//! sandbox, in its worktree, as the agent's user, while the agent works.
//! The run's sandbox record (`sandbox_record`) says which provider holds the
//! sandbox and its `state`; a fresh instance of that provider attaches to
//! it, as `gc` and the run's lanes do, runs the shell through
//! `interactive-exec`, and lets go of the sandbox without closing it: the
//! run owns it.

use super::reclaim::load_for;
use super::sandbox_record::{self, Record};
use crate::error::{Error, Result};
use crate::plugin::PluginRuntime;
use crate::plugin::api::{Command, EnvVar, ExecRequest};
use crate::plugin::sandbox::SandboxProvider;
use crate::worktree::Repo;

/// The shell: bash when the sandbox has it, else sh; interactive either way.
const SHELL: &str = "if command -v bash >/dev/null 2>&1; then exec bash -i; fi; exec sh -i";

/// Run a shell in the sandbox of run `run_id` with the terminal attached;
/// returns its exit code. The run goes on whatever the shell does.
pub async fn attach(repo: &Repo, runtime: &PluginRuntime, run_id: &str, name: &str) -> Result<i32> {
    let record = sandbox_record(repo, run_id, name)?;
    let state = record.state.clone().ok_or_else(|| {
        Error::input(format!(
            "run `{name}` ({run_id}) is still creating its sandbox; attach once `sanddune ps` shows it running"
        ))
    })?;
    let (loaded, spec): (SandboxProvider, _) = load_for(repo, runtime, &record).await?;
    let mut sandbox = loaded.reopen(&spec, &state, record.scratch.clone()).await?;
    let env = ["TERM", "COLORTERM", "LANG"]
        .into_iter()
        .filter_map(|key| {
            std::env::var(key).ok().map(|value| EnvVar {
                key: key.into(),
                value,
            })
        })
        .collect();
    let code = sandbox
        .interactive_exec(ExecRequest {
            command: Command::Argv(vec!["sh".into(), "-c".into(), SHELL.into()]),
            cwd: None,
            env,
            stdin: None,
            sudo: false,
            timeout_ms: None,
        })
        .await;
    // Not closed: the sandbox is the run's.
    sandbox.detach();
    code.map_err(|e| {
        Error::Other(anyhow::anyhow!(
            "cannot open a shell in run `{name}`'s {} sandbox: {e}",
            record.provider_name
        ))
    })
}

/// The record of the sandbox run `run_id` opened.
fn sandbox_record(repo: &Repo, run_id: &str, name: &str) -> Result<Record> {
    sandbox_record::records(&repo.git_dir())
        .into_iter()
        .find(|r| r.run_id == run_id)
        .ok_or_else(|| {
            Error::input(format!(
                "run `{name}` ({run_id}) has no sandbox open: it is setting up, or runs its agent on the host (no-sandbox)"
            ))
        })
}
