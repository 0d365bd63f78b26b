//! What a run, or a sandbox, is going to be, decided once and before the
//! first side effect: the repository and its trust, the sandbox provider
//! loaded once, its dev container applied once, the branch strategy, the
//! agent loaded with its prompt, the env of every layer and the commit
//! identity, and every up-front check (the agent's env and command, the
//! provider's `preflight`). Whatever is refused here is refused before a
//! run log, a worktree, a branch or a sandbox exists. The entry points then
//! only carry the plan out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::capture::{self, HostSessions};
use super::env::{self, EnvMap};
use super::identity::{self, CommitIdentity};
use super::log::RunLog;
use super::strategy::{self, BranchStrategy, ProviderType, Request};
use super::{AgentOptions, Prompt, RunOptions, SandboxOptions, prerequisites, sync};
use crate::capability::gateway::{self, Gateway, Reach};
use crate::capability::jail::shares_host_network;
use crate::capability::pool::PoolTicket;
use crate::error::{Error, Result};
use crate::hooks::HostHook;
use crate::plugin::agent::{AgentProvider, CommandRequest};
use crate::plugin::api::AgentCommand;
use crate::plugin::sandbox::{SandboxKind, SandboxProvider};
use crate::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use crate::prompt::{self, Template};
use crate::secrets;
use crate::worktree::{History, Repo};

/// The name that selects the no-sandbox provider (interactive only).
pub const NO_SANDBOX: &str = "no-sandbox";

/// A new sandbox, before anything exists for it.
pub(crate) struct SandboxPlan {
    pub repo: Repo,
    pub runtime: PluginRuntime,
    pub provider: SandboxProvider,
    /// The caller's options with the dev container applied (its image and
    /// user in `sandbox_config`, its `remoteEnv` in `env`, its lifecycle
    /// commands in `hooks`).
    pub options: SandboxOptions,
    /// The dev container's `initializeCommand`: the first onWorktreeReady
    /// hook of a worktree yet to be made, or run at once on one that exists.
    pub initialize: Option<HostHook>,
    /// The provider's options as it is told them (the host's `history`
    /// taken out; the dev container's workspace becomes a mount once the
    /// worktree's path is known).
    pub config: Vec<(String, String)>,
    /// How much history sync in sends (isolated providers).
    pub history: History,
    pub identity: CommitIdentity,
    /// The env of the sandbox's commands, the identity's as its lowest
    /// layer; with the agent's layers when planned for a run, its model
    /// API keys swapped for the gateway's placeholders.
    pub env: EnvMap,
    /// The credential gateway of a sandbox planned with its agent.
    pub gateway: gateway::Planned,
    /// The warm container the run claimed for this sandbox (ADR 0037).
    pub pool: Option<Arc<PoolTicket>>,
}

/// What an agent adds to the env of a sandbox's commands: the keys it
/// reads from the caller's environment, its own env, and the call-site env
/// of its commands.
#[derive(Default)]
pub(crate) struct AgentLayers {
    pub keys: Vec<String>,
    pub agent_env: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

impl AgentLayers {
    pub fn of(agent: &AgentProvider, options: &AgentOptions) -> Self {
        Self {
            keys: agent_keys(agent),
            agent_env: options.agent_env.clone(),
            env: options.env.clone(),
        }
    }
}

/// A sandbox provider loaded for a plan, before the env is known.
struct Loaded {
    repo: Repo,
    runtime: PluginRuntime,
    provider: SandboxProvider,
    options: SandboxOptions,
    initialize: Option<HostHook>,
    config: Vec<(String, String)>,
    history: History,
}

impl Loaded {
    /// Trust, the provider and the dev container.
    async fn new(mut options: SandboxOptions) -> Result<Self> {
        let repo = Repo::discover(&absolute(&options.cwd)?)?;
        check_trust(repo.root(), &options)?;
        let runtime = runtime(&options.runtime)?;
        options.runtime = Some(runtime.clone());
        if matches!(&options.sandbox, PluginRef::Builtin(n) if n == NO_SANDBOX) {
            strategy::resolve(
                None,
                ProviderType::NoSandbox,
                NO_SANDBOX,
                Request::default(),
            )?;
        }
        let provider = SandboxProvider::load(&runtime, &options.sandbox).await?;
        let initialize = crate::devcontainer::apply(
            &provider,
            repo.root(),
            &mut options.sandbox_config,
            &mut options.env,
            &mut options.hooks,
        )
        .await?;
        let isolated = provider.info().kind == SandboxKind::Isolated;
        let (history, config) =
            sync::take_history(provider.name(), isolated, &options.sandbox_config)?;
        Ok(Self {
            repo,
            runtime,
            provider,
            options,
            initialize,
            config,
            history,
        })
    }

