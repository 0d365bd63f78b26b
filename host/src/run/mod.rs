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
//! Setup is layered: worktree (copyToWorktree, host.onWorktreeReady), then
//! sandbox (sync in, host.onSandboxReady ∥ sandbox.onSandboxReady), then
//! agent runs. Everything that can be refused is checked before the first
//! side effect.

pub mod abort;
mod agent_files;
mod attach;
pub mod capture;
mod containment;
pub mod env;
mod handle;
pub mod hooks;
pub mod identity;
mod interactive;
pub mod invoker;
pub mod iteration;
mod lanes;
pub mod log;
mod prerequisites;
mod privileges;
pub mod reclaim;
pub mod registry;
mod sandbox_record;
pub mod secrets;
mod setup;
pub mod strategy;
pub mod structured;
pub mod sync;
pub mod timings;
mod uncommitted;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use crate::outcome::{self, Commit};
pub use abort::AbortHandle;
pub use attach::attach;
pub(crate) use handle::check_sandbox;
pub use handle::{CloseResult, SandboxHandle, WorktreeHandle};
pub use hooks::{Hooks, HostHook, NamedSandboxHook, SandboxHook};
pub use identity::{CoAuthor, CommitOptions, GitIdentity};
pub use interactive::{InteractiveOptions, InteractiveResult, InteractiveSandbox, interactive};
pub use iteration::{
    AgentInvoker, IterationResult, IterationUsage, StreamEvent, StreamEventCallback,
};
pub use log::LogMode;
pub use registry::WorkflowItem;
pub use setup::NO_SANDBOX;
pub use strategy::{BranchStrategy, WorktreeStrategy};
pub use structured::{OutputError, StructuredOutput};

use crate::capability::containers::ResourceLimits;
use crate::capability::egress::Denial;
use crate::error::Result;
use crate::plugin::{PluginRef, PluginRuntime};
pub use crate::trust::TrustPolicy;

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

/// Everything a one-shot run needs.
#[derive(Clone)]
pub struct RunOptions {
    pub sandbox: PluginRef,
    /// Sandbox provider options (`create-options.config`).
    pub sandbox_config: Vec<(String, String)>,
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
    /// Env for the agent provider and the sandbox provider (their keys
    /// must not overlap), and the call site's env, which wins over all.
    pub agent_env: Vec<(String, String)>,
    pub sandbox_env: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// The branch strategy; the sandbox provider's default when None.
    pub strategy: Option<BranchStrategy>,
    /// The repository to work on; relative to the process's cwd.
    pub cwd: PathBuf,
    /// Prefixes every log line and names the log file.
    pub name: Option<String>,
    pub hooks: Hooks,
    /// How the agent's commits are attributed beyond your git identity.
    pub commit: CommitOptions,
    /// Files and directories copied from the repository into the new
    /// worktree before the hooks run; relative to the repository (`cwd`).
    pub copy_to_worktree: Vec<PathBuf>,
    pub timeouts: Timeouts,
    pub log: LogMode,
    pub on_event: Option<StreamEventCallback>,
    /// Copy each iteration's agent session to the host (default true).
    pub capture_sessions: bool,
    /// Resume this agent session in iteration 1 (needs max_iterations 1).
    pub resume_session: Option<String>,
    /// Ask for a structured result (a tagged JSON block and its schema).
    pub output: Option<StructuredOutput>,
    pub abort: AbortHandle,
    /// A shared runtime (and its compiled-component cache); a default one
    /// when None.
    pub runtime: Option<PluginRuntime>,
    /// The workflow item this run is, for the live-runs registry.
    pub workflow_item: Option<WorkflowItem>,
    /// How many sandboxes run side by side with this one (a workflow's
    /// fan-out): see `SandboxSpec::side_by_side`.
    pub side_by_side: u32,
    /// Whether the repository's host-effective config (host hooks, secret
    /// references, mounts, a dev container's initializeCommand, ...) must
    /// be approved in the user's record first (the default) or is vouched
    /// for by the caller: see [`crate::trust`].
    pub trust: TrustPolicy,
}

impl RunOptions {
    pub fn new(sandbox: PluginRef, agent: PluginRef, prompt: Prompt) -> Self {
        Self {
            sandbox,
            sandbox_config: vec![],
            agent,
            agent_options: vec![],
            model: None,
            prompt,
            prompt_args: vec![],
            max_iterations: 1,
            completion_signals: vec![DEFAULT_COMPLETION_SIGNAL.to_string()],
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            agent_env: vec![],
            sandbox_env: vec![],
            env: vec![],
            strategy: None,
            cwd: PathBuf::from("."),
            name: None,
            hooks: Hooks::default(),
            commit: CommitOptions::default(),
            copy_to_worktree: vec![],
            timeouts: Timeouts::default(),
            log: LogMode::default(),
            on_event: None,
            capture_sessions: true,
            resume_session: None,
            output: None,
            abort: AbortHandle::new(),
            runtime: None,
            workflow_item: None,
            side_by_side: 1,
            trust: TrustPolicy::default(),
        }
    }

