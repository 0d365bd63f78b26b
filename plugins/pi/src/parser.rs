//! Parser for `pi -p --mode json` (one JSON object per stdout line). See
//! docs/reference/protocols.md, "pi".
//!
//! The first line is the session header (`type: "session"`, the only line
//! with the session id); then pi's agent events: `agent_start`, `turn_start`,
//! `message_start` / `message_update` / `message_end` (for user, assistant
//! and tool-result messages), `tool_execution_*`, `turn_end`, `agent_end`.
//! A failed model call is an assistant `message_end` with `stopReason:
//! "error"` and `errorMessage`, followed by `agent_end`; pi may then retry
//! (`auto_retry_start`, a new `agent_start` ... `agent_end`), so a failed
//! `agent_end` is held until the end of the stream.

use serde_json::Value;

pub use sanddune_agent_sdk::{Event, Request, Usage};

/// Reads pi's `usage` object of an assistant message: `input` (without
/// cached tokens), `output`, `cacheRead`, `cacheWrite`. Missing or
/// non-integer fields count as 0; None when `value` is not an object.
pub fn usage_from_json(value: &Value) -> Option<Usage> {
    let keys: [&[&str]; 4] = [&["input"], &["cacheWrite"], &["cacheRead"], &["output"]];
    Usage::from_keys(value, keys).map(|(usage, _)| usage)
}

pub const NO_AGENT_END: &str = "pi ended without agent_end";

