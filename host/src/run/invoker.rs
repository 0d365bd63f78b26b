//! The production `AgentInvoker`: the agent provider builds the command, the
//! sandbox execs it streaming lines, and the agent's parser turns the lines
//! into events while the command still runs.

use std::time::Duration;

use tokio::sync::mpsc;

use super::abort::AbortHandle;
use super::iteration::{AgentInvoker, Invocation, StreamEvent, StreamEventCallback, now_ms};
use super::sync;
use crate::error::{Error, Result};
use crate::plugin::agent::{AgentEvent, AgentProvider, CommandRequest};
use crate::plugin::bindings::types::OutputStream;
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};
use crate::prompt::{self, Segment, Template};
use crate::worktree::Worktree;

/// Most stdout lines handed to the agent's parser in one call.
const MAX_BATCH: usize = 256;

/// How long a provider gets to return after its processes were killed.
const RETURN_AFTER_KILL: Duration = Duration::from_secs(10);

pub struct SandboxInvoker<'a> {
    pub agent: &'a mut AgentProvider,
    pub sandbox: &'a mut Sandbox,
    pub model: Option<String>,
    pub options: Vec<(String, String)>,
    /// Isolated providers: the host worktree and the last commit synced out.
    pub sync: Option<(&'a Worktree, String)>,
    pub on_event: Option<StreamEventCallback>,
    pub abort: AbortHandle,
    /// Stop the agent after this long without a line of output.
    pub idle_timeout: Duration,
    /// A prompt template with shell expressions, expanded in the sandbox
    /// before every iteration (they may see the previous iteration's work).
    pub template: Option<Template>,
}

impl SandboxInvoker<'_> {
    /// Prompt expansion: run each shell expression in the sandbox and put
    /// its stdout in its place. Any failure fails the run before the agent
    /// starts. The expressions run one after another for now: one plugin
    /// instance serves one call at a time.
    async fn expand(&mut self, template: &Template) -> Result<String> {
        let mut outputs = Vec::new();
        for segment in &template.segments {
            let Segment::Shell(cmd) = segment else {
                continue;
            };
            let request = ExecRequest {
                command: Command::Shell(cmd.clone()),
                cwd: None,
                env: vec![],
                stdin: None,
                sudo: false,
                timeout_ms: Some(EXPANSION_TIMEOUT_MS),
            };
            let out = self.sandbox.exec(request, |_| {}).await?;
            if out.exit_code != 0 || out.timed_out {
                let why = if out.timed_out {
                    "timed out".to_string()
                } else {
                    format!("exited with code {}", out.exit_code)
                };
                return Err(Error::Input(format!(
                    "shell expression !`{cmd}` in the prompt template {why}: {}",
                    last_lines(&out.stderr, 3)
                )));
            }
            outputs.push(out.stdout);
        }
        let prompt = prompt::assemble(template, &outputs);
        if prompt.trim().is_empty() {
            return Err(Error::Input(
                "the prompt is empty after prompt expansion".into(),
            ));
        }
        Ok(prompt)
    }
}

/// How long one shell expression may run.
const EXPANSION_TIMEOUT_MS: u64 = 60_000;

/// Everything the parser said during one exec.
#[derive(Default)]
struct Parsed {
    inv: Invocation,
    failed_result: bool,
    errors: Vec<String>,
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
            resume_session: None,
            skip_permissions: true,
        };
        let command = self.agent.build_print_command(&request).await?;
        let program = command.argv.first().cloned().unwrap_or_default();
        let exec = ExecRequest {
            command: Command::Argv(command.argv),
            cwd: None,
            env: command.env,
            stdin: command.stdin,
            sudo: false,
            timeout_ms: None,
        };
        let parser = self.agent.new_parser().await?;
        let canceller = self.sandbox.canceller();
        let mut parsed = Parsed::default();
        let mut idled = false;
        // The exec and the parser run side by side; the block ends their borrows.
        let (exec_result, parser_failure) = {
            // Stdout lines go to the parser; stderr lines (None) only count
            // as signs of life for the idle timeout.
            let (tx, mut rx) = mpsc::unbounded_channel::<Option<String>>();
            let run = self.sandbox.exec(exec, move |line| {
                let stdout = line.stream == OutputStream::Stdout;
                let _ = tx.send(stdout.then(|| line.text.clone()));
            });
            let (agent, on_event, parsed) = (&mut *self.agent, &self.on_event, &mut parsed);
            let (parser, idle, idled) = (&parser, self.idle_timeout, &mut idled);
            let idle_canceller = canceller.clone();
            let consume = async move {
                let mut failure = None;
                loop {
                    let next = if *idled {
                        rx.recv().await
                    } else {
                        match tokio::time::timeout(idle, rx.recv()).await {
                            Ok(next) => next,
                            Err(_) => {
                                // Silent too long: stop the agent, keep draining.
                                *idled = true;
                                idle_canceller.kill_all();
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
                        Ok(events) => events
                            .into_iter()
                            .for_each(|e| handle(on_event, iteration, e, parsed)),
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
                    let _ = tokio::time::timeout(RETURN_AFTER_KILL, work).await;
                    return Err(Error::Aborted(self.abort.reason()));
                }
            }
        };
        let output = exec_result?;
        if let Some(e) = parser_failure {
            return Err(e);
        }
        for event in self.agent.finish(parser).await? {
            handle(&self.on_event, iteration, event, &mut parsed);
        }
        // Bring commits back before judging the iteration: a failed
        // iteration's commits are kept on the branch too.
        if let Some((worktree, synced)) = &mut self.sync {
            *synced = sync::sync_out(self.sandbox, worktree, synced).await?;
        }
        let name = self.agent.name().to_string();
        if idled {
            return Err(Error::Agent(format!(
                "agent `{name}` produced no output for {} s in iteration {iteration} and was stopped (idle timeout; raise it with --idle-timeout)",
                self.idle_timeout.as_secs()
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
                why.push(last_lines(&output.stderr, 5));
            }
            let why = why.join("; ");
            return Err(Error::Agent(format!(
                "agent `{name}` failed in iteration {iteration} (`{program}` exited with code {}): {why}",
                output.exit_code
            )));
        }
        Ok(parsed.inv)
    }
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
