//! The owned handles of the layered entry points. A [`WorktreeHandle`] owns
//! a worktree; a [`SandboxHandle`] owns a sandbox and, when it came from the
//! top-level `create_sandbox` (or `run`), the worktree under it too. Close
//! them explicitly with `close().await`; a handle dropped unclosed still
//! tears its sandbox down in the background and warns.

use std::sync::Arc;

use serde::Serialize;

use super::capture::{self, HostSessions};
use super::containment;
use super::env::EnvMap;
use super::invoker::SandboxInvoker;
use super::iteration::{self, StreamEvent, StreamEventCallback};
use super::log::RunLog;
use super::prerequisites;
use super::registry::{self, Live};
use super::setup::{self, Place, PreparedAgent, Started};
use super::strategy::{BranchStrategy, WorktreeStrategy};
use super::structured::OutputError;
use super::sync;
use super::uncommitted;
use super::{AgentOptions, Commit, RunResult, SandboxOptions};
use crate::error::{Error, Result};
use crate::plugin::PluginRuntime;
use crate::plugin::agent::AgentProvider;
use crate::plugin::sandbox::{Sandbox, SandboxKind, SandboxProvider};
use crate::worktree::{AgentGitDir, Repo};

/// What closing a handle left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseResult {
    /// Set when the worktree had uncommitted changes and was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_worktree_path: Option<String>,
}

/// A live sandbox on one branch, reusable across agent runs: what its
/// hooks installed stays. See [`super::create_sandbox`] and
/// [`WorktreeHandle::create_sandbox`].
pub struct SandboxHandle {
    place: Place,
    /// The handle also owns the worktree (top-level create_sandbox, run).
    owns_place: bool,
    provider: SandboxProvider,
    sandbox: Option<Sandbox>,
    /// The git identity's env in this sandbox (see `identity`).
    commit_env: EnvMap,
    setup: SandboxOptions,
    runtime: PluginRuntime,
    log: RunLog,
    /// Isolated providers: the last commit synced out.
    synced: Option<String>,
    /// Container providers on host paths: where the agent commits.
    agent_git: Option<AgentGitDir>,
    /// The record of the run under way in the live-runs registry.
    live: Option<Live>,
}

impl SandboxHandle {
    pub(super) fn new(
        place: Place,
        owns_place: bool,
        provider: SandboxProvider,
        started: Started,
        setup: SandboxOptions,
        runtime: PluginRuntime,
        log: RunLog,
    ) -> Self {
        let synced = (provider.info().kind == SandboxKind::Isolated)
            .then(|| place.repo().and_then(|r| r.branch_head(&place.branch)).ok())
            .flatten();
        Self {
            place,
            owns_place,
            provider,
            sandbox: Some(started.sandbox),
            commit_env: started.commit_env,
            agent_git: started.agent_git,
            setup,
            runtime,
            log,
            synced,
            live: None,
        }
    }

    /// The source branch this sandbox works on.
    pub fn branch(&self) -> &str {
        &self.place.branch
    }

    /// The worktree on the host (the repository itself under head).
    pub fn worktree_path(&self) -> &std::path::Path {
        self.place.path()
    }