    /// The commit identity and the env of the sandbox's commands, with the
    /// agent's layers when it runs here.
    fn plan(self, agent: Option<AgentLayers>) -> Result<SandboxPlan> {
        let mut declared = self.provider.capabilities().env_keys;
        let mut call_site = self.options.env.clone();
        let agent = agent.unwrap_or_default();
        declared.extend(agent.keys.iter().cloned());
        call_site.extend(agent.env);
        let above = resolve_env(
            self.repo.root(),
            EnvMap::new(),
            declared,
            &agent.agent_env,
            &self.options.sandbox_env,
            &call_site,
        )?;
        let identity = identity::resolve(self.repo.root(), &self.options.commit, &above)?;
        let mut env = identity.env(None);
        env.extend(above);
        let reach = match self.provider.capabilities() {
            _ if !self.options.credential_gateway => None,
            caps if caps.containers => Some(Reach::Link),
            // A jail on the host's network reaches a loopback port; one
            // with a network of its own, its link.
            caps if caps.jail => Some(if shares_host_network(&self.config) {
                Reach::Loopback
            } else {
                Reach::Link
            }),
            // Its programs run on the host: a loopback port reaches it.
            caps if !caps.programs.is_empty() => Some(Reach::Loopback),
            _ => None,
        };
        let gateway = Gateway::plan(&agent.keys, &mut env, reach)
            .map_err(|e| Error::input(format!("credential gateway: {e}")))?;
        Ok(SandboxPlan {
            repo: self.repo,
            runtime: self.runtime,
            provider: self.provider,
            options: self.options,
            initialize: self.initialize,
            config: self.config,
            history: self.history,
            identity,
            env,
            gateway,
            pool: None,
        })
    }
}

impl SandboxPlan {
    /// A sandbox with no agent yet ([`super::create_sandbox`], a worktree's
    /// sandbox): loaded, its env resolved, and checked.
    pub async fn new(options: SandboxOptions) -> Result<Self> {
        Self::with_agent(options, None).await
    }

    /// A sandbox for an agent already loaded, whose env layers its commands
    /// get too (an interactive session, a run on an existing worktree).
    pub async fn with_agent(options: SandboxOptions, agent: Option<AgentLayers>) -> Result<Self> {
        let plan = Loaded::new(options).await?.plan(agent)?;
        plan.preflight().await?;
        Ok(plan)
    }

    /// What the provider needs on this host: see `prerequisites`.
    async fn preflight(&self) -> Result<()> {
        let options = &self.options.sandbox_config;
        let git_dir = self.repo.git_dir();
        prerequisites::check_sandbox_provider(
            &self.provider,
            options,
            &self.config,
            &self.env,
            &git_dir,
        )
        .await
    }

    /// Whether the host needs a new worktree's files: not when the agent
    /// works on a copy in an isolated sandbox and no host step
    /// (copyToWorktree, a host hook) runs in the worktree. Then only the
    /// branch's commits land there, and a checkout of a big tree would be
    /// wasted (`worktree` writes the files later if someone needs them).
    pub fn host_needs_files(&self) -> bool {
        let o = &self.options;
        self.provider.info().kind != SandboxKind::Isolated
            || !o.copy_to_worktree.is_empty()
            || self.initialize.is_some()
            || !o.hooks.host_on_worktree_ready.is_empty()
            || !o.hooks.host_on_sandbox_ready.is_empty()
    }

