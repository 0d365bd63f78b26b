//! Interactive sessions: the agent's terminal UI with the user's terminal
//! attached, in a sandbox or (no-sandbox) on the host with the agent's
//! permission prompts on. Control returns when the user leaves the UI.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::Stdio;

use serde::Serialize;

use super::env::{self, EnvMap};
use super::log::{LogMode, RunLog};
use super::place::{self, Place};
use super::plan::{self, AgentLayers, SandboxPlan};
use super::setup;
use super::strategy::{self, BranchStrategy, ProviderType, Request};
use super::worktree_handle::WorktreeHandle;
use super::{AbortHandle, Commit, Prompt, SandboxOptions, agent_files, containment, sync};
use crate::attribution::CommitOptions;
use crate::error::{Error, Result};
use crate::hooks::Hooks;
use crate::plugin::agent::{AgentProvider, CommandRequest};
use crate::plugin::api::EnvVar;
use crate::plugin::sandbox::{Command, ExecRequest, SandboxKind, env_vars};
use crate::plugin::{PluginRef, PluginRuntime};
use crate::prompt;
use crate::worktree::Repo;

/// Where an interactive session runs.
#[derive(Clone, Debug)]
pub enum InteractiveSandbox {
    Provider(PluginRef),
    /// On the host, no sandbox; the agent keeps its permission prompts.
    NoSandbox,
}

#[derive(Clone)]
pub struct InteractiveOptions {
    pub sandbox: InteractiveSandbox,
    pub sandbox_config: Vec<(String, String)>,
    pub agent: PluginRef,
    pub agent_options: Vec<(String, String)>,
    pub model: Option<String>,
    /// An optional first prompt.
    pub prompt: Option<Prompt>,
    /// A placeholder without a value is asked for at the terminal.
    pub prompt_args: Vec<(String, String)>,
    pub agent_env: Vec<(String, String)>,
    pub sandbox_env: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    /// Any repository; relative to the process's cwd.
    pub cwd: PathBuf,
    pub name: Option<String>,
    pub hooks: Hooks,
    /// How the agent's commits in a sandbox are attributed.
    pub commit: CommitOptions,
    pub abort: AbortHandle,
    pub runtime: Option<PluginRuntime>,
    /// Workspace trust for the repository's config: see [`crate::trust`].
    pub trust: crate::trust::TrustPolicy,
    /// See [`SandboxOptions::credential_gateway`].
    pub credential_gateway: bool,
}

impl InteractiveOptions {
    pub fn new(sandbox: InteractiveSandbox, agent: PluginRef) -> Self {
        Self {
            sandbox,
            sandbox_config: vec![],
            agent,
            agent_options: vec![],
            model: None,
            prompt: None,
            prompt_args: vec![],
            agent_env: vec![],
            sandbox_env: vec![],
            env: vec![],
            cwd: PathBuf::from("."),
            name: None,
            hooks: Hooks::default(),
            commit: CommitOptions::default(),
            abort: AbortHandle::new(),
            runtime: None,
            trust: Default::default(),
            credential_gateway: true,
        }
    }

    fn sandbox_options(&self, runtime: &PluginRuntime) -> SandboxOptions {
        let mut so = SandboxOptions::new(match &self.sandbox {
            InteractiveSandbox::Provider(p) => p.clone(),
            InteractiveSandbox::NoSandbox => PluginRef::Builtin(plan::NO_SANDBOX.into()),
        });
        so.sandbox_config = self.sandbox_config.clone();
        so.sandbox_env = self.sandbox_env.clone();
        so.env = self.env.clone();
        so.hooks = self.hooks.clone();
        so.commit = self.commit.clone();
        so.name = self.name.clone();
        so.cwd = self.cwd.clone();
        so.credential_gateway = self.credential_gateway;
        // The terminal belongs to the agent's UI: sanddune's own lines go
        // to stderr before and after it.
        so.log = LogMode::Terminal;
        so.abort = self.abort.clone();
        so.runtime = Some(runtime.clone());
        so.trust = self.trust;
        so
    }