    /// Run an agent in this sandbox. After an abort or an idle timeout the
    /// sandbox stays usable: run again, or close.
    pub async fn run(&mut self, mut options: AgentOptions) -> Result<RunResult> {
        let checked = setup::check_agent_options(&options)?;
        // The config may have changed since the sandbox was made.
        check_trust(
            &self.place.root,
            &self.setup.sandbox,
            &self.setup.sandbox_config,
            self.setup.trust,
        )?;
        let mut prepared = setup::prepare_agent(
            &self.runtime,
            &options,
            checked,
            &self.place.branch,
            &self.place.target,
            Some(&self.log),
        )
        .await?;
        let mut declared = setup::agent_keys(&prepared.agent);
        declared.extend(setup::declared_sandbox_keys(&self.provider));
        let call_site: Vec<_> = self.setup.env.iter().chain(&options.env).cloned().collect();
        let env = setup::resolve_env(
            &self.place.root,
            self.commit_env.clone(),
            declared,
            &options.agent_env,
            &self.setup.sandbox_env,
            &call_site,
        )?;
        prerequisites::check_agent_env(&prepared.agent, &env)?;
        prerequisites::check_agent_command(&mut prepared, &options, &env).await?;
        // `sanddune stop` stops this run only, not the others sharing the
        // caller's handle (a workflow's items).
        options.abort = options.abort.child();
        let record = registry_record(
            setup::run_id(),
            &self.setup,
            (&self.place.branch, &self.place.root),
            self.provider.name(),
            &prepared.agent,
            options.max_iterations,
            &self.log,
        );
        self.live = Some(Live::start(
            &self.place.repo()?.git_dir(),
            record,
            options.abort.clone(),
        ));
        let result = self.run_prepared(prepared, &options, env, None).await;
        self.live = None;
        result
    }