    /// The sandbox half and the agent half.
    fn split(self) -> (SandboxOptions, AgentOptions) {
        let sandbox = SandboxOptions {
            sandbox: self.sandbox,
            sandbox_config: self.sandbox_config,
            sandbox_env: self.sandbox_env,
            env: self.env.clone(),
            hooks: self.hooks,
            commit: self.commit,
            copy_to_worktree: self.copy_to_worktree,
            timeouts: self.timeouts,
            name: self.name,
            cwd: self.cwd,
            log: self.log,
            abort: self.abort.clone(),
            runtime: self.runtime,
            workflow_item: self.workflow_item,
            side_by_side: self.side_by_side,
            trust: self.trust,
        };
        let agent = AgentOptions {
            agent: self.agent,
            agent_options: self.agent_options,
            model: self.model,
            prompt: self.prompt,
            prompt_args: self.prompt_args,
            max_iterations: self.max_iterations,
            completion_signals: self.completion_signals,
            idle_timeout: self.idle_timeout,
            agent_env: self.agent_env,
            env: self.env,
            on_event: self.on_event,
            capture_sessions: self.capture_sessions,
            output: self.output,
            abort: self.abort,
        };
        (sandbox, agent)
    }
}

/// What sets a sandbox up: [`create_sandbox`], [`WorktreeHandle::create_sandbox`].
#[derive(Clone)]
pub struct SandboxOptions {
    pub sandbox: PluginRef,
    pub sandbox_config: Vec<(String, String)>,
    /// The sandbox provider's env (must not share a key with an agent's).
    pub sandbox_env: Vec<(String, String)>,
    /// Call-site env for every command in the sandbox; wins over all.
    pub env: Vec<(String, String)>,
    pub hooks: Hooks,
    /// How the agent's commits in this sandbox are attributed.
    pub commit: CommitOptions,
    /// Used only when the call creates the worktree.
    pub copy_to_worktree: Vec<PathBuf>,
    pub timeouts: Timeouts,
    pub name: Option<String>,
    /// The repository; relative to the process's cwd.
    pub cwd: PathBuf,
    pub log: LogMode,
    /// Cancels the setup (hooks in flight are killed).
    pub abort: AbortHandle,
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
}

impl SandboxOptions {
    pub fn new(sandbox: PluginRef) -> Self {
        let (options, _) = RunOptions::new(
            sandbox,
            PluginRef::Builtin(String::new()),
            Prompt::Inline(String::new()),
        )
        .split();
        options
    }
}

/// What one agent run on an existing sandbox needs: [`SandboxHandle::run`].
/// No resume here: a long-lived sandbox does not chain agent sessions.
#[derive(Clone)]
pub struct AgentOptions {
    pub agent: PluginRef,
    pub agent_options: Vec<(String, String)>,
    pub model: Option<String>,
    pub prompt: Prompt,
    pub prompt_args: Vec<(String, String)>,
    pub max_iterations: u32,
    pub completion_signals: Vec<String>,
    pub idle_timeout: Duration,
    pub agent_env: Vec<(String, String)>,
    /// Call-site env for the agent's commands; wins over all.
    pub env: Vec<(String, String)>,
    pub on_event: Option<StreamEventCallback>,
    pub capture_sessions: bool,
    pub output: Option<StructuredOutput>,
    pub abort: AbortHandle,
}

impl AgentOptions {
    pub fn new(agent: PluginRef, prompt: Prompt) -> Self {
        let (_, options) =
            RunOptions::new(PluginRef::Builtin(String::new()), agent, prompt).split();
        options
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
}

/// Run an agent in a sandbox until a completion signal or `max_iterations`,
/// and bring its commits back by the branch strategy.
pub async fn run(options: RunOptions) -> Result<RunResult> {
    let strategy = options.strategy.clone();
    let resume = options.resume_session.clone();
    let (sandbox, agent) = options.split();
    handle::one_shot(sandbox, agent, strategy, resume).await
}

/// A reusable sandbox on `branch` (the branch strategy, by construction):
/// hooks run once, and each [`SandboxHandle::run`] reuses the sandbox.
/// `close` tears down the sandbox and the worktree (kept when dirty).
pub async fn create_sandbox(branch: &str, mut options: SandboxOptions) -> Result<SandboxHandle> {
    // What the sandbox needs is checked before its worktree is made, on
    // the runtime the sandbox then uses.
    let runtime = setup::runtime(&options.runtime)?;
    check_sandbox(&options, &runtime).await?;
    options.runtime = Some(runtime);
    let wt = create_worktree(
        WorktreeStrategy::Branch(branch.to_string()),
        options.clone(),
    )
    .await?;
    wt.into_sandbox(options).await
}

/// A worktree as a lifecycle of its own. Only `branch` and `merge-to-head`
/// exist for it ([`WorktreeStrategy`] has no head). Of `options`, it uses
/// `cwd`, `name`, `copy_to_worktree`, `timeouts`, `log`, `abort` and the
/// host.onWorktreeReady hooks.
pub async fn create_worktree(
    strategy: WorktreeStrategy,
    options: SandboxOptions,
) -> Result<WorktreeHandle> {
    handle::WorktreeHandle::create(strategy, options).await
}
