//! The production `AgentInvoker`: the agent provider builds the command, the
//! sandbox execs it streaming lines, and the agent's parser turns the lines
//! into events while the command still runs.

use std::time::Duration;

use tokio::sync::mpsc;

use std::sync::Arc;

use super::abort::AbortHandle;
use super::agent_files;
use super::capture::{self, HostSessions};
use super::iteration::{AgentInvoker, Invocation, StreamEvent, StreamEventCallback, now_ms};
use super::lanes::{self, Outcome};
use super::log::RunLog;
use super::registry::{Live, State};
use super::{plan, sync};
use crate::capability::gateway::ApiUrls;
use crate::capability::output::OutputStream;
use crate::error::{Error, Result};
use crate::plugin::agent::{AgentEvent, AgentProvider, CommandRequest};
use crate::plugin::api::AgentCommand;
use crate::plugin::api::AgentFile;
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox, env_vars};
use crate::prompt::{self, Segment, Template};
use crate::secrets;
use crate::worktree::{AgentGitDir, Worktree};

/// Most stdout lines handed to the agent's parser in one call.
const MAX_BATCH: usize = 256;

pub struct SandboxInvoker<'a> {
    pub agent: &'a mut AgentProvider,
    pub sandbox: &'a mut Sandbox,
    pub model: Option<String>,
    pub options: Vec<(String, String)>,
    /// The run's env for the agent's command (the env layers).
    pub env: Vec<(String, String)>,
    /// Isolated providers: the host worktree and the last commit synced out.
    pub sync: Option<(&'a Worktree, String)>,
    /// Container providers on host paths: where the agent commits.
    pub agent_git: Option<&'a mut AgentGitDir>,
    pub on_event: Option<StreamEventCallback>,
    pub abort: AbortHandle,
    /// Stop the agent after this long without a line of output.
    pub idle_timeout: Duration,
    /// A prompt template with shell expressions, expanded in the sandbox
    /// before every iteration (they may see the previous iteration's work).
    pub template: Option<Template>,
    /// The command the up-front check built, and for what request: the
    /// first iteration that asks for the same uses it.
    pub first_command: Option<(CommandRequest, AgentCommand)>,
    /// Resume this agent session in iteration 1 (already transferred in).
    pub resume_session: Option<String>,
    /// Capture each iteration's session file to the host, when set.
    pub capture: Option<HostSessions>,
    /// The sandbox user's home, once known.
    pub sandbox_home: Option<String>,
    pub log: RunLog,
    /// The agent's config files as last written into the sandbox.
    pub written_files: Vec<AgentFile>,
    /// The run's record in the live-runs registry.
    pub(crate) live: Option<Live>,
    /// The credential gateway's URLs: an agent's error names the API the
    /// user set, not the gateway the agent used.
    pub api_urls: ApiUrls,
}

impl SandboxInvoker<'_> {
    /// Prompt expansion before an iteration; an empty result fails the run.
    async fn expand(&mut self, template: &Template) -> Result<String> {
        let prompt = expand(self.sandbox, template, &self.env, &self.abort).await?;
        if prompt.trim().is_empty() {
            return Err(Error::Input(
                "the prompt is empty after prompt expansion".into(),
            ));
        }
        Ok(prompt)
    }

    /// Best-effort session capture: a failure warns and leaves the
    /// iteration without `sessionFilePath`; the run goes on.
    async fn capture(&mut self, iteration: u32, inv: &mut Invocation) {
        let (Some(host), Some(session)) = (self.capture.clone(), inv.session_id.clone()) else {
            return;
        };
        if !self.agent.info().session_files {
            return;
        }
        let captured = async {
            let home = match &self.sandbox_home {
                Some(home) => home.clone(),
                None => {
                    let home = capture::sandbox_home(self.sandbox).await?;
                    self.sandbox_home = Some(home.clone());
                    home
                }
            };
            capture::capture(self.agent, self.sandbox, &home, &host, &session).await
        };
        match captured.await {
            Ok(Some((path, content))) => {
                // The stream's total is the better figure; the session's
                // last turn stands in when the stream had none.
                if inv.usage.is_none()
                    && let Ok(Some(usage)) = self.agent.usage_from_session(&content).await
                {
                    inv.usage = Some(usage.into());
                }
                inv.session_file_path = Some(path.display().to_string());
            }
            Ok(None) => {}
            Err(e) => {
                let msg = format!(
                    "could not capture the session of iteration {iteration} ({session}): {e}"
                );
                tracing::warn!("{msg}");
                self.log.line(&format!("warning: {msg}"));
            }
        }
    }
}