    /// The onWorktreeReady hooks of a worktree made for this sandbox:
    /// `initializeCommand` first.
    pub fn worktree_hooks(&self) -> Vec<HostHook> {
        self.initialize
            .iter()
            .chain(&self.options.hooks.host_on_worktree_ready)
            .cloned()
            .collect()
    }
}

/// An agent provider, loaded and checked against the run's prompt and env.
pub(super) struct AgentPlan {
    pub options: AgentOptions,
    pub agent: AgentProvider,
    /// What the agent gets when there is nothing to expand.
    pub prompt: String,
    /// A template with shell expressions, expanded before each iteration.
    pub template: Option<Template>,
    /// The first iteration's command, built by the up-front check: the
    /// iteration uses it when it asks for the same (no expansion, no
    /// resume), so the provider builds it once.
    pub first_command: Option<(CommandRequest, AgentCommand)>,
}

impl AgentPlan {
    /// Load the agent and substitute the prompt arguments; the options and
    /// prompt are refused now, not after a worktree and a sandbox exist.
    /// `source` and `target` are the branches the prompt may name.
    pub async fn new(
        runtime: &PluginRuntime,
        options: AgentOptions,
        (source, target): (&str, &str),
        log: Option<&RunLog>,
    ) -> Result<Self> {
        let (text, is_template) = check_agent_options(&options)?;
        let agent = AgentProvider::load(runtime, &options.agent).await?;
        let template = if is_template {
            let t = prompt::render(&text, &options.prompt_args, source, target)?;
            for key in &t.unused {
                let msg = format!("prompt argument `{key}` is not used by the prompt template");
                tracing::warn!("{msg}");
                if let Some(log) = log {
                    log.line(&format!("warning: {msg}"));
                }
            }
            Some(t)
        } else {
            None
        };
        // With shell expressions, a readable stand-in until they run.
        let prompt = match &template {
            Some(t) => prompt::assemble(t, &prompt::stand_ins(t)),
            None => text,
        };
        Ok(Self {
            options,
            agent,
            prompt,
            template: template.filter(Template::has_shell_expressions),
            first_command: None,
        })
    }

    /// The agent's env requirements are met in `env` (the env its commands
    /// get), and its provider builds the first iteration's command with the
    /// run's values of its declared keys: a provider that refuses a value
    /// (copilot's own endpoint without a model) refuses before anything is
    /// created.
    pub async fn check(&mut self, env: &EnvMap) -> Result<()> {
        prerequisites::check_agent_env(&self.agent, env)?;
        let pairs: Vec<(String, String)> = env.clone().into_iter().collect();
        let request = self.request(self.prompt.clone(), None, &pairs);
        let command = self.agent.build_print_command(&request).await?;
        self.first_command = Some((request, command));
        Ok(())
    }

