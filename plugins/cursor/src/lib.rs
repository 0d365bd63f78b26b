//! Agent provider for Cursor's CLI (`agent`, formerly `cursor-agent`).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;

use sanddune_agent_sdk::{Agent, AgentInfo, Command, EnvRequirement, Request};

pub struct Cursor;

impl Agent for Cursor {
    type Parser = parser::Parser;

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
            // Honoured when set: proxies.
            optional_env: ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"]
                .map(String::from)
                .to_vec(),
            session_files: false,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: ["api2.cursor.sh", "*.cursor.sh"].map(String::from).to_vec(),
        }
    }

    fn print_command(request: &Request) -> Result<Command, String> {
        command::print_command(request)
    }

    fn interactive_command(request: &Request) -> Result<Command, String> {
        command::interactive_command(request)
    }
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(Cursor);
