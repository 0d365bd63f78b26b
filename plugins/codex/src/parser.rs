//! Parser for `codex exec --json` (one JSON object per stdout line). See
//! docs/reference/protocols.md, "Codex".
//!
//! Codex prints no final result line: the iteration's outcome is decided at
//! [`Parser::finish`] from the turns seen. Its `usage` counts cached tokens
//! inside `input_tokens`; the parser converts and sums. `turn.completed`
//! carries the thread's running total: after `exec resume` that includes the
//! earlier runs' turns, so a resumed iteration reports no usage from the
//! stream and the host takes the turn's own from the session file
//! ([`crate::session::usage_from_session`]).

use std::collections::BTreeSet;

use serde_json::Value;

pub use sanddune_agent_sdk::{Event, Usage};

/// Reads a codex usage object (`input_tokens`, `cached_input_tokens`,
/// `cache_write_input_tokens`, `output_tokens`); missing or non-integer
/// fields count as 0. Codex's `input_tokens` includes the cached ones, so
/// fresh input is the difference. None when `value` is not an object at all.
pub fn usage_from_codex(value: &Value) -> Option<Usage> {
    let keys: [&[&str]; 4] = [
        &["input_tokens"],
        &["cache_write_input_tokens"],
        &["cached_input_tokens"],
        &["output_tokens"],
    ];
    let (usage, _) = Usage::from_keys(value, keys)?;
    Some(Usage {
        input_tokens: usage
            .input_tokens
            .saturating_sub(usage.cache_read_input_tokens),
        ..usage
    })
}

/// A connection failure rather than an answer from the API.
fn unreachable(message: &str) -> bool {
    [
        "waiting for network",
        "Connection refused",
        "error sending request",
        "dns error",
        "Connection failed",
    ]
    .iter()
    .any(|m| message.contains(m))
}

pub const NO_TURN: &str = "codex ended without completing a turn \
     (stream cut short, interrupted, or the CLI failed before starting)";

#[derive(Debug)]
pub struct Parser {
    /// What the iteration's command was built with.
    context: crate::command::Context,
    /// Thread ids already reported, so each is reported once. (A BTreeSet:
    /// HashSet seeding would import wasi:random into the component.)
    threads: BTreeSet<String>,
    /// Ids of items already reported as tool calls: a command is reported at
    /// `item.started` and not again at `item.completed`.
    items: BTreeSet<String>,
    /// The sum of the completed turns' usage.
    usage: Usage,
    turns_completed: u32,
    /// The message of the last `turn.failed`.
    failure: Option<String>,
    /// Top-level `error` messages since the last completed turn. Codex also
    /// prints retry notices this way ("Reconnecting... 1/5 (...)") and then
    /// completes the turn, so they only count if no turn completes after them.
    pending_errors: Vec<String>,
    /// The last retry notice reported, since the last completed turn.
    last_retry: Option<String>,
    last_message: Option<String>,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::for_command(crate::command::Context::default())
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    pub fn for_command(context: crate::command::Context) -> Parser {
        Parser {
            context,
            threads: BTreeSet::new(),
            items: BTreeSet::new(),
            usage: Usage::default(),
            turns_completed: 0,
            failure: None,
            pending_errors: Vec::new(),
            last_retry: None,
            last_message: None,
        }
    }

    /// A retry notice with the endpoint codex retries.
    fn retrying(&self, message: &str) -> String {
        let explained = self.explained(message);
        if explained.contains(&self.context.base_url) {
            explained
        } else {
            format!(
                "codex is retrying its model API at {}: {explained}",
                self.context.base_url
            )
        }
    }

    /// `message` with what the user can act on: the endpoint codex cannot
    /// reach and where it is set, or the key it was refused.
    fn explained(&self, message: &str) -> String {
        let url = &self.context.base_url;
        if message.contains("401 Unauthorized") || message.contains("403 Forbidden") {
            format!("{message} (check the API key in CODEX_API_KEY or OPENAI_API_KEY)")
        } else if unreachable(message) {
            format!(
                "codex cannot reach its model API at {url}: {message} \
                 (the URL is set by OPENAI_BASE_URL, passed to codex as -c openai_base_url)"
            )
        } else {
            message.to_owned()
        }
    }