    /// The command request of an iteration.
    pub fn request(
        &self,
        prompt: String,
        resume_session: Option<String>,
        env: &[(String, String)],
    ) -> CommandRequest {
        CommandRequest {
            prompt,
            model: self.options.model.clone(),
            options: self.options.agent_options.clone(),
            resume_session,
            skip_permissions: true,
            env: super::agent_files::declared_values(&agent_keys(&self.agent), env),
        }
    }
}

/// A one-shot run: the sandbox, the agent, the branches and the session
/// to resume.
pub(super) struct RunPlan {
    pub sandbox: SandboxPlan,
    pub agent: AgentPlan,
    pub strategy: BranchStrategy,
    pub run_id: String,
    /// The branch the agent works on.
    pub source: String,
    /// A session to resume in iteration 1, and where its file is on the
    /// host.
    pub resume: Option<(String, PathBuf)>,
    pub check: Option<super::Check>,
    /// The remote `--push` sends the run's branch to, checked here.
    pub push: Option<String>,
    /// The run's warm sandboxes (`pool=N`): the one it claimed, and what
    /// tops the pool up.
    pub pool: Option<super::pool::RunPool>,
}

impl RunPlan {
    pub async fn new(options: RunOptions) -> Result<Self> {
        check_agent_options(&options.agent)?;
        if options.resume_session.is_some() && options.agent.max_iterations > 1 {
            return Err(Error::input(
                "resuming a session applies to iteration 1 only: use --max-iterations 1 with --resume",
            ));
        }
        let loaded = Loaded::new(options.sandbox).await?;
        let provider = &loaded.provider;
        let strategy = strategy::resolve(
            options.strategy,
            provider.info().kind.into(),
            provider.name(),
            Request {
                interactive: false,
                copies: !loaded.options.copy_to_worktree.is_empty(),
            },
        )?;
        let target = loaded.repo.current_branch()?;
        // A warm container is made for a run id: the run takes it before
        // its branch is named.
        let mut pool = super::pool::plan(
            &loaded.provider,
            &loaded.config,
            &loaded.repo,
            loaded.options.side_by_side,
            &strategy,
        );
        let run_id = pool
            .as_mut()
            .and_then(|p| p.claim(&loaded.repo))
            .unwrap_or_else(strategy::run_id);
        let source = strategy::source_branch(&strategy, &target, &run_id);
        // The branch that holds the commits when the run ends.
        let landed = match strategy {
            BranchStrategy::Branch(_) => &source,
            BranchStrategy::Head | BranchStrategy::MergeToHead => &target,
        };
        let push = match &options.push {
            Some(to) => Some(loaded.repo.push_remote(to, landed)?),
            None => None,
        };
        let branches = (source.as_str(), target.as_str());
        let mut agent = AgentPlan::new(&loaded.runtime, options.agent, branches, None).await?;
        let sandbox = loaded.plan(Some(AgentLayers::of(&agent.agent, &agent.options)))?;
        agent.check(&sandbox.env).await?;
        sandbox.preflight().await?;
        let resume = match options.resume_session {
            Some(session) => {
                let host = HostSessions::from_env(sandbox.repo.root()).ok_or_else(|| {
                    Error::input("HOME is not set, so there is no session to resume")
                })?;
                let source = capture::resume_source(&mut agent.agent, &host, &session).await?;
                Some((session, source))
            }
            None => None,
        };
        Ok(Self {
            sandbox,
            agent,
            strategy,
            run_id,
            source,
            resume,
            check: options.check,
            push,
            pool,
        })
    }
}

/// An agent run on a sandbox that exists: the agent planned on its branch,
/// with the env the sandbox's commands have (`commit_env` is its git
/// identity there). The env checks of [`AgentPlan::check`] apply.
pub(super) async fn agent_on_sandbox(
    sandbox: &SandboxPlan,
    commit_env: &EnvMap,
    options: AgentOptions,
    (source, target): (&str, &str),
    log: &RunLog,
) -> Result<(AgentPlan, EnvMap)> {
    let mut agent = AgentPlan::new(&sandbox.runtime, options, (source, target), Some(log)).await?;
    let mut declared = agent_keys(&agent.agent);
    declared.extend(sandbox.provider.capabilities().env_keys);
    let call_site: Vec<_> = sandbox
        .options
        .env
        .iter()
        .chain(&agent.options.env)
        .cloned()
        .collect();
    let env = resolve_env(
        sandbox.repo.root(),
        commit_env.clone(),
        declared,
        &agent.options.agent_env,
        &sandbox.options.sandbox_env,
        &call_site,
    )?;
    agent.check(&env).await?;
    // The gateway is planned with a sandbox for its agent; a sandbox made
    // before its agents were known has none, and says so.
    let kept_in = Gateway::plan(&agent_keys(&agent.agent), &mut env.clone(), None)
        .map(|p| p.kept_in)
        .unwrap_or_default();
    if !kept_in.is_empty() {
        log.line(&format!(
            "warning: {} goes into the sandbox as it is: the credential gateway is planned with a sandbox made for its agent, and this one was made before",
            kept_in.join(", ")
        ));
    }
    Ok((agent, env))
}

/// The prompt's text, and whether it is a template (from a file).
pub(super) fn resolve_prompt(prompt: &Prompt) -> Result<(String, bool)> {
    let (text, template) = match prompt {
        Prompt::Inline(text) => (text.clone(), false),
        Prompt::File(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                Error::input(format!("cannot read prompt file {}: {e}", path.display()))
            })?,
            true,
        ),
    };
    Ok((text, template))
}

