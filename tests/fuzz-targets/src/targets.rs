//! The target functions. Each panics when the code under test panics or
//! when its output breaks an invariant stated next to the check.

use std::path::Path;

use sanddune::config::ProjectConfig;
use sanddune::prompt::{self, Segment, Template};
use sanddune::run::StructuredOutput;
use sanddune_agent_sdk::{Event, Parser};
use serde_json::{Value, json};

/// The input as text: invalid UTF-8 becomes U+FFFD, as the host reads
/// files and agent output.
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

// ---------------------------------------------------------------- prompt

fn shell_count(t: &Template) -> usize {
    t.segments
        .iter()
        .filter(|s| matches!(s, Segment::Shell(_)))
        .count()
}

/// The template text back from its segments (shell expressions re-quoted).
fn rebuild(t: &Template) -> String {
    t.segments
        .iter()
        .map(|s| match s {
            Segment::Text(t) => t.clone(),
            Segment::Shell(c) => format!("!`{c}`"),
        })
        .collect()
}

/// Input: the template, then optionally `\0` and `KEY=VALUE` lines.
///
/// - `render` fails exactly when `missing_keys` names a key (or a built-in
///   is overridden), and the error names the first missing key;
/// - every unused argument is one the caller passed;
/// - substituting each placeholder by itself gives back the template
///   (shell expressions included): nothing is lost or moved;
/// - argument values never create or remove shell expressions.
pub fn prompt_template(data: &[u8]) {
    let input = text(data);
    let (template, arg_text) = input.split_once('\0').unwrap_or((&input, ""));
    let args: Vec<(String, String)> = arg_text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let overrides = args
        .iter()
        .any(|(k, _)| prompt::BUILT_INS.contains(&k.as_str()));
    let rendered = prompt::render(template, &args, "sanddune/fuzz", "main");
    if overrides {
        assert!(rendered.is_err(), "a built-in was overridden without error");
    } else {
        let missing = prompt::missing_keys(template, &args);
        match &rendered {
            Ok(t) => {
                assert!(
                    missing.is_empty(),
                    "rendered although {missing:?} are missing"
                );
                for key in &t.unused {
                    assert!(
                        args.iter().any(|(k, _)| k == key),
                        "unused {key} was never passed"
                    );
                }
                let shells = shell_count(t);
                assert_eq!(prompt::stand_ins(t).len(), shells);
                let outputs: Vec<String> = (0..shells).map(|i| format!("out {i}\n")).collect();
                let _ = prompt::assemble(t, &outputs);
            }
            Err(e) => {
                let first = missing.first().unwrap_or_else(|| {
                    panic!("render failed ({e}) but missing_keys found nothing")
                });
                assert!(e.to_string().contains(&format!("{{{{{first}}}}}")), "{e}");
                assert_eq!(e.exit_code(), 2);
            }
        }
    }

    let keys = prompt::missing_keys(template, &[]);
    let identity: Vec<(String, String)> = keys
        .iter()
        .map(|k| (k.clone(), format!("{{{{{k}}}}}")))
        .collect();
    let same = prompt::render(
        template,
        &identity,
        "{{SOURCE_BRANCH}}",
        "{{TARGET_BRANCH}}",
    )
    .unwrap_or_else(|e| panic!("every placeholder had a value, yet: {e}"));
    assert_eq!(
        rebuild(&same),
        template,
        "identity substitution changed the template"
    );

    let hostile: Vec<(String, String)> = keys
        .iter()
        .map(|k| (k.clone(), "!`touch /pwned` {{X}} `".to_owned()))
        .collect();
    let t = prompt::render(template, &hostile, "!`a`", "b`").expect("all keys given");
    assert_eq!(
        shell_count(&t),
        shell_count(&same),
        "an argument value changed the shell expressions"
    );
}

// ---------------------------------------------------------------- config

/// Input: a `.sanddune/config.toml`.
///
/// - parsing is deterministic, and an error is bad input naming the file;
/// - an accepted config has no empty hook command and valid commit options;
/// - it survives a TOML round trip: written back by the toml crate and read
///   again, it is the same config.
pub fn project_config(data: &[u8]) {
    let text = text(data);
    let path = Path::new("/r/.sanddune/config.toml");
    let parsed = ProjectConfig::parse(&text, path);
    match parsed {
        Err(e) => {
            assert!(
                ProjectConfig::parse(&text, path).is_err(),
                "not deterministic"
            );
            assert!(e.to_string().contains("/r/.sanddune/config.toml"), "{e}");
            assert_eq!(e.exit_code(), 2, "{e}");
        }
        Ok(config) => {
            assert_eq!(
                ProjectConfig::parse(&text, path).ok().as_ref(),
                Some(&config)
            );
            for command in config.hooks().commands() {
                assert!(
                    !command.trim().is_empty(),
                    "an empty hook command was accepted"
                );
            }
            config
                .commit_options(path)
                .expect("an accepted config has valid commit options");
            let table: toml::Table =
                toml::from_str(&text).expect("an accepted config is a TOML table");
            let written = toml::to_string(&table)
                .unwrap_or_else(|e| panic!("the toml crate cannot write what it read: {e}"));
            let again = ProjectConfig::parse(&written, path)
                .unwrap_or_else(|e| panic!("the config written back is refused: {e}\n{written}"));
            assert_eq!(again, config, "the TOML round trip changed the config");
        }
    }
}

