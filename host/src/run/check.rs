//! The check: a command the user gives (`--check "cargo test"`) run in the
//! sandbox after the agent's last iteration, before teardown, on the files
//! as the agent left them. A run whose check fails does not land: its
//! commits stay on its branch. Best-of-N judges its candidates by it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::abort::AbortHandle;
use super::lanes::{self, Outcome};
use super::log::RunLog;
use crate::error::{Error, Result};
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};

/// How long a check may run when the user sets no limit.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// The last lines of a check's output kept in its result.
const TAIL_LINES: usize = 40;
/// ... and at most this many bytes of them.
const TAIL_BYTES: usize = 8 * 1024;

/// A command that says whether the agent's work is good: exit 0 passes.
#[derive(Clone, Debug)]
pub struct Check {
    /// Run with `sh -c` in the sandbox, in the worktree.
    pub command: String,
    pub timeout: Duration,
}

impl Check {
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            timeout: DEFAULT_CHECK_TIMEOUT,
        }
    }

    /// Refuses a blank command.
    pub fn validate(&self) -> Result<()> {
        if self.command.trim().is_empty() {
            return Err(Error::input("the check command is empty"));
        }
        if self.timeout.is_zero() {
            return Err(Error::input(
                "the check's timeout must be more than 0 seconds",
            ));
        }
        Ok(())
    }
}

/// What the check said.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub command: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub passed: bool,
    /// The output's last lines, stdout and stderr as they arrived.
    pub tail: String,
    pub duration_ms: u64,
}

impl CheckResult {
    /// "exit 1", "timed out after 600 s": why it failed, for messages.
    pub fn verdict(&self) -> String {
        if self.timed_out {
            "timed out".to_string()
        } else if self.passed {
            "passed".to_string()
        } else {
            format!("failed (exit {})", self.exit_code)
        }
    }
}

/// Run `check` in `sandbox`; an abort kills it and is the error.
pub(super) async fn run(
    sandbox: &mut Sandbox,
    check: &Check,
    abort: &AbortHandle,
    log: &RunLog,
) -> Result<CheckResult> {
    log.headline(&format!("check: {}", check.command));
    let request = ExecRequest {
        command: Command::Shell(check.command.clone()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(check.timeout.as_millis() as u64),
    };
    let lines = Arc::new(Mutex::new(Tail::default()));
    let (sink_lines, sink_log) = (lines.clone(), log.clone());
    let sink: lanes::LineSink = Arc::new(move |_, line| {
        sink_log.line(&format!("check: {}", line.text));
        sink_lines.lock().unwrap().push(&line.text);
    });
    let started = Instant::now();
    let out = match lanes::exec_all(sandbox, vec![request], abort, sink).await? {
        Outcome::Done(mut outs) => outs.remove(0),
        Outcome::Failed(_, out) => out,
    };
    let passed = out.exit_code == 0 && !out.timed_out;
    let result = CheckResult {
        command: check.command.clone(),
        exit_code: out.exit_code,
        timed_out: out.timed_out,
        passed,
        tail: lines.lock().unwrap().text(),
        duration_ms: started.elapsed().as_millis() as u64,
    };
    log.status(&format!("check {}", result.verdict()));
    Ok(result)
}

/// The last [`TAIL_LINES`] lines, at most [`TAIL_BYTES`] of them.
#[derive(Default)]
struct Tail(std::collections::VecDeque<String>);

impl Tail {
    fn push(&mut self, line: &str) {
        self.0.push_back(line.to_string());
        while self.0.len() > TAIL_LINES {
            self.0.pop_front();
        }
        while self.0.len() > 1 && self.0.iter().map(|l| l.len() + 1).sum::<usize>() > TAIL_BYTES {
            self.0.pop_front();
        }
    }

    fn text(&self) -> String {
        let mut text = self.0.iter().cloned().collect::<Vec<_>>().join("\n");
        if text.len() > TAIL_BYTES {
            let mut cut = text.len() - TAIL_BYTES;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text.drain(..cut);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bytes() {
        let mut tail = Tail::default();
        for i in 0..100 {
            tail.push(&format!("line {i}"));
        }
        let text = tail.text();
        assert!(
            text.starts_with("line 60\n") && text.ends_with("line 99"),
            "{text}"
        );
        let mut tail = Tail::default();
        tail.push("short");
        tail.push(&"é".repeat(TAIL_BYTES));
        let text = tail.text();
        assert!(text.len() <= TAIL_BYTES && text.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_blank_check_is_refused() {
        assert!(Check::new(" ").validate().is_err());
        assert!(Check::new("true").validate().is_ok());
    }
}