/// Checks on an agent run that need nothing loaded. Returns the prompt
/// text and whether it is a template.
fn check_agent_options(o: &AgentOptions) -> Result<(String, bool)> {
    let (text, is_template) = resolve_prompt(&o.prompt)?;
    if text.trim().is_empty() {
        return Err(Error::input(
            "the prompt is empty: give the agent something to do",
        ));
    }
    if !is_template && !o.prompt_args.is_empty() {
        return Err(Error::input(
            "prompt arguments need a prompt template: an inline --prompt is passed literally (use --prompt-file)",
        ));
    }
    if o.idle_timeout.is_zero() {
        return Err(Error::input("--idle-timeout must be at least 1 second"));
    }
    if o.max_iterations == 0 {
        return Err(Error::input("--max-iterations must be at least 1"));
    }
    if o.completion_signals.iter().any(|s| s.is_empty()) {
        return Err(Error::input("a completion signal cannot be empty"));
    }
    if let Some(output) = &o.output {
        output.check()?;
    }
    Ok((text, is_template))
}

/// Workspace trust: every entry point passes here before it creates or
/// runs anything (see `crate::trust`).
pub(super) fn check_trust(root: &Path, options: &SandboxOptions) -> Result<()> {
    let scope = crate::trust::Scope::Run {
        sandbox: &options.sandbox,
        sandbox_config: &options.sandbox_config,
    };
    crate::trust::require(root, &scope, options.trust)
}

/// The caller's shared runtime, or a default one.
pub(super) fn runtime(given: &Option<PluginRuntime>) -> Result<PluginRuntime> {
    match given {
        Some(rt) => Ok(rt.clone()),
        None => PluginRuntime::new(RuntimeConfig::default()),
    }
}

pub(super) fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path)
        .map_err(|e| Error::input(format!("bad --cwd {}: {e}", path.display())))
}

fn read_dotenv(root: &Path) -> Result<EnvMap> {
    let path = root.join(crate::dotenv::FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let source = path.display().to_string();
            crate::dotenv::parse(&text, &source)?
                .into_iter()
                .map(|(k, v)| secrets::resolve(&k, &v, root, &source).map(|v| (k, v)))
                .collect()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(EnvMap::new()),
        Err(e) => Err(Error::input(format!("cannot read {}: {e}", path.display()))),
    }
}

/// The env of the sandbox's commands from the four layers (see `env`).
/// `declared` are the keys read from the process env; `identity` lies
/// below them all.
pub(super) fn resolve_env(
    root: &Path,
    identity: EnvMap,
    declared: Vec<String>,
    agent_env: &[(String, String)],
    sandbox_env: &[(String, String)],
    call_site: &[(String, String)],
) -> Result<EnvMap> {
    let map = |pairs: &[(String, String)]| pairs.iter().cloned().collect::<EnvMap>();
    env::resolve(&env::EnvLayers {
        identity,
        declared,
        process: std::env::vars().collect(),
        dotenv: read_dotenv(root)?,
        agent: map(agent_env),
        sandbox: map(sandbox_env),
        call_site: map(call_site),
    })
}

/// The keys the agent reads from the caller's environment: those it needs
/// and the optional ones its CLI honours (a gateway URL, a cloud switch).
pub(super) fn agent_keys(agent: &AgentProvider) -> Vec<String> {
    let info = agent.info();
    info.env
        .iter()
        .flat_map(|r| r.any_of.clone())
        .chain(info.optional_env.iter().cloned())
        .collect()
}
