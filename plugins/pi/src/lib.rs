//! Agent provider for pi (`pi`, the `@mariozechner/pi-coding-agent` CLI).
//!
//! This file is only the WIT glue; the logic lives in plain modules so it can
//! be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use std::cell::RefCell;

wit_bindgen::generate!({ world: "agent-plugin", path: "../../wit" });

use exports::sanddune::plugin::agent_provider::{
    AgentCommand, AgentEvent, AgentInfo, AgentOption, AgentResult, CommandRequest, EnvRequirement,
    Guest, GuestStreamParser, ToolCall,
};
use sanddune::plugin::types::Usage;

struct Component;

impl Guest for Component {
    type StreamParser = StreamParser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "pi".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "pi (@mariozechner/pi-coding-agent), run with `pi -p --mode json`".into(),
            program: command::PROGRAM.into(),
            // pi picks a default model for the provider whose key it finds.
            default_model: None,
            options: vec![
                AgentOption {
                    name: command::THINKING.into(),
                    description: "Thinking level (--thinking)".into(),
                    allowed_values: command::THINKING_LEVELS.map(String::from).to_vec(),
                },
                AgentOption {
                    name: command::PROVIDER.into(),
                    description: "Model provider (--provider), e.g. anthropic, openai, google"
                        .into(),
                    allowed_values: Vec::new(),
                },
            ],
            env: vec![EnvRequirement {
                any_of: vec![
                    "ANTHROPIC_API_KEY".into(),
                    "OPENAI_API_KEY".into(),
                    "GEMINI_API_KEY".into(),
                ],
                description: "A provider API key; pi reads the keys of the providers it \
                              supports from the environment itself"
                    .into(),
            }],
            session_files: true,
        }
    }

    fn build_print_command(request: CommandRequest) -> Result<AgentCommand, String> {
        command::print_command(&convert_request(request)).map(convert_command)
    }

    fn build_interactive_command(request: CommandRequest) -> Result<AgentCommand, String> {
        command::interactive_command(&convert_request(request)).map(convert_command)
    }

    fn session_file_path(home: String, cwd: String, session_id: String) -> Option<String> {
        session::session_file_path(&home, &cwd, &session_id)
    }

    fn rewrite_session_cwd(content: String, from_cwd: String, to_cwd: String) -> String {
        session::rewrite_session_cwd(&content, &from_cwd, &to_cwd)
    }

    fn usage_from_session(content: String) -> Option<Usage> {
        session::usage_from_session(&content).map(convert_usage)
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
        stdin: c.stdin,
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