    /// The agent loop on this sandbox, then the run's commits.
    pub(super) async fn run_prepared(
        &mut self,
        prepared: PreparedAgent,
        o: &AgentOptions,
        env: EnvMap,
        resume: Option<(String, std::path::PathBuf)>,
    ) -> Result<RunResult> {
        let PreparedAgent {
            mut agent,
            prompt,
            template,
        } = prepared;
        let repo = self.place.repo()?;
        let base = repo.branch_head(&self.place.branch)?;
        let log = self.log.clone();
        // An abort kills whatever the provider runs then, not only the
        // agent: a provider stuck in another command is given up on (see
        // `Sandbox::exec`) instead of holding the abort to that timeout.
        let _kill_on_abort = self.sandbox.as_ref().map(|sandbox| {
            let (canceller, abort) = (sandbox.canceller(), o.abort.clone());
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                abort.aborted().await;
                canceller.kill_all();
            }))
        });
        log.headline(&format!(
            "agent `{}` in sandbox `{}` on branch {} (up to {} iteration{})",
            agent.name(),
            self.provider.name(),
            self.place.branch,
            o.max_iterations,
            if o.max_iterations == 1 { "" } else { "s" }
        ));
        let host_worktree = self.host_worktree();
        let sandbox = self
            .sandbox
            .as_mut()
            .ok_or_else(|| Error::Plugin("the sandbox is closed".into()))?;
        containment::allow_agent(sandbox, &agent.info().egress_hosts, &env, &log);
        if let (Some(live), Some(words)) = (&self.live, containment::describe(sandbox)) {
            live.set_containment(words);
        }
        let isolated = self.provider.info().kind == SandboxKind::Isolated;
        // A reused sandbox gets what its branch gained on the host since it
        // last synced (nothing, unless someone committed there).
        if isolated && let (Some(have), Some(wt)) = (&self.synced, self.place.worktree.as_deref()) {
            let start = std::time::Instant::now();
            let (tip, bytes) = sync::sync_in_since(sandbox, wt, have).await?;
            if bytes > 0 {
                log.timings()
                    .record_bytes("sync in", start.elapsed(), bytes);
            }
            self.synced = Some(tip);
        }
        let sessions = HostSessions::from_env(&self.place.root);
        let mut sandbox_home = None;
        if let Some((session, source)) = &resume {
            let host = sessions
                .as_ref()
                .ok_or_else(|| Error::input("HOME is not set, so there is no session to resume"))?;
            let home = capture::sandbox_home(sandbox).await?;
            capture::transfer_in(&mut agent, sandbox, &home, host, source, session).await?;
            sandbox_home = Some(home);
        }
        let (before, home) = log
            .timings()
            .time(
                "status before",
                uncommitted::status_and_home(sandbox, host_worktree.as_deref()),
            )
            .await
            .unwrap_or_default();
        if sandbox_home.is_none() {
            sandbox_home = home;
        }
        let worktree = self.place.worktree.clone();
        let synced = self.synced.clone().unwrap_or_else(|| base.clone());
        let outcome = {
            let mut invoker = SandboxInvoker {
                agent: &mut agent,
                sandbox,
                model: o.model.clone(),
                options: o.agent_options.clone(),
                env: env.into_iter().collect(),
                sync: if isolated {
                    worktree.as_deref().map(|wt| (wt, synced))
                } else {
                    None
                },
                agent_git: self.agent_git.as_mut(),
                on_event: Some(forward_events(&log, o.on_event.clone())),
                abort: o.abort.clone(),
                idle_timeout: o.idle_timeout,
                template,
                resume_session: resume.map(|(session, _)| session),
                capture: if o.capture_sessions { sessions } else { None },
                sandbox_home,
                log: log.clone(),
                written_files: Vec::new(),
                live: self.live.clone(),
            };
            let outcome = iteration::run_iterations(
                &mut invoker,
                &prompt,
                o.max_iterations,
                &o.completion_signals,
            )
            .await;
            if let Some((_, synced)) = invoker.sync.take() {
                self.synced = Some(synced);
            }
            outcome
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            // Whatever failed once the run was aborted (a provider given up
            // on after the kill), the run ends as aborted.
            Err(e) if o.abort.is_aborted() && !matches!(e, Error::Aborted(_)) => {
                log.line(&format!("error: {e}"));
                return Err(Error::Aborted(o.abort.reason()));
            }
            Err(e) => {
                let e = containment::explain(sandbox, e).await;
                log.line(&format!("error: {e}"));
                return Err(e);
            }
        };
        let (limits, denied_egress) = containment::report(sandbox, &log);
        let uncommitted = log
            .timings()
            .clone()
            .time(
                "status after",
                self.left_uncommitted(&before, outcome.completion_signal.is_some()),
            )
            .await;
        let commits: Vec<Commit> = repo
            .commits_since(&base, &self.place.branch)?
            .into_iter()
            .map(|sha| Commit { sha })
            .collect();
        let n = outcome.iterations.len();
        log.headline(&format!(
            "{n} iteration{}, {} commit{} on {}{}",
            if n == 1 { "" } else { "s" },
            commits.len(),
            if commits.len() == 1 { "" } else { "s" },
            self.place.branch,
            match &outcome.completion_signal {
                Some(s) => format!(", completion signal {s}"),
                None => String::new(),
            }
        ));
        let output = match &o.output {
            Some(spec) => match spec.extract(&outcome.stdout) {
                Ok(value) => Some(value),
                Err(message) => {
                    log.line(&format!("error: {message}"));
                    return Err(Error::Output(Box::new(OutputError {
                        message,
                        raw: outcome.stdout,
                        commits,
                    })));
                }
            },
            None => None,
        };
        Ok(RunResult {
            iterations: outcome.iterations,
            completion_signal: outcome.completion_signal,
            stdout: outcome.stdout,
            commits,
            branch: self.place.branch.clone(),
            preserved_worktree_path: None,
            uncommitted_changes: uncommitted,
            log_file_path: log.path().map(|p| p.display().to_string()),
            output,
            // Since the sandbox was created; `run` adds its teardown.
            timings: log.timings().phases(),
            limits,
            denied_egress,
        })
    }

    /// A bind-mount sandbox's worktree on the host: the same files the
    /// sandbox sees.
    fn host_worktree(&self) -> Option<std::path::PathBuf> {
        (self.provider.info().kind == SandboxKind::BindMount).then(|| self.place.path().into())
    }

    /// What the agent changed and did not commit in this run, said in the
    /// log and (isolated) brought out to the host worktree so that it is
    /// kept. Finding out is best effort: a failure is a warning.
    async fn left_uncommitted(&mut self, before: &[String], said_done: bool) -> Vec<String> {
        let host_worktree = self.host_worktree();
        let Some(sandbox) = self.sandbox.as_mut() else {
            return vec![];
        };
        let left = match uncommitted::status(sandbox, host_worktree.as_deref()).await {
            Ok(after) => uncommitted::new_entries(before, after),
            Err(e) => {
                self.log.line(&format!(
                    "warning: cannot tell whether the agent left uncommitted changes: {e}"
                ));
                return vec![];
            }
        };
        if left.is_empty() {
            return left;
        }
        self.log.line(&format!(
            "warning: the agent {} left uncommitted changes, which are in no commit: {}",
            if said_done {
                "said it was done but"
            } else {
                "stopped and"
            },
            left.join(", ")
        ));
        if self.provider.info().kind == SandboxKind::Isolated
            && let Some(wt) = &self.place.worktree
            && let Err(e) = match wt.write_files() {
                Ok(()) => uncommitted::bring_out(sandbox, wt).await,
                Err(e) => Err(e),
            }
        {
            self.log.line(&format!(
                "warning: the uncommitted changes could not be brought out of the sandbox: {e}"
            ));
        }
        left
    }

    /// Tear down the sandbox, and the worktree when this handle owns it
    /// (kept when dirty; its branch is kept).
    pub async fn close(mut self) -> Result<CloseResult> {
        self.close_inner(false).await.map(|(close, _)| close)
    }

    /// `run`'s ending: close the sandbox, merge a merge-to-head branch
    /// when the run succeeded, and remove the worktree unless it is dirty.
    pub(super) async fn teardown(mut self, result: Result<RunResult>) -> Result<RunResult> {
        let merge = result.is_ok() && self.place.strategy == BranchStrategy::MergeToHead;
        if merge && let Some(live) = &self.live {
            live.set_state(registry::State::Merging);
        }
        if matches!(result, Err(Error::Aborted(_))) {
            // An aborted run keeps its worktree as the killed agent left it,
            // with its files for whoever looks.
            if let Some(wt) = &self.place.worktree {
                if let Err(e) = wt.write_files() {
                    self.log
                        .line(&format!("warning: the worktree's files: {e}"));
                }
                self.log
                    .line(&format!("aborted; worktree kept: {}", wt.path.display()));
            }
            self.owns_place = false;
        }
        let (close, merged) = match self.close_inner(merge).await {
            Ok(closed) => closed,
            Err(e) => return Err(result.err().unwrap_or(e)),
        };
        let mut result = result?;
        if merged {
            result.branch = self.place.target.clone();
        }
        result.preserved_worktree_path = close.preserved_worktree_path;
        result.timings = self.log.timings().phases();
        Ok(result)
    }

    /// Returns what was kept and whether a merge happened.
    async fn close_inner(&mut self, merge: bool) -> Result<(CloseResult, bool)> {
        let timings = self.log.timings().clone();
        let closed = match self.sandbox.take() {
            Some(mut sandbox) => timings.time("sandbox close", sandbox.close()).await,
            None => Ok(()),
        };
        if let Some(dir) = self.agent_git.take() {
            last_take_back(dir, &self.log);
        }
        super::privileges::after_close(self.provider.info().kind, self.place.path(), &self.log);
        self.log.finish();
        if !self.owns_place {
            return closed.map(|_| (CloseResult::default(), false));
        }
        let repo = self.place.repo()?;
        let mut merged = false;
        let mut failure = closed.err();
        if merge && failure.is_none() {
            let merging = std::time::Instant::now();
            match repo.merge_into_head(&self.place.branch) {
                Ok(_) => merged = true,
                Err(e) => failure = Some(e),
            }
            timings.record("merge", merging.elapsed());
        }
        let mut close = CloseResult::default();
        if let Some(wt) = &self.place.worktree {
            let releasing = std::time::Instant::now();
            close.preserved_worktree_path = setup::release_worktree(&repo, wt, merged)?;
            timings.record("worktree release", releasing.elapsed());
        }
        self.owns_place = false;
        match failure {
            Some(e) => Err(e),
            None => Ok((close, merged)),
        }
    }
}

