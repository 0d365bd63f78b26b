//! Agent provider for Cursor's CLI (`agent`, formerly `cursor-agent`).
//!
//! This file is only the WIT glue; the logic lives in plain modules so it can
//! be unit-tested natively.

pub mod command;
pub mod parser;

use std::cell::RefCell;

wit_bindgen::generate!({ world: "agent-plugin", path: "../../wit" });

use exports::sanddune::plugin::agent_provider::{
    AgentCommand, AgentEvent, AgentInfo, AgentResult, CommandRequest, EnvRequirement, Guest,
    GuestStreamParser, ToolCall,
};
use sanddune::plugin::types::Usage;

struct Component;

impl Guest for Component {
    type StreamParser = StreamParser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: command::NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Cursor's CLI (`agent`), run in print mode with stream-json output. \
                          It takes no agent options: only the model can be chosen."
                .into(),
            program: command::PROGRAM.into(),
            // The CLI picks its own default (the account's setting).
            default_model: None,
            options: Vec::new(),
            env: vec![EnvRequirement {
                any_of: vec!["CURSOR_API_KEY".into()],
                description: "A Cursor API key (Cursor dashboard, Integrations)".into(),
            }],
            session_files: false,
        }
    }

    fn build_print_command(request: CommandRequest) -> Result<AgentCommand, String> {
        command::print_command(&convert_request(request)).map(convert_command)
    }

    fn build_interactive_command(request: CommandRequest) -> Result<AgentCommand, String> {
        command::interactive_command(&convert_request(request)).map(convert_command)
    }

    // Cursor keeps its chats in its own store, which sanddune does not read:
    // `session-files` is false and the session helpers have nothing to do.
    fn session_file_path(_home: String, _cwd: String, _session_id: String) -> Option<String> {
        None
    }

    fn rewrite_session_cwd(content: String, _from_cwd: String, _to_cwd: String) -> String {
        content
    }

    fn usage_from_session(_content: String) -> Option<Usage> {
        None
    }
}

/// WIT methods take `&self`, hence the RefCell.
struct StreamParser(RefCell<parser::Parser>);

impl GuestStreamParser for StreamParser {
    fn new() -> Self {
        StreamParser(RefCell::new(parser::Parser::new()))
    }

    fn push_line(&self, line: String) -> Vec<AgentEvent> {
        convert_events(self.0.borrow_mut().push_line(&line))
    }

    fn finish(&self) -> Vec<AgentEvent> {
        convert_events(self.0.borrow_mut().finish())
    }
}

fn convert_request(r: CommandRequest) -> command::Request {
    command::Request {
        prompt: r.prompt,
        model: r.model,
        options: r.options,
        resume_session: r.resume_session,
        skip_permissions: r.skip_permissions,
    }
}

fn convert_command(c: command::Command) -> AgentCommand {
    AgentCommand {
        argv: c.argv,
        stdin: None,
        env: Vec::new(),
    }
}

fn convert_usage(u: parser::Usage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        output_tokens: u.output_tokens,
    }
}

fn convert_events(events: Vec<parser::Event>) -> Vec<AgentEvent> {
    use parser::Event;
    events
        .into_iter()
        .map(|event| match event {
            Event::Text(text) => AgentEvent::Text(text),
            Event::ToolCall { name, input } => AgentEvent::ToolCall(ToolCall { name, input }),
            Event::SessionId(id) => AgentEvent::SessionId(id),
            Event::Usage(usage) => AgentEvent::Usage(convert_usage(usage)),
            Event::Result { is_error, text } => AgentEvent::Result(AgentResult { is_error, text }),
            Event::Error(message) => AgentEvent::Error(message),
        })
        .collect()
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build. The glue above still type-checks.
#[cfg(target_arch = "wasm32")]
export!(Component);
