//! `sanddune run --best-of N`: the candidates' flags, progress (the live
//! view on a terminal, as for a workflow), and the summary.

use std::path::Path;
use std::sync::Arc;

use clap::Args;

use super::outcome_words::candidate_word;
use crate::error::{Error, Result};
use crate::plugin::PluginRef;
use crate::run::{LogMode, RunOptions, StreamEvent};
use crate::terminal_text::visible;
use crate::workflow::WorkflowEvent;
use crate::workflow::best_of::{self, BestOf, BestOfResult, Candidate, Judge, TieBreak};

#[derive(Args)]
pub struct BestOfArgs {
    /// Run N candidates of the prompt at once, each on its own branch, and
    /// land the best (docs/guide/best-of.md). Also implied by a list in
    /// --agent or --model.
    #[arg(long, value_name = "N")]
    best_of: Option<usize>,
    /// How the winner is chosen among the candidates that passed the
    /// check: fewest-lines, fewest-tokens, first (to finish) or judge.
    #[arg(long, value_name = "RULE", default_value = "fewest-lines")]
    tie_break: String,
    /// The judge's agent provider (default: the first candidate's).
    #[arg(long)]
    judge_agent: Option<String>,
    /// The judge's model (default: the first candidate's).
    #[arg(long)]
    judge_model: Option<String>,
    /// Instructions put first in the judge's prompt.
    #[arg(long)]
    judge_prompt: Option<String>,
    /// Delete the other candidates' branches once the winner has landed.
    #[arg(long)]
    discard_losers: bool,
    /// At most this many candidates at once (default: all).
    #[arg(long, value_name = "N")]
    parallel: Option<usize>,
    /// Stop a candidate still working after this many seconds; the others
    /// go on.
    #[arg(long, value_name = "SECONDS")]
    candidate_timeout: Option<u64>,
}

/// The candidates when this is a best-of run (`--best-of`, or a list of
/// agents or models), else None. Each list has one entry (every candidate
/// uses it) or one per candidate.
pub(super) fn candidates(
    args: &BestOfArgs,
    agents: &[String],
    models: &[String],
) -> Result<Option<Vec<Candidate>>> {
    let n = args.best_of.unwrap_or(agents.len().max(models.len()));
    let judging =
        args.judge_agent.is_some() || args.judge_model.is_some() || args.judge_prompt.is_some();
    if n <= 1 {
        if args.best_of.is_some() {
            return Err(Error::input("--best-of needs at least 2 candidates"));
        }
        if judging
            || args.discard_losers
            || args.parallel.is_some()
            || args.candidate_timeout.is_some()
            || args.tie_break != "fewest-lines"
        {
            return Err(Error::input(
                "--tie-break, --judge-*, --discard-losers, --parallel and --candidate-timeout are best-of flags: add --best-of N",
            ));
        }
        return Ok(None);
    }
    let rule = TieBreak::parse(&args.tie_break).ok_or_else(|| {
        Error::input(format!(
            "unknown --tie-break `{}`: use fewest-lines, fewest-tokens, first or judge",
            args.tie_break
        ))
    })?;
    if judging && rule != TieBreak::Judge {
        return Err(Error::input(
            "--judge-agent, --judge-model and --judge-prompt need --tie-break judge",
        ));
    }
    let pick = |list: &[String], what: &str| -> Result<Vec<Option<String>>> {
        match list.len() {
            0 => Ok(vec![None; n]),
            1 => Ok(vec![Some(list[0].clone()); n]),
            len if len == n => Ok(list.iter().cloned().map(Some).collect()),
            len => Err(Error::input(format!(
                "--{what} lists {len} values for {n} candidates: give one, or one per candidate"
            ))),
        }
    };
    let (agents, models) = (pick(agents, "agent")?, pick(models, "model")?);
    Ok(Some(
        agents
            .into_iter()
            .zip(models)
            .map(|(agent, model)| Candidate {
                agent: PluginRef::parse(&agent.expect("--agent is required")),
                model,
            })
            .collect(),
    ))
}

/// How the caller wants it shown.
pub(super) struct How<'a> {
    pub json: bool,
    pub terminal_log: bool,
    pub cwd: &'a Path,
}

