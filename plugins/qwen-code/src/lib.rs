//! Agent provider for Qwen Code (`qwen`, the `@qwen-code/qwen-code`
//! package), pointed at any OpenAI-compatible chat completions API.
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use sanddune_agent_sdk::{
    Agent, AgentInfo, AgentOption, Command, Config, EnvRequirement, Request, Usage,
};

pub struct QwenCode;

impl Agent for QwenCode {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: command::NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Qwen Code (@qwen-code/qwen-code) on an OpenAI-compatible API, run \
                          headless with `qwen --output-format stream-json`"
                .into(),
            program: command::PROGRAM.into(),
            // Without one the CLI uses its own default; OPENAI_MODEL also
            // names one.
            default_model: None,
            options: vec![AgentOption {
                name: command::MAX_RETRIES.into(),
                description: "How many times the CLI retries a failed or rate-limited API \
                              request (settings.json model.generationConfig.maxRetries; its \
                              own default retries a rate limit 10 times, waiting 60 s to 5 \
                              minutes)"
                    .into(),
                allowed_values: Vec::new(),
            }],
            env: vec![EnvRequirement {
                any_of: vec!["OPENAI_API_KEY".into()],
                description: "The key of the OpenAI-compatible API the CLI calls (OpenAI, \
                              DashScope, OpenRouter, a local server: OPENAI_BASE_URL says which)"
                    .into(),
            }],
            optional_env: [
                "OPENAI_BASE_URL",
                "OPENAI_MODEL",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            session_files: true,
            // What its CLI reaches to think without OPENAI_BASE_URL: let
            // through under an egress policy.
            egress_hosts: vec!["api.openai.com".into()],
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

    fn usage_from_session(content: &str) -> Option<Usage> {
        session::usage_from_session(content)
    }
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(QwenCode);
