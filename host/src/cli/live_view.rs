//! The live view of `sanddune workflow run` on a terminal: one line per
//! item of the step under way (item, branch, iteration, state, elapsed
//! time, tokens, the agent's last tool call or text), redrawn in place
//! four times a second. Step headers, landings and the agents' output
//! (`--log terminal`) print above it and stay. The iteration, state and
//! tokens of a running item are its record in the live-runs registry, read
//! as `ps` reads them. Without a terminal (or with `NO_COLOR`, `TERM=dumb`)
//! the workflow prints plain lines instead.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::outcome_words::{landing, status_word};
use super::table;
use crate::capability::containers::owner_id;
use crate::run::StreamEvent;
use crate::run::registry::{self, State};
use crate::terminal_text::visible;
use crate::workflow::{ItemStatus, WorkflowEvent};

/// How often the view is redrawn (and the registry read).
const TICK: Duration = Duration::from_millis(250);

/// Whether stderr wants the live view: a terminal that is not dumb, and no
/// `NO_COLOR`.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").is_ok_and(|t| !t.is_empty() && t != "dumb")
}

/// The view, shared by the workflow's callbacks and the ticker. Workflow
/// events redraw it at once; agent events wait for the next tick.
pub struct LiveView {
    git_dir: PathBuf,
    workflow: String,
    owner: String,
    screen: Mutex<Screen>,
}

#[derive(Default)]
struct Screen {
    rows: Vec<Row>,
    /// Lines of the view on the screen, below what stays.
    drawn: usize,
}

struct Row {
    label: String,
    branch: String,
    started: Instant,
    /// Set when the item ended: its status and how long it took.
    ended: Option<(ItemStatus, Duration)>,
    /// From the registry while the item's run lives.
    state: Option<State>,
    iteration: (u32, u32),
    tokens: u64,
    /// The agent's last tool call or line of text.
    activity: String,
}

impl LiveView {
    pub fn new(git_dir: PathBuf, workflow: &str) -> Arc<Self> {
        Arc::new(Self {
            git_dir,
            workflow: workflow.to_string(),
            owner: owner_id(),
            screen: Mutex::default(),
        })
    }

