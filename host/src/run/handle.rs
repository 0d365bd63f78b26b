//! The sandbox handle of the layered entry points (the worktree's is in
//! `worktree_handle`). A [`SandboxHandle`] owns a sandbox and, when it came from the
//! top-level `create_sandbox` (or `run`), the worktree under it too. Close
//! them explicitly with `close().await`; a handle dropped unclosed still
//! tears its sandbox down in the background and warns.

use std::sync::Arc;

use serde::Serialize;

use super::capture::{self, HostSessions};
use super::closing::Closing;
use super::containment;
use super::env::EnvMap;
use super::invoker::SandboxInvoker;
use super::iteration::{self, StreamEvent, StreamEventCallback};
use super::log::RunLog;
use super::place::{self, Place};
use super::plan::{self, AgentPlan, SandboxPlan};
use super::registry::{self, Live};
use super::setup;
use super::strategy::{self, BranchStrategy};
use super::structured::OutputError;
use super::sync;
use super::uncommitted;
use super::{AgentOptions, Commit, RunResult, SandboxOptions};
use crate::error::{Error, Result};
use crate::plugin::sandbox::{Sandbox, SandboxKind};
use crate::worktree::{AgentGitDir, Removed, Repo};

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
/// [`WorktreeHandle::create_sandbox`](super::WorktreeHandle::create_sandbox).
pub struct SandboxHandle {
    place: Place,
    /// The handle also owns the worktree (top-level create_sandbox, run).
    owns_place: bool,
    /// What the sandbox was made from; its `env` is the env of its
    /// commands, with the git identity it has in the sandbox.
    plan: SandboxPlan,
    sandbox: Option<Sandbox>,
    /// The git identity's env in this sandbox (see `identity`).
    commit_env: EnvMap,
    log: RunLog,
    /// Isolated providers: the last commit synced out.
    synced: Option<String>,
    /// Container providers on host paths: where the agent commits.
    agent_git: Option<AgentGitDir>,
    /// The record of the run under way in the live-runs registry.
    pub(super) live: Option<Live>,
}

impl SandboxHandle {
    /// Start the planned sandbox on `place`. When the handle is to own the
    /// place, a failure releases it (and says so in the log).
    pub(super) async fn start(
        mut plan: SandboxPlan,
        place: Place,
        owns_place: bool,
        log: RunLog,
    ) -> Result<Self> {
        let started = match setup::start_sandbox(&plan, &place, &log).await {
            Ok(started) => started,
            Err(e) => {
                if owns_place {
                    log.line(&format!("error: {e}"));
                    log.finish();
                    if let Some(wt) = &place.worktree {
                        let _ = place::release_worktree(&plan.repo, wt, false);
                    }
                }
                return Err(e);
            }
        };
        let kind = plan.provider.info().kind;
        super::privileges::after_setup(kind, &plan.options.hooks, place.path(), &log);
        let identity = plan.identity.env(None);
        super::env::replace_identity(&mut plan.env, &identity, &started.commit_env);
        let synced = (kind == SandboxKind::Isolated)
            .then(|| place.repo().and_then(|r| r.branch_head(&place.branch)).ok())
            .flatten();
        Ok(Self {
            place,
            owns_place,
            plan,
            sandbox: Some(started.sandbox),
            commit_env: started.commit_env,
            agent_git: started.agent_git,
            log,
            synced,
            live: None,
        })
    }

