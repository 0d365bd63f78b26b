//! Parser for `copilot -p <prompt> --output-format json` (GitHub's Copilot
//! CLI; one JSON event per stdout line, `{"type":..,"data":{..},"id":..}`,
//! ending with a `result` line). See docs/reference/protocols.md, "Copilot".
//!
//! What is read:
//! - `assistant.message_delta{data:{messageId,deltaContent}}`: buffered.
//! - `assistant.message{data:{messageId,content}}`: one text event (its
//!   content; the buffered deltas of that message are dropped).
//! - `tool.execution_start{data:{toolName,arguments}}`: a tool call.
//! - `assistant.usage{data:{inputTokens,...}}`: one model call's tokens,
//!   summed into the iteration's usage so far.
//! - `result{sessionId,exitCode,usage}`: the session id, usage when it has
//!   token counts, and the result (a non-zero `exitCode` or an `error` fails).
//! - `session.error{data:{errorType,message}}` / `error{message}`: an error
//!   event and a failed result.
//!
//! Everything else (`session.*`, `user.message`, `assistant.turn_*`,
//! reasoning, `tool.execution_complete`, unknown types) yields nothing.

use std::collections::BTreeSet;

use serde_json::Value;

pub use sanddune_agent_sdk::{Event, Usage};

/// Reads token counts. Copilot spells them `inputTokens`, `outputTokens`,
/// `cacheReadTokens` and `cacheWriteTokens` (the last is cache creation);
/// the snake_case forms (`input_tokens`, `cache_read_tokens`, ...) and
/// Claude's names are read too. Missing or non-integer fields count as 0.
/// None when `value` is not an object or has none of these fields: the
/// `result` line's usage holds only request counts and durations, and is
/// no zero total.
pub fn usage_from_json(value: &Value) -> Option<Usage> {
    let keys: [&[&str]; 4] = [
        &["inputTokens", "input_tokens"],
        &[
            "cacheWriteTokens",
            "cache_write_tokens",
            "cache_creation_input_tokens",
        ],
        &[
            "cacheReadTokens",
            "cache_read_tokens",
            "cache_read_input_tokens",
        ],
        &["outputTokens", "output_tokens"],
    ];
    let (usage, found) = Usage::from_keys(value, keys)?;
    found.then_some(usage)
}

pub const NO_RESULT: &str = "copilot ended without a result line \
     (stream cut short, or the CLI failed before starting: see its stderr)";

#[derive(Debug, Default)]
pub struct Parser {
    /// Session ids already reported, so each is reported once. (BTree
    /// collections: HashSet seeding would import wasi:random into the
    /// component.)
    sessions: BTreeSet<String>,
    /// Deltas of messages not complete yet, in arrival order:
    /// (messageId, text so far).
    pending: Vec<(String, String)>,
    /// The sum of the `assistant.usage` events so far.
    usage: Option<Usage>,
    /// Ids of the `assistant.usage` events counted, so a repeated event is
    /// not counted twice.
    usage_ids: BTreeSet<String>,
    /// The last assistant message: the result's text.
    last_text: String,
    /// An error line was seen: every later result is a failure too.
    failed: bool,
    saw_result: bool,
}