    /// One `item.started` / `item.completed`.
    fn item(&mut self, item: &Value, completed: bool, events: &mut Vec<Event>) {
        let kind = item.get("type").and_then(Value::as_str);
        if kind == Some("agent_message") {
            if completed && let Some(text) = item.get("text").and_then(Value::as_str) {
                events.push(Event::Text(text.to_owned()));
                self.last_message = Some(text.to_owned());
            }
            return;
        }
        let call = match kind {
            Some("command_execution") => item.get("command").map(|command| {
                let input = serde_json::json!({ "command": command });
                ("shell".to_owned(), input.to_string())
            }),
            Some("file_change") => item.get("changes").map(|changes| {
                let input = serde_json::json!({ "changes": changes });
                ("file_change".to_owned(), input.to_string())
            }),
            Some("mcp_tool_call") => {
                let server = item.get("server").and_then(Value::as_str).unwrap_or("");
                let tool = item.get("tool").and_then(Value::as_str).unwrap_or("");
                // Claude Code's naming for MCP tools, so both agents read alike.
                let input = match item.get("arguments") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(arguments) => arguments.to_string(),
                };
                Some((format!("mcp__{server}__{tool}"), input))
            }
            // The query is only known once the search completes.
            Some("web_search") if completed => item.get("query").map(|query| {
                let input = serde_json::json!({ "query": query });
                ("web_search".to_owned(), input.to_string())
            }),
            // `reasoning`, `todo_list`, `collab_tool_call`, `plan`, the
            // non-fatal `error` item (warnings), unknown items: nothing.
            _ => None,
        };
        let Some((name, input)) = call else {
            return;
        };
        // Report each item once, at its first sighting. An item without an id
        // cannot be matched up, so it is reported every time.
        if let Some(id) = item.get("id").and_then(Value::as_str)
            && !self.items.insert(id.to_owned())
        {
            return;
        }
        events.push(Event::ToolCall { name, input });
    }
}

impl sanddune_agent_sdk::Parser for Parser {
    fn for_request(request: &sanddune_agent_sdk::Request) -> Parser {
        Parser::for_command(crate::command::Context::of(request))
    }