    /// The agent, loaded on `runtime`, and the session's sandbox planned
    /// with it (none on the host): nothing is created when either is
    /// refused.
    async fn plan(
        &self,
        runtime: &PluginRuntime,
        root: &std::path::Path,
    ) -> Result<(AgentProvider, Option<SandboxPlan>)> {
        let so = self.sandbox_options(runtime);
        let agent = AgentProvider::load(runtime, &self.agent).await?;
        let planned = match &self.sandbox {
            InteractiveSandbox::NoSandbox => {
                plan::check_trust(root, &so)?;
                None
            }
            InteractiveSandbox::Provider(_) => {
                let layers = AgentLayers {
                    keys: plan::agent_keys(&agent),
                    agent_env: self.agent_env.clone(),
                    env: vec![],
                };
                Some(SandboxPlan::with_agent(so, Some(layers)).await?)
            }
        };
        Ok((agent, planned))
    }
}

/// How an interactive session ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InteractiveResult {
    /// The agent's exit code.
    pub exit_code: i32,
    /// Commits made during the session, oldest first.
    pub commits: Vec<Commit>,
    /// Where they are now (the target branch after a merge-to-head).
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_worktree_path: Option<String>,
}

/// An interactive session with the provider's default branch strategy
/// (bind-mount and no-sandbox: head; isolated: merge-to-head). For another
/// strategy use `create_worktree` and [`WorktreeHandle::interactive`].
pub async fn interactive(options: InteractiveOptions) -> Result<InteractiveResult> {
    let repo = Repo::discover(&plan::absolute(&options.cwd)?)?;
    let runtime = plan::runtime(&options.runtime)?;
    let (agent, planned) = options.plan(&runtime, repo.root()).await?;
    let (provider_type, name) = match &planned {
        None => (ProviderType::NoSandbox, plan::NO_SANDBOX.to_string()),
        Some(p) => (p.provider.info().kind.into(), p.provider.name().to_string()),
    };
    let strategy = strategy::resolve(
        None,
        provider_type,
        &name,
        Request {
            interactive: true,
            copies: false,
        },
    )?;
    let so = options.sandbox_options(&runtime);
    let hooks = match &planned {
        Some(p) => p.worktree_hooks(),
        None => so.hooks.host_on_worktree_ready.clone(),
    };
    let log = place::open_log(&repo, &so.log, so.name.as_deref())?;
    let id = strategy::run_id();
    let place =
        place::prepare_place(&repo, (strategy, &id, false), &so, &hooks, true, &log).await?;
    let session = session_on(&place, &options, agent, planned, &log).await;
    // The ending of the provider's default strategy.
    let mut merged = false;
    let mut failure = session.as_ref().err().map(|e| e.to_string());
    if session.is_ok() && place.strategy == BranchStrategy::MergeToHead {
        match repo.merge_into_head(&place.branch) {
            Ok(_) => merged = true,
            Err(e) => failure = Some(e.to_string()),
        }
    }
    let mut preserved = None;
    if let Some(wt) = &place.worktree {
        preserved = place::release_worktree(&repo, wt, merged)?;
    }
    log.finish();
    let (exit_code, commits) = session?;
    if let Some(why) = failure {
        return Err(Error::Other(anyhow::anyhow!(why)));
    }
    Ok(InteractiveResult {
        exit_code,
        commits,
        branch: if merged {
            place.target.clone()
        } else {
            place.branch.clone()
        },
        preserved_worktree_path: preserved,
    })
}

impl WorktreeHandle {
    /// An interactive session on this worktree (any sandbox provider, or
    /// no-sandbox). The worktree stays; `close` ends it.
    pub async fn interactive(&self, options: InteractiveOptions) -> Result<InteractiveResult> {
        let runtime = options
            .runtime
            .clone()
            .unwrap_or_else(|| self.runtime().clone());
        let place = self.place_for_interactive();
        let (agent, planned) = options.plan(&runtime, &place.root).await?;
        let log = place::open_log(&place.repo()?, &LogMode::Terminal, options.name.as_deref())?;
        // The worktree exists already: initializeCommand runs now.
        if let Some(initialize) = planned.as_ref().and_then(|p| p.initialize.as_ref()) {
            super::hook_runner::run_on_worktree_ready(
                std::slice::from_ref(initialize),
                place.path(),
                &options.abort,
                &place::hook_log(&log),
            )
            .await?;
        }
        let (exit_code, commits) = session_on(&place, &options, agent, planned, &log).await?;
        log.finish();
        Ok(InteractiveResult {
            exit_code,
            commits,
            branch: place.branch.clone(),
            preserved_worktree_path: None,
        })
    }
}