pub(super) async fn run(
    args: BestOfArgs,
    mut options: RunOptions,
    candidates: Vec<Candidate>,
    how: How<'_>,
) -> Result<()> {
    let n = candidates.len();
    let name = options
        .sandbox
        .name
        .take()
        .unwrap_or_else(|| "best-of".into());
    let tie_break = TieBreak::parse(&args.tie_break).expect("checked in candidates()");
    let mut b = BestOf {
        candidates,
        tie_break,
        judge: Judge {
            agent: args.judge_agent.as_deref().map(PluginRef::parse),
            model: args.judge_model,
            instructions: args.judge_prompt,
        },
        discard_losers: args.discard_losers,
        workflow: name.clone(),
        name: name.clone(),
        parallel: args.parallel.unwrap_or(n).max(1),
        timeout: args.candidate_timeout.map(std::time::Duration::from_secs),
        on_event: Some(Arc::new(super::progress::print_progress)),
        on_stream_event: None,
        run: options,
    };
    let git_dir = crate::worktree::Repo::discover(
        &std::path::absolute(how.cwd).map_err(|e| Error::input(e.to_string()))?,
    )?
    .git_dir();
    // On a terminal, the live view with a row per candidate; else plain
    // lines as things happen.
    let view = (!how.json && super::live_view::wanted())
        .then(|| super::live_view::LiveView::new(git_dir, &name));
    if let Some(view) = &view {
        b.run.sandbox.log = LogMode::FileQuiet;
        let on_event = view.clone();
        b.on_event = Some(Arc::new(move |event: &WorkflowEvent| on_event.event(event)));
        let (on_stream, terminal_log) = (view.clone(), how.terminal_log);
        b.on_stream_event = Some(Arc::new(move |label: &str, event: &StreamEvent| {
            on_stream.agent_event(label, event);
            if terminal_log {
                for line in super::progress::event_lines(label, event) {
                    on_stream.line(&line);
                }
            }
        }));
    } else {
        b.run.sandbox.log = LogMode::File;
        if how.terminal_log {
            b.on_stream_event = Some(Arc::new(|label: &str, event: &StreamEvent| {
                for line in super::progress::event_lines(label, event) {
                    eprintln!("{line}");
                }
            }));
        }
    }
    let ticking = view.as_ref().map(|v| v.start_ticking());
    let result = best_of::run(b).await;
    drop(ticking);
    if let Some(view) = &view {
        view.finish();
    }
    let result = result?;
    if how.json {
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
    match result.error {
        Some(error) if !result.ok => Err(Error::Agent(error)),
        _ => Ok(()),
    }
}

/// A row per candidate (the winner starred), then why it won, where it
/// landed, and the branches kept.
fn print_summary(result: &BestOfResult) {
    let winner = result.winner.as_ref().map(|w| w.index);
    let mut rows = vec![
        [
            "", "#", "AGENT", "MODEL", "STATUS", "LINES", "TOKENS", "TIME", "BRANCH",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for c in &result.candidates {
        rows.push(vec![
            if Some(c.index) == winner { "*" } else { "" }.into(),
            c.index.to_string(),
            c.agent.clone(),
            c.model.clone().unwrap_or_else(|| "-".into()),
            candidate_word(c.status).into(),
            c.diff.map_or("-".into(), |d| d.lines().to_string()),
            super::table::tokens(c.tokens),
            super::table::elapsed(c.duration_ms / 1000),
            if c.kept {
                c.branch.clone()
            } else {
                "(deleted)".into()
            },
        ]);
    }
    for line in super::table::columns(&rows) {
        println!("{line}");
    }
    if let Some(w) = &result.winner {
        println!("winner: #{} ({})", w.index, visible(&w.reason));
    }
    if let Some(landing) = &result.landing {
        match &landing.landing {
            crate::workflow::Landing::Landed { commit } => {
                println!(
                    "landed on {} ({})",
                    result.target,
                    &commit[..commit.len().min(10)]
                );
            }
            other => println!("not landed: {other:?}"),
        }
    }
    for c in &result.candidates {
        if let Some(error) = &c.error {
            println!("#{}: {}", c.index, visible(error));
        }
        if let Some(check) = c.check.as_ref().filter(|check| !check.passed) {
            let last = check.tail.lines().last().unwrap_or("");
            println!("#{}: check {}: {}", c.index, check.verdict(), visible(last));
        }
        if let Some(path) = &c.log_file_path {
            println!("#{} log: {path}", c.index);
        }
    }
}
