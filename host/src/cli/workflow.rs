//! `sanddune workflow run | list`: the workflows in `.sanddune/workflows/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::outcome_words::{candidate_word, landing, landing_word, status_word};
use super::progress::{event_lines, print_progress};
use super::run::{LogArg, call_site_env, hooks, project_config};
use crate::error::{Error, Result};
use crate::run::{LogMode, StreamEvent};
use crate::terminal_text::visible;
use crate::workflow::{
    Landing, WorkflowEvent, WorkflowOptions, WorkflowResult, default_parallel, file,
};
use crate::worktree::Repo;

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum WorkflowCommands {
    /// Run a workflow (the only one when NAME is left out).
    Run(RunArgs),
    /// The workflows of this repository.
    List {
        #[arg(long, default_value = ".")]
        cwd: PathBuf,
    },
}

#[derive(Args)]
pub struct RunArgs {
    /// The workflow: .sanddune/workflows/NAME.toml.
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::workflows))]
    name: Option<String>,
    /// A workflow argument KEY=VALUE (repeatable; only declared keys).
    #[arg(long = "arg", value_parser = super::key_value)]
    args: Vec<(String, String)>,
    /// At most this many agents at once (default: the number of cores).
    #[arg(long)]
    parallel: Option<usize>,
    /// Sandbox provider for every step, over the file's.
    #[arg(long, add = clap_complete::engine::ArgValueCompleter::new(super::completions::sandbox_provider))]
    sandbox: Option<String>,
    /// Agent provider for every run, over the file's.
    #[arg(long, add = clap_complete::engine::ArgValueCompleter::new(super::completions::agent_provider))]
    agent: Option<String>,
    /// Model for every run, over the file's.
    #[arg(long)]
    model: Option<String>,
    /// Sandbox provider option KEY=VALUE (repeatable). docker and podman
    /// also take egress=, cpus=, memory=, pids= and disk=, applied by the
    /// host (docs/security.md).
    #[arg(long = "sandbox-opt", value_parser = super::key_value)]
    sandbox_opts: Vec<(String, String)>,
    /// Agent provider option KEY=VALUE (repeatable).
    #[arg(long = "agent-opt", value_parser = super::key_value)]
    agent_opts: Vec<(String, String)>,
    /// Env for every run's commands, KEY=VALUE (repeatable).
    #[arg(long = "env", value_parser = super::key_value)]
    env: Vec<(String, String)>,
    /// file: one run log per agent run under .sanddune/logs (default);
    /// terminal: every agent's output on stderr, prefixed with its branch.
    #[arg(long, value_enum, default_value = "file")]
    log: LogArg,
    /// The repository.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    /// Print the workflow result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Approve the repository's host-effective config and this workflow's
    /// mounts as they are now, without asking (`sanddune trust --show`
    /// prints them).
    #[arg(long)]
    trust: bool,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn workflow(command: WorkflowCommands) -> Result<()> {
    match command {
        WorkflowCommands::Run(args) => run(args).await,
        WorkflowCommands::List { cwd } => {
            let repo = Repo::discover(&cwd)?;
            let found = file::list(repo.root())?;
            if found.is_empty() {
                println!("no workflows in .sanddune/workflows (sanddune init writes one)");
            }
            for (name, description) in found {
                println!("{name:<30} {description}");
            }
            Ok(())
        }
    }
}

async fn run(args: RunArgs) -> Result<()> {
    let repo = Repo::discover(&args.cwd)?;
    let workflow = file::load(repo.root(), args.name.as_deref())?;
    let trust = super::trust::gate(
        &args.cwd,
        |root| {
            Ok(super::trust::GateScope::Workflow {
                workflow: workflow.host_effects(root),
                sandbox_config: crate::config::ProjectConfig::read(root)?
                    .sandbox_options(args.sandbox_opts.clone()),
            })
        },
        args.trust,
    )?;
    let config = project_config(&args.cwd)?;
    if args.parallel == Some(0) {
        return Err(Error::input("--parallel must be at least 1"));
    }
    let mut options = WorkflowOptions {
        cwd: args.cwd.clone(),
        args: args.args,
        parallel: args.parallel.unwrap_or_else(default_parallel),
        sandbox: args.sandbox,
        agent: args.agent,
        model: args.model,
        sandbox_options: args.sandbox_opts,
        project_sandbox_options: config.sandbox_options(vec![]),
        agent_options: args.agent_opts,
        env: call_site_env(&config, args.env),
        hooks: hooks(&config, &[], &[], &[]),
        copy_to_worktree: config.copy_to_worktree.clone(),
        log: LogMode::File,
        on_event: Some(Arc::new(print_progress)),
        // Replaced by the live view's on a terminal.
        runtime: Some(args.approval.runtime()?),
        trust,
        commit: config.commit_options(Path::new(crate::config::CONFIG_FILE))?,
        ..WorkflowOptions::default()
    };
    if let Some(ms) = config.timeouts.copy_to_worktree_ms {
        options.timeouts.copy_to_worktree = Duration::from_millis(ms);
    }
    let terminal_log = matches!(args.log, LogArg::Terminal);
    // On a terminal, the live view; else plain lines as things happen.
    let view = super::live_view::wanted()
        .then(|| super::live_view::LiveView::new(repo.git_dir(), &workflow.name));
    if let Some(view) = &view {
        // The view shows each run; `sanddune logs ITEM` finds its log.
        options.log = LogMode::FileQuiet;
        let on_event = view.clone();
        options.on_event = Some(Arc::new(move |event: &WorkflowEvent| on_event.event(event)));
        let on_stream = view.clone();
        options.on_stream_event = Some(Arc::new(move |label: &str, event: &StreamEvent| {
            on_stream.agent_event(label, event);
            if terminal_log {
                for line in event_lines(label, event) {
                    on_stream.line(&line);
                }
            }
        }));
    } else if terminal_log {
        options.on_stream_event = Some(Arc::new(|label: &str, event: &StreamEvent| {
            for line in event_lines(label, event) {
                eprintln!("{line}");
            }
        }));
    }
    super::abort_on_ctrl_c(&options.abort);
    eprintln!(
        "workflow `{}`: {} step{}, up to {} agent{} at once",
        workflow.name,
        workflow.steps.len(),
        if workflow.steps.len() == 1 { "" } else { "s" },
        options.parallel,
        if options.parallel == 1 { "" } else { "s" }
    );
    let ticking = view.as_ref().map(|v| v.start_ticking());
    let result = workflow.run(options).await;
    drop(ticking);
    if let Some(view) = &view {
        view.finish();
    }
    let result = result?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).map_err(|e| Error::Other(e.into()))?
        );
    } else {
        print_summary(&result);
    }
    if let Some(reason) = result.aborted {
        return Err(Error::Aborted(reason));
    }
    if !result.ok {
        return Err(Error::Agent(format!(
            "workflow `{}` did not finish cleanly (see above)",
            result.workflow
        )));
    }
    Ok(())
}

