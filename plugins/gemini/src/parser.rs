//! Parser for `gemini --output-format stream-json` (one JSON object per
//! stdout line): `init` (the session id), `message` (the user's prompt
//! echoed, then the assistant's text as `delta` pieces, joined here into
//! one text event per message), `tool_use`,
//! `tool_result`, and a last `result` with the status and the token
//! counts. See docs/reference/protocols.md, "Gemini CLI".

use sanddune_agent_sdk::Usage;
use serde_json::{Map, Value};

pub use sanddune_agent_sdk::Event;

pub const NO_RESULT: &str = "gemini ended without a result line \
     (stream cut short, or the CLI failed before starting: see its stderr)";

/// Where the CLI is pointed unless `GOOGLE_GEMINI_BASE_URL` says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

#[derive(Debug, Default)]
pub struct Parser {
    session_reported: bool,
    saw_result: bool,
    /// The assistant message being streamed, delta by delta.
    message: String,
    /// The last whole assistant message: the result's text.
    last_message: String,
    /// `GOOGLE_GEMINI_BASE_URL` of the run, when set: the CLI's "fetch
    /// failed" names no address, so the error does.
    base_url: Option<String>,
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }
}

type Object = Map<String, Value>;

impl sanddune_agent_sdk::Parser for Parser {
    fn for_request(request: &sanddune_agent_sdk::Request) -> Self {
        Parser {
            base_url: request
                .env_value("GOOGLE_GEMINI_BASE_URL")
                .map(String::from),
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
        let kind = obj.get("type").and_then(Value::as_str);
        let delta = kind == Some("message") && string(&obj, "role") == Some("assistant");
        if !delta {
            // Any other line ends the message the deltas were building.
            self.flush(&mut events);
        }
        match kind {
            Some("init") => {
                if let Some(id) = string(&obj, "session_id")
                    && !self.session_reported
                {
                    self.session_reported = true;
                    events.push(Event::SessionId(id.to_owned()));
                }
            }
            Some("message") if delta => {
                if let Some(text) = string(&obj, "content") {
                    self.message.push_str(text);
                }
            }
            Some("tool_use") => {
                if let Some(name) = string(&obj, "tool_name") {
                    let input = match obj.get("parameters") {
                        None | Some(Value::Null) => "{}".to_owned(),
                        Some(value) => value.to_string(),
                    };
                    events.push(Event::ToolCall {
                        name: name.to_owned(),
                        input,
                    });
                }
            }
            Some("result") => {
                self.saw_result = true;
                self.result(&obj, &mut events);
            }
            // The user's prompt echoed, tool results (the model reads
            // them; a failing command is still "success" there), unknown
            // types: nothing.
            _ => {}
        }
        events
    }

    /// Called at end of stdout: a stream without a `result` line means the
    /// iteration did not complete (the CLI exits non-zero and says why on
    /// stderr, or was cut short).
    fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        self.flush(&mut events);
        if !self.saw_result {
            events.push(Event::Error(NO_RESULT.to_owned()));
        }
        events
    }
}

impl Parser {
    /// The streamed message as one text event: the CLI sends a message in
    /// pieces, a line each, which are no lines of their own.
    fn flush(&mut self, events: &mut Vec<Event>) {
        if self.message.is_empty() {
            return;
        }
        self.last_message = std::mem::take(&mut self.message);
        events.push(Event::Text(self.last_message.clone()));
    }

    fn result(&mut self, obj: &Object, events: &mut Vec<Event>) {
        if let Some(usage) = obj.get("stats").and_then(usage_from_stats) {
            events.push(Event::Usage(usage));
        }
        let success = string(obj, "status") == Some("success");
        if success {
            events.push(Event::Result {
                is_error: false,
                text: self.last_message.clone(),
            });
            return;
        }
        let detail = obj
            .get("error")
            .and_then(|e| match e {
                Value::String(s) => Some(s.as_str()),
                e => e.get("message").and_then(Value::as_str),
            })
            .unwrap_or("")
            .trim();
        let status = string(obj, "status").unwrap_or("no status");
        let mut message = format!("gemini stopped with {status}");
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        message.push_str(&self.hint(detail));
        events.push(Event::Result {
            is_error: true,
            text: detail.to_owned(),
        });
        events.push(Event::Error(message));
    }
}

