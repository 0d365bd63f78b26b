//! One run session: worktree, sandbox, iterations, commits back by the
//! branch strategy, teardown.

pub mod abort;
pub mod env;
pub mod invoker;
pub mod iteration;
pub mod strategy;
pub mod sync;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use abort::AbortHandle;
pub use iteration::{
    AgentInvoker, IterationResult, IterationUsage, StreamEvent, StreamEventCallback,
};
pub use strategy::BranchStrategy;

use crate::error::{Error, Result};
use crate::plugin::agent::{AgentProvider, CommandRequest};
use crate::plugin::sandbox::{SandboxKind, SandboxProvider, SandboxSpec};
use crate::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use crate::prompt;
use crate::worktree::{Repo, Worktree};

/// The default completion signal. sanddune never adds it to a prompt.
pub const DEFAULT_COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Where the prompt comes from.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// Passed to the agent literally.
    Inline(String),
    /// Read from a file, relative to the process's cwd.
    File(PathBuf),
}

/// Everything a run needs.
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
    /// Stop an iteration whose agent is silent this long (default 600 s);
    /// every output line resets it.
    pub idle_timeout: std::time::Duration,
    /// Env for the agent provider and the sandbox provider (their keys
    /// must not overlap), and the call site's env, which wins over all.
    pub agent_env: Vec<(String, String)>,
    pub sandbox_env: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// The branch strategy; the sandbox provider's default when None.
    pub strategy: Option<BranchStrategy>,
    /// The repository to work on; relative to the process's cwd.
    pub cwd: PathBuf,
    pub on_event: Option<StreamEventCallback>,
    pub abort: AbortHandle,
    /// A shared runtime (and its compiled-component cache); a default one
    /// when None.
    pub runtime: Option<PluginRuntime>,
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
            on_event: None,
            abort: AbortHandle::new(),
            runtime: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Commit {
    pub sha: String,
}

/// What a run produced. Field names follow the PRD (camelCase in JSON).
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
}

/// The prompt's text, and whether it is a template (from a file).
fn resolve_prompt(prompt: &Prompt) -> Result<(String, bool)> {
    let (text, template) = match prompt {
        Prompt::Inline(text) => (text.clone(), false),
        Prompt::File(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                Error::input(format!("cannot read prompt file {}: {e}", path.display()))
            })?,
            true,
        ),
    };
    if text.trim().is_empty() {
        return Err(Error::input(
            "the prompt is empty: give the agent something to do",
        ));
    }
    Ok((text, template))
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path)
        .map_err(|e| Error::input(format!("bad --cwd {}: {e}", path.display())))
}

fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{:04x}",
        nanos / 1_000_000_000,
        (nanos as u32 ^ std::process::id()) & 0xffff
    )
}

/// The sandbox's env from the four layers (see `env`).
fn sandbox_env(
    options: &RunOptions,
    repo: &Repo,
    agent: &AgentProvider,
    provider: &SandboxProvider,
) -> Result<env::EnvMap> {
    let mut declared: Vec<String> = agent
        .info()
        .env
        .iter()
        .flat_map(|r| r.any_of.clone())
        .collect();
    declared.extend(provider.info().capabilities.env_keys.iter().cloned());
    let dotenv_path = repo.root().join(".sanddune/.env");
    let dotenv = match std::fs::read_to_string(&dotenv_path) {
        Ok(text) => env::parse_dotenv(&text, &dotenv_path.display().to_string())?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => env::EnvMap::new(),
        Err(e) => {
            return Err(Error::input(format!(
                "cannot read {}: {e}",
                dotenv_path.display()
            )));
        }
    };
    let map = |pairs: &[(String, String)]| pairs.iter().cloned().collect::<env::EnvMap>();
    env::resolve(&env::EnvLayers {
        declared,
        process: std::env::vars().collect(),
        dotenv,
        agent: map(&options.agent_env),
        sandbox: map(&options.sandbox_env),
        call_site: map(&options.env),
    })
}