/// The session itself on a place: returns the agent's exit code and the
/// commits it made.
async fn session_on(
    place: &Place,
    o: &InteractiveOptions,
    mut agent: AgentProvider,
    planned: Option<SandboxPlan>,
    log: &RunLog,
) -> Result<(i32, Vec<Commit>)> {
    let repo = place.repo()?;
    let base = repo.branch_head(&place.branch)?;
    let template = match &o.prompt {
        None => None,
        Some(p) => {
            let (text, is_template) = plan::resolve_prompt(p)?;
            if !is_template {
                if !o.prompt_args.is_empty() {
                    return Err(Error::input(
                        "prompt arguments need a prompt template: an inline prompt is passed literally",
                    ));
                }
                Some(prompt::Template {
                    segments: vec![prompt::Segment::Text(text)],
                    unused: vec![],
                })
            } else {
                let mut args = o.prompt_args.clone();
                for key in prompt::missing_keys(&text, &args) {
                    args.push((key.clone(), ask(&key)?));
                }
                Some(prompt::render(&text, &args, &place.branch, &place.target)?)
            }
        }
    };
    let agent_keys = plan::agent_keys(&agent);
    let exit_code = match planned {
        None => {
            // The agent works as the user, whose own git config applies.
            let env = plan::resolve_env(
                &place.root,
                EnvMap::new(),
                agent_keys.clone(),
                &o.agent_env,
                &o.sandbox_env,
                &o.env,
            )?;
            let prompt = match &template {
                Some(t) => expand_on_host(t, place).await?,
                None => String::new(),
            };
            let pairs: Vec<(String, String)> = env.clone().into_iter().collect();
            let values = agent_files::declared_values(&agent_keys, &pairs);
            let command = agent
                .build_interactive_command(&request(o, prompt, false, values))
                .await?;
            // The host's HOME is the user's own: their config stays theirs.
            for file in &command.files {
                log.line(&format!(
                    "warning: agent `{}` asks for ~/{}, which sanddune writes only into a sandbox's HOME; with no sandbox the CLI reads your own config",
                    agent.name(),
                    file.path
                ));
            }
            log.line(&format!(
                "starting `{}` on the host (no sandbox) in {}",
                agent.name(),
                place.path().display()
            ));
            log.finish();
            run_on_host(
                command.argv,
                command.stdin,
                env.into_iter()
                    .chain(command.env.into_iter().map(|e| (e.key, e.value)))
                    .collect(),
                place,
                &o.abort,
            )
            .await?
        }
        Some(plan) => {
            let provider = &plan.provider;
            let started = setup::start_sandbox(&plan, place, log).await?;
            let kind = provider.info().kind;
            super::privileges::after_setup(kind, &plan.options.hooks, place.path(), log);
            let mut env = plan.env.clone();
            env::replace_identity(&mut env, &plan.identity.env(None), &started.commit_env);
            let mut sandbox = started.sandbox;
            let agent_git = started.agent_git;
            containment::start_agent_phase(&sandbox, &agent.info().egress_hosts, &env, log);
            let session = async {
                let pairs: Vec<(String, String)> = env.clone().into_iter().collect();
                let prompt = match &template {
                    Some(t) if t.has_shell_expressions() => {
                        super::invoker::expand(&mut sandbox, t, &pairs, &o.abort).await?
                    }
                    Some(t) => prompt::assemble(t, &[]),
                    None => String::new(),
                };
                let values = agent_files::declared_values(&agent_keys, &pairs);
                let command = agent
                    .build_interactive_command(&request(o, prompt, true, values))
                    .await?;
                agent_files::write(&mut sandbox, agent.name(), &command.files, &pairs, &o.abort)
                    .await?;
                log.line(&format!(
                    "starting `{}` in sandbox `{}`",
                    agent.name(),
                    provider.name()
                ));
                log.finish();
                let code = sandbox
                    .interactive_exec(ExecRequest {
                        command: Command::Argv(command.argv),
                        cwd: None,
                        env: env_vars(&pairs).into_iter().chain(command.env).collect(),
                        stdin: command.stdin,
                        sudo: false,
                        timeout_ms: None,
                    })
                    .await?;
                if provider.info().kind == SandboxKind::Isolated
                    && let Some(wt) = &place.worktree
                {
                    sync::sync_out(&mut sandbox, wt, &base).await?;
                }
                Ok(code)
            };
            let code = tokio::select! {
                code = session => code,
                () = o.abort.aborted() => {
                    sandbox.canceller().kill_all();
                    Err(Error::Aborted(o.abort.reason()))
                }
            };
            let closed = sandbox.close().await;
            // The agent's commits land whatever the session's end.
            let taken = match agent_git {
                Some(mut dir) => {
                    let taken = dir.take_back();
                    dir.remove();
                    taken.map(drop)
                }
                None => Ok(()),
            };
            super::privileges::after_close(provider.info().kind, place.path(), log);
            let code = code?;
            closed?;
            taken?;
            code
        }
    };
    let commits = repo
        .commits_since(&base, &place.branch)?
        .into_iter()
        .map(|sha| Commit { sha })
        .collect();
    Ok((exit_code, commits))
}

