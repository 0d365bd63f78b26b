//! A planned sandbox started on its place: created, the repository synced
//! in (isolated providers) or the agent's git dir made (containers on host
//! paths), then the onSandboxReady hooks, or a prepared snapshot in their
//! place.

use std::collections::BTreeSet;
use std::path::Path;

use super::env::EnvMap;
use super::hook_runner;
use super::identity;
use super::log::RunLog;
use super::place::{Place, hook_log};
use super::plan::{self, SandboxPlan};
use super::provider_snapshot::{self, Wanted};
use super::{sandbox_record, snapshot, sync};
use crate::capability::containers::snapshot::short_id;
use crate::capability::pool::PoolTicket;
use crate::error::Result;
use crate::hooks::Hooks;
use crate::plugin::PluginRef;
use crate::plugin::sandbox::{Sandbox, SandboxKind, SandboxSpec};
use crate::worktree::AgentGitDir;

/// A sandbox that is up, and the env its git identity needs from now on.
pub(super) struct Started {
    pub sandbox: Sandbox,
    pub commit_env: EnvMap,
    /// Where the agent commits, for a container sandbox on host paths.
    pub agent_git: Option<AgentGitDir>,
}

/// Tokens of a code forge: the gateway covers model APIs only, and a push
/// needs none in the sandbox (`--push` pushes from the host), but a CLI
/// there (gh, copilot) may read one.
const FORGE_TOKENS: [&str; 4] = [
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "GITLAB_TOKEN",
];

/// Which model API keys stay on the host and which go in, and which forge
/// tokens go in, for the log.
fn say_gateway(plan: &SandboxPlan, log: &RunLog) {
    let forge: Vec<&str> = FORGE_TOKENS
        .into_iter()
        .filter(|key| plan.env.get(*key).is_some_and(|v| !v.is_empty()))
        .collect();
    if !forge.is_empty() {
        log.line(&format!(
            "warning: {} goes into the sandbox as it is, and the agent can do with it all it allows: give it the least the run needs (a fine-grained token for this repository); pushing needs none inside (`--push` pushes from the host)",
            forge.join(", ")
        ));
    }
    for (key, api) in &plan.gateway.kept_out {
        log.line(&format!(
            "credential gateway: {key} stays on the host; the sandbox gets a placeholder, which the gateway swaps for it on requests to {api}"
        ));
    }
    if !plan.gateway.kept_in.is_empty() {
        let why = if plan.options.credential_gateway {
            format!(
                "sandbox provider `{}` cannot reach the host's credential gateway",
                plan.provider.name()
            )
        } else {
            "the credential gateway is off".to_string()
        };
        log.line(&format!(
            "warning: {} goes into the sandbox as it is: {why}",
            plan.gateway.kept_in.join(", ")
        ));
    }
}

/// The hooks to run under the sandbox's prepared snapshot (ADR 0035): the
/// host's only when it started from one (whose worktree files are copied
/// back first), all of them otherwise; and when it may be kept as one
/// after them, what the worktree held before.
async fn snapshot_setup(
    sandbox: &mut Sandbox,
    hooks: &Hooks,
    worktree: &Path,
    log: &RunLog,
) -> (Hooks, Option<BTreeSet<String>>) {
    let Some(snapshot) = sandbox.snapshot() else {
        return (hooks.clone(), None);
    };
    let setup = hooks.sandbox_setup();
    if let Some(restored) = snapshot.restored() {
        let short = short_id(&restored.image);
        let back = match restored.worktree_files {
            true => snapshot::restore(sandbox, worktree).await,
            false => Ok(()),
        };
        return match back {
            Ok(()) => {
                log.line(&format!(
                    "snapshot: started from prepared image {short}: its set-up ({} sandbox hook(s)) is skipped",
                    setup.len()
                ));
                (hooks.host_only(), None)
            }
            Err(e) => {
                log.line(&format!(
                    "warning: snapshot: image {short} did not give back its worktree files ({e}); running the set-up"
                ));
                (hooks.clone(), None)
            }
        };
    }
    if !snapshot.may_keep() {
        return (hooks.clone(), None);
    }
    if setup.is_empty() {
        log.line(snapshot::NOTHING_TO_KEEP);
        return (hooks.clone(), None);
    }
    match snapshot::untracked(worktree) {
        Ok(before) => (hooks.clone(), Some(before)),
        Err(e) => {
            log.line(&format!(
                "warning: snapshot: the prepared sandbox will not be kept: {e}"
            ));
            (hooks.clone(), None)
        }
    }
}

