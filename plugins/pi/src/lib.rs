//! Agent provider for pi (`pi`, the `@mariozechner/pi-coding-agent` CLI).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use sanddune_agent_sdk::{Agent, AgentInfo, AgentOption, Command, Config, Request};

pub struct Pi;

impl Agent for Pi {
    type Parser = parser::Parser;

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
            // No env requirement: pi reads the key of whichever model
            // provider it is given (dozens, each with its own variable, or
            // its own login), so no list of keys is one it needs. The
            // common keys pass from the caller's environment when set.
            env: Vec::new(),
            optional_env: [
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "GEMINI_API_KEY",
                // pi itself ignores these two: the provider writes them
                // into ~/.pi/agent/models.json (command::config).
                "ANTHROPIC_BASE_URL",
                "OPENAI_BASE_URL",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            session_files: true,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: ["api.anthropic.com", "api.openai.com"]
                .map(String::from)
                .to_vec(),
        }
    }

    fn print_command(request: &Request) -> Result<Command, String> {
        command::print_command(request)
    }

    fn interactive_command(request: &Request) -> Result<Command, String> {
        command::interactive_command(request)
    }

    fn config(request: &Request) -> Result<Config, String> {
        command::config(request)
    }

    fn session_file_path(home: &str, cwd: &str, session_id: &str) -> Option<String> {
        session::session_file_path(home, cwd, session_id)
    }

    fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
        session::rewrite_session_cwd(content, from, to)
    }

    fn usage_from_session(content: &str) -> Option<sanddune_agent_sdk::Usage> {
        session::usage_from_session(content)
    }
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(Pi);
