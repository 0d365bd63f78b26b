//! Shared guest side of sanddune's agent providers.
//!
//! An agent provider implements [`Agent`] on a unit struct with plain Rust
//! types, and exports it with
//! `#[cfg(target_arch = "wasm32")] sanddune_agent_sdk::export_agent!(MyAgent);`
//! (natively the exported symbol names, which contain `:`, break the cdylib
//! link of the test build). The WIT conversions live here, once.

pub mod json;
pub mod session;
pub mod stream_json;
pub mod testing;
pub mod validate;

use std::cell::RefCell;

wit_bindgen::generate!({
    world: "agent-plugin",
    path: "../../wit",
    pub_export_macro: true,
    export_macro_name: "export_agent",
    default_bindings_module: "sanddune_agent_sdk",
});

pub use exports::sanddune::plugin::agent_provider::{AgentInfo, AgentOption, EnvRequirement};

use exports::sanddune::plugin::agent_provider as wit;

/// Token usage of an iteration (the WIT `usage` record).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// Reads token counts from a JSON object: each field from the first of
    /// its `keys` (in the order input, cache creation, cache read, output)
    /// that holds an integer, 0 when none does. None when `value` is not an
    /// object; otherwise the usage and whether any of the keys was found.
    pub fn from_keys(value: &serde_json::Value, keys: [&[&str]; 4]) -> Option<(Usage, bool)> {
        let obj = value.as_object()?;
        let mut found = false;
        let [input, creation, read, output] = keys.map(|keys| {
            let n = keys.iter().find_map(|key| obj.get(*key)?.as_u64());
            found |= n.is_some();
            n.unwrap_or(0)
        });
        let usage = Usage {
            input_tokens: input,
            cache_creation_input_tokens: creation,
            cache_read_input_tokens: read,
            output_tokens: output,
        };
        Some((usage, found))
    }

    /// Adds `other` field by field, saturating.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

/// One event, mirroring the WIT `agent-event` variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Text(String),
    ToolCall { name: String, input: String },
    SessionId(String),
    Usage(Usage),
    Result { is_error: bool, text: String },
    Error(String),
}

/// Mirrors the WIT `command-request`.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub prompt: String,
    pub model: Option<String>,
    pub options: Vec<(String, String)>,
    pub resume_session: Option<String>,
    pub skip_permissions: bool,
    /// The run's values of the keys the agent declared that are set.
    pub env: Vec<(String, String)>,
}

impl Request {
    /// The run's value of a declared key; None when unset or empty.
    pub fn env_value(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// The WIT `agent-command`'s command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub argv: Vec<String>,
    pub stdin: Option<Vec<u8>>,
}

/// How the CLI is pointed and keyed for a run, beside its command line: the
/// WIT `agent-command`'s `env` and `files`, the same for the print and the
/// interactive command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Set for the command, over the run's env.
    pub env: Vec<(String, String)>,
    /// Written into the sandbox's HOME before the command runs.
    pub files: Vec<File>,
}

/// A config file, relative to the sandbox's HOME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub contents: Vec<u8>,
}

/// Turns an agent's stdout, line by line, into events.
pub trait Parser {
    /// The parser for the output of the command built for `request`: a
    /// failure message can name the endpoint the CLI was pointed at (from
    /// `request.env`), usage can tell a resumed session.
    fn for_request(_request: &Request) -> Self
    where
        Self: Default,
    {
        Self::default()
    }
    fn push_line(&mut self, line: &str) -> Vec<Event>;
    fn finish(&mut self) -> Vec<Event>;
}

/// An agent provider, in plain Rust types.
pub trait Agent {
    type Parser: Parser + Default + 'static;

    fn describe() -> AgentInfo;
    fn print_command(request: &Request) -> Result<Command, String>;
    fn interactive_command(request: &Request) -> Result<Command, String>;
    /// The env and config files the CLI needs for `request`; none by default.
    fn config(_request: &Request) -> Result<Config, String> {
        Ok(Config::default())
    }

    fn session_file_path(_home: &str, _cwd: &str, _session_id: &str) -> Option<String> {
        None
    }
    fn rewrite_session_cwd(content: &str, _from: &str, _to: &str) -> String {
        content.to_owned()
    }
    fn usage_from_session(_content: &str) -> Option<Usage> {
        None
    }
}

impl<T: Agent> wit::Guest for T {
    type StreamParser = ParserResource<T::Parser>;

    fn describe() -> AgentInfo {
        T::describe()
    }

    fn build_print_command(request: wit::CommandRequest) -> Result<wit::AgentCommand, String> {
        let request = from_wit_request(request);
        to_wit_command(T::print_command(&request)?, T::config(&request)?)
    }