fn request(
    o: &InteractiveOptions,
    prompt: String,
    skip_permissions: bool,
    env: Vec<EnvVar>,
) -> CommandRequest {
    CommandRequest {
        prompt,
        model: o.model.clone(),
        options: o.agent_options.clone(),
        resume_session: None,
        skip_permissions,
        env,
    }
}

/// Ask for a prompt argument's value at the terminal.
fn ask(key: &str) -> Result<String> {
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "value for {{{{{key}}}}}: ");
    let _ = stderr.flush();
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    match read {
        Ok(n) if n > 0 => Ok(line.trim_end_matches(['\n', '\r']).to_string()),
        _ => Err(Error::input(format!(
            "the prompt template uses {{{{{key}}}}} and no value was given{}: pass --prompt-arg {key}=...",
            if std::io::stdin().is_terminal() {
                ""
            } else {
                " (stdin is not a terminal)"
            }
        ))),
    }
}

/// No sandbox: shell expressions run on the host, in the place.
async fn expand_on_host(template: &prompt::Template, place: &Place) -> Result<String> {
    let mut outputs = Vec::new();
    for segment in &template.segments {
        if let prompt::Segment::Shell(cmd) = segment {
            let out = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .current_dir(place.path())
                .stdin(Stdio::null())
                .output()
                .await
                .map_err(|e| Error::Other(e.into()))?;
            if !out.status.success() {
                return Err(Error::Input(format!(
                    "shell expression !`{cmd}` in the prompt template failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        }
    }
    Ok(prompt::assemble(template, &outputs))
}

/// The agent on the host with the terminal attached.
async fn run_on_host(
    argv: Vec<String>,
    stdin: Option<Vec<u8>>,
    env: Vec<(String, String)>,
    place: &Place,
    abort: &AbortHandle,
) -> Result<i32> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| Error::Plugin("the agent provider built an empty command".into()))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(place.path())
        .envs(env)
        .kill_on_drop(true);
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().map_err(|e| {
        Error::input(format!(
            "cannot start `{program}` on the host (is it installed and on PATH?): {e}"
        ))
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use tokio::io::AsyncWriteExt;
        let _ = pipe.write_all(&bytes).await;
    }
    tokio::select! {
        status = child.wait() => Ok(status.map_err(|e| Error::Other(e.into()))?.code().unwrap_or(-1)),
        () = abort.aborted() => {
            let _ = child.kill().await;
            Err(Error::Aborted(abort.reason()))
        }
    }
}
