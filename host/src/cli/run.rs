//! `sanddune run`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use crate::error::{Error, Result};
use crate::plugin::PluginRef;
use crate::run::{BranchStrategy, Prompt, RunOptions, RunResult, StreamEvent};

#[derive(Args)]
#[command(group = clap::ArgGroup::new("prompt-source").required(true).args(["prompt", "prompt_file"]))]
pub struct RunArgs {
    /// Sandbox provider: a built-in name (test-isolated) or a component file (./x.wasm).
    #[arg(long)]
    sandbox: String,
    /// Agent provider: a built-in name (claude-code, demo) or a component file.
    #[arg(long)]
    agent: String,
    /// Model for the agent.
    #[arg(long)]
    model: Option<String>,
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
    /// Stop an iteration after this many seconds without agent output.
    #[arg(long, default_value_t = 600)]
    idle_timeout: u64,
    /// Text that ends the run when the agent outputs it (repeatable).
    /// Default: <promise>COMPLETE</promise>.
    #[arg(long = "completion-signal")]
    completion_signals: Vec<String>,
    /// Commit to this branch (the branch strategy `branch`); it is kept.
    #[arg(long)]
    branch: Option<String>,
    /// Branch strategy; default: head for bind-mount providers, merge-to-head for isolated ones.
    #[arg(long, value_enum, conflicts_with = "branch")]
    strategy: Option<StrategyArg>,
    /// The repository to work on.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    /// Sandbox provider option KEY=VALUE (repeatable).
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
}

#[derive(Clone, Copy, ValueEnum)]
enum StrategyArg {
    Head,
    MergeToHead,
}

pub async fn run(args: RunArgs) -> Result<()> {
    let prompt = match (args.prompt, args.prompt_file) {
        (Some(text), None) => Prompt::Inline(text),
        (None, Some(path)) => Prompt::File(path),
        _ => {
            return Err(Error::input(
                "give exactly one of --prompt and --prompt-file",
            ));
        }
    };
    let mut options = RunOptions::new(
        PluginRef::parse(&args.sandbox),
        PluginRef::parse(&args.agent),
        prompt,
    );
    options.model = args.model;
    options.max_iterations = args.max_iterations;
    options.idle_timeout = std::time::Duration::from_secs(args.idle_timeout);
    options.prompt_args = args.prompt_args;
    if !args.completion_signals.is_empty() {
        options.completion_signals = args.completion_signals;
    }
    options.strategy = match (args.branch, args.strategy) {
        (Some(branch), _) => Some(BranchStrategy::Branch(branch)),
        (None, Some(StrategyArg::Head)) => Some(BranchStrategy::Head),
        (None, Some(StrategyArg::MergeToHead)) => Some(BranchStrategy::MergeToHead),
        (None, None) => None,
    };
    options.cwd = args.cwd.clone();
    options.sandbox_config = args.sandbox_opts;
    options.agent_options = args.agent_opts;
    options.env = args.env;
    options.agent_env = args.agent_env;
    options.sandbox_env = args.sandbox_env;
    if !args.json {
        options.on_event = Some(Arc::new(print_event));
    }
    let abort = options.abort.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            abort.abort("interrupted (Ctrl-C)");
        }
    });
    let result = crate::run::run(options).await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).map_err(|e| Error::Other(e.into()))?
        );
    } else {
        print_summary(&result, &args.cwd);
    }
    Ok(())
}

/// Agent output as it streams, on stderr, one line per event.
fn print_event(event: &StreamEvent) {
    let line = match event {
        StreamEvent::Text {
            iteration, text, ..
        } => format!("[{iteration}] {}", text.trim()),
        StreamEvent::ToolCall {
            iteration,
            name,
            input,
            ..
        } => {
            let input: String = input.chars().take(120).collect();
            format!("[{iteration}] > {name} {input}")
        }
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}

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
        println!("  {} {summary}", &commit.sha[..commit.sha.len().min(10)]);
    }
    if let Some(path) = &result.preserved_worktree_path {
        println!("worktree kept (uncommitted changes): {path}");
    }
}