type Object = serde_json::Map<String, Value>;

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    fn buffer(&mut self, message_id: &str, delta: &str) {
        match self.pending.iter_mut().find(|(id, _)| id == message_id) {
            Some((_, text)) => text.push_str(delta),
            None => self.pending.push((message_id.to_owned(), delta.to_owned())),
        }
    }

    fn take(&mut self, message_id: &str) -> String {
        match self.pending.iter().position(|(id, _)| id == message_id) {
            Some(i) => self.pending.remove(i).1,
            None => String::new(),
        }
    }

    fn session_id(&mut self, id: &str, events: &mut Vec<Event>) {
        if !id.is_empty() && self.sessions.insert(id.to_owned()) {
            events.push(Event::SessionId(id.to_owned()));
        }
    }

    /// `{"type":"result","sessionId":"..","exitCode":0,"usage":{"premiumRequests":1,..}}`
    fn result(&mut self, obj: &Object, events: &mut Vec<Event>) {
        self.saw_result = true;
        if let Some(id) = obj.get("sessionId").and_then(Value::as_str) {
            self.session_id(id, events);
        }
        // Token counts here, should a version report them, are the total.
        if let Some(usage) = obj.get("usage").and_then(usage_from_json) {
            self.usage = Some(usage);
            events.push(Event::Usage(usage));
        }
        let exit_code = obj.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        // Only an `error` field: a result's other fields are not errors.
        let error = obj.get("error").and_then(error_text);
        let own_failure = exit_code != 0
            || error.is_some()
            || obj.get("is_error").and_then(Value::as_bool) == Some(true);
        let text = match &error {
            Some(message) if !message.is_empty() => message.clone(),
            _ => self.last_text.clone(),
        };
        events.push(Event::Result {
            is_error: own_failure || self.failed,
            text,
        });
        // An error line before this one already said why; an exit code
        // alone would add nothing.
        if own_failure && !(self.failed && error.is_none()) {
            let mut report = format!("copilot's result reports failure (exit code {exit_code})");
            if let Some(message) = error.filter(|m| !m.trim().is_empty()) {
                report.push_str(": ");
                report.push_str(&message);
            }
            events.push(Event::Error(report));
        }
    }
}

impl sanddune_agent_sdk::Parser for Parser {
    /// Events for one stdout line. Anything that is not a JSON object, or is
    /// a type we do not use, yields nothing: stdout can carry stray output.
    fn push_line(&mut self, line: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            return events;
        };
        let data = obj.get("data").and_then(Value::as_object);
        let data_str = |key: &str| data.and_then(|d| d.get(key)).and_then(Value::as_str);

        match obj.get("type").and_then(Value::as_str) {
            Some("assistant.message_delta") => {
                if let Some(delta) = data_str("deltaContent") {
                    self.buffer(data_str("messageId").unwrap_or(""), delta);
                }
            }
            Some("assistant.message") => {
                let buffered = self.take(data_str("messageId").unwrap_or(""));
                // The whole message; its deltas only stand in when it has no
                // content (a message that only requests tools has "").
                let text = match data_str("content") {
                    Some(content) if !content.is_empty() => content.to_owned(),
                    _ => buffered,
                };
                if !text.is_empty() {
                    self.last_text.clone_from(&text);
                    events.push(Event::Text(text));
                }
            }
            Some("tool.execution_start") => {
                let name = data_str("toolName").unwrap_or("");
                events.push(Event::ToolCall {
                    name: name.to_owned(),
                    input: json_text(data.and_then(|d| d.get("arguments"))),
                });
            }
            Some("assistant.usage") => {
                let id = obj.get("id").and_then(Value::as_str);
                if let Some(usage) = obj.get("data").and_then(usage_from_json)
                    && id.is_none_or(|id| self.usage_ids.insert(id.to_owned()))
                {
                    let total = self.usage.get_or_insert_default();
                    total.add(usage);
                    events.push(Event::Usage(*total));
                }
            }
            Some("session.start") => {
                if let Some(id) = data_str("sessionId") {
                    self.session_id(id, &mut events);
                }
            }
            Some("result") => self.result(&obj, &mut events),
            Some("session.error" | "error") => {
                let message = error_message(&obj).unwrap_or_default();
                let kind = data_str("errorType").or(obj.get("errorType").and_then(Value::as_str));
                let mut report = match kind {
                    Some(kind) => format!("copilot reported an error ({kind})"),
                    None => "copilot reported an error".to_owned(),
                };
                if !message.trim().is_empty() {
                    report.push_str(": ");
                    report.push_str(&message);
                }
                // Copilot names the URL but not where it comes from: a
                // refused connection, or one that closed unanswered (a
                // gateway in front of an API that cannot be reached).
                if message.starts_with("Could not connect to local model provider")
                    || message.contains("error sending request for url")
                {
                    report.push_str(" (the URL is COPILOT_PROVIDER_BASE_URL)");
                }
                self.failed = true;
                self.saw_result = true;
                events.push(Event::Error(report));
                events.push(Event::Result {
                    is_error: true,
                    text: message,
                });
            }
            _ => {}
        }
        events
    }

    /// Called at end of stdout: text still buffered in deltas (a message cut
    /// off before its `assistant.message`), and an error when no result came.
    fn finish(&mut self) -> Vec<Event> {
        let mut events: Vec<Event> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|(_, text)| !text.is_empty())
            .map(|(_, text)| Event::Text(text))
            .collect();
        if !self.saw_result {
            events.push(Event::Error(NO_RESULT.to_owned()));
        }
        events
    }
}

