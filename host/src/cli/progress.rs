//! What a workflow and a best-of print as things happen when there is no
//! live view (stderr is not a terminal): a line per step, item and
//! landing, and with `--log terminal` the agents' events.

use super::outcome_words::landing;
use crate::run::StreamEvent;
use crate::terminal_text::{visible, visible_line};
use crate::workflow::{ItemStatus, WorkflowEvent};

/// An agent event as `--log terminal` prints it: `[label] ...` lines.
pub fn event_lines(label: &str, event: &StreamEvent) -> Vec<String> {
    match event {
        StreamEvent::Text { text, .. } => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| format!("[{label}] {}", visible_line(line)))
            .collect(),
        StreamEvent::ToolCall { name, input, .. } => {
            let input: String = input.chars().take(120).collect();
            vec![format!(
                "[{label}] > {} {}",
                visible_line(name),
                visible_line(&input)
            )]
        }
    }
}

/// One line per step, branch and landing, as they happen (no terminal).
pub fn print_progress(event: &WorkflowEvent) {
    // Labels come from the backlog, errors and landings quote the agent.
    eprintln!("{}", visible(&progress_line(event)));
}

fn progress_line(event: &WorkflowEvent) -> String {
    match event {
        WorkflowEvent::StepStarted { step, items } => match items {
            Some(n) => format!("== {step}: {n} item{}", if *n == 1 { "" } else { "s" }),
            None => format!("== {step}"),
        },
        WorkflowEvent::ItemStarted { label, branch } => match branch {
            Some(b) => format!("[{label}] started on {b}"),
            None => format!("[{label}] started"),
        },
        WorkflowEvent::ItemFinished { label, result } => match result.status {
            ItemStatus::Succeeded => format!(
                "[{label}] done: {} commit{}",
                result.commits.len(),
                if result.commits.len() == 1 { "" } else { "s" }
            ),
            ItemStatus::NotStarted => format!("[{label}] not started (aborted)"),
            _ => format!(
                "[{label}] {}: {}",
                if result.status == ItemStatus::Aborted {
                    "aborted"
                } else {
                    "failed"
                },
                result.error.as_deref().unwrap_or("")
            ),
        },
        WorkflowEvent::Landing(q) => format!("merge {}: {}", q.branch, landing(&q.landing)),
    }
}