    fn build_interactive_command(
        request: wit::CommandRequest,
    ) -> Result<wit::AgentCommand, String> {
        let request = from_wit_request(request);
        to_wit_command(T::interactive_command(&request)?, T::config(&request)?)
    }

    fn session_file_path(home: String, cwd: String, session_id: String) -> Option<String> {
        T::session_file_path(&home, &cwd, &session_id)
    }

    fn rewrite_session_cwd(content: String, from_cwd: String, to_cwd: String) -> String {
        T::rewrite_session_cwd(&content, &from_cwd, &to_cwd)
    }

    fn usage_from_session(content: String) -> Option<sanddune::plugin::types::Usage> {
        T::usage_from_session(&content).map(to_wit_usage)
    }
}

/// The WIT `stream-parser` resource over any [`Parser`]. WIT methods take
/// `&self`, hence the RefCell.
pub struct ParserResource<P>(RefCell<P>);

impl<P: Parser + Default + 'static> wit::GuestStreamParser for ParserResource<P> {
    fn new(request: wit::CommandRequest) -> Self {
        ParserResource(RefCell::new(P::for_request(&from_wit_request(request))))
    }

    fn push_line(&self, line: String) -> Vec<wit::AgentEvent> {
        to_wit_events(self.0.borrow_mut().push_line(&line))
    }

    fn push_lines(&self, lines: Vec<String>) -> Vec<wit::AgentEvent> {
        let mut parser = self.0.borrow_mut();
        to_wit_events(
            lines
                .iter()
                .flat_map(|line| parser.push_line(line))
                .collect(),
        )
    }

    fn finish(&self) -> Vec<wit::AgentEvent> {
        to_wit_events(self.0.borrow_mut().finish())
    }
}

fn from_wit_request(r: wit::CommandRequest) -> Request {
    Request {
        prompt: r.prompt,
        model: r.model,
        options: r.options,
        resume_session: r.resume_session,
        skip_permissions: r.skip_permissions,
        env: r.env.into_iter().map(|v| (v.key, v.value)).collect(),
    }
}

fn to_wit_command(c: Command, config: Config) -> Result<wit::AgentCommand, String> {
    Ok(wit::AgentCommand {
        argv: c.argv,
        stdin: c.stdin,
        env: config
            .env
            .into_iter()
            .map(|(key, value)| sanddune::plugin::types::EnvVar { key, value })
            .collect(),
        files: config
            .files
            .into_iter()
            .map(|f| wit::AgentFile {
                path: f.path,
                contents: f.contents,
            })
            .collect(),
    })
}

fn to_wit_usage(u: Usage) -> sanddune::plugin::types::Usage {
    sanddune::plugin::types::Usage {
        input_tokens: u.input_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        output_tokens: u.output_tokens,
    }
}

fn to_wit_events(events: Vec<Event>) -> Vec<wit::AgentEvent> {
    events
        .into_iter()
        .map(|event| match event {
            Event::Text(text) => wit::AgentEvent::Text(text),
            Event::ToolCall { name, input } => {
                wit::AgentEvent::ToolCall(wit::ToolCall { name, input })
            }
            Event::SessionId(id) => wit::AgentEvent::SessionId(id),
            Event::Usage(usage) => wit::AgentEvent::Usage(to_wit_usage(usage)),
            Event::Result { is_error, text } => {
                wit::AgentEvent::Result(wit::AgentResult { is_error, text })
            }
            Event::Error(message) => wit::AgentEvent::Error(message),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [&[&str]; 4] = [&["in", "input"], &["write"], &["read"], &["out"]];

    #[test]
    fn usage_from_keys() {
        let value = serde_json::json!({"input": 5, "in": "x", "read": 2, "out": 7});
        let expected = Usage {
            input_tokens: 5,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 2,
            output_tokens: 7,
        };
        assert_eq!(Usage::from_keys(&value, KEYS), Some((expected, true)));
        let none = serde_json::json!({"other": 1});
        assert_eq!(
            Usage::from_keys(&none, KEYS),
            Some((Usage::default(), false))
        );
        assert_eq!(Usage::from_keys(&serde_json::json!([1]), KEYS), None);
    }

    #[test]
    fn usage_adds_saturating() {
        let mut usage = Usage {
            input_tokens: u64::MAX,
            output_tokens: 1,
            ..Usage::default()
        };
        usage.add(Usage {
            input_tokens: 1,
            cache_read_input_tokens: 3,
            output_tokens: 2,
            ..Usage::default()
        });
        assert_eq!(usage.input_tokens, u64::MAX);
        assert_eq!(usage.cache_read_input_tokens, 3);
        assert_eq!(usage.output_tokens, 3);
    }
}