/// Once the sandbox is closed: what the agent committed since its last
/// iteration (a background process, `attach`) lands, then its git dir goes.
fn last_take_back(mut dir: AgentGitDir, log: &RunLog) {
    if let Err(e) = dir.take_back() {
        log.line(&format!("warning: after the sandbox closed: {e}"));
    }
    dir.remove();
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        let Some(mut sandbox) = self.sandbox.take() else {
            return;
        };
        tracing::warn!(
            "a sandbox of `{}` was dropped without close(); tearing it down in the background",
            self.provider.name()
        );
        let place = self.owns_place.then(|| self.place.clone());
        let (agent_git, log) = (self.agent_git.take(), self.log.clone());
        let (kind, shared) = (self.provider.info().kind, self.place.path().to_path_buf());
        let teardown = async move {
            let _ = sandbox.close().await;
            if let Some(dir) = agent_git {
                last_take_back(dir, &log);
            }
            super::privileges::after_close(kind, &shared, &log);
            if let Some(wt) = place.as_ref().and_then(|p| p.worktree.as_ref())
                && let Ok(repo) = Repo::discover(&place.as_ref().unwrap().root)
            {
                let _ = setup::release_worktree(&repo, wt, false);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(teardown);
            }
            // No runtime to close on: the sandbox's own drop still kills
            // its processes and removes its scratch directory.
            Err(_) => drop(teardown),
        }
    }
}

