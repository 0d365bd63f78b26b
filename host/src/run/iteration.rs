//! The iteration loop, behind the `AgentInvoker` seam so it can be tested
//! with scripted fakes and no process.

use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::Result;
use crate::plugin::agent::Usage;

/// Token usage of one iteration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationUsage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

impl IterationUsage {
    /// Every token the agent reported, cached ones included.
    pub fn total(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
    }
}

impl From<Usage> for IterationUsage {
    fn from(u: Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

/// What one iteration left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Where the session was captured on the host; unset when capture was
    /// off, the agent keeps no session files, or the capture failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<IterationUsage>,
}

/// One agent invocation as the loop sees it.
#[derive(Clone, Debug, Default)]
pub struct Invocation {
    pub session_id: Option<String>,
    pub session_file_path: Option<String>,
    pub usage: Option<IterationUsage>,
    /// The agent's text and final result text, in arrival order.
    pub texts: Vec<String>,
}

/// Runs the agent once. The production invoker execs the agent in a
/// sandbox; tests substitute scripted fakes.
pub trait AgentInvoker {
    fn invoke(
        &mut self,
        iteration: u32,
        prompt: &str,
    ) -> impl Future<Output = Result<Invocation>> + Send;
}

/// An agent stream event, as a stream-event callback receives it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum StreamEvent {
    Text {
        iteration: u32,
        timestamp: u64,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCall {
        iteration: u32,
        timestamp: u64,
        name: String,
        input: String,
    },
}

pub type StreamEventCallback = Arc<dyn Fn(&StreamEvent) + Send + Sync>;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the loop produced.
#[derive(Clone, Debug, Default)]
pub struct LoopOutcome {
    pub iterations: Vec<IterationResult>,
    pub completion_signal: Option<String>,
    pub stdout: String,
}

/// Invoke the agent up to `max_iterations` times, stopping after the first
/// iteration whose output contains one of `signals` (a substring match; the
/// first text to contain one wins, signals tried in order).
pub async fn run_iterations<I: AgentInvoker>(
    invoker: &mut I,
    prompt: &str,
    max_iterations: u32,
    signals: &[String],
) -> Result<LoopOutcome> {
    let mut outcome = LoopOutcome::default();
    for iteration in 1..=max_iterations {
        let inv = invoker.invoke(iteration, prompt).await?;
        outcome.iterations.push(IterationResult {
            session_id: inv.session_id,
            session_file_path: inv.session_file_path,
            usage: inv.usage,
        });
        for text in &inv.texts {
            outcome.stdout.push_str(text);
            outcome.stdout.push('\n');
            if outcome.completion_signal.is_none() {
                outcome.completion_signal =
                    signals.iter().find(|s| text.contains(s.as_str())).cloned();
            }
        }
        if outcome.completion_signal.is_some() {
            break;
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Replays scripted texts, one list per iteration.
    struct Scripted {
        script: Vec<Result<Vec<&'static str>, &'static str>>,
        prompts: Vec<(u32, String)>,
    }

    impl AgentInvoker for Scripted {
        async fn invoke(&mut self, iteration: u32, prompt: &str) -> Result<Invocation> {
            self.prompts.push((iteration, prompt.to_string()));
            match self.script.remove(0) {
                Ok(texts) => Ok(Invocation {
                    session_id: Some(format!("s{iteration}")),
                    texts: texts.into_iter().map(String::from).collect(),
                    ..Default::default()
                }),
                Err(msg) => Err(Error::Agent(msg.into())),
            }
        }
    }

    fn signals(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn stops_at_the_first_iteration_with_a_signal() {
        let mut fake = Scripted {
            script: vec![
                Ok(vec!["working"]),
                Ok(vec!["done <promise>COMPLETE</promise>"]),
                Ok(vec!["never"]),
            ],
            prompts: vec![],
        };
        let out = run_iterations(
            &mut fake,
            "p",
            3,
            &signals(&["<promise>COMPLETE</promise>"]),
        )
        .await
        .unwrap();
        assert_eq!(out.iterations.len(), 2);
        assert_eq!(
            out.completion_signal.as_deref(),
            Some("<promise>COMPLETE</promise>")
        );
        assert_eq!(
            fake.prompts,
            vec![(1, "p".to_string()), (2, "p".to_string())]
        );
        assert_eq!(out.iterations[1].session_id.as_deref(), Some("s2"));
    }

    #[tokio::test]
    async fn runs_max_iterations_without_a_signal() {
        let mut fake = Scripted {
            script: vec![Ok(vec!["a"]), Ok(vec!["b"])],
            prompts: vec![],
        };
        let out = run_iterations(&mut fake, "p", 2, &signals(&["DONE"]))
            .await
            .unwrap();
        assert_eq!(out.iterations.len(), 2);
        assert_eq!(out.completion_signal, None);
        assert_eq!(out.stdout, "a\nb\n");
    }

    #[tokio::test]
    async fn first_matching_text_wins() {
        let mut fake = Scripted {
            script: vec![Ok(vec!["x ABORTED", "y DONE"])],
            prompts: vec![],
        };
        let out = run_iterations(&mut fake, "p", 5, &signals(&["DONE", "ABORTED"]))
            .await
            .unwrap();
        assert_eq!(out.completion_signal.as_deref(), Some("ABORTED"));
    }

    #[tokio::test]
    async fn an_agent_failure_fails_the_loop() {
        let mut fake = Scripted {
            script: vec![Ok(vec!["a"]), Err("rate limited")],
            prompts: vec![],
        };
        let err = run_iterations(&mut fake, "p", 3, &signals(&["DONE"]))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Agent(m) if m == "rate limited"));
    }
}
