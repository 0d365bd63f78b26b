//! The orchestration core and its four entry points:
//!
//! - [`run`]: one-shot. Worktree, sandbox, iterations, commits back by the
//!   branch strategy, teardown.
//! - [`create_sandbox`]: a reusable sandbox on one branch ([`SandboxHandle`]);
//!   its hooks run once, each `run` on it reuses what they installed.
//! - [`create_worktree`]: a worktree as a lifecycle of its own
//!   ([`WorktreeHandle`]): run, sandboxes and interactive sessions on it.
//! - [`interactive`]: the agent's terminal UI in a sandbox or on the host.
//!
//! Each entry point first makes a plan (`plan`): every check, with the
//! providers loaded once and nothing created. Then the setup is layered:
//! the place (`place`: worktree, copyToWorktree, host.onWorktreeReady),
//! the sandbox on it (`setup`: sync in, host.onSandboxReady ∥
//! sandbox.onSandboxReady), then agent runs (`handle`, `invoker`,
//! `iteration`).

pub mod abort;
mod agent_files;
mod attach;
pub mod capture;
mod check;
mod closing;
mod containment;
pub mod env;
mod handle;
pub mod hook_runner;
pub mod identity;
mod interactive;
pub mod invoker;
pub mod iteration;
mod lanes;
pub mod log;
mod place;
mod plan;
pub(crate) mod pool;
mod prerequisites;
mod privileges;
pub mod provider_snapshot;
pub mod reclaim;
pub mod registry;
mod sandbox_record;
mod setup;
mod snapshot;
pub mod strategy;
pub mod structured;
pub mod sync;
pub mod timings;
mod uncommitted;
mod worktree_handle;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use crate::attribution::{CoAuthor, CommitOptions, GitIdentity};
pub use crate::hooks::{Hooks, HostHook, NamedSandboxHook, SandboxHook};
pub use crate::outcome::{self, Commit};
pub use abort::AbortHandle;
pub use attach::attach;
pub use check::{Check, CheckResult, DEFAULT_CHECK_TIMEOUT};
pub use closing::Closing;
pub use handle::{CloseResult, SandboxHandle};
pub use interactive::{InteractiveOptions, InteractiveResult, InteractiveSandbox, interactive};
pub use iteration::{
    AgentInvoker, IterationResult, IterationUsage, StreamEvent, StreamEventCallback,
};
pub use log::LogMode;
pub use plan::NO_SANDBOX;
use plan::RunPlan;
pub(crate) use plan::SandboxPlan;
pub use registry::WorkflowItem;
pub(crate) use strategy::run_id;
pub use strategy::{BranchStrategy, WorktreeStrategy};
pub use structured::{OutputError, StructuredOutput};
pub use worktree_handle::WorktreeHandle;

use crate::capability::containers::ResourceLimits;
use crate::capability::egress::Denial;
use crate::error::Result;
use crate::plugin::{PluginRef, PluginRuntime};
pub use crate::trust::TrustPolicy;
pub use crate::worktree::{PushTo, Pushed};

/// The default completion signal. sanddune never adds it to a prompt.
pub const DEFAULT_COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Where the prompt comes from.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// Passed to the agent literally.
    Inline(String),
    /// Read from a file, relative to the process's cwd.
    File(PathBuf),
}

/// Lifecycle timeouts (hooks have their own, per hook).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// copyToWorktree as a whole (default 60 s).
    pub copy_to_worktree: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            copy_to_worktree: crate::worktree::DEFAULT_COPY_TIMEOUT,
        }
    }
}

/// Everything a one-shot run needs: the sandbox part and the agent part,
/// each as [`create_sandbox`] and [`SandboxHandle::run`] take it, and what
/// only a one-shot run has. The run stops when either part's
/// [`AbortHandle`] is aborted; [`RunOptions::new`] gives both one handle.
#[derive(Clone)]
pub struct RunOptions {
    pub sandbox: SandboxOptions,
    pub agent: AgentOptions,
    /// The branch strategy; the sandbox provider's default when None.
    pub strategy: Option<BranchStrategy>,
    /// Resume this agent session in iteration 1 (needs max_iterations 1).
    pub resume_session: Option<String>,
    /// Run in the sandbox after the agent; a run whose check fails does
    /// not merge (merge-to-head) and fails.
    pub check: Option<Check>,
    /// Push the branch that holds the run's commits from the host, with
    /// the user's git credentials, when the run made any (and its check,
    /// if any, passed).
    pub push: Option<PushTo>,
}