    /// Redraw every [`TICK`] until the returned guard is dropped.
    pub fn start_ticking(self: &Arc<Self>) -> tokio_util::task::AbortOnDropHandle<()> {
        let view = self.clone();
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                view.refresh();
            }
        }))
    }

    pub fn event(&self, event: &WorkflowEvent) {
        let mut screen = self.lock();
        match event {
            WorkflowEvent::StepStarted { step, items } => {
                // The last step's lines stay as they were last drawn.
                self.draw(&mut screen);
                screen.rows.clear();
                screen.drawn = 0;
                let header = match items {
                    Some(n) => format!("== {step}: {n} item{}", if *n == 1 { "" } else { "s" }),
                    None => format!("== {step}"),
                };
                self.print_above(&mut screen, &header);
            }
            WorkflowEvent::ItemStarted { label, branch } => {
                screen.rows.push(Row {
                    label: label.clone(),
                    branch: branch.clone().unwrap_or_else(|| "-".into()),
                    started: Instant::now(),
                    ended: None,
                    state: None,
                    iteration: (0, 0),
                    tokens: 0,
                    activity: String::new(),
                });
                self.draw(&mut screen);
            }
            WorkflowEvent::ItemFinished { label, result } => {
                if let Some(row) = screen.rows.iter_mut().find(|r| &r.label == label) {
                    row.ended = Some((result.status, row.started.elapsed()));
                    row.tokens = row.tokens.max(result.tokens);
                    if let Some(error) = &result.error {
                        row.activity = error.lines().next().unwrap_or_default().to_string();
                    }
                }
                self.draw(&mut screen);
            }
            WorkflowEvent::Landing(q) => {
                let line = format!("merge {}: {}", q.branch, landing(&q.landing));
                self.print_above(&mut screen, &line);
            }
        }
    }

    /// An agent event of the run `label` (`item` or `item/run`).
    pub fn agent_event(&self, label: &str, event: &StreamEvent) {
        let item = label.split('/').next().unwrap_or(label);
        let activity = match event {
            StreamEvent::Text { text, .. } => text
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string()),
            StreamEvent::ToolCall { name, input, .. } => Some(format!(
                "> {name} {}",
                input.split_whitespace().collect::<Vec<_>>().join(" ")
            )),
        };
        // Agents print often: the next tick draws it.
        let mut screen = self.lock();
        if let (Some(activity), Some(row)) =
            (activity, screen.rows.iter_mut().find(|r| r.label == item))
        {
            row.activity = activity;
        }
    }

    /// A line that stays (an agent's output with `--log terminal`).
    pub fn line(&self, line: &str) {
        let mut screen = self.lock();
        self.print_above(&mut screen, line);
    }

    /// Read the registry and redraw.
    fn refresh(&self) {
        let runs = registry::list(&self.git_dir);
        let mut screen = self.lock();
        for row in screen.rows.iter_mut().filter(|r| r.ended.is_none()) {
            let Some(found) = runs.iter().find(|f| {
                let r = &f.record;
                r.owner == self.owner
                    && r.workflow.as_deref() == Some(&self.workflow)
                    && r.item.as_deref() == Some(&row.label)
            }) else {
                continue;
            };
            let r = &found.record;
            row.state = Some(r.state);
            row.iteration = (r.iteration, r.max_iterations);
            row.tokens = r.tokens;
        }
        self.draw(&mut screen);
    }

    /// The view is done: its last lines stay.
    pub fn finish(&self) {
        let mut screen = self.lock();
        self.draw(&mut screen);
        screen.rows.clear();
        screen.drawn = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Screen> {
        self.screen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A line above the view: an agent's text, a landing, a step header,
    /// with their control characters shown as escapes.
    fn print_above(&self, screen: &mut Screen, line: &str) {
        let mut out = std::io::stderr().lock();
        let _ = writeln!(out, "{}{}", erase(screen.drawn), visible(line));
        screen.drawn = 0;
        drop(out);
        self.draw(screen);
    }

    /// Replace the view's lines on the screen with its rows now.
    fn draw(&self, screen: &mut Screen) {
        let (cols, rows) = terminal_size();
        let lines = render(&screen.rows, cols, rows.saturating_sub(2).max(3));
        let mut out = std::io::stderr().lock();
        let mut text = erase(screen.drawn);
        for line in &lines {
            text += line;
            text += "\n";
        }
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        screen.drawn = lines.len();
    }
}

/// Back to the first of the `lines` above the cursor, erasing to the end.
fn erase(lines: usize) -> String {
    match lines {
        0 => String::new(),
        n => format!("\x1b[{n}F\x1b[J"),
    }
}

/// The lines of the view, each cut to `cols` (a wrapped line would throw
/// the redraw off), at most `max` of them: past that the items that ended
/// are counted on one line.
fn render(rows: &[Row], cols: usize, max: usize) -> Vec<String> {
    let shown: Vec<&Row> = if rows.len() <= max {
        rows.iter().collect()
    } else {
        rows.iter()
            .filter(|r| r.ended.is_none())
            .take(max - 1)
            .collect()
    };
    let cells: Vec<Vec<String>> = shown
        .iter()
        .map(|r| {
            let (state, elapsed) = match r.ended {
                Some((status, took)) => (status_word(status), took),
                None => (
                    r.state.map_or("starting", State::label),
                    r.started.elapsed(),
                ),
            };
            vec![
                r.label.clone(),
                r.branch.clone(),
                if r.iteration.1 == 0 {
                    "-".into()
                } else {
                    format!("{}/{}", r.iteration.0, r.iteration.1)
                },
                state.to_string(),
                table::elapsed(elapsed.as_secs()),
                format!("{} tok", table::tokens(r.tokens)),
                r.activity.clone(),
            ]
        })
        .collect();
    let mut lines: Vec<String> = table::columns(&cells)
        .into_iter()
        .map(|l| l.chars().take(cols.saturating_sub(1)).collect())
        .collect();
    if shown.len() < rows.len() {
        let done = rows.iter().filter(|r| r.ended.is_some()).count();
        let hidden = rows.len() - shown.len();
        lines.push(format!("… {hidden} more ({done} ended)"));
    }
    lines
}

/// Stderr's (columns, rows).
fn terminal_size() -> (usize, usize) {
    let (rows, cols) = console::Term::stderr().size();
    (cols as usize, rows as usize)
}
