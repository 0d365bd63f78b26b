//! Parser for `qwen --output-format stream-json` (Qwen Code; one JSON object
//! per stdout line). The lines are Claude-shaped (`system` init, `assistant`
//! with per-call usage, `user` tool results, `result`; compare the
//! claude-code plugin's parser) plus `system` `retry` lines and
//! `stream_event` lines. See docs/reference/protocols.md, "Qwen Code".

use std::collections::BTreeSet;

use sanddune_agent_sdk::stream_json;
use serde_json::Value;

pub use sanddune_agent_sdk::{Event, Request, Usage};

/// Reads a usage object of the stream (`message.usage`) or of a session
/// file (`usageMetadata`). Qwen counts cached tokens inside the input (as
/// OpenAI does); sanddune's input is the fresh input alone, so the cache
/// reads are taken out. None when `value` is not an object or has none of
/// the fields.
pub fn usage_from_json(value: &Value) -> Option<Usage> {
    let keys: [&[&str]; 4] = [
        &["input_tokens", "promptTokenCount"],
        &[],
        &["cache_read_input_tokens", "cachedContentTokenCount"],
        &["output_tokens", "candidatesTokenCount"],
    ];
    let (mut usage, found) = Usage::from_keys(value, keys)?;
    usage.input_tokens = usage
        .input_tokens
        .saturating_sub(usage.cache_read_input_tokens);
    found.then_some(usage)
}

pub const NO_RESULT: &str = "qwen ended without a result line (stream cut short, its \
     --max-wall-time reached, or the CLI failed before starting: see its stderr)";

#[derive(Debug)]
pub struct Parser {
    /// Session ids already reported, so each is reported once. (A BTreeSet:
    /// HashSet seeding would import wasi:random into the component.)
    sessions: BTreeSet<String>,
    saw_result: bool,
    /// The usage of this run's model calls so far. The `result` line's is
    /// the whole session's, earlier runs of a resumed session included.
    usage: Usage,
    /// The last retry: why a stream cut short has no result.
    last_retry: Option<String>,
    /// Where qwen sends model requests, as the errors say it.
    endpoint: String,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::for_request(&Request::default())
    }
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    /// A parser for the command built for `request`: its errors name the
    /// URL the run pointed qwen at, and the variable that set it.
    pub fn for_request(request: &Request) -> Parser {
        let endpoint = match request.env_value("OPENAI_BASE_URL") {
            Some(url) => format!("{url} (OPENAI_BASE_URL)"),
            None => "the CLI's default endpoint (OPENAI_BASE_URL is not set)".to_owned(),
        };
        Parser {
            sessions: BTreeSet::new(),
            saw_result: false,
            usage: Usage::default(),
            last_retry: None,
            endpoint,
        }
    }
}

impl sanddune_agent_sdk::Parser for Parser {
    fn for_request(request: &Request) -> Self {
        Parser::for_request(request)
    }

    /// Events for one stdout line. Anything that is not a JSON object, or is
    /// a type we do not use, yields nothing: stdout can carry stray output.
    fn push_line(&mut self, line: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            return events;
        };
        // Every line carries `session_id`; the first sighting of an id is
        // reported whatever the line's type (init normally comes first).
        if let Some(id) = obj.get("session_id").and_then(Value::as_str)
            && !id.is_empty()
            && self.sessions.insert(id.to_owned())
        {
            events.push(Event::SessionId(id.to_owned()));
        }
        let subtype = obj.get("subtype").and_then(Value::as_str);
        match obj.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                stream_json::assistant_content(&obj, &mut events);
                let usage = obj.get("message").and_then(|m| m.get("usage"));
                if let Some(usage) = usage.and_then(usage_from_json) {
                    self.usage.add(usage);
                    events.push(Event::Usage(self.usage));
                }
            }
            Some("system") if subtype == Some("retry") => {
                // qwen waits (a minute and more for a rate limit) with no
                // other output: each retry is an error, so a run that never
                // gets through can be stopped.
                let message = retry(&obj, &self.endpoint);
                self.last_retry = Some(message.clone());
                events.push(Event::Error(message));
            }
            Some("result") => {
                self.saw_result = true;
                let (result, error) = stream_json::result(&obj, "qwen", error_detail);
                events.push(result);
                if let Some(message) = error {
                    events.push(Event::Error(with_hint(message, &self.endpoint)));
                }
            }
            // `system` init, `user` (tool results), `stream_event`, unknown
            // types: nothing more.
            _ => {}
        }
        events
    }

    /// Called at end of stdout: a stream without a `result` line means the
    /// iteration did not complete, even if qwen exited 0.
    fn finish(&mut self) -> Vec<Event> {
        if self.saw_result {
            return Vec::new();
        }
        let message = match &self.last_retry {
            Some(retry) => format!("{NO_RESULT}; it was retrying: {retry}"),
            None => NO_RESULT.to_owned(),
        };
        vec![Event::Error(message)]
    }
}