impl RunOptions {
    pub fn new(sandbox: PluginRef, agent: PluginRef, prompt: Prompt) -> Self {
        let sandbox = SandboxOptions::new(sandbox);
        let mut agent = AgentOptions::new(agent, prompt);
        agent.abort = sandbox.abort.clone();
        Self {
            sandbox,
            agent,
            strategy: None,
            resume_session: None,
            check: None,
            push: None,
        }
    }
}

/// What sets a sandbox up: [`create_sandbox`], [`WorktreeHandle::create_sandbox`],
/// the sandbox part of [`RunOptions`].
#[derive(Clone)]
pub struct SandboxOptions {
    pub sandbox: PluginRef,
    /// Sandbox provider options (`create-options.config`).
    pub sandbox_config: Vec<(String, String)>,
    /// The sandbox provider's env (must not share a key with an agent's).
    pub sandbox_env: Vec<(String, String)>,
    /// Call-site env for every command in the sandbox (hooks and agents);
    /// wins over all.
    pub env: Vec<(String, String)>,
    pub hooks: Hooks,
    /// How the agent's commits in this sandbox are attributed beyond your
    /// git identity.
    pub commit: CommitOptions,
    /// Files and directories copied from the repository into the new
    /// worktree before the hooks run; relative to the repository (`cwd`).
    /// Used only when the call creates the worktree.
    pub copy_to_worktree: Vec<PathBuf>,
    pub timeouts: Timeouts,
    /// Prefixes every log line and names the log file.
    pub name: Option<String>,
    /// The repository to work on; relative to the process's cwd.
    pub cwd: PathBuf,
    pub log: LogMode,
    /// Cancels the setup (hooks in flight are killed).
    pub abort: AbortHandle,
    /// A shared runtime (and its compiled-component cache); a default one
    /// when None.
    pub runtime: Option<PluginRuntime>,
    /// The workflow item whose runs use this sandbox, for the live-runs
    /// registry.
    pub workflow_item: Option<WorkflowItem>,
    /// How many sandboxes run side by side with this one (a workflow's
    /// fan-out): see `SandboxSpec::side_by_side`.
    pub side_by_side: u32,
    /// Whether the repository's host-effective config (host hooks, secret
    /// references, mounts, a dev container's initializeCommand, ...) must
    /// be approved in the user's record first (the default) or is vouched
    /// for by the caller: see [`crate::trust`].
    pub trust: TrustPolicy,
    /// Keep the agent's model API keys on the host behind the credential
    /// gateway where the sandbox can reach it (the default); off, they go
    /// into the sandbox as they are.
    pub credential_gateway: bool,
}

impl SandboxOptions {
    pub fn new(sandbox: PluginRef) -> Self {
        Self {
            sandbox,
            sandbox_config: vec![],
            sandbox_env: vec![],
            env: vec![],
            hooks: Hooks::default(),
            commit: CommitOptions::default(),
            copy_to_worktree: vec![],
            timeouts: Timeouts::default(),
            name: None,
            cwd: PathBuf::from("."),
            log: LogMode::default(),
            abort: AbortHandle::new(),
            runtime: None,
            workflow_item: None,
            side_by_side: 1,
            trust: TrustPolicy::default(),
            credential_gateway: true,
        }
    }
}

/// What one agent run needs: [`SandboxHandle::run`], the agent part of
/// [`RunOptions`]. No resume here: a long-lived sandbox does not chain
/// agent sessions.
#[derive(Clone)]
pub struct AgentOptions {
    pub agent: PluginRef,
    /// Agent provider options, e.g. ("effort", "high").
    pub agent_options: Vec<(String, String)>,
    pub model: Option<String>,
    pub prompt: Prompt,
    /// Prompt arguments for a prompt template's `{{KEY}}` placeholders.
    pub prompt_args: Vec<(String, String)>,
    pub max_iterations: u32,
    pub completion_signals: Vec<String>,
    /// Stop an iteration whose agent makes no progress this long (default
    /// 600 s): a parsed event that is not an error resets it. An agent that
    /// keeps reporting errors with no progress is stopped after 30 s.
    pub idle_timeout: Duration,
    /// The agent provider's env (must not share a key with the sandbox
    /// provider's).
    pub agent_env: Vec<(String, String)>,
    /// Call-site env for the agent's commands, over the sandbox's; wins
    /// over all.
    pub env: Vec<(String, String)>,
    pub on_event: Option<StreamEventCallback>,
    /// Copy each iteration's agent session to the host (default true).
    pub capture_sessions: bool,
    /// Ask for a structured result (a tagged JSON block and its schema).
    pub output: Option<StructuredOutput>,
    pub abort: AbortHandle,
}