#[derive(Debug, Default)]
pub struct Parser {
    session_reported: bool,
    /// `text_delta`s of the assistant message under way.
    deltas: String,
    /// Text of the last assistant message: the result text.
    last_text: String,
    /// Why the last assistant message failed (`stopReason` error/aborted).
    failure: Option<String>,
    /// Usage summed over assistant messages (one per model call).
    usage: Usage,
    /// An `agent_end` after a failure, reported at the end unless a retry
    /// succeeds first.
    pending_failure: Option<String>,
    /// A result was emitted for a successful `agent_end`.
    succeeded: bool,
    /// An `agent_error` / `error` line ended the run.
    errored: bool,
    /// The provider of the last assistant message (`anthropic`, ...).
    provider: String,
    /// (provider, base URL) the run set, which the provider wrote into
    /// models.json: pi's errors never say where it connected.
    base_urls: Vec<(&'static str, String)>,
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    /// An assistant message is complete: its text (one event per message,
    /// not per delta), its usage, and whether it failed.
    fn message_end(&mut self, message: Option<&Value>, events: &mut Vec<Event>) {
        if !is_assistant(message) {
            return;
        }
        let message = message.expect("checked by is_assistant");
        let deltas = std::mem::take(&mut self.deltas);
        // The finished message's text blocks are authoritative; the deltas
        // stand in when a message carries no content list.
        let text = match message.get("content").and_then(Value::as_array) {
            Some(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            None => deltas,
        };
        if !text.is_empty() {
            events.push(Event::Text(text.clone()));
        }
        self.last_text = text;
        if let Some(usage) = message.get("usage").and_then(usage_from_json) {
            self.usage.add(usage);
            events.push(Event::Usage(self.usage));
        }
        if let Some(provider) = message.get("provider").and_then(Value::as_str) {
            self.provider = provider.to_owned();
        }
        self.failure = match message.get("stopReason").and_then(Value::as_str) {
            Some(reason @ ("error" | "aborted")) => Some(
                message
                    .get("errorMessage")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map_or_else(|| format!("pi stopped: {reason}"), |m| self.explain(m)),
            ),
            _ => None,
        };
    }

    /// pi's error text with what to check: pi names neither the variable
    /// holding the key nor the URL it tried.
    fn explain(&self, error: &str) -> String {
        let provider = self.provider.as_str();
        let (key, url) = match provider {
            "anthropic" => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
            "openai" => ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
            _ => ("the provider's API key variable", "its base URL"),
        };
        if error.starts_with("401") || error.starts_with("403") {
            format!("pi: the model API refused the credentials: {error} (check {key})")
        } else if error.starts_with("Connection error") {
            let at = self
                .base_urls
                .iter()
                .find(|(p, _)| *p == provider)
                .map_or(String::new(), |(_, u)| format!(" at {u}"));
            format!(
                "pi could not reach the model API{at}: {error} (check {url}, which sanddune \
                 writes to providers.{provider}.baseUrl in ~/.pi/agent/models.json)"
            )
        } else {
            error.to_owned()
        }
    }
}

impl sanddune_agent_sdk::Parser for Parser {
    fn for_request(request: &Request) -> Self {
        let base_urls = [
            ("anthropic", "ANTHROPIC_BASE_URL"),
            ("openai", "OPENAI_BASE_URL"),
        ]
        .into_iter()
        .filter_map(|(p, key)| request.env_value(key).map(|u| (p, u.to_owned())))
        .collect();
        Parser {
            base_urls,
            ..Parser::default()
        }
    }

    /// Events for one stdout line. Anything that is not a JSON object, or is
    /// a type we do not use, yields nothing: stdout can carry stray output.
    fn push_line(&mut self, line: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            return events;
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("session") => {
                if !self.session_reported
                    && let Some(id) = obj.get("id").and_then(Value::as_str)
                    && !id.is_empty()
                {
                    self.session_reported = true;
                    events.push(Event::SessionId(id.to_owned()));
                }
            }
            // A (re)started run: an earlier failure is being retried.
            Some("agent_start") => self.pending_failure = None,
            Some("message_start") if is_assistant(obj.get("message")) => self.deltas.clear(),
            Some("message_update") => {
                let event = obj.get("assistantMessageEvent");
                if event.and_then(|e| e.get("type")).and_then(Value::as_str) == Some("text_delta")
                    && let Some(delta) = event.and_then(|e| e.get("delta")).and_then(Value::as_str)
                {
                    self.deltas.push_str(delta);
                }
            }
            Some("message_end") => self.message_end(obj.get("message"), &mut events),
            Some("tool_execution_start") => {
                let name = obj.get("toolName").and_then(Value::as_str).unwrap_or("");
                // Compact JSON text; missing args are an empty object.
                let input = obj
                    .get("args")
                    .map_or_else(|| "{}".to_owned(), Value::to_string);
                events.push(Event::ToolCall {
                    name: name.to_owned(),
                    input,
                });
            }
            Some("agent_end") => match self.failure.take() {
                Some(message) => self.pending_failure = Some(message),
                None => {
                    self.pending_failure = None;
                    self.succeeded = true;
                    events.push(Event::Result {
                        is_error: false,
                        text: self.last_text.clone(),
                    });
                }
            },
            // Each retry is an error (the host stops an agent whose
            // errors go on without progress), though a retry may succeed.
            Some("auto_retry_start") => {
                let num = |k: &str| obj.get(k).and_then(Value::as_u64);
                let error = obj
                    .get("errorMessage")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                let mut message = format!("{}; pi retries", self.explain(error));
                if let (Some(attempt), Some(max)) = (num("attempt"), num("maxAttempts")) {
                    message.push_str(&format!(" ({attempt} of {max})"));
                }
                if let Some(ms) = num("delayMs") {
                    message.push_str(&format!(" in {:.1} s", ms as f64 / 1000.0));
                }
                events.push(Event::Error(message));
            }
            // Retries exhausted: the last failure stands.
            Some("auto_retry_end") => {
                if obj.get("success").and_then(Value::as_bool) == Some(false)
                    && let Some(message) = obj
                        .get("finalError")
                        .and_then(Value::as_str)
                        .filter(|m| !m.is_empty())
                {
                    self.pending_failure = Some(self.explain(message));
                }
            }
            Some("agent_error" | "error") => {
                let message = error_message(&obj);
                self.errored = true;
                self.pending_failure = None;
                events.push(Event::Error(message.clone()));
                events.push(Event::Result {
                    is_error: true,
                    text: message,
                });
            }
            // turn_*, tool_execution_update/end, auto_compaction_*,
            // unknown types: nothing.
            _ => {}
        }
        events
    }

    /// Called at end of stdout: a failed run still pending is reported now;
    /// a stream without `agent_end` means the run did not complete.
    fn finish(&mut self) -> Vec<Event> {
        if let Some(message) = self.pending_failure.take() {
            return vec![
                Event::Error(message.clone()),
                Event::Result {
                    is_error: true,
                    text: message,
                },
            ];
        }
        if self.succeeded || self.errored {
            Vec::new()
        } else {
            vec![Event::Error(NO_AGENT_END.to_owned())]
        }
    }
}

fn is_assistant(message: Option<&Value>) -> bool {
    message.and_then(|m| m.get("role")).and_then(Value::as_str) == Some("assistant")
}

/// The message of an `agent_error` / `error` line, whichever way it is put.
fn error_message(obj: &serde_json::Map<String, Value>) -> String {
    let error = obj.get("error");
    [
        error.and_then(Value::as_str),
        error.and_then(|e| e.get("message")).and_then(Value::as_str),
        error
            .and_then(|e| e.get("data"))
            .and_then(|d| d.get("message"))
            .and_then(Value::as_str),
        error
            .and_then(|e| e.get("errorMessage"))
            .and_then(Value::as_str),
        obj.get("message").and_then(Value::as_str),
        obj.get("errorMessage").and_then(Value::as_str),
    ]
    .into_iter()
    .flatten()
    .find(|m| !m.trim().is_empty())
    .unwrap_or("pi reported an error")
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::Parser as _;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    const SID: &str = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    // Recorded lines, shaped as pi 0.5x prints them (partials shortened).
    const SESSION: &str = r#"{"type":"session","version":3,"id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    const AGENT_START: &str = r#"{"type":"agent_start"}"#;
    const TURN_START: &str = r#"{"type":"turn_start"}"#;
    const USER_START: &str = r#"{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"run the tests"}],"timestamp":1767225600000}}"#;
    const USER_END: &str = r#"{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"run the tests"}],"timestamp":1767225600000}}"#;
    const A1_START: &str = r#"{"type":"message_start","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225600100}}"#;
    const A1_DELTA_1: &str = r#"{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"Running "}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Running ","partial":{"role":"assistant","content":[{"type":"text","text":"Running "}]}}}"#;
    const A1_DELTA_2: &str = r#"{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"Running the tests."}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"the tests.","partial":{"role":"assistant","content":[{"type":"text","text":"Running the tests."}]}}}"#;
    const A1_TOOLCALL: &str = r#"{"type":"message_update","message":{"role":"assistant","content":[]},"assistantMessageEvent":{"type":"toolcall_end","contentIndex":1,"toolCall":{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"npm test"}},"partial":{"role":"assistant","content":[]}}}"#;
    const A1_END: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Running the tests."},{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"npm test"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1200,"output":58,"cacheRead":9600,"cacheWrite":300,"totalTokens":11158,"cost":{"input":0.0036,"output":0.00087,"cacheRead":0.00288,"cacheWrite":0.001125,"total":0.008475}},"stopReason":"toolUse","timestamp":1767225600100}}"#;
    const TOOL_START: &str = r#"{"type":"tool_execution_start","toolCallId":"toolu_01","toolName":"bash","args":{"command":"npm test"}}"#;
    const TOOL_END: &str = r#"{"type":"tool_execution_end","toolCallId":"toolu_01","toolName":"bash","result":{"content":[{"type":"text","text":"12 passing"}]},"isError":false}"#;
    const TOOL_RESULT_END: &str = r#"{"type":"message_end","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"bash","content":[{"type":"text","text":"12 passing"}],"isError":false,"timestamp":1767225603000}}"#;
    const TURN_END: &str =
        r#"{"type":"turn_end","message":{"role":"assistant","content":[]},"toolResults":[]}"#;
    const A2_START: &str = r#"{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"stop"}}"#;
    const A2_DELTA: &str = r#"{"type":"message_update","message":{"role":"assistant","content":[]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"All 12 tests pass. <promise>COMPLETE</promise>","partial":{"role":"assistant","content":[]}}}"#;
    const A2_END: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"All 12 tests pass. <promise>COMPLETE</promise>"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":40,"output":20,"cacheRead":10800,"cacheWrite":0,"totalTokens":10860,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225604000}}"#;
    const AGENT_END: &str = r#"{"type":"agent_end","messages":[{"role":"user","content":[{"type":"text","text":"run the tests"}]},{"role":"assistant","content":[{"type":"text","text":"All 12 tests pass. <promise>COMPLETE</promise>"}],"stopReason":"stop"}]}"#;
    const A_ERR_END: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"error","errorMessage":"429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit","timestamp":1767225600100}}"#;
    const RATE_LIMIT: &str =
        "429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit";

    fn feed(lines: &[&str]) -> (Vec<Event>, Vec<Event>) {
        let mut parser = Parser::new();
        let events = lines.iter().flat_map(|l| parser.push_line(l)).collect();
        (events, parser.finish())
    }

    const FULL: [&str; 20] = [
        SESSION,
        AGENT_START,
        TURN_START,
        USER_START,
        USER_END,
        A1_START,
        A1_DELTA_1,
        A1_DELTA_2,
        A1_TOOLCALL,
        A1_END,
        TOOL_START,
        TOOL_END,
        USER_START, // stands in for the tool result's message_start
        TOOL_RESULT_END,
        TURN_END,
        TURN_START,
        A2_START,
        A2_DELTA,
        A2_END,
        AGENT_END,
    ];

    #[test]
    fn full_successful_stream() {
        let (events, end) = feed(&FULL);
        assert_eq!(
            events,
            vec![
                Event::SessionId(SID.into()),
                Event::Text("Running the tests.".into()),
                Event::Usage(Usage {
                    input_tokens: 1200,
                    cache_creation_input_tokens: 300,
                    cache_read_input_tokens: 9600,
                    output_tokens: 58,
                }),
                Event::ToolCall {
                    name: "bash".into(),
                    input: r#"{"command":"npm test"}"#.into(),
                },
                Event::Text("All 12 tests pass. <promise>COMPLETE</promise>".into()),
                // Cumulative: the last usage event is the iteration's total.
                Event::Usage(Usage {
                    input_tokens: 1240,
                    cache_creation_input_tokens: 300,
                    cache_read_input_tokens: 20400,
                    output_tokens: 78,
                }),
                Event::Result {
                    is_error: false,
                    text: "All 12 tests pass. <promise>COMPLETE</promise>".into(),
                },
            ]
        );
        assert_eq!(end, vec![]);
    }

    #[test]
    fn text_from_deltas_when_the_message_has_no_content_list() {
        let end = r#"{"type":"message_end","message":{"role":"assistant","stopReason":"stop"}}"#;
        let (events, _) = feed(&[A1_START, A1_DELTA_1, A1_DELTA_2, end, AGENT_END]);
        assert_eq!(
            events,
            vec![
                Event::Text("Running the tests.".into()),
                Event::Result {
                    is_error: false,
                    text: "Running the tests.".into()
                }
            ]
        );
        // Deltas of one message never leak into the next.
        let (events, _) = feed(&[A1_START, A1_DELTA_1, A2_START, end]);
        assert_eq!(events, vec![]);
    }

    #[test]
    fn error_message_with_exit_0_is_a_failed_result() {
        let (events, end) = feed(&[
            SESSION,
            AGENT_START,
            TURN_START,
            A_ERR_END,
            TURN_END,
            AGENT_END,
        ]);
        assert_eq!(
            events,
            vec![Event::SessionId(SID.into()), Event::Usage(Usage::default()),]
        );
        assert_eq!(
            end,
            vec![
                Event::Error(RATE_LIMIT.into()),
                Event::Result {
                    is_error: true,
                    text: RATE_LIMIT.into()
                }
            ]
        );
    }

    #[test]
    fn retried_failure_then_success_is_a_success() {
        let retry = r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"429 rate_limit_error"}"#;
        let retry_end = r#"{"type":"auto_retry_end","success":true,"attempt":1}"#;
        let (events, end) = feed(&[
            SESSION,
            AGENT_START,
            A_ERR_END,
            AGENT_END,
            retry,
            AGENT_START,
            A2_START,
            A2_DELTA,
            A2_END,
            retry_end,
            AGENT_END,
        ]);
        assert_eq!(
            events.last(),
            Some(&Event::Result {
                is_error: false,
                text: "All 12 tests pass. <promise>COMPLETE</promise>".into()
            })
        );
        // The retry is an error of its own; the result is still a success.
        let errors: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Error(_)))
            .collect();
        assert_eq!(
            errors,
            [&Event::Error(
                "429 rate_limit_error; pi retries (1 of 3) in 2.0 s".into()
            )]
        );
        assert_eq!(end, vec![]);
    }

    /// Real streams of pi 0.73.1 against the model mock.
    const REAL_401: &str = include_str!("testdata/real-0.73.1-401.jsonl");
    const REAL_UNREACHABLE: &str = include_str!("testdata/real-0.73.1-unreachable.jsonl");
    const REAL_CUT_MID_STREAM: &str = include_str!("testdata/real-0.73.1-500-mid-stream.jsonl");

    #[test]
    fn real_401_exits_0_and_fails_naming_the_key() {
        let (events, end) = feed_text(REAL_401);
        assert!(!events.iter().any(|e| matches!(e, Event::Error(_))));
        let Some(Event::Error(message)) = end.first() else {
            panic!("{end:?}");
        };
        assert!(message.starts_with("pi: the model API refused the credentials: 401 "));
        assert!(message.ends_with("(check ANTHROPIC_API_KEY)"), "{message}");
    }

    #[test]
    fn real_unreachable_api_is_an_error_per_retry_and_fails() {
        let (events, end) = feed_text(REAL_UNREACHABLE);
        let errors: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Error(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "pi could not reach the model API: Connection error. (check ANTHROPIC_BASE_URL"
            ) && errors[0].ends_with("; pi retries (1 of 3) in 2.0 s"),
            "{}",
            errors[0]
        );
        assert!(
            matches!(&end[..], [Event::Error(m), Event::Result { is_error: true, .. }]
                if m.starts_with("pi could not reach the model API")),
            "{end:?}"
        );
    }

    #[test]
    fn an_unreachable_api_is_named_by_the_url_the_run_set() {
        use sanddune_agent_sdk::Parser as _;
        let request = Request {
            env: vec![("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into())],
            ..Request::default()
        };
        let mut parser = Parser::for_request(&request);
        for line in REAL_UNREACHABLE.lines() {
            parser.push_line(line);
        }
        let end = parser.finish();
        assert!(
            matches!(&end[..], [Event::Error(m), ..]
                if m.starts_with("pi could not reach the model API at http://127.0.0.1:9: Connection error.")),
            "{end:?}"
        );
    }

    #[test]
    fn real_stream_cut_by_an_error_is_retried_to_a_success() {
        let (events, end) = feed_text(REAL_CUT_MID_STREAM);
        assert_eq!(
            events.last(),
            Some(&Event::Result {
                is_error: false,
                text: "Added the line and committed it. <promise>COMPLETE</promise>".into()
            })
        );
        assert_eq!(end, vec![]);
        // The cut answer's usage (what its message_start said) counts too.
        let usage = events.iter().rev().find_map(|e| match e {
            Event::Usage(u) => Some(*u),
            _ => None,
        });
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 111 + 211 + 311,
                cache_creation_input_tokens: 23 + 43 + 63,
                cache_read_input_tokens: 1005 + 2005 + 3005,
                output_tokens: 1 + 27 + 37,
            })
        );
    }

    #[test]
    fn retries_exhausted_report_the_final_error() {
        let retry = r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":1,"delayMs":2000,"errorMessage":"429"}"#;
        let gave_up =
            r#"{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"429 again"}"#;
        let (_, end) = feed(&[
            SESSION,
            AGENT_START,
            A_ERR_END,
            AGENT_END,
            retry,
            AGENT_START,
            A_ERR_END,
            AGENT_END,
            gave_up,
        ]);
        assert_eq!(
            end,
            vec![
                Event::Error("429 again".into()),
                Event::Result {
                    is_error: true,
                    text: "429 again".into()
                }
            ]
        );
    }

    #[test]
    fn aborted_without_message() {
        let aborted = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"partial"}],"stopReason":"aborted"}}"#;
        let (events, end) = feed(&[aborted, AGENT_END]);
        assert_eq!(events, vec![Event::Text("partial".into())]);
        assert_eq!(end[0], Event::Error("pi stopped: aborted".into()));
    }

    #[test]
    fn agent_error_and_error_lines() {
        for (line, expected) in [
            (
                r#"{"type":"agent_error","error":"No API key found for anthropic"}"#,
                "No API key found for anthropic",
            ),
            (r#"{"type":"error","error":{"message":"boom"}}"#, "boom"),
            (r#"{"type":"error","message":"bang"}"#, "bang"),
            (r#"{"type":"agent_error"}"#, "pi reported an error"),
        ] {
            let (events, end) = feed(&[SESSION, line]);
            assert_eq!(
                events[1..],
                [
                    Event::Error(expected.into()),
                    Event::Result {
                        is_error: true,
                        text: expected.into()
                    }
                ],
                "{line}"
            );
            assert_eq!(end, vec![], "{line}");
        }
    }

    #[test]
    fn missing_agent_end_is_an_error_at_finish() {
        let (_, end) = feed(&FULL[..FULL.len() - 1]);
        assert_eq!(end, vec![Event::Error(NO_AGENT_END.into())]);
        // Only the header: what pi prints when it gets no prompt.
        let (events, end) = feed(&[SESSION]);
        assert_eq!(events, vec![Event::SessionId(SID.into())]);
        assert_eq!(end, vec![Event::Error(NO_AGENT_END.into())]);
        let (events, end) = feed(&[]);
        assert!(events.is_empty());
        assert_eq!(end, vec![Event::Error(NO_AGENT_END.into())]);
    }

    #[test]
    fn user_and_tool_result_messages_are_not_text() {
        let (events, _) = feed(&[USER_START, USER_END, TOOL_RESULT_END]);
        assert_eq!(events, vec![]);
    }

    #[test]
    fn session_id_once() {
        let mut parser = Parser::new();
        assert_eq!(
            parser.push_line(SESSION),
            vec![Event::SessionId(SID.into())]
        );
        assert_eq!(parser.push_line(SESSION), vec![]);
        assert_eq!(
            Parser::new().push_line(r#"{"type":"session","id":""}"#),
            vec![]
        );
    }

    #[test]
    fn ignored_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_no_events(
            &mut parser,
            &[
                AGENT_START,
                TURN_START,
                TURN_END,
                TOOL_END,
                r#"{"type":"tool_execution_update","toolCallId":"t","toolName":"bash","args":{},"partialResult":{}}"#,
                r#"{"type":"auto_compaction_start","reason":"threshold"}"#,
                r#"{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","delta":"hmm"}}"#,
                "Warning: Invalid thinking level \"huge\"",
            ],
        );
    }

    #[test]
    fn truncated_json_yields_nothing() {
        let mut parser = Parser::new();
        assert_cuts_yield_nothing(&mut parser, &[SESSION, A2_END, AGENT_END]);
        assert_eq!(parser.finish(), vec![Event::Error(NO_AGENT_END.into())]);
    }

    #[test]
    fn invalid_utf8_replaced_chars() {
        // The host hands lines over with bad bytes replaced by U+FFFD.
        let mut bytes =
            br#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"caf"#
                .to_vec();
        bytes.extend_from_slice(&[0xE9, 0xFF, 0xC3]);
        bytes.extend_from_slice(br#""}]}}"#);
        let line = String::from_utf8_lossy(&bytes);
        assert_eq!(
            Parser::new().push_line(&line),
            vec![Event::Text("caf\u{FFFD}\u{FFFD}\u{FFFD}".into())]
        );
    }

    #[test]
    fn huge_lines() {
        // message_update lines repeat the whole partial message, so they grow
        // with the answer: a 5 MB text arrives as 5 MB lines.
        let text = "x".repeat(5 * 1024 * 1024);
        let update = serde_json::json!({
            "type": "message_update",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": text},
        })
        .to_string();
        let end = serde_json::json!({
            "type": "message_end",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop"},
        })
        .to_string();
        let mut parser = Parser::new();
        assert_eq!(parser.push_line(A1_START), vec![]);
        assert_eq!(parser.push_line(&update), vec![]);
        assert_eq!(parser.push_line(&end), vec![Event::Text(text.clone())]);
        assert_eq!(
            parser.push_line(AGENT_END),
            vec![Event::Result {
                is_error: false,
                text
            }]
        );
    }

    #[test]
    fn hostile_lines_do_not_panic() {
        assert_survives_hostile_lines::<Parser>();
    }

    #[test]
    fn odd_shapes_are_tolerated() {
        let mut parser = Parser::new();
        for line in [
            r#"{"type":"message_end"}"#,
            r#"{"type":"message_end","message":"text"}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[1,null,{"type":"text","text":5}],"usage":7}}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":5}}"#,
            r#"{"type":"session","id":7}"#,
            r#"{"type":42}"#,
        ] {
            assert_eq!(parser.push_line(line), vec![], "line: {line}");
        }
        assert_eq!(
            parser.push_line(r#"{"type":"tool_execution_start","toolName":"read"}"#),
            vec![Event::ToolCall {
                name: "read".into(),
                input: "{}".into()
            }]
        );
    }

    /// Output of `tests/fakes/pi`, captured by running it by hand in a
    /// scratch git repo (`printf 'add a note' | pi -p --mode json`).
    const FAKE_SUCCESS: &str = include_str!("testdata/fake-success.jsonl");
    /// The same fake with FAKE:is-error in the prompt (it exits 0).
    const FAKE_IS_ERROR: &str = include_str!("testdata/fake-is-error.jsonl");

    fn feed_text(stream: &str) -> (Vec<Event>, Vec<Event>) {
        let lines: Vec<&str> = stream.lines().collect();
        feed(&lines)
    }

    fn header_id(stream: &str) -> String {
        let first: Value = serde_json::from_str(stream.lines().next().unwrap()).unwrap();
        assert_eq!(first["type"], "session");
        first["id"].as_str().unwrap().to_owned()
    }

    #[test]
    fn captured_fake_success() {
        let (events, end) = feed_text(FAKE_SUCCESS);
        assert_eq!(events.len(), 7, "{events:#?}");
        assert_eq!(events[0], Event::SessionId(header_id(FAKE_SUCCESS)));
        // One text event per message, not per delta.
        assert_eq!(
            events[1],
            Event::Text("Let me look at the repository.".into())
        );
        assert_eq!(
            events[2],
            Event::Usage(Usage {
                input_tokens: 1200,
                cache_creation_input_tokens: 300,
                cache_read_input_tokens: 9600,
                output_tokens: 58,
            })
        );
        assert_eq!(
            events[3],
            Event::ToolCall {
                name: "bash".into(),
                input: r#"{"command":"git commit -am 'Add a note'"}"#.into(),
            }
        );
        assert_eq!(
            events[4],
            Event::Text("Added a note. <promise>COMPLETE</promise>".into())
        );
        assert_eq!(
            events[5],
            Event::Usage(Usage {
                input_tokens: 1240,
                cache_creation_input_tokens: 300,
                cache_read_input_tokens: 20400,
                output_tokens: 78,
            })
        );
        assert_eq!(
            events[6],
            Event::Result {
                is_error: false,
                text: "Added a note. <promise>COMPLETE</promise>".into(),
            }
        );
        assert_eq!(end, vec![]);
    }

    #[test]
    fn captured_fake_is_error() {
        let (events, end) = feed_text(FAKE_IS_ERROR);
        assert_eq!(events[0], Event::SessionId(header_id(FAKE_IS_ERROR)));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::Result { .. } | Event::Error(_))),
            "{events:#?}"
        );
        let message = r#"429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
        assert_eq!(
            end,
            vec![
                Event::Error(message.into()),
                Event::Result {
                    is_error: true,
                    text: message.into(),
                }
            ]
        );
    }

    #[test]
    fn captured_fake_cut_before_agent_end() {
        let lines: Vec<&str> = FAKE_SUCCESS.lines().collect();
        let (events, end) = feed(&lines[..lines.len() - 1]);
        assert!(!events.iter().any(|e| matches!(e, Event::Result { .. })));
        assert_eq!(end, vec![Event::Error(NO_AGENT_END.into())]);
    }
}
