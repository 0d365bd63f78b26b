//! Parser for `claude --print --output-format stream-json` (one JSON object
//! per stdout line). See docs/reference/protocols.md, "Claude Code".

use std::borrow::Cow;
use std::collections::BTreeSet;

use sanddune_agent_sdk::stream_json;
use serde::Deserialize;
use serde_json::Value;

pub use sanddune_agent_sdk::{Event, Request, Usage};

/// Reads a Claude usage object (`message.usage`, `result.usage`); missing or
/// non-integer fields count as 0. None when `value` is not an object at all.
pub fn usage_from_json(value: &Value) -> Option<Usage> {
    let keys: [&[&str]; 4] = [
        &["input_tokens"],
        &["cache_creation_input_tokens"],
        &["cache_read_input_tokens"],
        &["output_tokens"],
    ];
    Usage::from_keys(value, keys).map(|(usage, _)| usage)
}

pub const AUTH_HINT: &str = " (the model API refused the credentials: check ANTHROPIC_API_KEY, \
     or ANTHROPIC_AUTH_TOKEN / CLAUDE_CODE_OAUTH_TOKEN, and ANTHROPIC_BASE_URL)";

pub const NO_RESULT: &str =
    "claude ended without a result line (stream cut short or the CLI failed before starting)";

#[derive(Debug)]
pub struct Parser {
    /// Session ids already reported, so each is reported once. (A BTreeSet:
    /// HashSet seeding would import wasi:random into the component.)
    sessions: BTreeSet<String>,
    saw_result: bool,
    /// The last api_retry error: why a stream cut short has no result.
    last_retry: Option<String>,
    /// Where claude sends model requests, as the errors say it.
    endpoint: String,
}

/// claude's model API when ANTHROPIC_BASE_URL is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

impl Default for Parser {
    fn default() -> Parser {
        Parser::new()
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser::for_request(&Request::default())
    }

    /// A parser for the command built for `request`: its errors name the
    /// URL the run pointed claude at, and the variable that set it.
    pub fn for_request(request: &Request) -> Parser {
        let endpoint = match request.env_value("ANTHROPIC_BASE_URL") {
            Some(url) => format!("{url} (ANTHROPIC_BASE_URL)"),
            None => format!("{DEFAULT_BASE_URL} (ANTHROPIC_BASE_URL is not set)"),
        };
        Parser {
            sessions: BTreeSet::new(),
            saw_result: false,
            last_retry: None,
            endpoint,
        }
    }

    /// Events for one stdout line. Anything that is not a JSON object, or is
    /// a type we do not use, yields nothing: stdout can carry stray output.
    pub fn push_line(&mut self, line: &str) -> Vec<Event> {
        let mut events = Vec::new();
        // A cheap first pass reads only `type` and `session_id`: most lines
        // (tool results, progress, rate limits) need nothing more, and a
        // tool result can be megabytes that would otherwise become a tree.
        // (Objects only: serde would also fill the struct from an array.)
        if !line.trim_start().starts_with('{') {
            return events;
        }
        let Ok(envelope) = serde_json::from_str::<Envelope>(line) else {
            return events;
        };

        // Every line carries `session_id`; the first sighting of an id is
        // reported whatever the line's type (init normally comes first).
        if let Some(id) = envelope.session_id.as_deref()
            && !id.is_empty()
            && !self.sessions.contains(id)
        {
            self.sessions.insert(id.to_owned());
            events.push(Event::SessionId(id.to_owned()));
        }

        let kind = envelope.kind.as_deref();
        if kind == Some("system") && envelope.subtype.as_deref() == Some("api_retry") {
            // claude retries a failed model request with no other output
            // (for minutes when the API is unreachable): each retry is an
            // error, so a run that never gets through can be stopped.
            if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) {
                let message = api_retry(&obj, &self.endpoint);
                self.last_retry = Some(message.clone());
                events.push(Event::Error(message));
            }
            return events;
        }
        if !matches!(kind, Some("assistant" | "result")) {
            // `system` (init and the rest), `user` (tool results),
            // `rate_limit_event`, `stream_event`, unknown types: nothing more.
            return events;
        }
        if kind == Some("assistant")
            && let Ok(typed) = serde_json::from_str::<AssistantLine>(line)
        {
            // The usual shape, read without building a tree of the line.
            typed.push_events(&mut events);
            return events;
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            return events;
        };
        if kind == Some("assistant") {
            assistant(&obj, &mut events);
        } else {
            self.saw_result = true;
            result(&obj, &mut events);
        }
        events
    }

    /// Called at end of stdout: a stream without a `result` line means the
    /// iteration did not complete, even if claude exited 0.
    pub fn finish(&mut self) -> Vec<Event> {
        if self.saw_result {
            return Vec::new();
        }
        // Stopped while retrying: the retry says why, the host quotes the
        // last error.
        let message = match &self.last_retry {
            Some(retry) => format!("{NO_RESULT}; it was retrying: {retry}"),
            None => NO_RESULT.to_owned(),
        };
        vec![Event::Error(message)]
    }
}