type Object = serde_json::Map<String, Value>;

/// A `system` `retry` line: qwen says which attempt and how long it waits,
/// not why; `endpoint` says where it was pointed.
fn retry(obj: &Object, endpoint: &str) -> String {
    let data = obj.get("data");
    let num = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_u64);
    let mut message = format!("qwen is retrying a failed request to {endpoint}");
    if let (Some(attempt), Some(max)) = (num("attempt"), num("maxRetries")) {
        message.push_str(&format!(": retry {attempt} of {max}"));
    }
    if let Some(ms) = num("delayMs") {
        message.push_str(&format!(" in {:.1} s", ms as f64 / 1000.0));
    }
    message
}

/// An error result's `error.message` (qwen's error results carry no
/// `result` text).
fn error_detail(obj: &Object) -> String {
    obj.get("error")
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// qwen quotes the API's error but names neither the variable holding the
/// key nor the URL it could not reach: the hint does.
fn with_hint(mut message: String, endpoint: &str) -> String {
    if message.contains("API Error: 401") || message.contains("API Error: 403") {
        message.push_str(&format!(
            " (the model API at {endpoint} refused the credentials: check OPENAI_API_KEY)"
        ));
    } else if message.contains("Connection error") {
        message.push_str(&format!(" (qwen could not reach {endpoint})"));
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::Parser as _;
    use sanddune_agent_sdk::testing::{
        assert_cuts_yield_nothing, assert_no_events, assert_survives_hostile_lines,
    };

    const COMMIT: &str = include_str!("../testdata/real-0.24.4-commit.jsonl");
    const UNAUTHORIZED: &str = include_str!("../testdata/real-0.24.4-401.jsonl");
    const UNREACHABLE: &str = include_str!("../testdata/real-0.24.4-unreachable.jsonl");
    const SESSION: &str = "3d13499a-4325-457b-af03-286ee5301fbf";
    const RETRY: &str = r#"{"type":"system","subtype":"retry","uuid":"8e4f0807-4356-4f2c-bd25-7b15242a8634","session_id":"6329dbcb-954c-4465-86ca-fa4347fdc4b3","parent_tool_use_id":null,"data":{"reason":"retry","attempt":1,"maxRetries":10,"delayMs":60000,"discardedToolCalls":0,"preserveText":false}}"#;

    fn feed(parser: &mut Parser, transcript: &str) -> (Vec<Event>, Vec<Event>) {
        let events = transcript
            .lines()
            .flat_map(|l| parser.push_line(l))
            .collect();
        (events, parser.finish())
    }

    fn with_base_url(url: &str) -> Parser {
        Parser::for_request(&Request {
            env: vec![("OPENAI_BASE_URL".into(), url.into())],
            ..Request::default()
        })
    }

    #[test]
    fn a_real_run_that_commits() {
        let (events, end) = feed(&mut Parser::new(), COMMIT);
        assert_eq!(end, vec![]);
        assert_eq!(events[0], Event::SessionId(SESSION.into()));
        let Event::ToolCall { name, input } = &events[1] else {
            panic!("{events:?}")
        };
        assert_eq!(name, "run_shell_command");
        let input: Value = serde_json::from_str(input).unwrap();
        assert!(input["command"].as_str().unwrap().contains("git commit"));
        // The sum of the two calls, fresh input without the cache reads;
        // not the result line's, which counts the session's every call.
        let turn = |input, read, output| Usage {
            input_tokens: input,
            cache_read_input_tokens: read,
            output_tokens: output,
            ..Usage::default()
        };
        assert_eq!(events[2], Event::Usage(turn(200, 0, 30)));
        assert_eq!(
            events[3..],
            [
                Event::Text("hello <promise>COMPLETE</promise>".into()),
                Event::Usage(turn(200 + 60, 40, 37)),
                Event::Result {
                    is_error: false,
                    text: "hello <promise>COMPLETE</promise>".into()
                },
            ]
        );
    }

    #[test]
    fn a_refused_key_names_the_variable_and_the_url() {
        let mut parser = with_base_url("http://127.0.0.1:9/v1");
        let (events, end) = feed(&mut parser, UNAUTHORIZED);
        assert_eq!(end, vec![]);
        let Some(Event::Error(message)) = events.last() else {
            panic!("{events:?}")
        };
        assert!(
            message.starts_with("qwen stopped with error_during_execution: [API Error: 401"),
            "{message}"
        );
        assert!(
            message.ends_with(
                "(the model API at http://127.0.0.1:9/v1 (OPENAI_BASE_URL) refused the credentials: check OPENAI_API_KEY)"
            ),
            "{message}"
        );
    }

    #[test]
    fn an_unreachable_api_names_the_url() {
        let mut parser = with_base_url("http://127.0.0.1:18311/v1");
        let (events, _) = feed(&mut parser, UNREACHABLE);
        let Some(Event::Error(message)) = events.last() else {
            panic!("{events:?}")
        };
        assert!(message.contains("Connection error"), "{message}");
        assert!(
            message.ends_with("(qwen could not reach http://127.0.0.1:18311/v1 (OPENAI_BASE_URL))"),
            "{message}"
        );
        let (events, _) = feed(&mut Parser::new(), UNREACHABLE);
        assert!(
            matches!(events.last(), Some(Event::Error(m)) if m.contains("OPENAI_BASE_URL is not set")),
            "{events:?}"
        );
    }

    #[test]
    fn a_retry_is_an_error_and_explains_a_missing_result() {
        let mut parser = with_base_url("http://m/v1");
        let events = parser.push_line(RETRY);
        let retry = "qwen is retrying a failed request to http://m/v1 (OPENAI_BASE_URL): retry 1 of 10 in 60.0 s";
        assert_eq!(
            events,
            [
                Event::SessionId("6329dbcb-954c-4465-86ca-fa4347fdc4b3".into()),
                Event::Error(retry.into())
            ]
        );
        assert_eq!(
            parser.finish(),
            [Event::Error(format!(
                "{NO_RESULT}; it was retrying: {retry}"
            ))]
        );
        assert_eq!(Parser::new().finish(), [Event::Error(NO_RESULT.into())]);
    }

    #[test]
    fn usage_reads_the_stream_and_the_session_spelling() {
        let stream = serde_json::json!({"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 40, "total_tokens": 107});
        let session = serde_json::json!({"promptTokenCount": 100, "candidatesTokenCount": 7, "thoughtsTokenCount": 0, "totalTokenCount": 107, "cachedContentTokenCount": 40});
        let want = Usage {
            input_tokens: 60,
            cache_read_input_tokens: 40,
            output_tokens: 7,
            ..Usage::default()
        };
        assert_eq!(usage_from_json(&stream), Some(want));
        assert_eq!(usage_from_json(&session), Some(want));
        assert_eq!(usage_from_json(&serde_json::json!({"x": 1})), None);
        assert_eq!(usage_from_json(&serde_json::json!(3)), None);
        // More cached than input (a hostile line): no underflow.
        let odd = serde_json::json!({"input_tokens": 1, "cache_read_input_tokens": 5});
        assert_eq!(usage_from_json(&odd).unwrap().input_tokens, 0);
    }

    #[test]
    fn stray_and_cut_lines_yield_nothing() {
        assert_no_events(
            &mut Parser::new(),
            &[
                "",
                "not json",
                "[1,2]",
                r#"{"type":"user"}"#,
                r#"{"type":"stream_event","event":{}}"#,
            ],
        );
        let lines: Vec<&str> = COMMIT.lines().collect();
        assert_cuts_yield_nothing(&mut Parser::new(), &lines);
        assert_survives_hostile_lines::<Parser>();
    }
}