    /// Events for one stdout line. Anything that is not a JSON object, or is
    /// a type we do not use, yields nothing: stdout can carry stray output.
    fn push_line(&mut self, line: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            return events;
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                if let Some(id) = obj.get("thread_id").and_then(Value::as_str)
                    && !id.is_empty()
                    && self.threads.insert(id.to_owned())
                {
                    events.push(Event::SessionId(id.to_owned()));
                }
            }
            Some("item.started") => {
                if let Some(item) = obj.get("item") {
                    self.item(item, false, &mut events);
                }
            }
            Some("item.completed") => {
                if let Some(item) = obj.get("item") {
                    self.item(item, true, &mut events);
                }
            }
            Some("turn.completed") => {
                self.turns_completed += 1;
                // Whatever was reported before is what codex recovered from.
                self.pending_errors.clear();
                self.last_retry = None;
                if let Some(usage) = obj.get("usage").and_then(usage_from_codex)
                    && !self.context.resuming
                {
                    self.usage.add(usage);
                    events.push(Event::Usage(self.usage));
                }
            }
            Some("turn.failed") => {
                let message = obj
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or("no reason given");
                // The failure names the cause; earlier notices (often the same
                // message, or the retries leading to it) add nothing.
                self.pending_errors.clear();
                let message = self.explained(message);
                events.push(Event::Error(format!("codex turn failed: {message}")));
                self.failure = Some(message);
            }
            Some("error") => {
                let message = obj
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or("no message");
                // A retry notice is an error as it comes, naming the URL:
                // waiting for the network goes on forever, and the host stops
                // an agent whose errors continue without progress (a retry
                // that recovers is followed by progress). The last error
                // before `turn.failed` repeats it, so it waits.
                if message.starts_with("Reconnecting...") {
                    let retry = self.retrying(message);
                    self.last_retry = Some(retry.clone());
                    events.push(Event::Error(retry));
                } else {
                    self.pending_errors.push(message.to_owned());
                }
            }
            // `turn.started`, `item.updated`, `item.plan.delta`,
            // `request_user_input`, unknown types: nothing.
            _ => {}
        }
        events
    }

    /// Called at end of stdout. Codex has no result line: the result is the
    /// last agent message of a completed turn, or the failure. Errors codex
    /// printed and never recovered from are reported now, and a stream that
    /// neither completed nor failed a turn is an error, even if codex exited 0.
    fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut pending = std::mem::take(&mut self.pending_errors);
        pending.dedup();
        for message in &pending {
            let message = self.explained(message);
            events.push(Event::Error(format!("codex reported an error: {message}")));
        }
        if let Some(failure) = self.failure.take() {
            events.push(Event::Result {
                is_error: true,
                text: failure,
            });
        } else if let Some(last) = pending.pop() {
            events.push(Event::Result {
                is_error: true,
                text: last,
            });
        } else if self.turns_completed > 0 {
            events.push(Event::Result {
                is_error: false,
                text: self.last_message.take().unwrap_or_default(),
            });
        } else if let Some(retry) = self.last_retry.take() {
            // Stopped while retrying: the retry says why, and stays the last
            // error the host quotes.
            events.push(Event::Result {
                is_error: true,
                text: retry,
            });
        } else {
            events.push(Event::Error(NO_TURN.to_owned()));
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::Parser as _;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    // Recorded lines, shaped as in docs/reference/protocols.md.
    const THREAD: &str =
        r#"{"type":"thread.started","thread_id":"019fd9f6-3e33-72e0-89e8-49e33838d1cf"}"#;
    const TURN_STARTED: &str = r#"{"type":"turn.started"}"#;
    const REASONING: &str = r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Listing the files**"}}"#;
    const CMD_STARTED: &str = r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/sh -lc 'ls'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#;
    const CMD_COMPLETED: &str = r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/sh -lc 'ls'","aggregated_output":"README.md\nnotes.txt\n","exit_code":0,"status":"completed"}}"#;
    const FILE_CHANGE: &str = r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/repo/notes.txt","kind":"update"}],"status":"completed"}}"#;
    const MESSAGE: &str = r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"DONE <promise>COMPLETE</promise>"}}"#;
    const TURN_COMPLETED: &str = r#"{"type":"turn.completed","usage":{"input_tokens":79281,"cached_input_tokens":60416,"output_tokens":301}}"#;
    const THREAD_ID: &str = "019fd9f6-3e33-72e0-89e8-49e33838d1cf";

    fn feed(lines: &[&str]) -> (Vec<Event>, Vec<Event>) {
        let mut parser = Parser::new();
        let events = lines.iter().flat_map(|l| parser.push_line(l)).collect();
        (events, parser.finish())
    }

    fn turn_usage() -> Usage {
        Usage {
            input_tokens: 79281 - 60416,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 60416,
            output_tokens: 301,
        }
    }

    #[test]
    fn full_successful_stream() {
        let (events, end) = feed(&[
            THREAD,
            TURN_STARTED,
            REASONING,
            CMD_STARTED,
            CMD_COMPLETED,
            FILE_CHANGE,
            MESSAGE,
            TURN_COMPLETED,
        ]);
        assert_eq!(
            events,
            vec![
                Event::SessionId(THREAD_ID.into()),
                Event::ToolCall {
                    name: "shell".into(),
                    input: r#"{"command":"/bin/sh -lc 'ls'"}"#.into(),
                },
                Event::ToolCall {
                    name: "file_change".into(),
                    input: r#"{"changes":[{"kind":"update","path":"/repo/notes.txt"}]}"#.into(),
                },
                Event::Text("DONE <promise>COMPLETE</promise>".into()),
                Event::Usage(turn_usage()),
            ]
        );
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: false,
                text: "DONE <promise>COMPLETE</promise>".into(),
            }]
        );
    }

    #[test]
    fn two_turns_are_summed_and_the_last_message_is_the_result() {
        let first = r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"first"}}"#;
        let second_usage = r#"{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":200,"output_tokens":50}}"#;
        let (events, end) = feed(&[
            THREAD,
            TURN_STARTED,
            first,
            TURN_COMPLETED,
            TURN_STARTED,
            MESSAGE,
            second_usage,
        ]);
        let usages: Vec<Usage> = events
            .iter()
            .filter_map(|e| match e {
                Event::Usage(u) => Some(*u),
                _ => None,
            })
            .collect();
        assert_eq!(
            usages,
            [
                turn_usage(),
                Usage {
                    input_tokens: 79281 - 60416 + 800,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 60416 + 200,
                    output_tokens: 351,
                }
            ]
        );
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: false,
                text: "DONE <promise>COMPLETE</promise>".into(),
            }]
        );
    }

    #[test]
    fn turn_failed_is_an_error_even_with_exit_0() {
        let failed =
            r#"{"type":"turn.failed","error":{"message":"stream error: 429 Too Many Requests"}}"#;
        let (events, end) = feed(&[THREAD, TURN_STARTED, failed]);
        assert_eq!(
            events,
            vec![
                Event::SessionId(THREAD_ID.into()),
                Event::Error("codex turn failed: stream error: 429 Too Many Requests".into()),
            ]
        );
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: true,
                text: "stream error: 429 Too Many Requests".into(),
            }]
        );
        // No message at all still fails.
        let (events, end) = feed(&[r#"{"type":"turn.failed"}"#]);
        assert_eq!(
            events,
            vec![Event::Error("codex turn failed: no reason given".into())]
        );
        assert!(matches!(end[..], [Event::Result { is_error: true, .. }]));
    }

    #[test]
    fn error_then_turn_failed_reports_the_failure_once() {
        let error = r#"{"type":"error","message":"unexpected status 401 Unauthorized"}"#;
        let failed =
            r#"{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}"#;
        let (events, end) = feed(&[THREAD, TURN_STARTED, error, failed]);
        assert_eq!(
            events[1..],
            [Event::Error(
                "codex turn failed: unexpected status 401 Unauthorized \
                 (check the API key in CODEX_API_KEY or OPENAI_API_KEY)"
                    .into()
            )]
        );
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: true,
                text: "unexpected status 401 Unauthorized \
                       (check the API key in CODEX_API_KEY or OPENAI_API_KEY)"
                    .into(),
            }]
        );
    }

    #[test]
    fn top_level_error_without_a_turn_is_reported() {
        let error = r#"{"type":"error","message":"model \"gpt-9\" does not exist"}"#;
        let (events, end) = feed(&[THREAD, error]);
        assert_eq!(events, vec![Event::SessionId(THREAD_ID.into())]);
        assert_eq!(
            end,
            vec![
                Event::Error("codex reported an error: model \"gpt-9\" does not exist".into()),
                Event::Result {
                    is_error: true,
                    text: "model \"gpt-9\" does not exist".into(),
                },
            ]
        );
        // The same error twice in a row is reported once.
        let (_, end) = feed(&[error, error]);
        assert_eq!(end.len(), 2);
    }

    #[test]
    fn retry_notices_are_errors_naming_the_url() {
        let retry1 = r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion: stream closed before response.completed)"}"#;
        let retry2 = r#"{"type":"error","message":"Reconnecting... 2/5 (exceeded retry limit, last status: 429 Too Many Requests)"}"#;
        let (events, end) = feed(&[
            THREAD,
            TURN_STARTED,
            retry1,
            retry2,
            MESSAGE,
            TURN_COMPLETED,
        ]);
        assert_eq!(
            events[1..3],
            [
                Event::Error(
                    "codex is retrying its model API at https://api.openai.com/v1: \
                     Reconnecting... 1/5 (stream disconnected before completion: \
                     stream closed before response.completed)"
                        .into()
                ),
                Event::Error(
                    "codex is retrying its model API at https://api.openai.com/v1: \
                     Reconnecting... 2/5 (exceeded retry limit, last status: 429 Too Many Requests)"
                        .into()
                ),
            ]
        );
        // Progress after them, and a good result: the host forgives them.
        assert!(matches!(&events[3], Event::Text(_)));
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: false,
                text: "DONE <promise>COMPLETE</promise>".into(),
            }]
        );
        // Retries cut short (codex stopped): the last one is the result.
        let (events, end) = feed(&[THREAD, TURN_STARTED, retry1, retry2]);
        assert!(matches!(&end[..], [Event::Result { is_error: true, text }]
            if Some(&Event::Error(text.clone())) == events.last()));
    }

    #[test]
    fn error_items_are_not_errors() {
        let warning = r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"model rerouted: gpt-5 -> gpt-5-mini"}}"#;
        let (events, end) = feed(&[THREAD, TURN_STARTED, warning, MESSAGE, TURN_COMPLETED]);
        assert!(!events.iter().any(|e| matches!(e, Event::Error(_))));
        assert!(matches!(
            end[..],
            [Event::Result {
                is_error: false,
                ..
            }]
        ));
    }

    #[test]
    fn missing_turn_is_an_error_at_finish() {
        let (_, end) = feed(&[THREAD, TURN_STARTED, CMD_STARTED, MESSAGE]);
        assert_eq!(end, vec![Event::Error(NO_TURN.into())]);
        let (events, end) = feed(&[]);
        assert!(events.is_empty());
        assert_eq!(end, vec![Event::Error(NO_TURN.into())]);
    }

    #[test]
    fn completed_turn_without_message_or_usage() {
        let (events, end) = feed(&[THREAD, r#"{"type":"turn.completed"}"#]);
        assert_eq!(events, vec![Event::SessionId(THREAD_ID.into())]);
        assert_eq!(
            end,
            vec![Event::Result {
                is_error: false,
                text: String::new(),
            }]
        );
    }

    #[test]
    fn tool_calls_reported_once_per_item() {
        let mcp_started = r#"{"type":"item.started","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"wit"},"result":null,"error":null,"status":"in_progress"}}"#;
        let mcp_completed = r#"{"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"wit"},"result":{"content":[],"structured_content":null},"error":null,"status":"completed"}}"#;
        let search_started =
            r#"{"type":"item.started","item":{"id":"item_6","type":"web_search","query":""}}"#;
        let search_completed = r#"{"type":"item.completed","item":{"id":"item_6","type":"web_search","query":"wasmtime epoch"}}"#;
        // A command seen only completed (its start line lost) is still reported.
        let only_completed = CMD_COMPLETED.replace("item_1", "item_7");
        let mut parser = Parser::new();
        let events: Vec<Event> = [
            CMD_STARTED,
            CMD_COMPLETED,
            mcp_started,
            mcp_completed,
            search_started,
            search_completed,
            &only_completed,
        ]
        .iter()
        .flat_map(|l| parser.push_line(l))
        .collect();
        assert_eq!(
            events,
            vec![
                Event::ToolCall {
                    name: "shell".into(),
                    input: r#"{"command":"/bin/sh -lc 'ls'"}"#.into(),
                },
                Event::ToolCall {
                    name: "mcp__docs__search".into(),
                    input: r#"{"q":"wit"}"#.into(),
                },
                Event::ToolCall {
                    name: "web_search".into(),
                    input: r#"{"query":"wasmtime epoch"}"#.into(),
                },
                Event::ToolCall {
                    name: "shell".into(),
                    input: r#"{"command":"/bin/sh -lc 'ls'"}"#.into(),
                },
            ]
        );
        // MCP call without arguments: an empty object.
        let bare = r#"{"type":"item.started","item":{"type":"mcp_tool_call","server":"s","tool":"t","arguments":null}}"#;
        assert_eq!(
            Parser::new().push_line(bare),
            vec![Event::ToolCall {
                name: "mcp__s__t".into(),
                input: "{}".into()
            }]
        );
    }

    #[test]
    fn session_id_once_per_distinct_id() {
        let mut parser = Parser::new();
        assert_eq!(
            parser.push_line(THREAD),
            vec![Event::SessionId(THREAD_ID.into())]
        );
        assert_eq!(parser.push_line(THREAD), vec![]);
        assert_eq!(
            parser.push_line(r#"{"type":"thread.started","thread_id":"other"}"#),
            vec![Event::SessionId("other".into())]
        );
        for odd in [
            r#"{"type":"thread.started"}"#,
            r#"{"type":"thread.started","thread_id":""}"#,
            r#"{"type":"thread.started","thread_id":7}"#,
        ] {
            assert_eq!(parser.push_line(odd), vec![], "{odd}");
        }
    }

    #[test]
    fn ignored_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_no_events(
            &mut parser,
            &[
                TURN_STARTED,
                REASONING,
                r#"{"type":"item.updated","item":{"id":"item_9","type":"todo_list","items":[{"text":"a","completed":false}]}}"#,
                r#"{"type":"item.started","item":{"id":"item_9","type":"todo_list","items":[]}}"#,
                r#"{"type":"item.started","item":{"id":"item_3","type":"agent_message","text":"partial"}}"#,
                r#"{"type":"item.plan.delta","item_id":"item_4","delta":"x"}"#,
                "Reading prompt from stdin...",
                "2026-05-21T09:18:12.446963Z ERROR codex_core::codex: failed to load skill",
            ],
        );
    }

    #[test]
    fn truncated_json_yields_nothing() {
        let mut parser = Parser::new();
        assert_cuts_yield_nothing(&mut parser, &[THREAD, MESSAGE, TURN_COMPLETED]);
        // A cut-off turn.completed does not count as a completed turn.
        assert_eq!(parser.finish(), vec![Event::Error(NO_TURN.into())]);
    }

    #[test]
    fn invalid_utf8_replaced_chars() {
        // The host hands lines over with bad bytes replaced by U+FFFD.
        let mut bytes =
            br#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"caf"#
                .to_vec();
        bytes.extend_from_slice(&[0xE9, 0xFF, 0xC3]);
        bytes.extend_from_slice(br#""}}"#);
        let line = String::from_utf8_lossy(&bytes);
        let events = Parser::new().push_line(&line);
        assert_eq!(
            events,
            vec![Event::Text("caf\u{FFFD}\u{FFFD}\u{FFFD}".into())]
        );
    }

    #[test]
    fn huge_agent_message() {
        let text = "x".repeat(5 * 1024 * 1024);
        let line = serde_json::json!({
            "type": "item.completed",
            "item": {"id": "item_0", "type": "agent_message", "text": text},
        })
        .to_string();
        let mut parser = Parser::new();
        assert_eq!(parser.push_line(&line), vec![Event::Text(text.clone())]);
        parser.push_line(TURN_COMPLETED);
        assert_eq!(
            parser.finish(),
            vec![Event::Result {
                is_error: false,
                text
            }]
        );
    }

    #[test]
    fn hostile_lines_do_not_panic() {
        assert_survives_hostile_lines::<Parser>();
        let line = format!(
            r#"{{"type":"item.completed","item":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(Parser::new().push_line(&line), vec![]);
    }

    #[test]
    fn odd_shapes_are_tolerated() {
        let mut parser = Parser::new();
        for line in [
            r#"{"type":"item.completed"}"#,
            r#"{"type":"item.completed","item":"text"}"#,
            r#"{"type":"item.completed","item":{"type":"agent_message","text":5}}"#,
            r#"{"type":"item.started","item":{"type":"command_execution"}}"#,
            r#"{"type":"item.completed","item":{"type":"file_change"}}"#,
            r#"{"type":"turn.completed","usage":7}"#,
            r#"{"type":"turn.failed","error":"boom"}"#,
            r#"{"type":"error","message":42}"#,
            r#"{"type":42,"thread_id":5}"#,
        ] {
            let events = parser.push_line(line);
            assert!(
                events.iter().all(|e| matches!(e, Event::Error(_))),
                "line: {line} gave {events:?}"
            );
        }
        // Usage fields of the wrong type count as 0; cached above input saturates.
        let line = r#"{"type":"turn.completed","usage":{"input_tokens":"9","cached_input_tokens":5,"output_tokens":-1}}"#;
        assert_eq!(
            Parser::new().push_line(line),
            vec![Event::Usage(Usage {
                cache_read_input_tokens: 5,
                ..Usage::default()
            })]
        );
    }

    /// Captured from `echo hi | HOME=$tmp tests/fakes/codex exec --json -`
    /// in a scratch git repo.
    #[test]
    fn fake_codex_sample() {
        let sample = include_str!("../testdata/fake-codex-sample.jsonl");
        let mut parser = Parser::new();
        let mut events: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        events.extend(parser.finish());
        assert!(matches!(&events[0], Event::SessionId(id) if id.len() == 36));
        let names: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCall { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["shell", "file_change"]);
        assert_eq!(
            events[events.len() - 2..],
            [
                Event::Usage(turn_usage()),
                Event::Result {
                    is_error: false,
                    text: "Added a note. <promise>COMPLETE</promise>".into(),
                },
            ]
        );
        assert!(!events.iter().any(|e| matches!(e, Event::Error(_))));
    }

    /// Real codex 0.169.0 output against tests/model-mock: the exec tool's
    /// command, the final message, and the turn's usage (two responses:
    /// 111 + 211 fresh, 1005 + 2005 cached, 17 + 27 out).
    #[test]
    fn real_0_169_commit() {
        let sample = include_str!("../testdata/codex-0.169.0-commit.jsonl");
        let (events, end) = feed(&sample.lines().collect::<Vec<_>>());
        assert!(
            matches!(&events[0], Event::SessionId(id) if id == "01a212cc-59d1-7ea2-8572-fa16decd86ca")
        );
        assert!(
            matches!(&events[1], Event::ToolCall { name, input } if name == "shell" && input.contains("git commit -q"))
        );
        assert_eq!(
            events[2..],
            [
                Event::Text("Added the line and committed it. <promise>COMPLETE</promise>".into()),
                Event::Usage(Usage {
                    input_tokens: 322,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 3010,
                    output_tokens: 44,
                }),
            ]
        );
        assert!(
            matches!(&end[..], [Event::Result { is_error: false, text }] if text.ends_with("<promise>COMPLETE</promise>"))
        );
    }

    /// `exec resume`: turn.completed is the session's running total, so the
    /// stream reports no usage (the host reads the turn's from the session).
    #[test]
    fn resumed_turn_reports_no_running_total() {
        let sample = include_str!("../testdata/codex-0.169.0-commit.jsonl");
        let mut parser = Parser::for_command(crate::command::Context {
            resuming: true,
            ..Default::default()
        });
        let events: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        assert!(!events.iter().any(|e| matches!(e, Event::Usage(_))));
        assert!(matches!(
            &parser.finish()[..],
            [Event::Result {
                is_error: false,
                ..
            }]
        ));
    }

    /// The real 401: five retries, then turn.failed; the error names the key.
    #[test]
    fn real_0_169_unauthorized() {
        let sample = include_str!("../testdata/codex-0.169.0-401.jsonl");
        let mut parser = Parser::for_command(crate::command::Context {
            base_url: "http://127.0.0.1:18080/v1".into(),
            resuming: false,
        });
        let events: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        let cause = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-bad., \
                     url: http://127.0.0.1:18080/v1/responses \
                     (check the API key in CODEX_API_KEY or OPENAI_API_KEY)";
        // Each retry as it comes (codex's words name the URL), then the failure.
        let retries: Vec<Event> = (1..=5)
            .map(|n| {
                Event::Error(format!(
                    "Reconnecting... {n}/5 (unexpected status 401 Unauthorized: Incorrect API key \
                     provided: sk-bad., url: http://127.0.0.1:18080/v1/responses) \
                     (check the API key in CODEX_API_KEY or OPENAI_API_KEY)"
                ))
            })
            .collect();
        assert_eq!(events[1..6], retries);
        assert_eq!(
            events[6..],
            [Event::Error(format!("codex turn failed: {cause}"))]
        );
        assert_eq!(
            parser.finish(),
            [Event::Result {
                is_error: true,
                text: cause.into()
            }]
        );
    }

    /// An unreachable API: five WebSocket retries, then codex retries forever
    /// ("waiting for network"), naming no URL. Each line is an error naming
    /// the URL and where it is set, as it comes.
    #[test]
    fn real_0_169_unreachable_errors_name_the_url() {
        let sample = include_str!("../testdata/codex-0.169.0-unreachable.jsonl");
        let mut parser = Parser::for_command(crate::command::Context {
            base_url: "http://127.0.0.1:18099/v1".into(),
            resuming: false,
        });
        let errors: Vec<Event> = sample.lines().flat_map(|l| parser.push_line(l)).collect();
        let expected = Event::Error(
            "codex cannot reach its model API at http://127.0.0.1:18099/v1: \
             Reconnecting... waiting for network (Connection failed: error sending request) \
             (the URL is set by OPENAI_BASE_URL, passed to codex as -c openai_base_url)"
                .into(),
        );
        assert_eq!(
            errors[0],
            Event::SessionId("01a212cb-a3de-7df1-82b7-4454023af7e9".into())
        );
        assert_eq!(errors.len(), 10);
        for (n, error) in errors[1..5].iter().enumerate() {
            let Event::Error(m) = error else {
                panic!("{error:?}")
            };
            assert!(
                m.starts_with("codex cannot reach its model API at http://127.0.0.1:18099/v1: ")
                    && m.contains(&format!("{}/5 (", n + 2))
                    && m.contains("Connection refused"),
                "{m}"
            );
        }
        assert_eq!(errors[5..], vec![expected; 5]);
    }
}