// ---------------------------------------------------------------- streams

/// Stdout lines as the host hands them to a parser.
fn lines(data: &[u8]) -> Vec<String> {
    data.split(|b| *b == b'\n')
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

/// An event as JSON, the way it leaves sanddune (run result, log, callback).
fn event_json(event: &Event) -> Value {
    match event {
        Event::Text(t) => json!({"type": "text", "text": t}),
        Event::ToolCall { name, input } => {
            json!({"type": "tool-call", "name": name, "input": input})
        }
        Event::SessionId(id) => json!({"type": "session-id", "id": id}),
        Event::Usage(u) => json!({
            "type": "usage",
            "inputTokens": u.input_tokens,
            "cacheCreationInputTokens": u.cache_creation_input_tokens,
            "cacheReadInputTokens": u.cache_read_input_tokens,
            "outputTokens": u.output_tokens,
        }),
        Event::Result { is_error, text } => {
            json!({"type": "result", "isError": is_error, "text": text})
        }
        Event::Error(m) => json!({"type": "error", "message": m}),
    }
}

/// The events of `lines` pushed one by one, then of `finish`.
fn parse_all<P: Parser + Default>(lines: &[String]) -> (Vec<Event>, Vec<Event>) {
    let mut parser = P::default();
    let pushed = lines.iter().flat_map(|l| parser.push_line(l)).collect();
    (pushed, parser.finish())
}

/// The invariants every agent stream parser keeps, whatever it is fed:
///
/// - a tool call's input is JSON text (the WIT contract says so);
/// - a session id is not empty and is reported once;
/// - the stream ends with an outcome: a result or an error event (a stream
///   cut short is an error, never a silent success);
/// - every event re-serialises to the same JSON;
/// - the same lines give the same events (no hidden state, no randomness).
fn check_stream(name: &str, lines: &[String], pushed: &[Event], finished: &[Event]) {
    let mut sessions = Vec::new();
    for event in pushed.iter().chain(finished) {
        match event {
            Event::ToolCall { input, .. } => {
                if let Err(e) = serde_json::from_str::<Value>(input) {
                    panic!("{name}: tool-call input is not JSON ({e}): {input:?}");
                }
            }
            Event::SessionId(id) => {
                assert!(!id.is_empty(), "{name}: an empty session id");
                assert!(
                    !sessions.contains(id),
                    "{name}: session id {id:?} reported twice"
                );
                sessions.push(id.clone());
            }
            _ => {}
        }
        let value = event_json(event);
        let back: Value = serde_json::from_str(&value.to_string()).expect("JSON re-parses");
        assert_eq!(back, value, "{name}: an event does not re-serialise");
    }
    let outcome = pushed
        .iter()
        .chain(finished)
        .any(|e| matches!(e, Event::Result { .. } | Event::Error(_)));
    assert!(
        outcome,
        "{name}: the stream ended without a result or an error event ({} lines)",
        lines.len()
    );
}

fn stream<P: Parser + Default>(name: &str, data: &[u8]) {
    let lines = lines(data);
    let (pushed, finished) = parse_all::<P>(&lines);
    check_stream(name, &lines, &pushed, &finished);
    assert_eq!(
        parse_all::<P>(&lines),
        (pushed, finished),
        "{name}: the same lines gave other events"
    );
}

pub fn stream_claude_code(data: &[u8]) {
    stream::<sanddune_plugin_claude_code::parser::Parser>("claude-code", data);
}

pub fn stream_codex(data: &[u8]) {
    stream::<sanddune_plugin_codex::parser::Parser>("codex", data);
}

pub fn stream_copilot(data: &[u8]) {
    stream::<sanddune_plugin_copilot::parser::Parser>("copilot", data);
}

pub fn stream_gemini(data: &[u8]) {
    stream::<sanddune_plugin_gemini::parser::Parser>("gemini", data);
}

pub fn stream_qwen_code(data: &[u8]) {
    stream::<sanddune_plugin_qwen_code::parser::Parser>("qwen-code", data);
}

pub fn stream_cursor(data: &[u8]) {
    stream::<sanddune_plugin_cursor::parser::Parser>("cursor", data);
}

pub fn stream_opencode(data: &[u8]) {
    stream::<sanddune_plugin_opencode::parser::Parser>("opencode", data);
}

pub fn stream_pi(data: &[u8]) {
    stream::<sanddune_plugin_pi::parser::Parser>("pi", data);
}

/// The demo agent's parser speaks the WIT types directly.
#[derive(Default)]
struct Demo(Option<sanddune_plugin_demo::Parser>);

impl Parser for Demo {
    fn push_line(&mut self, line: &str) -> Vec<Event> {
        use sanddune_plugin_demo::GuestStreamParser;
        let parser = self.0.get_or_insert_with(demo_parser);
        parser
            .push_line(line.to_owned())
            .into_iter()
            .map(demo_event)
            .collect()
    }

    fn finish(&mut self) -> Vec<Event> {
        use sanddune_plugin_demo::GuestStreamParser;
        let parser = self.0.get_or_insert_with(demo_parser);
        parser.finish().into_iter().map(demo_event).collect()
    }
}

fn demo_parser() -> sanddune_plugin_demo::Parser {
    use sanddune_plugin_demo::GuestStreamParser;
    sanddune_plugin_demo::Parser::new(sanddune_plugin_demo::CommandRequest {
        prompt: "fuzz".into(),
        model: None,
        options: vec![],
        resume_session: None,
        skip_permissions: true,
        env: vec![],
    })
}

fn demo_event(event: sanddune_plugin_demo::AgentEvent) -> Event {
    use sanddune_plugin_demo::AgentEvent as E;
    match event {
        E::Text(t) => Event::Text(t),
        E::ToolCall(c) => Event::ToolCall {
            name: c.name,
            input: c.input,
        },
        E::SessionId(id) => Event::SessionId(id),
        E::Usage(u) => Event::Usage(sanddune_agent_sdk::Usage {
            input_tokens: u.input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            output_tokens: u.output_tokens,
        }),
        E::Result(r) => Event::Result {
            is_error: r.is_error,
            text: r.text,
        },
        E::Error(m) => Event::Error(m),
    }
}

pub fn stream_demo(data: &[u8]) {
    stream::<Demo>("demo", data);
}

// ---------------------------------------------------------------- sessions

struct SessionAgent {
    name: &'static str,
    dir: &'static str,
    path: fn(&str, &str, &str) -> Option<String>,
    rewrite: fn(&str, &str, &str) -> String,
    usage: fn(&str) -> Option<sanddune_agent_sdk::Usage>,
    /// JSON pointers of the working directories the rewrite must change
    /// in a line (when they equal `from`).
    cwd_pointers: fn(&Value) -> Vec<&'static str>,
}

const SESSION_AGENTS: &[SessionAgent] = &[
    SessionAgent {
        name: "claude-code",
        dir: ".claude/projects/",
        path: sanddune_plugin_claude_code::session::session_file_path,
        rewrite: sanddune_plugin_claude_code::session::rewrite_session_cwd,
        usage: sanddune_plugin_claude_code::session::usage_from_session,
        cwd_pointers: |_| vec!["/cwd"],
    },
    SessionAgent {
        name: "codex",
        dir: ".codex/sessions/",
        path: sanddune_plugin_codex::session::session_file_path,
        rewrite: sanddune_plugin_codex::session::rewrite_session_cwd,
        usage: sanddune_plugin_codex::session::usage_from_session,
        cwd_pointers: |_| vec!["/cwd", "/payload/cwd"],
    },
    SessionAgent {
        name: "pi",
        dir: ".pi/agent/sessions/",
        path: sanddune_plugin_pi::session::session_file_path,
        rewrite: sanddune_plugin_pi::session::rewrite_session_cwd,
        usage: sanddune_plugin_pi::session::usage_from_session,
        cwd_pointers: |line| {
            if line.get("type").and_then(Value::as_str) == Some("session") {
                vec!["/cwd"]
            } else {
                vec![]
            }
        },
    },
];

/// `after` is `before` with some strings equal to `from` turned into `to`,
/// and nothing else changed.
fn only_rewritten(before: &Value, after: &Value, from: &str, to: &str) -> bool {
    match (before, after) {
        (Value::String(b), Value::String(a)) => a == b || (b == from && a == to),
        (Value::Array(b), Value::Array(a)) => {
            b.len() == a.len() && b.iter().zip(a).all(|(b, a)| only_rewritten(b, a, from, to))
        }
        (Value::Object(b), Value::Object(a)) => {
            b.len() == a.len()
                && b.iter()
                    .all(|(k, bv)| a.get(k).is_some_and(|av| only_rewritten(bv, av, from, to)))
        }
        (b, a) => a == b,
    }
}

/// A session path lies under `home`, in the agent's directory, with no
/// component that could climb out of it, and names a `.jsonl` file.
fn check_session_path(agent: &SessionAgent, home: &str, path: &str) {
    let prefix = format!("{}/{}", home.trim_end_matches('/'), agent.dir);
    let rest = path
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{}: {path:?} is not under {prefix:?}", agent.name));
    for component in rest.split('/') {
        assert!(
            !matches!(component, "" | "." | ".."),
            "{}: {path:?} has a `{component}` component",
            agent.name
        );
    }
    assert!(path.ends_with(".jsonl"), "{}: {path:?}", agent.name);
}

/// Input: `from` cwd, newline, `to` cwd, newline, the session file.
///
/// - the rewrite keeps the line count, keeps every line that is not a JSON
///   object byte for byte, changes object lines only by turning strings
///   equal to `from` into `to`, changes every working directory the agent
///   records (when it equals `from`), and is idempotent;
/// - reading usage never panics;
/// - the session path for a cwd and an id stays inside the agent's
///   directory under the home, whatever the cwd and the id.
pub fn session_cwd(data: &[u8]) {
    let input = text(data);
    let mut parts = input.splitn(3, '\n');
    let from = parts.next().unwrap_or_default();
    let to = parts.next().unwrap_or_default();
    let content = parts.next().unwrap_or_default();
    for agent in SESSION_AGENTS {
        let out = (agent.rewrite)(content, from, to);
        let (before, after): (Vec<&str>, Vec<&str>) =
            (content.split('\n').collect(), out.split('\n').collect());
        assert_eq!(
            before.len(),
            after.len(),
            "{}: line count changed",
            agent.name
        );
        for (b, a) in before.iter().zip(&after) {
            match serde_json::from_str::<Value>(b) {
                Ok(bv @ Value::Object(_)) => {
                    let av: Value = serde_json::from_str(a).unwrap_or_else(|e| {
                        panic!("{}: a rewritten line is not JSON ({e}): {a:?}", agent.name)
                    });
                    assert!(
                        only_rewritten(&bv, &av, from, to),
                        "{}: the rewrite changed more than the cwd:\n{b}\n{a}",
                        agent.name
                    );
                    for pointer in (agent.cwd_pointers)(&bv) {
                        if bv.pointer(pointer).and_then(Value::as_str) == Some(from) {
                            assert_eq!(
                                av.pointer(pointer).and_then(Value::as_str),
                                Some(to),
                                "{}: {pointer} was not rewritten:\n{b}\n{a}",
                                agent.name
                            );
                        }
                    }
                }
                _ => assert_eq!(b, a, "{}: a line that is not an object changed", agent.name),
            }
        }
        assert_eq!(
            (agent.rewrite)(&out, from, to),
            out,
            "{}: not idempotent",
            agent.name
        );
        let _ = (agent.usage)(content);

        for home in ["/home/u", "/home/u/", "/"] {
            for (cwd, id) in [(from, to), (to, from), ("/w", to), (from, "s1")] {
                if !cwd.starts_with('/') {
                    // Working directories are absolute paths.
                    continue;
                }
                if let Some(path) = (agent.path)(home, cwd, id) {
                    check_session_path(agent, home, &path);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- output

/// Input: an optional tag line, then the agent's text output.
///
/// - an extracted value is JSON that re-serialises to itself, and satisfies
///   the schema (checked here by hand for the verdict schema);
/// - text without tags before or after the last block changes nothing;
/// - a failure has a message.
pub fn structured_output(data: &[u8]) {
    let input = text(data);
    let (tag, output) = match input.split_once('\n') {
        Some((tag, rest))
            if !tag.is_empty()
                && tag.len() <= 32
                && tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            (tag.to_owned(), rest)
        }
        _ => ("result".to_owned(), input.as_str()),
    };
    let schemas = [
        json!({}),
        json!({
            "type": "object",
            "required": ["verdict"],
            "properties": {"verdict": {"enum": ["approve", "reject"]}}
        }),
    ];
    for (i, schema) in schemas.into_iter().enumerate() {
        let spec = StructuredOutput {
            tag: tag.clone(),
            schema,
        };
        spec.check().expect("a valid tag and schema");
        match spec.extract(output) {
            Ok(value) => {
                let back: Value = serde_json::from_str(&value.to_string()).expect("re-parses");
                assert_eq!(back, value, "the extracted value does not re-serialise");
                assert!(
                    output.contains(&format!("<{tag}>")) && output.contains(&format!("</{tag}>"))
                );
                if i == 1 {
                    let verdict = value.get("verdict").and_then(Value::as_str);
                    assert!(
                        matches!(verdict, Some("approve" | "reject")),
                        "accepted against the schema: {value}"
                    );
                }
                let wrapped = format!("Some words first.\n{output}\nAnd after it, no tags.");
                assert_eq!(
                    spec.extract(&wrapped).as_ref(),
                    Ok(&value),
                    "untagged text around the block changed the result"
                );
            }
            Err(message) => assert!(!message.is_empty()),
        }
    }
}
