//! Agent provider for Google's Gemini CLI (`gemini`, the
//! `@google/gemini-cli` package).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;

use sanddune_agent_sdk::{Agent, AgentInfo, AgentOption, Command, Config, EnvRequirement, Request};

pub struct Gemini;

impl Agent for Gemini {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: command::NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Google's Gemini CLI (@google/gemini-cli), run headless with \
                          `gemini --output-format stream-json`"
                .into(),
            program: command::PROGRAM.into(),
            // Without a model the CLI routes each request ("auto") through an
            // extra classifier call; a run that names one makes no such call.
            default_model: None,
            options: vec![AgentOption {
                name: command::MAX_ATTEMPTS.into(),
                description: "How many times the CLI tries a failed API request \
                              (settings.json general.maxAttempts; the CLI's own default \
                              is 10, with back-off up to 30 s)"
                    .into(),
                allowed_values: Vec::new(),
            }],
            env: vec![EnvRequirement {
                any_of: vec!["GEMINI_API_KEY".into()],
                description: "A Gemini API key (Google AI Studio)".into(),
            }],
            optional_env: [
                "GOOGLE_GEMINI_BASE_URL",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            // The CLI names its session file by the minute it started, which
            // no session id tells: the host cannot find it to capture.
            session_files: false,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: vec!["generativelanguage.googleapis.com".into()],
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
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(Gemini);