/// Prompt expansion: every shell expression of the template runs in the
/// sandbox at once (one lane each), each replaced by its stdout. Any failure
/// fails the run before the agent starts.
pub(super) async fn expand(
    sandbox: &mut Sandbox,
    template: &Template,
    env: &[(String, String)],
    abort: &AbortHandle,
) -> Result<String> {
    let commands: Vec<&String> = template
        .segments
        .iter()
        .filter_map(|s| match s {
            Segment::Shell(cmd) => Some(cmd),
            Segment::Text(_) => None,
        })
        .collect();
    let requests = commands
        .iter()
        .map(|cmd| ExecRequest {
            command: Command::Shell((*cmd).clone()),
            cwd: None,
            env: env_vars(env),
            stdin: None,
            sudo: false,
            timeout_ms: Some(EXPANSION_TIMEOUT_MS),
        })
        .collect();
    let outputs = match lanes::exec_all(sandbox, requests, abort, Arc::new(|_, _| {})).await? {
        Outcome::Done(outputs) => outputs,
        Outcome::Failed(i, out) => {
            let why = if out.timed_out {
                "timed out".to_string()
            } else {
                format!("exited with code {}", out.exit_code)
            };
            return Err(Error::Input(format!(
                "shell expression !`{}` in the prompt template {why}: {}",
                commands[i],
                last_lines(&out.stderr, 3)
            )));
        }
    };
    let outputs: Vec<String> = outputs.into_iter().map(|o| o.stdout).collect();
    Ok(prompt::assemble(template, &outputs))
}

/// How long one shell expression may run.
const EXPANSION_TIMEOUT_MS: u64 = 60_000;

/// Everything the parser said during one exec.
#[derive(Default)]
struct Parsed {
    inv: Invocation,
    failed_result: bool,
    /// The errors since the agent last made progress: a retry notice the
    /// agent recovered from does not fail the iteration.
    errors: Vec<String>,
}

/// What an event says of the agent's progress: `Some(true)` it is working
/// (text, a tool call, a result that is not an error), `Some(false)` it
/// reported an error, `None` neither (a session id, usage, a failed result,
/// which fails the iteration on its own).
fn progress(event: &AgentEvent) -> Option<bool> {
    match event {
        AgentEvent::Text(_) | AgentEvent::ToolCall(_) => Some(true),
        AgentEvent::Result(r) if !r.is_error => Some(true),
        AgentEvent::Error(_) => Some(false),
        _ => None,
    }
}

fn emit(on_event: &Option<StreamEventCallback>, event: StreamEvent) {
    if let Some(cb) = on_event {
        // A broken forwarder must not kill the run.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&event)));
    }
}