impl AgentOptions {
    pub fn new(agent: PluginRef, prompt: Prompt) -> Self {
        Self {
            agent,
            agent_options: vec![],
            model: None,
            prompt,
            prompt_args: vec![],
            max_iterations: 1,
            completion_signals: vec![DEFAULT_COMPLETION_SIGNAL.to_string()],
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            agent_env: vec![],
            env: vec![],
            on_event: None,
            capture_sessions: true,
            output: None,
            abort: AbortHandle::new(),
        }
    }
}

/// What a run produced. Field names are those of docs/guide/running.md,
/// "The result" (camelCase in JSON).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub iterations: Vec<IterationResult>,
    /// Which completion signal matched, if any.
    pub completion_signal: Option<String>,
    /// The agent's text output over all iterations.
    pub stdout: String,
    /// Commits the run added, oldest first.
    pub commits: Vec<Commit>,
    /// The branch the commits are on when the run ends: the target branch
    /// for head and merge-to-head, the named branch for branch.
    pub branch: String,
    /// Set when the worktree had uncommitted changes and was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_worktree_path: Option<String>,
    /// What the agent changed and did not commit (`git status --porcelain`
    /// entries that were not there before the run); they are in the kept
    /// worktree, not in any commit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uncommitted_changes: Vec<String>,
    /// The run log, in file mode only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_file_path: Option<String>,
    /// The structured result, when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// How long each phase took, in the order they ended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timings: Vec<timings::Phase>,
    /// The sandbox's resource limits, when it has any (container
    /// providers: `cpus=`, `memory=`, `pids=`, `disk=`, or a fan-out's share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceLimits>,
    /// Connections the sandbox's egress proxy refused, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub denied_egress: Vec<Denial>,
    /// What the check said, when the run had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckResult>,
    /// The branch the host pushed after the run (`--push`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<Pushed>,
}

impl RunResult {
    /// Every token the agent reported over the iterations, cached ones
    /// included.
    pub fn tokens(&self) -> u64 {
        self.iterations
            .iter()
            .filter_map(|i| i.usage.as_ref())
            .map(|u| u.total())
            .sum()
    }
}

/// Run an agent in a sandbox until a completion signal or `max_iterations`,
/// and bring its commits back by the branch strategy: [`plan`], then
/// [`PlannedRun::run`].
pub async fn run(options: RunOptions) -> Result<RunResult> {
    plan(options).await?.run().await
}

/// Every check of a run, with nothing created: the providers loaded, the
/// env resolved, the branches named. Runs that start together (best-of-N's
/// candidates) are all planned before any starts, so bad input is refused
/// with nothing made.
pub async fn plan(options: RunOptions) -> Result<PlannedRun> {
    let loading = std::time::Instant::now();
    let aborts = (options.sandbox.abort.clone(), options.agent.abort.clone());
    if let Some(check) = &options.check {
        check.validate()?;
    }
    let plan = RunPlan::new(options).await?;
    Ok(PlannedRun {
        plan,
        aborts,
        loaded: loading.elapsed(),
    })
}

/// A run planned by [`plan`], not started.
pub struct PlannedRun {
    plan: RunPlan,
    aborts: (AbortHandle, AbortHandle),
    loaded: std::time::Duration,
}

impl PlannedRun {
    /// The branch the agent's commits go on.
    pub fn branch(&self) -> &str {
        &self.plan.source
    }

    /// The agent provider's name.
    pub fn agent_name(&self) -> &str {
        self.plan.agent.agent.name()
    }

    /// Carry the plan out, the sandbox's close included.
    pub async fn run(self) -> Result<RunResult> {
        let (result, closing) = self.run_to_result().await?;
        closing.finish().await?;
        Ok(result)
    }

