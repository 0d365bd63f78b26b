//! `sanddune run`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::config::{CONFIG_FILE, ProjectConfig};
use crate::error::{Error, Result};
use crate::plugin::PluginRef;
use crate::run::{
    BranchStrategy, Check, Hooks, HostHook, LogMode, Prompt, PushTo, RunOptions, RunResult,
    SandboxHook, StructuredOutput,
};
use crate::terminal_text::{visible, visible_line};

#[derive(Args)]
#[command(group = clap::ArgGroup::new("prompt-source").required(true).args(["prompt", "prompt_file"]))]
pub struct RunArgs {
    /// Sandbox provider: a built-in name (test-isolated) or a component file (./x.wasm).
    #[arg(long, add = clap_complete::engine::ArgValueCompleter::new(super::completions::sandbox_provider))]
    sandbox: String,
    /// Agent provider: a built-in name (claude-code, demo) or a component
    /// file. A comma list gives best-of-N candidates their agents.
    #[arg(long, value_delimiter = ',', required = true, add = clap_complete::engine::ArgValueCompleter::new(super::completions::agent_provider))]
    agent: Vec<String>,
    /// Model for the agent. A comma list gives best-of-N candidates their
    /// models.
    #[arg(long, value_delimiter = ',')]
    model: Vec<String>,
    /// The prompt, passed to the agent literally.
    #[arg(long)]
    prompt: Option<String>,
    /// Read the prompt from this file.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    /// A prompt argument KEY=VALUE for the template's {{KEY}} (repeatable;
    /// needs --prompt-file).
    #[arg(long = "prompt-arg", value_parser = super::key_value)]
    prompt_args: Vec<(String, String)>,
    /// Upper bound on iterations.
    #[arg(long, default_value_t = 1)]
    max_iterations: u32,
    /// Stop an iteration after this many seconds without agent progress (a
    /// parsed event that is not an error).
    #[arg(long, default_value_t = 600)]
    idle_timeout: u64,
    /// Text that ends the run when the agent outputs it (repeatable).
    /// Default: <promise>COMPLETE</promise>.
    #[arg(long = "completion-signal")]
    completion_signals: Vec<String>,
    /// Commit to this branch (the branch strategy `branch`); it is kept.
    #[arg(long)]
    branch: Option<String>,
    /// Branch strategy; default: head for bind-mount providers, merge-to-head
    /// for isolated ones. `branch` needs --branch.
    #[arg(long, value_enum)]
    strategy: Option<StrategyArg>,
    /// Names the run: prefixes every log line and names the log file.
    #[arg(long)]
    name: Option<String>,
    /// Copy this file or directory (relative to the repository) into the new
    /// worktree before the hooks run (repeatable; not with head).
    #[arg(long = "copy")]
    copies: Vec<PathBuf>,
    /// Give up copying after this many seconds (default 60).
    #[arg(long)]
    copy_timeout: Option<u64>,
    /// host.onWorktreeReady hook: a command run on the host in the new
    /// worktree before the sandbox starts (repeatable, in order).
    #[arg(long = "hook-worktree-ready")]
    hook_worktree_ready: Vec<String>,
    /// host.onSandboxReady hook: a command run on the host once the sandbox
    /// is up (repeatable, all at once).
    #[arg(long = "hook-host-sandbox-ready")]
    hook_host_sandbox_ready: Vec<String>,
    /// sandbox.onSandboxReady hook: a command run inside the sandbox once it
    /// is up (repeatable, all at once). Sudo and timeouts: .sanddune/config.toml.
    #[arg(long = "hook-sandbox-ready")]
    hook_sandbox_ready: Vec<String>,
    /// Where progress goes: a log file under .sanddune/logs (default), or
    /// the terminal (spinner and summaries).
    #[arg(long, value_enum, default_value = "file")]
    log: LogArg,
    /// Resume this agent session in iteration 1 (needs --max-iterations 1).
    #[arg(long)]
    resume: Option<String>,
    /// Do not copy agent sessions back to the host.
    #[arg(long)]
    no_capture_sessions: bool,
    /// Ask for a structured result: the agent's last <TAG>...</TAG> block.
    #[arg(long, requires = "output_schema")]
    output_tag: Option<String>,
    /// The JSON Schema file the structured result must satisfy.
    #[arg(long, requires = "output_tag")]
    output_schema: Option<PathBuf>,
    /// The repository to work on.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    /// Sandbox provider option KEY=VALUE (repeatable). docker and podman
    /// also take egress=, egress.setup=, cpus=, memory=, pids= and disk=,
    /// applied by the host (docs/security.md).
    #[arg(long = "sandbox-opt", value_parser = super::key_value)]
    sandbox_opts: Vec<(String, String)>,
    /// Agent provider option KEY=VALUE, e.g. effort=high (repeatable).
    #[arg(long = "agent-opt", value_parser = super::key_value)]
    agent_opts: Vec<(String, String)>,
    /// Env for the sandbox's commands, KEY=VALUE (repeatable); wins over
    /// everything else.
    #[arg(long = "env", value_parser = super::key_value)]
    env: Vec<(String, String)>,
    /// Env owned by the agent provider, KEY=VALUE (repeatable).
    #[arg(long = "agent-env", value_parser = super::key_value)]
    agent_env: Vec<(String, String)>,
    /// Env owned by the sandbox provider, KEY=VALUE (repeatable); may not
    /// share a key with --agent-env.
    #[arg(long = "sandbox-env", value_parser = super::key_value)]
    sandbox_env: Vec<(String, String)>,
    /// Print the run result as JSON on stdout, and nothing else.
    #[arg(long)]
    json: bool,
    /// Print how long each phase of the run took, on stderr (the JSON
    /// result always has them as `timings`).
    #[arg(long)]
    timings: bool,
    /// Approve the repository's host-effective config (host hooks, secret
    /// references, mounts, ...) as it is now, without asking: `sanddune
    /// trust --show` prints it.
    #[arg(long)]
    trust: bool,
    /// Give the sandbox the agent's model API keys as they are, not
    /// placeholders that the host's credential gateway swaps for them
    /// (docs/security.md, "Credential gateway").
    #[arg(long)]
    no_gateway: bool,
    /// Run this command in the sandbox after the agent (`sh -c`, in the
    /// worktree): unless it exits 0 the run fails and nothing merges; the
    /// commits stay on the run's branch.
    #[arg(long)]
    check: Option<String>,
    /// Give up the check after this many seconds (default 600).
    #[arg(long, requires = "check")]
    check_timeout: Option<u64>,
    /// After the run, push the branch that holds its commits from the host
    /// with your git credentials (never forced; the sandbox never gets
    /// them): to REMOTE, else the branch's upstream remote, else `origin`.
    #[arg(long, value_name = "REMOTE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    push: Option<String>,
    #[command(flatten)]
    best_of: super::best_of::BestOfArgs,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum StrategyArg {
    Head,
    MergeToHead,
    Branch,
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum LogArg {
    File,
    Terminal,
}

/// The repository's `.sanddune/config.toml`, found from `cwd`, with its
/// references resolved: after the trust gate.
pub(super) fn project_config(cwd: &Path) -> Result<ProjectConfig> {
    let root = git2::Repository::discover(cwd).ok().and_then(|r| {
        if r.is_worktree() {
            r.commondir().parent().map(Path::to_path_buf)
        } else {
            r.workdir().map(Path::to_path_buf)
        }
    });
    match root {
        Some(root) => ProjectConfig::load(&root),
        // Not a repository: the run itself says so.
        None => Ok(ProjectConfig::default()),
    }
}

/// Config hooks, then the flags' hooks after them.
pub(super) fn hooks(
    config: &ProjectConfig,
    worktree: &[String],
    host: &[String],
    sandbox: &[String],
) -> Hooks {
    let host_hook = |command: &String| HostHook {
        command: command.clone(),
        timeout_ms: None,
    };
    let mut hooks = config.hooks();
    hooks
        .host_on_worktree_ready
        .extend(worktree.iter().map(host_hook));
    hooks
        .host_on_sandbox_ready
        .extend(host.iter().map(host_hook));
    hooks
        .sandbox_on_sandbox_ready
        .extend(sandbox.iter().map(|command| SandboxHook {
            command: command.clone(),
            sudo: false,
            timeout_ms: None,
        }));
    hooks
}

/// Config env first, so `--env` wins.
pub(super) fn call_site_env(
    config: &ProjectConfig,
    env: Vec<(String, String)>,
) -> Vec<(String, String)> {
    config.env.clone().into_iter().chain(env).collect()
}

fn strategy(args: &RunArgs) -> Result<Option<BranchStrategy>> {
    Ok(match (args.strategy, &args.branch) {
        (None | Some(StrategyArg::Branch), Some(branch)) => {
            Some(BranchStrategy::Branch(branch.clone()))
        }
        (Some(StrategyArg::Branch), None) => {
            return Err(Error::input("--strategy branch needs --branch NAME"));
        }
        (Some(_), Some(_)) => {
            return Err(Error::input(
                "--branch selects the branch strategy; it cannot be combined with --strategy head or merge-to-head",
            ));
        }
        (Some(StrategyArg::Head), None) => Some(BranchStrategy::Head),
        (Some(StrategyArg::MergeToHead), None) => Some(BranchStrategy::MergeToHead),
        (None, None) => None,
    })
}

fn output(args: &RunArgs) -> Result<Option<StructuredOutput>> {
    let (Some(tag), Some(path)) = (&args.output_tag, &args.output_schema) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::input(format!(
            "cannot read the output schema {}: {e}",
            path.display()
        ))
    })?;
    let schema = serde_json::from_str(&text).map_err(|e| {
        Error::input(format!(
            "the output schema {} is not JSON: {e}",
            path.display()
        ))
    })?;
    Ok(Some(StructuredOutput {
        tag: tag.clone(),
        schema,
    }))
}