/// Run an agent in a sandbox until a completion signal or `max_iterations`,
/// and bring its commits back by the branch strategy.
pub async fn run(options: RunOptions) -> Result<RunResult> {
    // Everything that can be refused is checked before the first side effect.
    let (text, is_template) = resolve_prompt(&options.prompt)?;
    if !is_template && !options.prompt_args.is_empty() {
        return Err(Error::input(
            "prompt arguments need a prompt template: an inline --prompt is passed literally (use --prompt-file)",
        ));
    }
    if options.idle_timeout.is_zero() {
        return Err(Error::input("--idle-timeout must be at least 1 second"));
    }
    if options.max_iterations == 0 {
        return Err(Error::input("--max-iterations must be at least 1"));
    }
    if options.completion_signals.iter().any(|s| s.is_empty()) {
        return Err(Error::input("a completion signal cannot be empty"));
    }
    let cwd = absolute(&options.cwd)?;
    let repo = Repo::discover(&cwd)?;
    let runtime = match options.runtime.clone() {
        Some(rt) => rt,
        None => PluginRuntime::new(RuntimeConfig::default())?,
    };
    let provider = SandboxProvider::load(&runtime, &options.sandbox).await?;
    let mut agent = AgentProvider::load(&runtime, &options.agent).await?;
    let kind = provider.info().kind;
    let strategy = strategy::resolve(options.strategy.clone(), kind, provider.name())?;
    let target = repo.current_branch()?;
    let id = run_id();
    let source = match &strategy {
        BranchStrategy::Head => target.clone(),
        BranchStrategy::MergeToHead => format!("sanddune/run-{id}"),
        BranchStrategy::Branch(branch) => branch.clone(),
    };
    let template = if is_template {
        let t = prompt::render(&text, &options.prompt_args, &source, &target)?;
        for key in &t.unused {
            tracing::warn!("prompt argument `{key}` is not used by the prompt template");
        }
        Some(t)
    } else {
        None
    };
    // What the agent gets when nothing is left to expand; with shell
    // expressions, a readable stand-in until they run in the sandbox.
    let prompt = match &template {
        Some(t) => prompt::assemble(t, &prompt::stand_ins(t)),
        None => text,
    };
    // Let the agent provider refuse bad options and prompts now, not after
    // a worktree and a sandbox exist.
    agent
        .build_print_command(&CommandRequest {
            prompt: prompt.clone(),
            model: options.model.clone(),
            options: options.agent_options.clone(),
            resume_session: None,
            skip_permissions: true,
        })
        .await?;
    let env = sandbox_env(&options, &repo, &agent, &provider)?;

    let worktree = match &strategy {
        BranchStrategy::Head => None,
        BranchStrategy::MergeToHead => {
            Some(repo.add_worktree(&format!("run-{id}"), &source, true)?)
        }
        BranchStrategy::Branch(branch) => {
            Some(repo.add_worktree(&branch.replace('/', "-"), branch, false)?)
        }
    };
    let result = run_in_worktree(
        &options,
        env,
        &repo,
        &provider,
        &mut agent,
        &strategy,
        worktree.as_ref(),
        &target,
        &id,
        &prompt,
        template.filter(prompt::Template::has_shell_expressions),
    )
    .await;
    let preserved = match &worktree {
        Some(wt) => {
            // A failed run keeps its branch when the agent committed to it.
            let committed = repo
                .commits_since(&wt.base, &wt.branch)
                .map(|c| !c.is_empty());
            let keep_branch = result.is_err() && committed.unwrap_or(true);
            repo.close_worktree(wt, keep_branch)?
        }
        None => None,
    };
    let mut result = result?;
    result.preserved_worktree_path = preserved.map(|p| p.display().to_string());
    Ok(result)
}

#[allow(clippy::too_many_arguments)]
async fn run_in_worktree(
    options: &RunOptions,
    env: env::EnvMap,
    repo: &Repo,
    provider: &SandboxProvider,
    agent: &mut AgentProvider,
    strategy: &BranchStrategy,
    worktree: Option<&Worktree>,
    target: &str,
    id: &str,
    prompt: &str,
    template: Option<prompt::Template>,
) -> Result<RunResult> {
    let (path, branch) = match worktree {
        Some(wt) => (wt.path.clone(), wt.branch.clone()),
        None => (repo.root().to_path_buf(), target.to_string()),
    };
    let base = repo.branch_head(&branch)?;
    let spec = SandboxSpec {
        run_id: id.to_string(),
        name: branch.clone(),
        worktree: path,
        git_dir: repo.git_dir(),
        branch: branch.clone(),
        env: env.into_iter().collect(),
        config: options.sandbox_config.clone(),
    };
    let mut sandbox = provider.create(&spec).await?;
    let isolated = provider.info().kind == SandboxKind::Isolated;
    let looped = async {
        if isolated {
            sync::sync_in(
                &mut sandbox,
                worktree.expect("isolated runs have a worktree"),
            )
            .await?;
        }
        let mut invoker = invoker::SandboxInvoker {
            agent,
            sandbox: &mut sandbox,
            model: options.model.clone(),
            options: options.agent_options.clone(),
            sync: if isolated {
                worktree.map(|wt| (wt, base.clone()))
            } else {
                None
            },
            on_event: options.on_event.clone(),
            abort: options.abort.clone(),
            idle_timeout: options.idle_timeout,
            template,
        };
        iteration::run_iterations(
            &mut invoker,
            prompt,
            options.max_iterations,
            &options.completion_signals,
        )
        .await
    }
    .await;
    let closed = sandbox.close().await;
    let outcome = looped?;
    closed?;

    let commits = repo.commits_since(&base, &branch)?;
    let landed_on = match strategy {
        BranchStrategy::MergeToHead => {
            repo.merge_into_head(&branch)?;
            target.to_string()
        }
        _ => branch,
    };
    Ok(RunResult {
        iterations: outcome.iterations,
        completion_signal: outcome.completion_signal,
        stdout: outcome.stdout,
        commits: commits.into_iter().map(|sha| Commit { sha }).collect(),
        branch: landed_on,
        preserved_worktree_path: None,
    })
}