/// The end: one table row per item (status, branch, commits, landing,
/// tokens, time), each step's merge counts, then what went wrong and the
/// worktrees kept.
fn print_summary(result: &WorkflowResult) {
    let mut rows = vec![
        [
            "ITEM", "STATUS", "BRANCH", "COMMITS", "LANDING", "TOKENS", "TIME",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let mut notes = Vec::new();
    for step in &result.steps {
        if let Some(error) = &step.error {
            notes.push(format!("{}: could not start: {error}", step.name));
        }
        let landings = result
            .steps
            .iter()
            .filter_map(|s| s.merge.as_ref())
            .flatten()
            .collect::<Vec<_>>();
        for item in &step.items {
            let label = match item.index {
                Some(i) => format!("{}-{i}", step.name),
                None => step.name.clone(),
            };
            let landing = landings
                .iter()
                .find(|q| Some(&q.branch) == item.branch.as_ref())
                .map_or("-", |q| landing_word(&q.landing));
            rows.push(vec![
                label.clone(),
                status_word(item.status).into(),
                item.branch
                    .clone()
                    .or_else(|| item.runs.last().map(|r| r.branch.clone()))
                    .unwrap_or_else(|| "-".into()),
                item.commits.len().to_string(),
                landing.into(),
                super::table::tokens(item.tokens),
                super::table::elapsed(item.duration_ms / 1000),
            ]);
            if let Some(error) = &item.error {
                notes.push(format!("{label}: {}: {error}", status_word(item.status)));
            }
            if let Some(path) = &item.preserved_worktree_path {
                notes.push(format!("{label}: worktree kept: {path}"));
            }
        }
        if let Some(best) = &step.best_of {
            let winner = best.winner.as_ref().map(|w| w.index);
            for c in &best.candidates {
                let won = Some(c.index) == winner && best.ok;
                rows.push(vec![
                    c.label.clone(),
                    candidate_word(c.status).into(),
                    c.branch.clone(),
                    c.commits.len().to_string(),
                    if won { "landed" } else { "-" }.into(),
                    super::table::tokens(c.tokens),
                    super::table::elapsed(c.duration_ms / 1000),
                ]);
            }
            match (&best.winner, &best.error) {
                (Some(w), None) => {
                    notes.push(format!("{}: winner #{}: {}", step.name, w.index, w.reason))
                }
                (_, Some(error)) => notes.push(format!("{}: {error}", step.name)),
                (None, None) => {}
            }
        }
        if let Some(queue) = &step.merge {
            let count = |f: fn(&Landing) -> bool| queue.iter().filter(|q| f(&q.landing)).count();
            notes.push(format!(
                "{}: {} landed, {} up to date, {} conflicted, {} failed, {} pending",
                step.name,
                count(|l| matches!(l, Landing::Landed { .. })),
                count(|l| matches!(l, Landing::UpToDate)),
                count(|l| matches!(l, Landing::Conflicted { .. })),
                count(|l| matches!(l, Landing::Failed { .. })),
                count(|l| matches!(l, Landing::Pending)),
            ));
            for q in queue {
                if let Landing::Conflicted { .. } | Landing::Failed { .. } = q.landing {
                    notes.push(format!("  {}: {}", q.branch, landing(&q.landing)));
                }
            }
        }
    }
    if rows.len() > 1 {
        for line in super::table::columns(&rows) {
            println!("{line}");
        }
    }
    // Notes quote errors, which may quote the agent.
    for note in notes {
        println!("{}", visible(&note));
    }
    if let Some(reason) = &result.aborted {
        println!("aborted: {reason}; the worktrees are kept");
    }
}