impl Parser {
    /// What to check, for the errors whose message does not say: the key
    /// the API refused, the address it could not reach.
    fn hint(&self, detail: &str) -> String {
        if detail.contains("API key not valid") || detail.contains("UNAUTHENTICATED") {
            return " (check GEMINI_API_KEY)".into();
        }
        if detail.contains("fetch failed") {
            return match &self.base_url {
                Some(url) => format!(
                    " (the Gemini API at {url}, set by GOOGLE_GEMINI_BASE_URL, did not answer)"
                ),
                None => format!(" (the Gemini API at {DEFAULT_BASE_URL} did not answer)"),
            };
        }
        String::new()
    }
}

fn string<'a>(obj: &'a Object, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

/// `result.stats`: `input_tokens` counts the cached ones too, `input` the
/// others, `cached` the cache reads, `output_tokens` the answer (thinking
/// not included). None when `stats` holds none of them (a zero total would
/// be a lie).
pub fn usage_from_stats(stats: &Value) -> Option<Usage> {
    let obj = stats.as_object()?;
    let n = |key: &str| obj.get(key).and_then(Value::as_u64);
    let (total_in, uncached, cached, output) = (
        n("input_tokens"),
        n("input"),
        n("cached"),
        n("output_tokens"),
    );
    if total_in.is_none() && uncached.is_none() && output.is_none() {
        return None;
    }
    let cached = cached.unwrap_or(0);
    Some(Usage {
        input_tokens: uncached.unwrap_or_else(|| total_in.unwrap_or(0).saturating_sub(cached)),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
        output_tokens: output.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::Parser as _;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    /// Real lines of gemini 0.61.0 against the loopback mock: a shell tool
    /// call that committed, then the answer in two deltas.
    const COMMIT: [&str; 7] = [
        r#"{"type":"init","timestamp":"2026-11-27T18:33:38.043Z","session_id":"c5247799-3071-42b5-b01f-40e546a3efe4","model":"gemini-2.5-pro"}"#,
        r#"{"type":"message","timestamp":"2026-11-27T18:33:38.044Z","role":"user","content":"make an empty commit"}"#,
        r#"{"type":"tool_use","timestamp":"2026-11-27T18:33:38.143Z","tool_name":"run_shell_command","tool_id":"run_shell_command__run_shell_command_1795804418095_0","parameters":{"command":"git commit --allow-empty -m from-gemini","description":"make an empty commit"}}"#,
        r#"{"type":"tool_result","timestamp":"2026-11-27T18:33:38.318Z","tool_id":"run_shell_command__run_shell_command_1795804418095_0","status":"success","output":"[master e6acb9d] from-gemini"}"#,
        r#"{"type":"message","timestamp":"2026-11-27T18:33:38.371Z","role":"assistant","content":"hello <promise>C","delta":true}"#,
        r#"{"type":"message","timestamp":"2026-11-27T18:33:38.372Z","role":"assistant","content":"OMPLETE</promise>","delta":true}"#,
        r#"{"type":"result","timestamp":"2026-11-27T18:33:38.380Z","status":"success","stats":{"total_tokens":43,"input_tokens":30,"output_tokens":13,"cached":0,"input":30,"duration_ms":337,"tool_calls":1,"models":{"gemini-2.5-pro":{"total_tokens":43,"input_tokens":30,"output_tokens":13,"cached":0,"input":30}}}}"#,
    ];

    /// The same CLI given a 401 by the API (it exits 145).
    const UNAUTHORIZED: &str = r#"{"type":"result","timestamp":"2026-11-27T18:33:49.604Z","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":401,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"UNAUTHENTICATED\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{"gemini-2.5-pro":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0}}}}"#;

    fn events(lines: &[&str]) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut out: Vec<Event> = lines.iter().flat_map(|l| parser.push_line(l)).collect();
        out.extend(parser.finish());
        out
    }

    #[test]
    fn a_real_run_gives_session_tool_text_usage_and_result() {
        assert_eq!(
            events(&COMMIT),
            vec![
                Event::SessionId("c5247799-3071-42b5-b01f-40e546a3efe4".into()),
                Event::ToolCall {
                    name: "run_shell_command".into(),
                    input: r#"{"command":"git commit --allow-empty -m from-gemini","description":"make an empty commit"}"#.into(),
                },
                Event::Text("hello <promise>COMPLETE</promise>".into()),
                Event::Usage(Usage {
                    input_tokens: 30,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 0,
                    output_tokens: 13,
                }),
                Event::Result {
                    is_error: false,
                    text: "hello <promise>COMPLETE</promise>".into(),
                },
            ]
        );
    }

    #[test]
    fn a_message_before_a_tool_call_is_one_text_of_its_own() {
        let before = r#"{"type":"message","role":"assistant","content":"Let me ","delta":true}"#;
        let more = r#"{"type":"message","role":"assistant","content":"look.","delta":true}"#;
        let out = events(&[before, more, COMMIT[2], COMMIT[4], COMMIT[5], COMMIT[6]]);
        let texts: Vec<&Event> = out.iter().filter(|e| matches!(e, Event::Text(_))).collect();
        assert_eq!(
            texts,
            [
                &Event::Text("Let me look.".into()),
                &Event::Text("hello <promise>COMPLETE</promise>".into())
            ]
        );
        assert!(matches!(&out[1], Event::ToolCall { .. }), "{out:?}");
    }

    #[test]
    fn cached_tokens_are_cache_reads() {
        // samples: prompt 10 (4 cached), answer 5, 3 thinking not counted.
        let stats = serde_json::json!({"total_tokens":18,"input_tokens":10,"output_tokens":5,"cached":4,"input":6});
        assert_eq!(
            usage_from_stats(&stats),
            Some(Usage {
                input_tokens: 6,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 4,
                output_tokens: 5,
            })
        );
        let older = serde_json::json!({"input_tokens":10,"output_tokens":5,"cached":4});
        assert_eq!(usage_from_stats(&older).unwrap().input_tokens, 6);
        assert_eq!(
            usage_from_stats(&serde_json::json!({"duration_ms": 3})),
            None
        );
    }

    #[test]
    fn an_api_error_is_an_error_naming_it() {
        let out = events(&[COMMIT[0], COMMIT[1], UNAUTHORIZED]);
        let Some(Event::Error(message)) = out.last() else {
            panic!("{out:?}");
        };
        assert!(
            message.starts_with("gemini stopped with error: [API Error:"),
            "{message}"
        );
        assert!(message.contains("API key not valid"), "{message}");
        assert!(message.ends_with("(check GEMINI_API_KEY)"), "{message}");
        assert!(
            out.iter()
                .any(|e| matches!(e, Event::Result { is_error: true, .. }))
        );
    }

    /// The CLI retried an API that does not listen (it exits 1).
    const UNREACHABLE: &str = r#"{"type":"result","timestamp":"2026-11-27T18:36:18.246Z","status":"error","error":{"type":"unknown","message":"[API Error: exception TypeError: fetch failed sending request]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{"gemini-2.5-pro":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0}}}}"#;

    #[test]
    fn an_unreachable_api_is_named_with_its_variable() {
        let request = sanddune_agent_sdk::Request {
            env: vec![("GOOGLE_GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into())],
            ..sanddune_agent_sdk::testing::request("p")
        };
        let mut parser = Parser::for_request(&request);
        let out = parser.push_line(UNREACHABLE);
        let Some(Event::Error(message)) = out.last() else {
            panic!("{out:?}");
        };
        assert!(message.contains("fetch failed"), "{message}");
        assert!(
            message.contains("http://127.0.0.1:9, set by GOOGLE_GEMINI_BASE_URL"),
            "{message}"
        );
        let out = Parser::new().push_line(UNREACHABLE);
        assert!(
            matches!(out.last(), Some(Event::Error(m)) if m.contains(DEFAULT_BASE_URL)),
            "{out:?}"
        );
    }

    #[test]
    fn no_result_line_is_an_error() {
        assert_eq!(
            events(&COMMIT[..6]).last(),
            Some(&Event::Error(NO_RESULT.into()))
        );
    }

    #[test]
    fn the_session_is_reported_once_and_user_lines_are_not_text() {
        let out = events(&[COMMIT[0], COMMIT[0], COMMIT[1], COMMIT[6]]);
        let sessions = out
            .iter()
            .filter(|e| matches!(e, Event::SessionId(_)))
            .count();
        assert_eq!(sessions, 1);
        assert!(!out.iter().any(|e| matches!(e, Event::Text(_))));
    }

    #[test]
    fn stray_and_hostile_lines_yield_nothing() {
        let mut parser = Parser::new();
        assert_no_events(&mut parser, &[COMMIT[1], COMMIT[3]]);
        assert_cuts_yield_nothing(&mut Parser::new(), &COMMIT);
        assert_survives_hostile_lines::<Parser>();
    }
}