/// The message of an error line: `data.message`, `message`, or `error` (a
/// string or `{message}`), the first present. None when it carries none.
fn error_message(obj: &Object) -> Option<String> {
    let data = obj.get("data");
    [
        data.and_then(|d| d.get("message")),
        obj.get("message"),
        obj.get("error"),
        data.and_then(|d| d.get("error")),
    ]
    .into_iter()
    .flatten()
    .find_map(error_text)
}

/// An `error` value's message: a string, or `{message}`; "" for an error
/// without a readable message. None for `null` and `false`: no error.
fn error_text(value: &Value) -> Option<String> {
    match value {
        Value::Null | Value::Bool(false) => None,
        Value::String(s) => Some(s.clone()),
        other => Some(
            other
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        ),
    }
}

/// Tool input as compact JSON text: a missing input is an empty object, and
/// a string that already holds JSON is kept as it is rather than quoted a
/// second time.
fn json_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) if serde_json::from_str::<Value>(s).is_ok() => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::Parser as _;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    // Recorded lines, shaped as copilot 1.0.x prints them.
    const SESSION: &str = "bff77b8b-cc7e-4b96-b2ae-8f52dbff73ab";
    const TOOLS_UPDATED: &str = r#"{"type":"session.tools_updated","data":{"model":"claude-sonnet-4.5"},"id":"e0","timestamp":"2026-11-20T10:00:00.000Z","parentId":null,"ephemeral":true}"#;
    const USER: &str = r#"{"type":"user.message","data":{"content":"fix the typo","transformedContent":"fix the typo","attachments":[],"interactionId":"i1"},"id":"e1","timestamp":"2026-11-20T10:00:00.100Z","parentId":"e0"}"#;
    const TURN_START: &str = r#"{"type":"assistant.turn_start","data":{"turnId":"0","interactionId":"i1"},"id":"e2","timestamp":"2026-11-20T10:00:00.200Z","parentId":"e1"}"#;
    const DELTA_1: &str = r#"{"type":"assistant.message_delta","data":{"messageId":"m1","deltaContent":"I'll fix "},"id":"e3","timestamp":"2026-11-20T10:00:01.000Z","parentId":"e2","ephemeral":true}"#;
    const DELTA_2: &str = r#"{"type":"assistant.message_delta","data":{"messageId":"m1","deltaContent":"the typo."},"id":"e4","timestamp":"2026-11-20T10:00:01.100Z","parentId":"e3","ephemeral":true}"#;
    const MESSAGE_1: &str = r#"{"type":"assistant.message","data":{"messageId":"m1","content":"I'll fix the typo.","toolRequests":[{"toolCallId":"toolu_1","name":"bash","arguments":{"command":"sed -i s/teh/the/ README.md","description":"Fix typo"},"type":"function"}],"outputTokens":58},"id":"e5","timestamp":"2026-11-20T10:00:01.200Z","parentId":"e4"}"#;
    const USAGE_1: &str = r#"{"type":"assistant.usage","data":{"model":"claude-sonnet-4.5","inputTokens":5200,"outputTokens":58,"cacheReadTokens":3000,"cacheWriteTokens":500,"cost":1,"duration":2500},"id":"e6","timestamp":"2026-11-20T10:00:01.300Z","parentId":"e5","ephemeral":true}"#;
    const TOOL_START: &str = r#"{"type":"tool.execution_start","data":{"toolCallId":"toolu_1","toolName":"bash","arguments":{"command":"sed -i s/teh/the/ README.md","description":"Fix typo"}},"id":"e7","timestamp":"2026-11-20T10:00:01.400Z","parentId":"e6"}"#;
    const TOOL_DONE: &str = r#"{"type":"tool.execution_complete","data":{"toolCallId":"toolu_1","success":true,"result":{"content":"<exited with exit code 0>"}},"id":"e8","timestamp":"2026-11-20T10:00:01.900Z","parentId":"e7"}"#;
    const MESSAGE_2: &str = r#"{"type":"assistant.message","data":{"messageId":"m2","content":"Done. <promise>COMPLETE</promise>","toolRequests":[],"outputTokens":9},"id":"e9","timestamp":"2026-11-20T10:00:02.500Z","parentId":"e8"}"#;
    const USAGE_2: &str = r#"{"type":"assistant.usage","data":{"model":"claude-sonnet-4.5","inputTokens":5400,"outputTokens":9,"cacheReadTokens":5000,"cacheWriteTokens":0},"id":"e10","timestamp":"2026-11-20T10:00:02.600Z","parentId":"e9","ephemeral":true}"#;
    const TURN_END: &str = r#"{"type":"assistant.turn_end","data":{"turnId":"0"},"id":"e11","timestamp":"2026-11-20T10:00:02.700Z","parentId":"e10"}"#;
    const RESULT: &str = r#"{"type":"result","timestamp":"2026-11-20T10:00:02.800Z","sessionId":"bff77b8b-cc7e-4b96-b2ae-8f52dbff73ab","exitCode":0,"usage":{"premiumRequests":1,"totalApiDurationMs":4100,"sessionDurationMs":5700,"codeChanges":{"linesAdded":1,"linesRemoved":1,"filesModified":["README.md"]}}}"#;

    fn feed(lines: &[&str]) -> (Vec<Event>, Vec<Event>) {
        let mut parser = Parser::new();
        let events = lines.iter().flat_map(|l| parser.push_line(l)).collect();
        (events, parser.finish())
    }

    const TOTAL: Usage = Usage {
        input_tokens: 10600,
        cache_creation_input_tokens: 500,
        cache_read_input_tokens: 8000,
        output_tokens: 67,
    };

    #[test]
    fn full_successful_stream() {
        let (events, end) = feed(&[
            TOOLS_UPDATED,
            USER,
            TURN_START,
            DELTA_1,
            DELTA_2,
            MESSAGE_1,
            USAGE_1,
            TOOL_START,
            TOOL_DONE,
            MESSAGE_2,
            USAGE_2,
            TURN_END,
            RESULT,
        ]);
        assert_eq!(
            events,
            vec![
                Event::Text("I'll fix the typo.".into()),
                Event::Usage(Usage {
                    input_tokens: 5200,
                    cache_creation_input_tokens: 500,
                    cache_read_input_tokens: 3000,
                    output_tokens: 58,
                }),
                Event::ToolCall {
                    name: "bash".into(),
                    input: r#"{"command":"sed -i s/teh/the/ README.md","description":"Fix typo"}"#
                        .into(),
                },
                Event::Text("Done. <promise>COMPLETE</promise>".into()),
                Event::Usage(TOTAL),
                Event::SessionId(SESSION.into()),
                Event::Result {
                    is_error: false,
                    text: "Done. <promise>COMPLETE</promise>".into(),
                },
            ]
        );
        assert_eq!(end, vec![]);
    }

    #[test]
    fn deltas_are_dropped_once_their_message_arrives() {
        let mut parser = Parser::new();
        assert_eq!(parser.push_line(DELTA_1), vec![]);
        // A delta of another message stays buffered.
        let other = r#"{"type":"assistant.message_delta","data":{"messageId":"m9","deltaContent":"half a tho"}}"#;
        assert_eq!(parser.push_line(other), vec![]);
        assert_eq!(parser.push_line(DELTA_2), vec![]);
        assert_eq!(
            parser.push_line(MESSAGE_1),
            vec![Event::Text("I'll fix the typo.".into())]
        );
        // Cut off: the other message's deltas are all there is of it.
        assert_eq!(
            parser.finish(),
            vec![
                Event::Text("half a tho".into()),
                Event::Error(NO_RESULT.into())
            ]
        );
    }

    #[test]
    fn message_without_content_falls_back_to_its_deltas() {
        let mut parser = Parser::new();
        parser.push_line(r#"{"type":"assistant.message_delta","data":{"deltaContent":"no "}}"#);
        parser.push_line(r#"{"type":"assistant.message_delta","data":{"deltaContent":"id"}}"#);
        assert_eq!(
            parser.push_line(r#"{"type":"assistant.message","data":{"toolRequests":[]}}"#),
            vec![Event::Text("no id".into())]
        );
        // A tool-only message: no text at all.
        assert_eq!(
            parser.push_line(
                r#"{"type":"assistant.message","data":{"messageId":"m3","content":"","toolRequests":[{"name":"bash"}]}}"#
            ),
            vec![]
        );
        assert_eq!(parser.finish(), vec![Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn usage_sums_and_skips_repeats() {
        let mut parser = Parser::new();
        parser.push_line(USAGE_1);
        // The same event twice (same id) counts once.
        assert_eq!(parser.push_line(USAGE_1), vec![]);
        assert_eq!(parser.push_line(USAGE_2), vec![Event::Usage(TOTAL)]);
        // Events without an id always count; snake_case is read too.
        let line = r#"{"type":"assistant.usage","data":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":3,"cache_write_tokens":4}}"#;
        let more = Usage {
            input_tokens: TOTAL.input_tokens + 1,
            output_tokens: TOTAL.output_tokens + 2,
            cache_read_input_tokens: TOTAL.cache_read_input_tokens + 3,
            cache_creation_input_tokens: TOTAL.cache_creation_input_tokens + 4,
        };
        assert_eq!(parser.push_line(line), vec![Event::Usage(more)]);
        assert_eq!(parser.push_line(line).len(), 1);
        // Usage without token counts is ignored.
        assert_eq!(
            parser.push_line(r#"{"type":"assistant.usage","data":{"model":"x","cost":1}}"#),
            vec![]
        );
    }

    #[test]
    fn result_with_token_usage_is_the_total() {
        let line = r#"{"type":"result","sessionId":"s1","exitCode":0,"usage":{"inputTokens":7,"outputTokens":8,"cacheReadTokens":9,"cacheWriteTokens":10,"premiumRequests":1}}"#;
        let (events, end) = feed(&[USAGE_1, line]);
        assert_eq!(
            &events[1..],
            &[
                Event::SessionId("s1".into()),
                Event::Usage(Usage {
                    input_tokens: 7,
                    output_tokens: 8,
                    cache_read_input_tokens: 9,
                    cache_creation_input_tokens: 10,
                }),
                Event::Result {
                    is_error: false,
                    text: String::new()
                },
            ]
        );
        assert!(end.is_empty());
    }

    #[test]
    fn session_error_with_exit_0() {
        // The CLI reports the failure as an event, whatever its exit code.
        let line = r#"{"type":"session.error","data":{"errorType":"rate_limit","message":"429 Too Many Requests","stack":"..."},"id":"e5"}"#;
        let (events, end) = feed(&[USER, line]);
        assert_eq!(
            events,
            vec![
                Event::Error(
                    "copilot reported an error (rate_limit): 429 Too Many Requests".into()
                ),
                Event::Result {
                    is_error: true,
                    text: "429 Too Many Requests".into()
                },
            ]
        );
        // The result was given: no "ended without a result" on top.
        assert!(end.is_empty());

        // A result line after it is a failure too, even with exit code 0,
        // and a failing one adds no second error.
        let failed_result = r#"{"type":"result","sessionId":"s","exitCode":1}"#;
        let (events, _) = feed(&[line, failed_result]);
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::Error(_)))
                .count(),
            1
        );
        let (events, _) = feed(&[line, RESULT]);
        assert_eq!(
            events.last(),
            Some(&Event::Result {
                is_error: true,
                text: String::new()
            })
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::Error(_)))
                .count(),
            1
        );
    }

    #[test]
    fn plain_error_lines() {
        for (line, expected) in [
            (
                r#"{"type":"error","message":"Authentication failed"}"#,
                "copilot reported an error: Authentication failed",
            ),
            (
                r#"{"type":"error","error":{"message":"No token"}}"#,
                "copilot reported an error: No token",
            ),
            (r#"{"type":"error"}"#, "copilot reported an error"),
        ] {
            let events = Parser::new().push_line(line);
            assert_eq!(events[0], Event::Error(expected.into()), "{line}");
            assert!(matches!(events[1], Event::Result { is_error: true, .. }));
        }
    }

    #[test]
    fn failed_results() {
        let line =
            r#"{"type":"result","sessionId":"s2","exitCode":1,"usage":{"premiumRequests":1}}"#;
        let (events, end) = feed(&[MESSAGE_2, line]);
        assert_eq!(
            &events[2..],
            &[
                Event::Result {
                    is_error: true,
                    text: "Done. <promise>COMPLETE</promise>".into()
                },
                Event::Error("copilot's result reports failure (exit code 1)".into()),
            ]
        );
        assert!(end.is_empty());
        let line = r#"{"type":"result","sessionId":"s3","exitCode":0,"error":{"message":"model not available"}}"#;
        assert_eq!(
            &feed(&[line]).0[1..],
            &[
                Event::Result {
                    is_error: true,
                    text: "model not available".into()
                },
                Event::Error(
                    "copilot's result reports failure (exit code 0): model not available".into()
                ),
            ]
        );
        // `error: null` is no error, nor is a result's other text.
        let line =
            r#"{"type":"result","sessionId":"s4","exitCode":0,"error":null,"message":"bye"}"#;
        assert!(matches!(
            feed(&[line]).0[1],
            Event::Result {
                is_error: false,
                ..
            }
        ));
    }

    #[test]
    fn session_ids_once() {
        let start = r#"{"type":"session.start","data":{"sessionId":"bff77b8b-cc7e-4b96-b2ae-8f52dbff73ab","selectedModel":"gpt-5"}}"#;
        let (events, _) = feed(&[start, RESULT]);
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::SessionId(_)))
                .collect::<Vec<_>>(),
            [&Event::SessionId(SESSION.into())]
        );
    }

    #[test]
    fn tool_call_shapes() {
        let mut parser = Parser::new();
        for (line, name, input) in [
            (
                r#"{"type":"tool.execution_start","data":{"toolCallId":"t","toolName":"str_replace_editor"}}"#,
                "str_replace_editor",
                "{}",
            ),
            (
                r#"{"type":"tool.execution_start","data":{"toolName":"bash","arguments":"{\"command\":\"ls\"}"}}"#,
                "bash",
                r#"{"command":"ls"}"#,
            ),
            (
                r#"{"type":"tool.execution_start","data":{"toolName":"view","arguments":"README.md"}}"#,
                "view",
                r#""README.md""#,
            ),
            (
                r#"{"type":"tool.execution_start","data":{"arguments":[1,2]}}"#,
                "",
                "[1,2]",
            ),
        ] {
            assert_eq!(
                parser.push_line(line),
                vec![Event::ToolCall {
                    name: name.into(),
                    input: input.into()
                }],
                "{line}"
            );
        }
        assert_eq!(
            parser.push_line(r#"{"type":"tool.execution_start"}"#).len(),
            1
        );
    }

    #[test]
    fn ignored_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_no_events(
            &mut parser,
            &[
                TOOLS_UPDATED,
                USER,
                TURN_START,
                TOOL_DONE,
                TURN_END,
                r#"{"type":"assistant.reasoning_delta","data":{"reasoningId":"r","deltaContent":"hmm"},"ephemeral":true}"#,
                r#"{"type":"assistant.reasoning","data":{"reasoningId":"r","content":"hmm"}}"#,
                r#"{"type":"session.task_complete","data":{"summary":"done","success":true}}"#,
                r#"{"type":"future.event.v99","payload":"x"}"#,
                r#"{"type":"assistant.message_delta","data":{"deltaContent":7}}"#,
                r#"{"type":"assistant.message","data":"text"}"#,
                r#"{"type":"assistant.message"}"#,
                r#"{"type":"assistant.usage","data":[1]}"#,
                r#"{"type":7,"data":{"message":"x"}}"#,
                "Welcome to GitHub Copilot CLI",
            ],
        );
        assert_eq!(parser.finish(), vec![Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn partial_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_cuts_yield_nothing(&mut parser, &[RESULT, MESSAGE_1, TOOL_START, USAGE_1]);
        assert_eq!(parser.finish(), vec![Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn invalid_utf8_replaced_chars() {
        let mut bytes = br#"{"type":"assistant.message","data":{"content":"caf"#.to_vec();
        bytes.extend_from_slice(&[0xE9, 0xFF, 0xC3]);
        bytes.extend_from_slice(br#""}}"#);
        let line = String::from_utf8_lossy(&bytes);
        assert_eq!(
            Parser::new().push_line(&line),
            vec![Event::Text("caf\u{FFFD}\u{FFFD}\u{FFFD}".into())]
        );
    }

    #[test]
    fn huge_lines() {
        let text = "x".repeat(5 * 1024 * 1024);
        let mut parser = Parser::new();
        let delta = serde_json::json!({
            "type": "assistant.message_delta",
            "data": {"messageId": "m", "deltaContent": text},
        })
        .to_string();
        assert_eq!(parser.push_line(&delta), vec![]);
        let message = serde_json::json!({
            "type": "assistant.message",
            "data": {"messageId": "m", "content": text},
        })
        .to_string();
        assert_eq!(parser.push_line(&message), vec![Event::Text(text.clone())]);
        let tool = serde_json::json!({
            "type": "tool.execution_start",
            "data": {"toolName": "create", "arguments": {"path": "big", "file_text": text}},
        })
        .to_string();
        assert!(
            matches!(&parser.push_line(&tool)[..], [Event::ToolCall { input, .. }] if input.len() > 5 * 1024 * 1024)
        );
    }

    #[test]
    fn hostile_lines_do_not_panic() {
        assert_survives_hostile_lines::<Parser>();
    }

    /// What `tests/fakes/copilot` printed for one run in a scratch repository
    /// (`copilot -p "Fix the typo in README.md" --output-format json --model
    /// gpt-5 --allow-all-tools`).
    const FAKE_RUN: &str = include_str!("../testdata/fake-copilot-run.jsonl");
    /// The same fake with `FAKE:is-error` in the prompt.
    const FAKE_ERROR_RUN: &str = include_str!("../testdata/fake-copilot-is-error.jsonl");

    #[test]
    fn captured_fake_run() {
        let lines: Vec<&str> = FAKE_RUN.lines().collect();
        let (events, end) = feed(&lines);
        assert!(end.is_empty());
        assert!(events.contains(&Event::ToolCall {
            name: "bash".into(),
            input: r#"{"command":"git commit -am 'Fix typo in README'","description":"Commit the fix"}"#
                .into()
        }));
        let texts: Vec<&String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Text(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            [
                "Let me look at the repository.",
                "Fixed the typo in README.md. <promise>COMPLETE</promise>"
            ]
        );
        let n = events.len();
        assert!(
            matches!(events[n - 3], Event::Usage(u) if u.input_tokens > 0 && u.output_tokens > 0)
        );
        assert!(matches!(&events[n - 2], Event::SessionId(id) if id.len() == 36));
        assert_eq!(
            events[n - 1],
            Event::Result {
                is_error: false,
                text: "Fixed the typo in README.md. <promise>COMPLETE</promise>".into()
            }
        );
        assert!(!events.iter().any(|e| matches!(e, Event::Error(_))));
    }

    #[test]
    fn captured_fake_error_run() {
        let lines: Vec<&str> = FAKE_ERROR_RUN.lines().collect();
        let (events, end) = feed(&lines);
        assert!(end.is_empty());
        let errors: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Error(_)))
            .collect();
        // The session.error line says why; the result's exit code 1 is not
        // reported a second time.
        assert!(matches!(errors[..], [Event::Error(m)] if m.contains("429")));
        assert!(matches!(
            events.last(),
            Some(Event::Result { is_error: true, .. })
        ));
        assert!(!events.iter().any(|e| matches!(
            e,
            Event::Result {
                is_error: false,
                ..
            }
        )));
    }

    /// Real copilot 1.0.102 output against tests/model-mock (BYOK, chat
    /// completions): no token counts on stdout (they are in the session).
    #[test]
    fn real_1_0_102_commit() {
        let sample = include_str!("../testdata/copilot-1.0.102-commit.jsonl");
        let mut parser = Parser::new();
        let mut events: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        events.extend(parser.finish());
        assert!(
            matches!(&events[0], Event::ToolCall { name, input } if name == "bash" && input.contains("git commit -q"))
        );
        assert_eq!(
            events[1..],
            [
                Event::Text("Added the line and committed it. <promise>COMPLETE</promise>".into()),
                Event::SessionId("73de4807-4711-4dfe-a073-e82ae4b4f471".into()),
                Event::Result {
                    is_error: false,
                    text: "Added the line and committed it. <promise>COMPLETE</promise>".into(),
                },
            ]
        );
    }

    /// The real 401: the error keeps copilot's own words, which name the URL
    /// and the variables to check.
    #[test]
    fn real_1_0_102_unauthorized() {
        let sample = include_str!("../testdata/copilot-1.0.102-401.jsonl");
        let mut parser = Parser::new();
        let mut events: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        events.extend(parser.finish());
        let error = events
            .iter()
            .find_map(|e| match e {
                Event::Error(m) => Some(m.as_str()),
                _ => None,
            })
            .unwrap();
        assert!(
            error.contains("http://127.0.0.1:18081/v1 (HTTP 401)"),
            "{error}"
        );
        assert!(error.contains("COPILOT_PROVIDER_API_KEY"), "{error}");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Result { is_error: true, .. }))
        );
    }

    /// The real message when the endpoint is unreachable names the URL; the
    /// error adds the variable that sets it.
    #[test]
    fn real_1_0_102_unreachable_names_the_variable() {
        let line = r#"{"type":"session.error","data":{"errorType":"query","message":"Could not connect to local model provider at http://127.0.0.1:18099/v1.\n  Check that the service is running and the port is correct.","originatingMessageId":"c4060dec-483c-4cd0-b2d8-c5e4c0d5b4ac"},"id":"2f1c","timestamp":"2026-11-25T13:00:55.050Z","parentId":null}"#;
        let events = Parser::new().push_line(line);
        assert!(matches!(&events[0], Event::Error(m)
            if m.contains("http://127.0.0.1:18099/v1") && m.ends_with("(the URL is COPILOT_PROVIDER_BASE_URL)")));
    }

    /// The real message (1.0.102) when the connection closes unanswered, as
    /// the credential gateway closes it when the API is unreachable.
    #[test]
    fn real_1_0_102_a_connection_closed_unanswered_names_the_variable() {
        let line = r#"{"type":"session.error","data":{"errorType":"query","message":"Failed to get response from the AI model; retried 5 times (total retry wait time: 5.00 seconds) Last error: Failed native model HTTP request: error sending request for url (http://127.0.0.1:44719/chat/completions): client error (SendRequest): connection error: Connection reset by peer (os error 104) [ECONNRESET]"},"id":"2f1d","timestamp":"2026-11-28T01:26:33.050Z","parentId":null}"#;
        let events = Parser::new().push_line(line);
        assert!(matches!(&events[0], Event::Error(m)
            if m.contains("http://127.0.0.1:44719/chat/completions") && m.ends_with("(the URL is COPILOT_PROVIDER_BASE_URL)")));
    }
}