/// The run log sees every event; the caller's callback too, and its panics
/// are caught where events are emitted.
fn forward_events(log: &RunLog, user: Option<StreamEventCallback>) -> StreamEventCallback {
    let log = log.clone();
    Arc::new(move |event: &StreamEvent| {
        log.event(event);
        if let Some(cb) = &user {
            cb(event);
        }
    })
}

/// A worktree as a lifecycle of its own: runs, sandboxes and interactive
/// sessions on it share it. `close` merges a merge-to-head branch that is
/// ahead of the target, then removes the worktree unless it is dirty.
pub struct WorktreeHandle {
    place: Option<Place>,
    runtime: PluginRuntime,
    log: RunLog,
}

impl WorktreeHandle {
    pub(super) async fn create(
        strategy: WorktreeStrategy,
        options: SandboxOptions,
    ) -> Result<Self> {
        let repo = Repo::discover(&setup::absolute(&options.cwd)?)?;
        check_trust(
            repo.root(),
            &options.sandbox,
            &options.sandbox_config,
            options.trust,
        )?;
        let runtime = setup::runtime(&options.runtime)?;
        let id = setup::run_id();
        let log = setup::open_log(&repo, &options.log, options.name.as_deref())?;
        let place = setup::prepare_place(&repo, strategy.into(), &id, &options, true, &log).await?;
        Ok(Self {
            place: Some(place),
            runtime,
            log,
        })
    }

    fn place(&self) -> &Place {
        self.place
            .as_ref()
            .expect("a worktree handle has its place until closed")
    }

    /// The worktree's path on the host.
    pub fn path(&self) -> &std::path::Path {
        self.place().path()
    }

    /// The branch checked out in the worktree.
    pub fn branch(&self) -> &str {
        &self.place().branch
    }

    pub(super) fn runtime(&self) -> &PluginRuntime {
        &self.runtime
    }

    pub(super) fn place_for_interactive(&self) -> Place {
        self.place().clone()
    }

    /// A sandbox on this worktree; its `close` tears down only the sandbox.
    pub async fn create_sandbox(&self, options: SandboxOptions) -> Result<SandboxHandle> {
        self.sandbox_on(options, false).await
    }

    /// The top-level create_sandbox: the sandbox handle takes the worktree.
    pub(super) async fn into_sandbox(mut self, options: SandboxOptions) -> Result<SandboxHandle> {
        match self.sandbox_on(options, true).await {
            Ok(handle) => {
                self.place = None;
                Ok(handle)
            }
            Err(e) => {
                let _ = self.close_place(false);
                Err(e)
            }
        }
    }