    /// Carry the plan out up to its result, and hand back the sandbox's
    /// close when the result no longer depends on it ([`Closing`]): the
    /// caller shows the result, then finishes the close. The data path
    /// reads top to bottom: the run log and the live-runs record, the
    /// place (worktree), the sandbox on it, the agent's iterations, the
    /// check, then the strategy's ending.
    pub async fn run_to_result(self) -> Result<(RunResult, Closing)> {
        let process = timings::since_process_start();
        let PlannedRun {
            mut plan,
            aborts: (sandbox_abort, agent_abort),
            loaded,
        } = self;
        // Side effects from here on. `sanddune stop` stops this run only,
        // not the others sharing the caller's handle (a workflow's items).
        let (abort, _either) = abort::either(&sandbox_abort, &agent_abort);
        plan.sandbox.options.abort = abort.clone();
        plan.agent.options.abort = abort;
        let so = &plan.sandbox.options;
        let log = place::open_log(&plan.sandbox.repo, &so.log, so.name.as_deref())?;
        let live = registry::Live::start(
            &plan.sandbox.repo.git_dir(),
            handle::registry_record(
                plan.run_id.clone(),
                so,
                (&plan.source, plan.sandbox.repo.root()),
                (plan.sandbox.provider.name(), plan.agent.agent.name()),
                plan.agent.options.max_iterations,
                &log,
            ),
            so.abort.clone(),
        );
        let timings = log.timings().clone();
        if let Some(process) = process {
            timings.record("process start", process);
        }
        timings.record("plugin load", loaded);
        if let Some(note) = plan.pool.as_ref().and_then(|p| p.note.as_deref()) {
            log.line(note);
        }
        let place = timings
            .time(
                "worktree",
                place::prepare_place(
                    &plan.sandbox.repo,
                    (
                        plan.strategy.clone(),
                        &plan.run_id,
                        plan.pool.as_ref().is_some_and(|p| p.claimed()),
                    ),
                    so,
                    &plan.sandbox.worktree_hooks(),
                    plan.sandbox.host_needs_files(),
                    &log,
                ),
            )
            .await?;
        let root = plan.sandbox.repo.root().to_path_buf();
        let abort = so.abort.clone();
        plan.sandbox.pool = plan.pool.as_mut().and_then(|p| p.ticket());
        let refill = plan.pool.as_ref().map(|p| {
            let s = &plan.sandbox;
            p.refill(pool::FillFrom {
                root: s.repo.root().to_path_buf(),
                provider: s.provider.clone(),
                config: s.config.clone(),
                env: s.env.clone().into_iter().collect(),
                gateway: s.gateway.gateway.clone(),
                side_by_side: s.options.side_by_side,
            })
        });
        let mut handle = SandboxHandle::start(plan.sandbox, place, true, log).await?;
        handle.live = Some(live);
        let mut result = handle.run_planned(plan.agent, plan.resume).await;
        if let (Ok(done), Some(check)) = (&mut result, &plan.check) {
            match handle.check(check).await {
                Ok(said) => done.check = Some(said),
                Err(e) => result = Err(e),
            }
        }
        let (mut done, closing) = handle.teardown(result).await?;
        let closing = closing.with_refill(refill);
        // A failed check merges nothing; nor does it push.
        if let Some(remote) = &plan.push
            && !done.commits.is_empty()
            && done.check.as_ref().is_none_or(|c| c.passed)
        {
            match push(&root, remote, &done.branch, &abort).await {
                Ok(pushed) => done.pushed = Some(pushed),
                Err(e) => {
                    // The close the failure cuts short, done first.
                    let _ = closing.finish().await;
                    return Err(e);
                }
            }
        }
        Ok((done, closing))
    }
}

/// Push `branch` of the repository at `root` to `remote` from the host
/// (`worktree::push`), until `abort` fires.
pub(crate) async fn push(
    root: &std::path::Path,
    remote: &str,
    branch: &str,
    abort: &AbortHandle,
) -> Result<Pushed> {
    let repo = crate::worktree::Repo::discover(root)?;
    tokio::select! {
        pushed = repo.push(remote, branch) => pushed,
        () = abort.aborted() => Err(crate::error::Error::Aborted(abort.reason())),
    }
}

/// A reusable sandbox on `branch` (the branch strategy, by construction):
/// hooks run once, and each [`SandboxHandle::run`] reuses the sandbox.
/// `close` tears down the sandbox and the worktree (kept when dirty).
pub async fn create_sandbox(branch: &str, options: SandboxOptions) -> Result<SandboxHandle> {
    // What the sandbox needs is checked before its worktree is made.
    let plan = SandboxPlan::new(options).await?;
    let wt = WorktreeHandle::for_plan(WorktreeStrategy::Branch(branch.to_string()), &plan).await?;
    wt.into_sandbox(plan).await
}

/// A worktree as a lifecycle of its own. Only `branch` and `merge-to-head`
/// exist for it ([`WorktreeStrategy`] has no head). Of `options`, it uses
/// `cwd`, `name`, `copy_to_worktree`, `timeouts`, `log`, `abort` and the
/// host.onWorktreeReady hooks.
pub async fn create_worktree(
    strategy: WorktreeStrategy,
    options: SandboxOptions,
) -> Result<WorktreeHandle> {
    WorktreeHandle::create(strategy, options).await
}