/// Create the planned sandbox on `place`, sync the repository in
/// (isolated), install the commit trailer's hook (see `identity`), then run
/// the onSandboxReady hooks. A failure closes the sandbox.
pub(super) async fn start_sandbox(
    plan: &SandboxPlan,
    place: &Place,
    log: &RunLog,
) -> Result<Started> {
    let (provider, o, identity) = (&plan.provider, &plan.options, &plan.identity);
    let isolated = provider.info().kind == SandboxKind::Isolated;
    // A warm container's agent git dir was made for its run (ADR 0037);
    // another sandbox on the same place gets one of its own.
    let agent_id = match &plan.pool {
        Some(_) => place.run_id.clone(),
        None => super::strategy::run_id(),
    };
    let (agent_git, git_shield) = place.agent_git_dir(provider, &agent_id)?;
    let mut spec = SandboxSpec {
        run_id: place.run_id.clone(),
        name: o.name.clone().unwrap_or_else(|| place.branch.clone()),
        worktree: place.path().to_path_buf(),
        git_dir: place.repo()?.git_dir(),
        branch: place.branch.clone(),
        env: plan.env.clone().into_iter().collect(),
        config: crate::devcontainer::mount_workspace(plan.config.clone(), place.path()),
        side_by_side: o.side_by_side,
        git_shield,
        gateway: plan.gateway.gateway.clone(),
        setup: o.hooks.sandbox_setup(),
        pool: plan.pool.clone(),
        snapshot: None,
    };
    log.status(&format!("starting sandbox `{}`", provider.name()));
    say_gateway(plan, log);
    let timings = log.timings();
    let source = match PluginRef::parse(&provider.plugin().source) {
        PluginRef::File(path) => plan::absolute(&path)?.display().to_string(),
        PluginRef::Builtin(name) => name,
    };
    // A snapshot the provider keeps itself (ADR 0038): one that matches is
    // where the sandbox starts.
    let mut wanted = provider_snapshot::wanted(provider, &plan.config, &spec, log)?;
    spec.snapshot = wanted.as_ref().and_then(Wanted::found_id);
    let record =
        sandbox_record::begin(provider, source.clone(), &super::strategy::run_id(), &spec)?;
    let created = provider_snapshot::create(provider, &mut spec, wanted.as_mut(), log).await;
    let mut sandbox = match created {
        Ok(sandbox) => sandbox,
        Err(e) => {
            record.abandon();
            if let Some(dir) = agent_git {
                dir.remove();
            }
            return Err(e);
        }
    };
    if let Some(said) = plan.pool.as_deref().and_then(PoolTicket::outcome) {
        log.line(&said);
    }
    let ready = async {
        let base = match &place.worktree {
            Some(wt) if isolated => Some(place.repo()?.branch_head(&wt.branch)?),
            _ => None,
        };
        record.created(&mut sandbox, base).await?;
        if isolated {
            let wt = place
                .worktree
                .as_ref()
                .expect("isolated providers always have a worktree");
            if place.repo()?.is_dirty(wt)? {
                log.line(&format!(
                    "warning: {} has uncommitted changes; an isolated sandbox gets committed work only, so they stay on the host",
                    wt.path.display()
                ));
            }
            let start = std::time::Instant::now();
            let bytes = sync::sync_in(&mut sandbox, wt, plan.history).await?;
            timings.record_bytes("sync in", start.elapsed(), bytes);
        }
        let hooks_start = std::time::Instant::now();
        let hooks_dir = match &identity.trailer {
            Some(trailer) => Some(identity::install_trailer_hook(&mut sandbox, trailer).await?),
            None => None,
        };
        let (hooks, keep_after) = match &spec.snapshot {
            Some(id) => {
                log.line(&format!(
                    "snapshot: started from snapshot {id}: its set-up ({} sandbox hook(s)) is skipped",
                    spec.setup.len()
                ));
                (o.hooks.host_only(), None)
            }
            None => snapshot_setup(&mut sandbox, &o.hooks, place.path(), log).await,
        };
        if !hooks.host_on_sandbox_ready.is_empty()
            || !hooks.sandbox_on_sandbox_ready.is_empty()
            || !hooks.devcontainer.is_empty()
        {
            log.status("running onSandboxReady hooks");
        }
        hook_runner::run_on_sandbox_ready(
            &hooks,
            place.path(),
            &mut sandbox,
            &o.abort,
            &hook_log(log),
        )
        .await?;
        timings.record("hooks", hooks_start.elapsed());
        if let Some(before) = keep_after {
            let start = std::time::Instant::now();
            snapshot::keep(&mut sandbox, place.path(), &before, log).await;
            timings.record("snapshot keep", start.elapsed());
        }
        if let Some(w) = wanted.as_mut().filter(|_| spec.snapshot.is_none()) {
            let start = std::time::Instant::now();
            provider_snapshot::keep(&mut sandbox, w, provider, &source, &spec, log).await?;
            timings.record("snapshot keep", start.elapsed());
        }
        Ok(hooks_dir)
    };
    match ready.await {
        Ok(hooks_dir) => Ok(Started {
            sandbox,
            commit_env: identity.env(hooks_dir.as_deref()),
            agent_git,
        }),
        Err(e) => {
            let _ = sandbox.close().await;
            if let Some(mut dir) = agent_git {
                // What a hook committed still lands.
                let _ = dir.take_back();
                dir.remove();
            }
            Err(e)
        }
    }
}