    async fn sandbox_on(&self, mut options: SandboxOptions, owns: bool) -> Result<SandboxHandle> {
        let runtime = match &options.runtime {
            Some(rt) => rt.clone(),
            None => self.runtime.clone(),
        };
        let place = self.place().clone();
        check_trust(
            &place.root,
            &options.sandbox,
            &options.sandbox_config,
            options.trust,
        )?;
        let provider = setup::load_sandbox_provider(&runtime, &options.sandbox).await?;
        // The worktree exists already: initializeCommand runs now.
        if let Some(initialize) = crate::devcontainer::apply(
            &provider,
            &place.root,
            &mut options.sandbox_config,
            &mut options.env,
            &mut options.hooks,
        )
        .await?
        {
            super::hooks::run_on_worktree_ready(
                &[initialize],
                place.path(),
                &options.abort,
                &setup::hook_log(&self.log),
            )
            .await?;
        }
        let (identity, env) = setup::resolve_identity_and_env(
            &place.root,
            &options.commit,
            setup::declared_sandbox_keys(&provider),
            &[],
            &options.sandbox_env,
            &options.env,
        )?;
        prerequisites::check_sandbox_provider(
            &provider,
            &options.sandbox_config,
            &env,
            &place.repo()?.git_dir(),
        )
        .await?;
        let started =
            setup::start_sandbox(&provider, &place, env, &options, &identity, &self.log).await?;
        super::privileges::after_setup(
            provider.info().kind,
            &options.hooks,
            place.path(),
            &self.log,
        );
        Ok(SandboxHandle::new(
            place,
            owns,
            provider,
            started,
            options,
            runtime,
            self.log.clone(),
        ))
    }

    /// One agent run in a fresh sandbox on this worktree; the sandbox is
    /// torn down after it, the worktree stays.
    pub async fn run(&self, sandbox: SandboxOptions, agent: AgentOptions) -> Result<RunResult> {
        setup::check_agent_options(&agent)?;
        check_trust(
            &self.place().root,
            &sandbox.sandbox,
            &sandbox.sandbox_config,
            sandbox.trust,
        )?;
        // The agent's env requirements, before a sandbox exists for it.
        let runtime = match &sandbox.runtime {
            Some(rt) => rt.clone(),
            None => self.runtime.clone(),
        };
        let provider = AgentProvider::load(&runtime, &agent.agent).await?;
        let call_site: Vec<_> = sandbox.env.iter().chain(&agent.env).cloned().collect();
        let env = setup::resolve_env(
            &self.place().root,
            EnvMap::new(),
            setup::agent_keys(&provider),
            &agent.agent_env,
            &sandbox.sandbox_env,
            &call_site,
        )?;
        prerequisites::check_agent_env(&provider, &env)?;
        let mut handle = self.create_sandbox(sandbox).await?;
        let result = handle.run(agent).await;
        let closed = handle.close().await;
        let result = result?;
        closed?;
        Ok(result)
    }

    /// Merge (merge-to-head, when ahead of the target) and remove the
    /// worktree; a dirty one is kept and its path returned.
    pub async fn close(mut self) -> Result<CloseResult> {
        self.log.finish();
        self.close_place(true)
    }

    fn close_place(&mut self, merge: bool) -> Result<CloseResult> {
        let Some(place) = self.place.take() else {
            return Ok(CloseResult::default());
        };
        let repo = place.repo()?;
        let Some(wt) = &place.worktree else {
            return Ok(CloseResult::default());
        };
        let mut merged = false;
        if merge && place.strategy == BranchStrategy::MergeToHead {
            // Gated on the branch being ahead, not on what one run did.
            if !repo
                .commits_since(&repo.branch_head(&place.target)?, &wt.branch)?
                .is_empty()
            {
                repo.merge_into_head(&wt.branch)?;
            }
            merged = true;
        }
        Ok(CloseResult {
            preserved_worktree_path: setup::release_worktree(&repo, wt, merged)?,
        })
    }
}