pub async fn run(args: RunArgs) -> Result<()> {
    let prompt = match (&args.prompt, &args.prompt_file) {
        (Some(text), None) => Prompt::Inline(text.clone()),
        (None, Some(path)) => Prompt::File(path.clone()),
        _ => {
            return Err(Error::input(
                "give exactly one of --prompt and --prompt-file",
            ));
        }
    };
    let trust = super::trust::gate(
        &args.cwd,
        |root| {
            Ok(super::trust::GateScope::Run {
                sandbox: PluginRef::parse(&args.sandbox),
                sandbox_config: ProjectConfig::read(root)?
                    .sandbox_options(args.sandbox_opts.clone()),
            })
        },
        args.trust,
    )?;
    let config = project_config(&args.cwd)?;
    let candidates = super::best_of::candidates(&args.best_of, &args.agent, &args.model)?;
    let mut options = RunOptions::new(
        PluginRef::parse(&args.sandbox),
        PluginRef::parse(&args.agent[0]),
        prompt,
    );
    options.strategy = strategy(&args)?;
    options.agent.output = output(&args)?;
    options.resume_session = args.resume;
    let so = &mut options.sandbox;
    so.runtime = Some(args.approval.runtime()?);
    so.trust = trust;
    so.credential_gateway = !args.no_gateway;
    so.name = args.name;
    so.hooks = hooks(
        &config,
        &args.hook_worktree_ready,
        &args.hook_host_sandbox_ready,
        &args.hook_sandbox_ready,
    );
    so.commit = config.commit_options(Path::new(CONFIG_FILE))?;
    so.copy_to_worktree = config
        .copy_to_worktree
        .iter()
        .cloned()
        .chain(args.copies)
        .collect();
    if let Some(ms) = config.timeouts.copy_to_worktree_ms {
        so.timeouts.copy_to_worktree = Duration::from_millis(ms);
    }
    if let Some(secs) = args.copy_timeout {
        so.timeouts.copy_to_worktree = Duration::from_secs(secs);
    }
    so.log = match args.log {
        LogArg::File => LogMode::File,
        LogArg::Terminal => LogMode::Terminal,
    };
    so.cwd = args.cwd.clone();
    so.sandbox_config = config.sandbox_options(args.sandbox_opts);
    so.env = call_site_env(&config, args.env);
    so.sandbox_env = args.sandbox_env;
    if let Some(command) = args.check {
        let mut check = Check::new(command);
        if let Some(secs) = args.check_timeout {
            check.timeout = Duration::from_secs(secs);
        }
        options.check = Some(check);
    }
    options.push = args.push.map(|remote| match remote.as_str() {
        "" => PushTo::Default,
        _ => PushTo::Remote(remote),
    });
    let agent = &mut options.agent;
    agent.model = args.model.first().cloned();
    agent.max_iterations = args.max_iterations;
    agent.idle_timeout = Duration::from_secs(args.idle_timeout);
    agent.prompt_args = args.prompt_args;
    if !args.completion_signals.is_empty() {
        agent.completion_signals = args.completion_signals;
    }
    agent.capture_sessions = !args.no_capture_sessions;
    agent.agent_options = args.agent_opts;
    agent.agent_env = args.agent_env;
    // One handle for both parts (`RunOptions::new`).
    super::abort_on_ctrl_c(&options.agent.abort);
    if let Some(candidates) = candidates {
        if options.push.is_some() {
            return Err(Error::input(
                "--push applies to one agent's run, not a best-of: push the winner's branch once it is picked (`git push REMOTE BRANCH`)",
            ));
        }
        let how = super::best_of::How {
            json: args.json,
            terminal_log: matches!(args.log, LogArg::Terminal),
            cwd: &args.cwd,
        };
        return super::best_of::run(args.best_of, options, candidates, how).await;
    }
    // The result is shown as soon as it is known; the sandbox's close
    // (`Closing`) finishes after it, before the process exits.
    let outcome = match crate::run::plan(options).await {
        Ok(planned) => planned.run_to_result().await,
        Err(e) => Err(e),
    };
    let (result, closing) = match outcome {
        Ok(done) => done,
        Err(Error::Output(e)) if args.json => {
            // The caller still gets the raw text and the commits.
            println!(
                "{}",
                serde_json::json!({"error": e.message, "raw": e.raw, "commits": e.commits})
            );
            return Err(Error::Output(e));
        }
        Err(e) => return Err(e),
    };
    if args.timings {
        eprint!("{}", crate::run::timings::table(&result.timings));
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).map_err(|e| Error::Other(e.into()))?
        );
    } else {
        print_summary(&result, &args.cwd);
    }
    closing.finish().await.map_err(|e| {
        Error::Plugin(format!(
            "after the result above: {e}; `sanddune gc` removes what is left"
        ))
    })?;
    match &result.check {
        Some(check) if !check.passed => Err(Error::Agent(format!(
            "the check `{}` {}; the commits stay on {}",
            check.command,
            check.verdict(),
            result.branch
        ))),
        _ => Ok(()),
    }
}