    /// The env of the sandbox's commands, with its git identity.
    pub(super) fn env(&self) -> &EnvMap {
        &self.plan.env
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
    pub async fn run(&mut self, options: AgentOptions) -> Result<RunResult> {
        // The config may have changed since the sandbox was made.
        plan::check_trust(self.plan.repo.root(), &self.plan.options)?;
        let branches = (self.place.branch.as_str(), self.place.target.as_str());
        let (agent, env) =
            plan::agent_on_sandbox(&self.plan, &self.commit_env, options, branches, &self.log)
                .await?;
        self.run_agent(agent, env).await
    }

    /// A planned agent's run with a record of its own in the live-runs
    /// registry: `sanddune stop` stops this run only, not the others
    /// sharing the caller's handle (a workflow's items).
    pub(super) async fn run_agent(
        &mut self,
        mut agent: AgentPlan,
        env: EnvMap,
    ) -> Result<RunResult> {
        agent.options.abort = agent.options.abort.child();
        let record = registry_record(
            strategy::run_id(),
            &self.plan.options,
            (&self.place.branch, &self.place.root),
            (self.plan.provider.name(), agent.agent.name()),
            agent.options.max_iterations,
            &self.log,
        );
        self.live = Some(Live::start(
            &self.plan.repo.git_dir(),
            record,
            agent.options.abort.clone(),
        ));
        let result = self.run_prepared(agent, env, None).await;
        self.live = None;
        result
    }

    /// The one-shot run's agent, in the env the plan resolved for it.
    pub(super) async fn run_planned(
        &mut self,
        agent: AgentPlan,
        resume: Option<(String, std::path::PathBuf)>,
    ) -> Result<RunResult> {
        self.run_prepared(agent, self.env().clone(), resume).await
    }

    /// The agent loop on this sandbox, then the run's commits.
    async fn run_prepared(
        &mut self,
        planned: AgentPlan,
        env: EnvMap,
        resume: Option<(String, std::path::PathBuf)>,
    ) -> Result<RunResult> {
        let AgentPlan {
            options: o,
            mut agent,
            prompt,
            template,
            first_command,
        } = planned;
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
            self.plan.provider.name(),
            self.place.branch,
            o.max_iterations,
            if o.max_iterations == 1 { "" } else { "s" }
        ));
        let host_worktree = self.host_worktree();
        let sandbox = self
            .sandbox
            .as_mut()
            .ok_or_else(|| Error::Plugin("the sandbox is closed".into()))?;
        containment::start_agent_phase(sandbox, &agent.info().egress_hosts, &env, &log);
        if let (Some(live), Some(words)) = (&self.live, containment::describe(sandbox)) {
            live.set_containment(words);
        }
        let isolated = self.plan.provider.info().kind == SandboxKind::Isolated;
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
                first_command,
                resume_session: resume.map(|(session, _)| session),
                capture: if o.capture_sessions { sessions } else { None },
                sandbox_home,
                log: log.clone(),
                written_files: Vec::new(),
                live: self.live.clone(),
                api_urls: self.plan.gateway.urls.clone(),
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
            check: None,
            pushed: None,
        })
    }

    /// A bind-mount sandbox's worktree on the host: the same files the
    /// sandbox sees.
    fn host_worktree(&self) -> Option<std::path::PathBuf> {
        (self.plan.provider.info().kind == SandboxKind::BindMount).then(|| self.place.path().into())
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
        if self.plan.provider.info().kind == SandboxKind::Isolated
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

    /// Run `check` in the sandbox, on the files as the agent left them.
    pub(super) async fn check(&mut self, check: &super::Check) -> Result<super::CheckResult> {
        if let Some(live) = &self.live {
            live.set_state(registry::State::Checking);
        }
        let abort = self.plan.options.abort.clone();
        let sandbox = self.sandbox.as_mut().ok_or_else(|| {
            Error::Other(anyhow::anyhow!("the check needs a sandbox, and it is gone"))
        })?;
        let timings = self.log.timings().clone();
        timings
            .time(
                "check",
                super::check::run(sandbox, check, &abort, &self.log),
            )
            .await
    }

    /// Tear down the sandbox, and the worktree when this handle owns it
    /// (kept when dirty; its branch is kept).
    pub async fn close(mut self) -> Result<CloseResult> {
        let (close, _, later) = self.close_inner(false, false).await?;
        debug_assert!(later.is_done(), "nothing is deferred here");
        Ok(close)
    }

    /// `run`'s ending: close the sandbox, merge a merge-to-head branch
    /// when the run succeeded, and remove the worktree unless it is dirty.
    /// When the run succeeded, what the result no longer depends on is
    /// left to the returned [`Closing`]: the sandbox's close and the
    /// deletion of the removed worktree's files.
    pub(super) async fn teardown(
        mut self,
        result: Result<RunResult>,
    ) -> Result<(RunResult, Closing)> {
        // A failed check keeps the commits on the run's own branch.
        let checked = |r: &RunResult| r.check.as_ref().is_none_or(|c| c.passed);
        let merge = result.as_ref().is_ok_and(checked)
            && self.place.strategy == BranchStrategy::MergeToHead;
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
        let (close, merged, later) = match self.close_inner(merge, result.is_ok()).await {
            Ok(closed) => closed,
            Err(e) => return Err(result.err().unwrap_or(e)),
        };
        let mut result = result?;
        if merged {
            result.branch = self.place.target.clone();
        }
        result.preserved_worktree_path = close.preserved_worktree_path;
        result.timings = self.log.timings().phases();
        Ok((result, later.with_live(self.live.take())))
    }

    /// Returns what was kept, whether a merge happened, and what `defer`
    /// let wait: the sandbox's close (see [`Self::stopped`]) and the
    /// deletion of the removed worktree's files.
    async fn close_inner(
        &mut self,
        merge: bool,
        defer: bool,
    ) -> Result<(CloseResult, bool, Closing)> {
        let timings = self.log.timings().clone();
        let mut later = None;
        let closed = match self.sandbox.take() {
            Some(mut sandbox) => {
                if defer && self.stopped(&mut sandbox).await {
                    later = Some(sandbox);
                    Ok(())
                } else {
                    timings.time("sandbox close", sandbox.close()).await
                }
            }
            None => Ok(()),
        };
        if let Some(dir) = self.agent_git.take() {
            last_take_back(dir, &self.log);
        }
        super::privileges::after_close(
            self.plan.provider.info().kind,
            self.place.path(),
            &self.log,
        );
        self.log.finish();
        let ended = if self.owns_place {
            self.end_place(merge, closed.err(), defer).await
        } else {
            closed.map(|_| (CloseResult::default(), false, None))
        };
        match ended {
            Ok((close, merged, removed)) => Ok((
                close,
                merged,
                Closing::new(later, removed, self.log.clone()),
            )),
            Err(e) => {
                // A failed ending reports nothing to do later.
                if let Some(mut sandbox) = later {
                    let _ = timings.time("sandbox close", sandbox.close()).await;
                }
                Err(e)
            }
        }
    }

    /// Whether the run's result no longer depends on `sandbox`, so its
    /// close can wait: an isolated sandbox's commits were synced out after
    /// each iteration; a bind-mount one must first be stopped by the host,
    /// as nothing may write the worktree or the agent's git dir once they
    /// are read as final.
    async fn stopped(&self, sandbox: &mut Sandbox) -> bool {
        match self.plan.provider.info().kind {
            SandboxKind::Isolated => true,
            SandboxKind::BindMount => {
                let timings = self.log.timings().clone();
                timings.time("sandbox stop", sandbox.stop()).await
            }
        }
    }

    /// The worktree's ending once the sandbox is closed or stopped: merge
    /// (unless `failure`), then release it unless it is dirty; with
    /// `defer`, a removed worktree's files are returned to delete later.
    async fn end_place(
        &mut self,
        merge: bool,
        mut failure: Option<Error>,
        defer: bool,
    ) -> Result<(CloseResult, bool, Option<Removed>)> {
        let timings = self.log.timings().clone();
        let repo = self.place.repo()?;
        let mut merged = false;
        if merge && failure.is_none() {
            let merging = std::time::Instant::now();
            match repo.merge_into_head(&self.place.branch) {
                Ok(_) => merged = true,
                Err(e) => failure = Some(e),
            }
            timings.record("merge", merging.elapsed());
        }
        let mut close = CloseResult::default();
        let mut removed = None;
        if let Some(wt) = &self.place.worktree {
            let releasing = std::time::Instant::now();
            let (kept, aside) = place::release_worktree_later(&repo, wt, merged)?;
            close.preserved_worktree_path = kept;
            removed = aside;
            timings.record("worktree release", releasing.elapsed());
        }
        self.owns_place = false;
        if let Some(removed) = removed.take_if(|_| !defer || failure.is_some()) {
            let deleted = removed.delete();
            // A failure already on hand is the one to report.
            if failure.is_none() {
                deleted?;
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok((close, merged, removed)),
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
            self.plan.provider.name()
        );
        let place = self.owns_place.then(|| self.place.clone());
        let (agent_git, log) = (self.agent_git.take(), self.log.clone());
        let (kind, shared) = (
            self.plan.provider.info().kind,
            self.place.path().to_path_buf(),
        );
        let teardown = async move {
            let _ = sandbox.close().await;
            if let Some(dir) = agent_git {
                last_take_back(dir, &log);
            }
            super::privileges::after_close(kind, &shared, &log);
            if let Some(wt) = place.as_ref().and_then(|p| p.worktree.as_ref())
                && let Ok(repo) = Repo::discover(&place.as_ref().unwrap().root)
            {
                let _ = place::release_worktree(&repo, wt, false);
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

/// A run's first record in the live-runs registry.
pub(super) fn registry_record(
    run_id: String,
    so: &SandboxOptions,
    (branch, repo): (&str, &std::path::Path),
    (sandbox, agent): (&str, &str),
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
        agent: agent.to_string(),
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