impl Drop for WorktreeHandle {
    fn drop(&mut self) {
        if self.place.is_some() {
            tracing::warn!("a worktree handle was dropped without close(); its worktree is kept");
        }
    }
}

/// What a new sandbox needs, checked before a worktree is made for it: the
/// commit identity, and what the sandbox provider needs on this host (see
/// `prerequisites`). A component file is approved (perhaps asked about)
/// only where it is used, so its `preflight` runs there.
pub(crate) async fn check_sandbox(options: &SandboxOptions, runtime: &PluginRuntime) -> Result<()> {
    let repo = Repo::discover(&setup::absolute(&options.cwd)?)?;
    check_trust(
        repo.root(),
        &options.sandbox,
        &options.sandbox_config,
        options.trust,
    )?;
    if matches!(&options.sandbox, crate::plugin::PluginRef::Builtin(n) if n == setup::NO_SANDBOX) {
        return Ok(());
    }
    let plugin = runtime.load(&options.sandbox, Some(crate::plugin::PluginKind::Sandbox))?;
    let provider = SandboxProvider::from_plugin(plugin).await?;
    // The dev container is refused or its image built here, before any
    // worktree; the sandbox applies it again (the image is then there) and
    // runs its initializeCommand.
    let mut options = options.clone();
    crate::devcontainer::apply(
        &provider,
        repo.root(),
        &mut options.sandbox_config,
        &mut options.env,
        &mut options.hooks,
    )
    .await?;
    let (_, env) = setup::resolve_identity_and_env(
        repo.root(),
        &options.commit,
        setup::declared_sandbox_keys(&provider),
        &[],
        &options.sandbox_env,
        &options.env,
    )?;
    prerequisites::check_sandbox_provider(&provider, &options.sandbox_config, &env, &repo.git_dir())
        .await
}

/// Workspace trust: every entry point passes here before it creates or
/// runs anything (see `crate::trust`).
pub(super) fn check_trust(
    root: &std::path::Path,
    sandbox: &crate::plugin::PluginRef,
    sandbox_config: &[(String, String)],
    policy: crate::trust::TrustPolicy,
) -> Result<()> {
    let scope = crate::trust::Scope::Run {
        sandbox,
        sandbox_config,
    };
    crate::trust::require(root, &scope, policy)
}

