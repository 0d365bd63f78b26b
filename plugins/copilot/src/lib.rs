//! Agent provider for GitHub's Copilot CLI (`copilot`).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;

use sanddune_agent_sdk::{Agent, AgentInfo, Command, EnvRequirement, Request};

pub struct Copilot;

impl Agent for Copilot {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: command::NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "GitHub's Copilot CLI, run in prompt mode with JSON output. \
                          It takes no agent options: only the model can be chosen."
                .into(),
            program: command::PROGRAM.into(),
            // The CLI picks its own default (the user's or organisation's setting).
            default_model: None,
            options: Vec::new(),
            env: vec![EnvRequirement {
                any_of: vec![
                    "GH_TOKEN".into(),
                    "GITHUB_TOKEN".into(),
                    "COPILOT_GITHUB_TOKEN".into(),
                ],
                description: "A GitHub token allowed to use Copilot (a fine-grained \
                              personal access token with the Copilot Requests permission)"
                    .into(),
            }],
            // Honoured when set: GitHub Enterprise hosts, proxies.
            optional_env: ["GH_HOST", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"]
                .map(String::from)
                .to_vec(),
            session_files: false,
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
sanddune_agent_sdk::export_agent!(Copilot);