fn handle(
    on_event: &Option<StreamEventCallback>,
    iteration: u32,
    event: AgentEvent,
    p: &mut Parsed,
) {
    if progress(&event) == Some(true) {
        p.errors.clear();
    }
    match event {
        AgentEvent::Text(text) => {
            emit(
                on_event,
                StreamEvent::Text {
                    iteration,
                    timestamp: now_ms(),
                    text: text.clone(),
                },
            );
            p.inv.texts.push(text);
        }
        AgentEvent::ToolCall(call) => emit(
            on_event,
            StreamEvent::ToolCall {
                iteration,
                timestamp: now_ms(),
                name: call.name,
                input: call.input,
            },
        ),
        AgentEvent::SessionId(id) => p.inv.session_id = Some(id),
        AgentEvent::Usage(usage) => p.inv.usage = Some(usage.into()),
        AgentEvent::Result(result) => {
            p.failed_result |= result.is_error;
            // Agents repeat their last message as the result: keep it once.
            if !result.text.is_empty() && p.inv.texts.last() != Some(&result.text) {
                p.inv.texts.push(result.text);
            }
        }
        AgentEvent::Error(message) => p.errors.push(message),
    }
}

impl AgentInvoker for SandboxInvoker<'_> {
    async fn invoke(&mut self, iteration: u32, prompt: &str) -> Result<Invocation> {
        let prompt = match self.template.take() {
            Some(template) => {
                let expanded = self.expand(&template).await;
                self.template = Some(template);
                expanded?
            }
            None => prompt.to_string(),
        };
        let request = CommandRequest {
            prompt,
            model: self.model.clone(),
            options: self.options.clone(),
            resume_session: if iteration == 1 {
                self.resume_session.clone()
            } else {
                None
            },
            skip_permissions: true,
            env: agent_files::declared_values(&plan::agent_keys(self.agent), &self.env),
        };
        self.log.headline(&format!("iteration {iteration}"));
        if let Some(live) = &self.live {
            live.set_iteration(iteration);
        }
        let command = match self.first_command.take() {
            Some((built_for, command)) if built_for == request => command,
            _ => self.agent.build_print_command(&request).await?,
        };
        if command.files != self.written_files {
            let name = self.agent.name().to_string();
            agent_files::write(self.sandbox, &name, &command.files, &self.env, &self.abort).await?;
            self.written_files = command.files.clone();
        }
        let program = command.argv.first().cloned().unwrap_or_default();
        self.log
            .status(&format!("iteration {iteration}: `{program}` is working"));
        // Capture will need the sandbox user's home: the agent's own exec
        // says it (a bind-mount sandbox's status is read on the host, so no
        // exec has yet), sparing a round trip into the sandbox.
        let ask_home = self.capture.is_some()
            && self.sandbox_home.is_none()
            && self.agent.info().session_files;
        let argv = if ask_home {
            saying_home(command.argv)
        } else {
            command.argv
        };
        let exec = ExecRequest {
            command: Command::Argv(argv),
            cwd: None,
            env: env_vars(&self.env).into_iter().chain(command.env).collect(),
            stdin: command.stdin,
            sudo: false,
            timeout_ms: None,
        };
        let parser = self.agent.new_parser(&request).await?;
        let canceller = self.sandbox.canceller();
        let exec_start = std::time::Instant::now();
        let mut parsed = Parsed::default();
        let mut stalled = None;
        // The exec and the parser run side by side; the block ends their borrows.
        let (exec_result, parser_failure) = {
            // Stdout lines go to the parser; stderr lines (None) are only
            // drained: what counts as progress is a parsed event.
            let (tx, mut rx) = mpsc::unbounded_channel::<Option<String>>();
            let run = self.sandbox.exec(exec, move |line| {
                let stdout = line.stream == OutputStream::Stdout;
                // A secret the agent prints is masked before anything sees it.
                let _ = tx.send(stdout.then(|| secrets::mask(&line.text).into_owned()));
            });
            let (agent, on_event, parsed) = (&mut *self.agent, &self.on_event, &mut parsed);
            let (parser, stalled) = (&parser, &mut stalled);
            let mut watch = Watch::new(self.idle_timeout);
            let stall_canceller = canceller.clone();
            let consume = async move {
                let mut failure = None;
                loop {
                    let next = if stalled.is_some() {
                        rx.recv().await
                    } else {
                        match tokio::time::timeout_at(watch.deadline(), rx.recv()).await {
                            Ok(next) => next,
                            Err(_) => {
                                // No progress too long: stop the agent, keep draining.
                                *stalled = Some(watch.stall());
                                stall_canceller.kill_all();
                                continue;
                            }
                        }
                    };
                    let Some(line) = next else { break };
                    let Some(line) = line else { continue };
                    if failure.is_some() {
                        continue; // keep draining so the exec is never blocked
                    }
                    // Lines already queued go to the parser in one call.
                    let mut batch = vec![line];
                    while batch.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(Some(line)) => batch.push(line),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                    match agent.push_lines(parser, &batch).await {
                        Ok(events) => events.into_iter().for_each(|e| {
                            watch.saw(&e);
                            handle(on_event, iteration, e, parsed)
                        }),
                        Err(e) => failure = Some(e),
                    }
                }
                failure
            };
            let work = async { tokio::join!(run, consume) };
            tokio::pin!(work);
            tokio::select! {
                r = &mut work => r,
                () = self.abort.aborted() => {
                    canceller.kill_all();
                    // The exec returns within its grace after a kill, given
                    // up on if it must be (`Sandbox::exec`).
                    if let (Err(e), _) = work.await {
                        self.log.line(&format!("after the abort: {e}"));
                    }
                    return Err(Error::Aborted(self.abort.reason()));
                }
            }
        };
        self.log
            .timings()
            .record(format!("iteration {iteration} exec"), exec_start.elapsed());
        let mut output = exec_result?;
        if ask_home {
            self.sandbox_home = take_home(&mut output.stderr);
        }
        if let Some(e) = parser_failure {
            return Err(e);
        }
        for event in self.agent.finish(parser).await? {
            handle(&self.on_event, iteration, event, &mut parsed);
        }
        // Bring commits back before judging the iteration: a failed
        // iteration's commits are kept on the branch too.
        if let Some(usage) = &parsed.inv.usage {
            self.log.usage(iteration, usage);
            if let Some(live) = &self.live {
                live.add_tokens(usage.total());
            }
        }
        if let Some((worktree, synced)) = &mut self.sync {
            if let Some(live) = &self.live {
                live.set_state(State::Syncing);
            }
            let start = std::time::Instant::now();
            let (head, bytes) = sync::sync_out(self.sandbox, worktree, synced).await?;
            *synced = head;
            self.log.timings().record_bytes(
                format!("iteration {iteration} sync out"),
                start.elapsed(),
                bytes,
            );
        }
        if let Some(dir) = self.agent_git.as_deref_mut() {
            let start = std::time::Instant::now();
            if dir.take_back()?.is_some() {
                self.log
                    .timings()
                    .record(format!("iteration {iteration} take back"), start.elapsed());
            }
        }
        let name = self.agent.name().to_string();
        if let Some(stall) = stalled {
            let last_error = parsed
                .errors
                .last()
                .map(|e| self.api_urls.as_the_user_set_them(e));
            return Err(Error::Agent(stall.message(
                &name,
                iteration,
                last_error.as_deref(),
            )));
        }
        if output.timed_out {
            return Err(Error::Agent(format!(
                "agent `{name}` timed out in iteration {iteration}"
            )));
        }
        if output.exit_code != 0 || parsed.failed_result || !parsed.errors.is_empty() {
            let mut why = parsed.errors;
            if output.exit_code != 0 || why.is_empty() {
                why.push(stderr_summary(&output.stderr));
            }
            let why = self.api_urls.as_the_user_set_them(&why.join("; "));
            return Err(Error::Agent(format!(
                "agent `{name}` failed in iteration {iteration} (`{program}` exited with code {}): {why}",
                output.exit_code
            )));
        }
        let mut inv = parsed.inv;
        let capturing = std::time::Instant::now();
        self.capture(iteration, &mut inv).await;
        self.log.timings().record(
            format!("iteration {iteration} session capture"),
            capturing.elapsed(),
        );
        Ok(inv)
    }
}

