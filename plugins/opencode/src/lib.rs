//! Agent provider for opencode (`opencode`), the open-source coding agent
//! from sst/anomaly.
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use sanddune_agent_sdk::{Agent, AgentInfo, AgentOption, Command, Config, Request};

pub struct OpenCode;

impl Agent for OpenCode {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "opencode".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "opencode, run with `opencode run --format json`".into(),
            program: command::PROGRAM.into(),
            // opencode picks the model from its own config and the provider
            // keys it finds; a model given here must be provider/model.
            default_model: None,
            options: vec![AgentOption {
                name: command::VARIANT.into(),
                description: "Reasoning variant (--variant), e.g. high or max; the names \
                              depend on the provider and model"
                    .into(),
                allowed_values: Vec::new(),
            }],
            // No env requirement: opencode reads the key of whichever model
            // provider it is given (dozens, each with its own variable, or
            // its own login), so no list of keys is one it needs. The
            // common keys pass from the caller's environment when set.
            env: Vec::new(),
            optional_env: [
                "ANTHROPIC_API_KEY",
                "OPENAI_API_KEY",
                "OPENROUTER_API_KEY",
                "ANTHROPIC_BASE_URL",
                "OPENAI_BASE_URL",
                "OPENCODE_CONFIG",
                "OPENCODE_CONFIG_CONTENT",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            session_files: true,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: [
                "api.anthropic.com",
                "api.openai.com",
                "models.dev",
                "opencode.ai",
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

    fn config(request: &Request) -> Result<Config, String> {
        command::config(request)
    }

    fn session_file_path(home: &str, cwd: &str, session_id: &str) -> Option<String> {
        session::session_file_path(home, cwd, session_id)
    }

    fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
        session::rewrite_session_cwd(content, from, to)
    }
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(OpenCode);

#[cfg(test)]
mod tests {
    use super::*;

    /// The session file is opencode's export of the session (see
    /// `session`); there is no usage to read from it.
    #[test]
    fn session_files_are_exports() {
        assert!(OpenCode::describe().session_files);
        assert_eq!(
            OpenCode::session_file_path("/home/u", "/w", "ses_abc").as_deref(),
            Some("/home/u/.local/share/opencode/sanddune/ses_abc.json")
        );
        assert_eq!(OpenCode::usage_from_session("{}"), None);
    }
}
