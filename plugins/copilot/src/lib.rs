//! Agent provider for GitHub's Copilot CLI (`copilot`).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

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
                    "COPILOT_GITHUB_TOKEN".into(),
                    "GH_TOKEN".into(),
                    "GITHUB_TOKEN".into(),
                    "COPILOT_PROVIDER_BASE_URL".into(),
                ],
                description: "A GitHub token allowed to use Copilot (a fine-grained \
                              personal access token with the Copilot Requests permission), \
                              or your own model provider's endpoint (with \
                              COPILOT_PROVIDER_API_KEY and COPILOT_MODEL; see \
                              `copilot help providers`)"
                    .into(),
            }],
            // Honoured when set: your own model provider (BYOK; `copilot help
            // providers`), offline mode, GitHub Enterprise hosts, proxies.
            optional_env: [
                "COPILOT_PROVIDER_TYPE",
                "COPILOT_PROVIDER_API_KEY",
                "COPILOT_PROVIDER_BEARER_TOKEN",
                "COPILOT_PROVIDER_WIRE_API",
                "COPILOT_PROVIDER_MODEL_ID",
                "COPILOT_PROVIDER_WIRE_MODEL",
                "COPILOT_MODEL",
                "COPILOT_OFFLINE",
                "GH_HOST",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            // ~/.copilot/session-state/<id>/events.jsonl: resumable, and the
            // only place 1.0.102 records token counts.
            session_files: true,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: [
                "api.githubcopilot.com",
                "*.githubcopilot.com",
                "api.github.com",
            ]
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
sanddune_agent_sdk::export_agent!(Copilot);