/// How long an agent may keep reporting errors (a model API it cannot
/// reach, a retry loop) with no progress between them before it is stopped.
const FAILING_FOR: Duration = Duration::from_secs(30);

/// When an agent stops making progress ([`progress`]); a line with no
/// event and stderr are not progress either.
struct Watch {
    idle: Duration,
    last_progress: tokio::time::Instant,
    /// The first error since the last progress.
    failing_since: Option<tokio::time::Instant>,
}

/// Why an agent was stopped before it exited.
#[derive(Debug, PartialEq, Eq)]
enum Stall {
    /// No progress for the idle timeout.
    Idle(Duration),
    /// Errors and no progress for this long.
    Failing(Duration),
}

impl Watch {
    fn new(idle: Duration) -> Self {
        Self {
            idle,
            last_progress: tokio::time::Instant::now(),
            failing_since: None,
        }
    }

    fn saw(&mut self, event: &AgentEvent) {
        let now = tokio::time::Instant::now();
        match progress(event) {
            Some(true) => {
                self.last_progress = now;
                self.failing_since = None;
            }
            Some(false) => {
                self.failing_since.get_or_insert(now);
            }
            None => {}
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        let idle = self.last_progress + self.idle;
        match self.failing_since {
            Some(since) => idle.min(since + FAILING_FOR),
            None => idle,
        }
    }

    fn stall(&self) -> Stall {
        match self.failing_since {
            Some(since) if since + FAILING_FOR < self.last_progress + self.idle => {
                Stall::Failing(FAILING_FOR)
            }
            _ => Stall::Idle(self.idle),
        }
    }
}

impl Stall {
    fn message(&self, agent: &str, iteration: u32, last_error: Option<&str>) -> String {
        let last = last_error.map_or(String::new(), |e| format!(": {e}"));
        match self {
            Stall::Idle(idle) => format!(
                "agent `{agent}` made no progress for {} s in iteration {iteration} and was stopped (idle timeout; raise it with --idle-timeout){last}",
                idle.as_secs()
            ),
            Stall::Failing(for_) => format!(
                "agent `{agent}` kept reporting errors for {} s with no progress in iteration {iteration} and was stopped{last}",
                for_.as_secs()
            ),
        }
    }
}

/// The stderr of a failed agent for its error: every line that names an
/// error (a CLI often prints the cause first and a stack or usage after),
/// then the last lines, each once.
fn stderr_summary(stderr: &str) -> String {
    let stderr = &*secrets::mask(stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail_from = lines.len().saturating_sub(5);
    let causes = lines[..tail_from].iter().filter(|l| {
        let l = l.to_ascii_lowercase();
        [
            "error",
            "fail",
            "unauthorized",
            "invalid",
            "denied",
            "refused",
        ]
        .iter()
        .any(|w| l.contains(w))
    });
    let summary: Vec<&str> = causes
        .take(5)
        .chain(&lines[tail_from..])
        .map(|l| l.trim())
        .collect();
    if summary.is_empty() {
        "no error output".into()
    } else {
        summary.join(" | ")
    }
}

/// What the line [`saying_home`] adds to stderr starts with.
const HOME_LINE: &str = "sanddune-home=";

/// `argv` run by `sh`, which first writes `$HOME` on a line of stderr, then
/// execs it: the same process, arguments, stdin and exit code.
fn saying_home(argv: Vec<String>) -> Vec<String> {
    let script = format!("printf '{HOME_LINE}%s\\n' \"$HOME\" >&2; exec \"$@\"");
    ["sh", "-c", &script, "sh"]
        .into_iter()
        .map(String::from)
        .chain(argv)
        .collect()
}

/// The home [`saying_home`] wrote, taken out of `stderr` (none when unset,
/// or when the provider lost the line: capture then asks with an exec).
fn take_home(stderr: &mut String) -> Option<String> {
    let start = if stderr.starts_with(HOME_LINE) {
        0
    } else {
        stderr.find(&format!("\n{HOME_LINE}"))? + 1
    };
    let end = stderr[start..]
        .find('\n')
        .map_or(stderr.len(), |n| start + n + 1);
    let home = stderr[start + HOME_LINE.len()..end]
        .trim_end_matches('\n')
        .to_string();
    stderr.replace_range(start..end, "");
    Some(home).filter(|h| !h.is_empty())
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(n)..].join(" | ");
    if tail.is_empty() {
        "no error output".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> AgentEvent {
        AgentEvent::Text("working".into())
    }

    fn error() -> AgentEvent {
        AgentEvent::Error("Reconnecting... 1/5 (http://127.0.0.1:9/v1/responses)".into())
    }

    #[tokio::test(start_paused = true)]
    async fn errors_without_progress_stop_the_agent_long_before_the_idle_timeout() {
        let idle = Duration::from_secs(600);
        let mut watch = Watch::new(idle);
        let start = tokio::time::Instant::now();
        assert_eq!(watch.deadline(), start + idle);
        tokio::time::advance(Duration::from_secs(5)).await;
        watch.saw(&error());
        tokio::time::advance(Duration::from_secs(5)).await;
        // A second error does not move the clock: the streak began at the first.
        watch.saw(&error());
        assert_eq!(
            watch.deadline(),
            start + Duration::from_secs(5) + FAILING_FOR
        );
        assert_eq!(watch.stall(), Stall::Failing(FAILING_FOR));
    }

    #[tokio::test(start_paused = true)]
    async fn progress_after_an_error_ends_the_streak_and_restarts_the_idle_clock() {
        let idle = Duration::from_secs(600);
        let mut watch = Watch::new(idle);
        watch.saw(&error());
        tokio::time::advance(Duration::from_secs(10)).await;
        watch.saw(&text());
        assert_eq!(watch.deadline(), tokio::time::Instant::now() + idle);
        assert_eq!(watch.stall(), Stall::Idle(idle));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_timeout_shorter_than_the_streak_limit_wins() {
        let idle = Duration::from_secs(5);
        let mut watch = Watch::new(idle);
        watch.saw(&error());
        assert_eq!(watch.stall(), Stall::Idle(idle));
    }

    #[test]
    fn a_retry_notice_the_agent_recovered_from_does_not_fail_the_iteration() {
        let mut p = Parsed::default();
        for e in [error(), AgentEvent::SessionId("s".into()), text()] {
            handle(&None, 1, e, &mut p);
        }
        assert!(p.errors.is_empty());
        // An error after the last progress stands.
        handle(&None, 1, error(), &mut p);
        handle(&None, 1, AgentEvent::Usage(Default::default()), &mut p);
        assert_eq!(p.errors.len(), 1);
    }

    #[test]
    fn the_stall_message_names_the_last_error() {
        let m = Stall::Failing(FAILING_FOR).message("codex", 2, Some("could not reach http://x"));
        assert!(
            m.contains("agent `codex` kept reporting errors for 30 s"),
            "{m}"
        );
        assert!(m.contains("iteration 2"), "{m}");
        assert!(m.ends_with(": could not reach http://x"), "{m}");
        let m = Stall::Idle(Duration::from_secs(7)).message("pi", 1, None);
        assert!(m.contains("no progress for 7 s"), "{m}");
        assert!(m.contains("--idle-timeout"), "{m}");
    }

    #[test]
    fn stderr_keeps_the_cause_printed_before_a_long_tail() {
        let stderr = "Error: the token could not be validated at http://127.0.0.1:9\n\
                      at a\nat b\nat c\nat d\nat e\nat f\n";
        let s = stderr_summary(stderr);
        assert!(
            s.starts_with("Error: the token could not be validated at http://127.0.0.1:9 | "),
            "{s}"
        );
        assert!(s.ends_with("at b | at c | at d | at e | at f"), "{s}");
        assert_eq!(stderr_summary("\n\n"), "no error output");
    }
}