/// The two fields every line is read for; everything else is skipped.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    subtype: Option<Cow<'a, str>>,
}

/// A `system` `api_retry` line as an error message: claude names neither
/// the URL nor the key, only the attempt, the status (null when the API
/// could not be reached) and its own error kind; `endpoint` says where it
/// was pointed.
fn api_retry(obj: &Object, endpoint: &str) -> String {
    let num = |k: &str| obj.get(k).and_then(Value::as_u64);
    let status = match num("error_status") {
        Some(status) => format!("HTTP {status} from {endpoint}"),
        None => format!("no answer from {endpoint}"),
    };
    let error = obj
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut message = format!("claude could not reach the model API: {status}, error {error}");
    if let (Some(attempt), Some(max)) = (num("attempt"), num("max_retries")) {
        message.push_str(&format!("; retry {attempt} of {max}"));
    }
    if let Some(ms) = num("retry_delay_ms") {
        message.push_str(&format!(" in {:.1} s", ms as f64 / 1000.0));
    }
    message
}

/// An assistant line in its usual shape: only the fields events come from
/// are read; the rest (ids, model, thinking text) are skipped unbuilt. Any
/// other shape falls back to the general path below.
#[derive(Deserialize)]
struct AssistantLine<'a> {
    #[serde(borrow)]
    message: AssistantMessage<'a>,
}

#[derive(Deserialize)]
struct AssistantMessage<'a> {
    #[serde(borrow, default)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    /// Present-but-null stays `null`, as the general path reports it.
    #[serde(default, deserialize_with = "present")]
    input: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl AssistantLine<'_> {
    fn push_events(self, events: &mut Vec<Event>) {
        for block in self.message.content {
            match block.kind.as_ref() {
                "text" => {
                    if let Some(text) = block.text {
                        events.push(Event::Text(text.into_owned()));
                    }
                }
                "tool_use" => events.push(Event::ToolCall {
                    name: block.name.map(Cow::into_owned).unwrap_or_default(),
                    input: block
                        .input
                        .map_or_else(|| "{}".to_owned(), |v| v.to_string()),
                }),
                _ => {}
            }
        }
        if let Some(usage) = self.message.usage.as_ref().and_then(usage_from_json) {
            events.push(Event::Usage(usage));
        }
    }
}

type Object = serde_json::Map<String, Value>;

fn assistant(obj: &Object, events: &mut Vec<Event>) {
    stream_json::assistant_content(obj, events);
    if let Some(usage) = obj
        .get("message")
        .and_then(|m| m.get("usage"))
        .and_then(usage_from_json)
    {
        events.push(Event::Usage(usage));
    }
}