/// What the agent wrote (commit subjects, file names, its output) is shown
/// with its control characters made visible.
pub(super) fn print_summary(result: &RunResult, cwd: &std::path::Path) {
    let n = result.iterations.len();
    println!("{n} iteration{}", if n == 1 { "" } else { "s" });
    match &result.completion_signal {
        Some(signal) => println!("completion signal: {signal}"),
        None => println!("no completion signal"),
    }
    let repo = git2::Repository::discover(cwd).ok();
    println!(
        "{} commit{} on {}",
        result.commits.len(),
        if result.commits.len() == 1 { "" } else { "s" },
        result.branch
    );
    for commit in &result.commits {
        let summary = repo
            .as_ref()
            .and_then(|r| r.find_commit(git2::Oid::from_str(&commit.sha).ok()?).ok())
            .and_then(|c| c.summary().ok().flatten().map(String::from))
            .unwrap_or_default();
        println!(
            "  {} {}",
            &commit.sha[..commit.sha.len().min(10)],
            visible_line(&summary)
        );
    }
    for (i, it) in result.iterations.iter().enumerate() {
        if let Some(path) = &it.session_file_path {
            println!("session of iteration {}: {}", i + 1, visible_line(path));
        }
    }
    if let Some(output) = &result.output {
        println!("output: {}", visible(&output.to_string()));
    }
    if let Some(check) = &result.check {
        println!(
            "check `{}`: {}",
            visible_line(&check.command),
            check.verdict()
        );
    }
    if let Some(pushed) = &result.pushed {
        println!(
            "pushed `{}` to `{}` ({})",
            visible_line(&pushed.branch),
            visible_line(&pushed.remote),
            &pushed.commit[..pushed.commit.len().min(10)]
        );
    }
    if !result.uncommitted_changes.is_empty() {
        println!(
            "{} uncommitted (in no commit):",
            if result.completion_signal.is_some() {
                "the agent said it was done, but left these changes"
            } else {
                "the agent left these changes"
            }
        );
        for entry in &result.uncommitted_changes {
            println!("  {}", visible_line(entry));
        }
    }
    if let Some(path) = &result.preserved_worktree_path {
        println!("worktree kept (uncommitted changes): {path}");
    }
    if let Some(path) = &result.log_file_path {
        println!("log: {path}");
    }
}