/// `run`: everything, then teardown with the branch strategy's ending.
pub(super) async fn one_shot(
    mut so: SandboxOptions,
    mut ao: AgentOptions,
    requested: Option<BranchStrategy>,
    resume: Option<String>,
) -> Result<RunResult> {
    let checked = setup::check_agent_options(&ao)?;
    if resume.is_some() && ao.max_iterations > 1 {
        return Err(Error::input(
            "resuming a session applies to iteration 1 only: use --max-iterations 1 with --resume",
        ));
    }
    let process = super::timings::since_process_start();
    let repo = Repo::discover(&setup::absolute(&so.cwd)?)?;
    check_trust(repo.root(), &so.sandbox, &so.sandbox_config, so.trust)?;
    let runtime = setup::runtime(&so.runtime)?;
    let loading = std::time::Instant::now();
    let provider = setup::load_sandbox_provider(&runtime, &so.sandbox).await?;
    let strategy = super::strategy::resolve(
        requested,
        provider.info().kind.into(),
        provider.name(),
        super::strategy::Request {
            interactive: false,
            copies: !so.copy_to_worktree.is_empty(),
        },
    )?;
    sync::take_history(
        provider.name(),
        provider.info().kind == SandboxKind::Isolated,
        &so.sandbox_config,
    )?;
    if let Some(initialize) = crate::devcontainer::apply(
        &provider,
        repo.root(),
        &mut so.sandbox_config,
        &mut so.env,
        &mut so.hooks,
    )
    .await?
    {
        so.hooks.host_on_worktree_ready.insert(0, initialize);
    }
    // The agent's commands get the call-site env the sandbox got (split
    // gave both the same one).
    ao.env = so.env.clone();
    let target = repo.current_branch()?;
    let id = setup::run_id();
    let source = setup::source_branch(&strategy, &target, &id);
    let mut prepared = setup::prepare_agent(&runtime, &ao, checked, &source, &target, None).await?;
    let loaded = loading.elapsed();
    let mut declared = setup::agent_keys(&prepared.agent);
    declared.extend(provider.capabilities().env_keys);
    let (identity, mut env) = setup::resolve_identity_and_env(
        repo.root(),
        &so.commit,
        declared,
        &ao.agent_env,
        &so.sandbox_env,
        &ao.env,
    )?;
    prerequisites::check_agent_env(&prepared.agent, &env)?;
    prerequisites::check_agent_command(&mut prepared, &ao, &env).await?;
    prerequisites::check_sandbox_provider(&provider, &so.sandbox_config, &env, &repo.git_dir())
        .await?;
    let resume = match resume {
        Some(session) => {
            let host = HostSessions::from_env(repo.root())
                .ok_or_else(|| Error::input("HOME is not set, so there is no session to resume"))?;
            let source = capture::resume_source(&mut prepared.agent, &host, &session).await?;
            Some((session, source))
        }
        None => None,
    };

    let files = setup::host_needs_files(&provider, &so);

    // Side effects from here on.
    let log = setup::open_log(&repo, &so.log, so.name.as_deref())?;
    // `sanddune stop` stops this run only, not the others sharing the
    // caller's handle (a workflow's items).
    so.abort = ao.abort.child();
    ao.abort = so.abort.clone();
    let live = Live::start(
        &repo.git_dir(),
        registry_record(
            id.clone(),
            &so,
            (&source, repo.root()),
            provider.name(),
            &prepared.agent,
            ao.max_iterations,
            &log,
        ),
        so.abort.clone(),
    );
    let timings = log.timings().clone();
    if let Some(process) = process {
        timings.record("process start", process);
    }
    timings.record("plugin load", loaded);
    let place = timings
        .time(
            "worktree",
            setup::prepare_place(&repo, strategy, &id, &so, files, &log),
        )
        .await?;
    let started =
        match setup::start_sandbox(&provider, &place, env.clone(), &so, &identity, &log).await {
            Ok(started) => started,
            Err(e) => {
                log.line(&format!("error: {e}"));
                log.finish();
                if let Some(wt) = &place.worktree {
                    let _ = setup::release_worktree(&repo, wt, false);
                }
                return Err(e);
            }
        };
    super::privileges::after_setup(provider.info().kind, &so.hooks, place.path(), &log);
    super::env::replace_identity(&mut env, &identity.env(None), &started.commit_env);
    let mut handle = SandboxHandle::new(place, true, provider, started, so, runtime, log);
    handle.live = Some(live);
    let result = handle.run_prepared(prepared, &ao, env, resume).await;
    handle.teardown(result).await
}

/// A run's first record in the live-runs registry.
fn registry_record(
    run_id: String,
    so: &SandboxOptions,
    (branch, repo): (&str, &std::path::Path),
    sandbox: &str,
    agent: &AgentProvider,
    max_iterations: u32,
    log: &RunLog,
) -> registry::Record {
    let (workflow, item) = match &so.workflow_item {
        Some(w) => (Some(w.workflow.clone()), Some(w.item.clone())),
        None => (None, None),
    };
    // `Live::start` fills in the owner and the start time.
    registry::Record {
        name: so.name.clone().unwrap_or_else(|| "run".into()),
        run_id,
        workflow,
        item,
        sandbox: sandbox.to_string(),
        agent: agent.name().to_string(),
        branch: branch.to_string(),
        iteration: 0,
        max_iterations,
        state: registry::State::SettingUp,
        started: 0,
        tokens: 0,
        log_file: log.path().map(std::path::Path::to_path_buf),
        repo: repo.to_path_buf(),
        owner: String::new(),
        containment: None,
    }
}
