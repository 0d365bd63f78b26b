//! Agent provider for OpenAI's Codex CLI (`codex`).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use sanddune_agent_sdk::{Agent, AgentInfo, AgentOption, Command, Config, EnvRequirement, Request};

pub struct Codex;

impl Agent for Codex {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "codex".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "OpenAI's Codex CLI, run as `codex exec --json` with the prompt on stdin"
                .into(),
            program: command::PROGRAM.into(),
            // Codex picks its own default model (config.toml or its built-in one).
            default_model: None,
            options: vec![AgentOption {
                name: command::EFFORT.into(),
                description: "Reasoning effort (-c model_reasoning_effort=\"...\")".into(),
                allowed_values: command::EFFORTS.map(String::from).to_vec(),
            }],
            env: vec![EnvRequirement {
                any_of: vec!["OPENAI_API_KEY".into(), "CODEX_API_KEY".into()],
                description: "An OpenAI API key (codex sends CODEX_API_KEY; the provider \
                              sets it from OPENAI_API_KEY when only that is set)"
                    .into(),
            }],
            // Honoured when set: an OpenAI-compatible gateway (passed to
            // codex as -c openai_base_url), the organisation and project,
            // proxies.
            optional_env: [
                "OPENAI_BASE_URL",
                "OPENAI_ORGANIZATION",
                "OPENAI_PROJECT",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            session_files: true,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: ["api.openai.com", "chatgpt.com"].map(String::from).to_vec(),
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
sanddune_agent_sdk::export_agent!(Codex);