fn result(obj: &Object, events: &mut Vec<Event>) {
    if let Some(usage) = obj.get("usage").and_then(usage_from_json) {
        events.push(Event::Usage(usage));
    }
    let (result, error) = stream_json::result(obj, "claude", stream_json::errors_list);
    events.push(result);
    if let Some(mut message) = error {
        // claude says "Invalid API key" but not which variable it read.
        if matches!(
            obj.get("api_error_status").and_then(Value::as_u64),
            Some(401 | 403)
        ) {
            message.push_str(AUTH_HINT);
        }
        events.push(Event::Error(message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    // Recorded lines, shaped as in docs/reference/protocols.md.
    const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11","tools":["Bash","Read","Edit"],"mcp_servers":[],"model":"claude-opus-4-6","permissionMode":"bypassPermissions","slash_commands":[],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.330","output_style":"default","agents":[],"skills":[],"plugins":[],"uuid":"0b7e3c1a-0000-4000-8000-000000000001"}"#;
    const ASSISTANT: &str = r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"thinking","thinking":"let me run the tests","signature":"abc"},{"type":"text","text":"Running the tests."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"npm test","description":"Run tests"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":9600,"output_tokens":58,"service_tier":"standard"}},"parent_tool_use_id":null,"session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11","uuid":"0b7e3c1a-0000-4000-8000-000000000002"}"#;
    const USER: &str = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"12 passing","is_error":false}]},"parent_tool_use_id":null,"session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11","uuid":"0b7e3c1a-0000-4000-8000-000000000003"}"#;
    const RATE_LIMIT: &str = r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1767225600,"rateLimitType":"five_hour"},"uuid":"0b7e3c1a-0000-4000-8000-000000000004","session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11"}"#;
    const SUCCESS: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":74096,"duration_api_ms":70011,"num_turns":15,"result":"Done. <promise>COMPLETE</promise>","session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11","total_cost_usd":0.24,"usage":{"input_tokens":18,"cache_creation_input_tokens":14760,"cache_read_input_tokens":169817,"output_tokens":2577,"server_tool_use":{"web_search_requests":0}},"permission_denials":[],"uuid":"0b7e3c1a-0000-4000-8000-000000000005"}"#;
    const SESSION: &str = "5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11";

    fn feed(lines: &[&str]) -> (Vec<Event>, Vec<Event>) {
        let mut parser = Parser::new();
        let events = lines.iter().flat_map(|l| parser.push_line(l)).collect();
        (events, parser.finish())
    }

    #[test]
    fn full_successful_stream() {
        let (events, end) = feed(&[INIT, ASSISTANT, USER, RATE_LIMIT, SUCCESS]);
        assert_eq!(
            events,
            vec![
                Event::SessionId(SESSION.into()),
                Event::Text("Running the tests.".into()),
                Event::ToolCall {
                    name: "Bash".into(),
                    input: r#"{"command":"npm test","description":"Run tests"}"#.into(),
                },
                Event::Usage(Usage {
                    input_tokens: 2,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 9600,
                    output_tokens: 58,
                }),
                Event::Usage(Usage {
                    input_tokens: 18,
                    cache_creation_input_tokens: 14760,
                    cache_read_input_tokens: 169817,
                    output_tokens: 2577,
                }),
                Event::Result {
                    is_error: false,
                    text: "Done. <promise>COMPLETE</promise>".into(),
                },
            ]
        );
        assert_eq!(end, vec![]);
    }

    #[test]
    fn ignored_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_eq!(parser.push_line(INIT).len(), 1);
        assert_no_events(
            &mut parser,
            &[
                USER,
                RATE_LIMIT,
                r#"{"type":"system","subtype":"hook_started","session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11"}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta"},"session_id":"5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11"}"#,
                "npm WARN deprecated something",
            ],
        );
    }

    #[test]
    fn session_id_once_per_distinct_id() {
        let mut parser = Parser::new();
        assert_eq!(
            parser.push_line(INIT),
            vec![Event::SessionId(SESSION.into())]
        );
        assert!(
            !parser
                .push_line(ASSISTANT)
                .contains(&Event::SessionId(SESSION.into()))
        );
        // A session id first seen on a later line is still reported.
        let other =
            r#"{"type":"user","message":{"role":"user","content":[]},"session_id":"other-id"}"#;
        assert_eq!(
            parser.push_line(other),
            vec![Event::SessionId("other-id".into())]
        );
        assert_eq!(parser.push_line(other), vec![]);
    }

    #[test]
    fn session_id_from_result_without_init() {
        let (events, end) = feed(&[SUCCESS]);
        assert_eq!(events[0], Event::SessionId(SESSION.into()));
        assert!(end.is_empty());
    }

    #[test]
    fn is_error_with_success_subtype_is_a_failure() {
        let line = r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":512,"num_turns":1,"result":"API Error: 429 rate_limit_error","session_id":"s1","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}"#;
        let (events, end) = feed(&[line]);
        assert_eq!(
            &events[2..],
            &[
                Event::Result {
                    is_error: true,
                    text: "API Error: 429 rate_limit_error".into(),
                },
                Event::Error("claude reported an error: API Error: 429 rate_limit_error".into()),
            ]
        );
        assert!(end.is_empty());
    }

    #[test]
    fn error_max_turns() {
        let line = r#"{"type":"result","subtype":"error_max_turns","is_error":false,"duration_ms":9000,"num_turns":3,"session_id":"s1","total_cost_usd":0.01,"usage":{"input_tokens":5,"output_tokens":7}}"#;
        let (events, _) = feed(&[line]);
        assert_eq!(
            events,
            vec![
                Event::SessionId("s1".into()),
                Event::Usage(Usage {
                    input_tokens: 5,
                    output_tokens: 7,
                    ..Usage::default()
                }),
                Event::Result {
                    is_error: true,
                    text: String::new(),
                },
                Event::Error("claude stopped with error_max_turns".into()),
            ]
        );
    }

    #[test]
    fn error_during_execution_uses_errors_list() {
        let line = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom","bang"]}"#;
        let (events, _) = feed(&[line]);
        assert_eq!(
            events.last(),
            Some(&Event::Error(
                "claude stopped with error_during_execution: boom; bang".into()
            ))
        );
    }

    #[test]
    fn missing_result_is_an_error_at_finish() {
        let (_, end) = feed(&[INIT, ASSISTANT]);
        assert_eq!(end, vec![Event::Error(NO_RESULT.into())]);
        let (events, end) = feed(&[]);
        assert!(events.is_empty());
        assert_eq!(end, vec![Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn json_that_is_not_an_object_yields_nothing() {
        let mut parser = Parser::new();
        for line in [r#"["assistant","5805de68"]"#, "42", r#""result""#, "null"] {
            assert_eq!(parser.push_line(line), vec![], "{line}");
        }
    }

    #[test]
    fn truncated_json_yields_nothing() {
        let mut parser = Parser::new();
        assert_cuts_yield_nothing(&mut parser, &[SUCCESS]);
        // A cut-off result line does not count as a result.
        assert_eq!(parser.finish(), vec![Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn invalid_utf8_replaced_chars() {
        // The host hands lines over with bad bytes replaced by U+FFFD.
        let mut bytes =
            br#"{"type":"assistant","message":{"content":[{"type":"text","text":"caf"#.to_vec();
        bytes.extend_from_slice(&[0xE9, 0xFF, 0xC3]);
        bytes.extend_from_slice(br#""}]},"session_id":"s1"}"#);
        let line = String::from_utf8_lossy(&bytes);
        let events = Parser::new().push_line(&line);
        assert_eq!(
            events,
            vec![
                Event::SessionId("s1".into()),
                Event::Text("caf\u{FFFD}\u{FFFD}\u{FFFD}".into())
            ]
        );
    }

    #[test]
    fn huge_text_line() {
        let text = "x".repeat(5 * 1024 * 1024);
        let line = serde_json::json!({
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": text}]},
            "session_id": "s1",
        })
        .to_string();
        let events = Parser::new().push_line(&line);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1], Event::Text(text));
    }

    #[test]
    fn hostile_lines_do_not_panic() {
        assert_survives_hostile_lines::<Parser>();
    }

    #[test]
    fn odd_shapes_are_tolerated() {
        let mut parser = Parser::new();
        // Wrong field types: skipped, never a panic.
        for line in [
            r#"{"type":"assistant"}"#,
            r#"{"type":"assistant","message":"text"}"#,
            r#"{"type":"assistant","message":{"content":"text","usage":7}}"#,
            r#"{"type":"assistant","message":{"content":[1,null,{"type":"text","text":5}]}}"#,
            r#"{"type":42,"session_id":5}"#,
        ] {
            assert_eq!(parser.push_line(line), vec![], "line: {line}");
        }
        let tool =
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read"}]}}"#;
        assert_eq!(
            parser.push_line(tool),
            vec![Event::ToolCall {
                name: "Read".into(),
                input: "{}".into()
            }]
        );
        // A null input is reported as null; a mixed block list falls back
        // to the general path and keeps the blocks it can read.
        let null = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":null}]}}"#;
        assert_eq!(
            parser.push_line(null),
            vec![Event::ToolCall {
                name: "Read".into(),
                input: "null".into()
            }]
        );
        let mixed =
            r#"{"type":"assistant","message":{"content":[7,{"type":"text","text":"kept"}]}}"#;
        assert_eq!(parser.push_line(mixed), vec![Event::Text("kept".into())]);
    }

    #[test]
    fn the_fast_path_reports_what_the_general_path_does() {
        // ASSISTANT has thinking, text and tool_use blocks and usage.
        let mut fast = Parser::new();
        let fast = fast.push_line(ASSISTANT);
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(ASSISTANT) else {
            panic!("recorded line is an object");
        };
        let mut general = vec![Event::SessionId(SESSION.into())];
        assistant(&obj, &mut general);
        assert_eq!(fast, general);
    }

    /// Real lines of claude 2.1.330 whose model API cannot be reached
    /// (connection refused): one per retry, nothing else for minutes.
    const API_RETRY: &str = r#"{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2480,"error_status":null,"error":"unknown","session_id":"710ff6b4-7151-4ae5-ab8b-53c3e2cd313f","uuid":"8a5aaace-e36e-4fc1-acc7-3e492a5705a0"}"#;

    #[test]
    fn each_api_retry_is_an_error() {
        let mut parser = Parser::new();
        let events = parser.push_line(API_RETRY);
        assert_eq!(
            events,
            vec![
                Event::SessionId("710ff6b4-7151-4ae5-ab8b-53c3e2cd313f".into()),
                Event::Error(
                    "claude could not reach the model API: no answer from \
                     https://api.anthropic.com (ANTHROPIC_BASE_URL is not set), error unknown; \
                     retry 3 of 10 in 2.5 s"
                        .into()
                )
            ]
        );
    }

    #[test]
    fn a_retry_names_the_url_the_run_set() {
        let request = Request {
            env: vec![("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into())],
            ..Request::default()
        };
        let mut parser = Parser::for_request(&request);
        let Some(Event::Error(message)) = parser.push_line(API_RETRY).pop() else {
            panic!("no error");
        };
        assert!(
            message.contains("no answer from http://127.0.0.1:9 (ANTHROPIC_BASE_URL)"),
            "{message}"
        );
    }

    #[test]
    fn a_stream_cut_while_retrying_says_the_retry() {
        let mut parser = Parser::new();
        parser.push_line(API_RETRY);
        let Some(Event::Error(message)) = parser.finish().pop() else {
            panic!("no error");
        };
        assert!(message.starts_with(NO_RESULT), "{message}");
        assert!(message.ends_with("retry 3 of 10 in 2.5 s"), "{message}");
    }

    /// Real lines of claude 2.1.330 given a 401 (authentication_error).
    const AUTH_ASSISTANT: &str = r#"{"type":"assistant","message":{"diagnostics":null,"id":"7653100c-62ab-49a8-8a7f-71f0d29bbd69","container":null,"model":"<synthetic>","role":"assistant","stop_details":null,"stop_reason":"stop_sequence","stop_sequence":"","type":"message","usage":{"output_tokens_details":null,"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":null,"cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"inference_geo":null,"iterations":null,"speed":null,"fallback_credit":null},"content":[{"type":"text","text":"Invalid API key · Fix external API key"}],"context_management":null},"parent_tool_use_id":null,"session_id":"dfa69df3-2f23-4127-bac4-8f6b9bbda560","uuid":"e47c5668-7692-400d-9a29-59795ddf3b0e","timestamp":"2026-11-25T13:02:06.511Z","error":"authentication_failed","request_id":"req_mock_1","is_api_error_message":true,"api_error_status":401,"api_error_type":"authentication_error"}"#;
    const AUTH_RESULT: &str = r#"{"duration_api_ms":0,"stop_reason":"stop_sequence","session_id":"dfa69df3-2f23-4127-bac4-8f6b9bbda560","total_cost_usd":0,"usage":{"output_tokens_details":{"thinking_tokens":0},"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0,"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"inference_geo":"","iterations":[],"speed":"standard","fallback_credit":null},"modelUsage":{},"permission_denials":[],"terminal_reason":"api_error","fast_mode_state":"off","fast_mode_disabled_reason":"sdk_opt_in_required","subagent_stats":{"spawned":0,"requested":{"background":0,"foreground":0,"unset":0},"started_in_background":0,"max_depth":0,"spawned_by_subagents":0,"completed":0,"failed":0,"killed":{"parent":0,"user":0,"system":0},"refused":{"depth_limit":0,"concurrency_limit":0,"budget":0},"by_type":{}},"safety_stops":0,"is_error":true,"num_turns":1,"subtype":"success","api_error_status":401,"api_error_type":"authentication_error","result":"Invalid API key · Fix external API key","type":"result","duration_ms":652,"uuid":"ef3758b0-69fa-4d74-9a8d-5f33fd8462e7","queued_turn_count":0,"result_index":0,"model_usage_since_last_result":{}}"#;

    #[test]
    fn a_401_names_the_variables_to_check() {
        let mut parser = Parser::new();
        let mut events = parser.push_line(AUTH_ASSISTANT);
        events.extend(parser.push_line(AUTH_RESULT));
        assert!(events.contains(&Event::Text(
            "Invalid API key · Fix external API key".into()
        )));
        let Some(Event::Error(message)) = events.last() else {
            panic!("{events:?}");
        };
        assert_eq!(
            message,
            &format!("claude reported an error: Invalid API key · Fix external API key{AUTH_HINT}")
        );
    }
}
