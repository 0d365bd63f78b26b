//! Agent provider for Anthropic's Claude Code CLI (`claude`).
//!
//! This file only describes the agent; the WIT glue is in sanddune-agent-sdk
//! and the logic lives in plain modules so it can be unit-tested natively.

pub mod command;
pub mod parser;
pub mod session;

use sanddune_agent_sdk::{
    Agent, AgentInfo, AgentOption, Command, EnvRequirement, Event, Request, Usage,
};

pub struct ClaudeCode;

impl Agent for ClaudeCode {
    type Parser = parser::Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "claude-code".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Anthropic's Claude Code CLI, run in print mode with stream-json output"
                .into(),
            program: command::PROGRAM.into(),
            // An alias claude resolves itself, so it does not go stale.
            default_model: Some("opus".into()),
            options: vec![
                AgentOption {
                    name: command::EFFORT.into(),
                    description: "Reasoning effort (--effort)".into(),
                    allowed_values: command::EFFORTS.map(String::from).to_vec(),
                },
                AgentOption {
                    name: command::PERMISSION_MODE.into(),
                    description: "Permission mode (--permission-mode), used only when \
                                  permission prompts are not skipped"
                        .into(),
                    allowed_values: Vec::new(),
                },
            ],
            // Any one of these lets `claude` reach a model: a key, a
            // subscription's token, a gateway's token, or the switch to
            // Bedrock or Vertex (whose credentials are optional env below).
            env: vec![EnvRequirement {
                any_of: [
                    "ANTHROPIC_API_KEY",
                    "CLAUDE_CODE_OAUTH_TOKEN",
                    "ANTHROPIC_AUTH_TOKEN",
                    "CLAUDE_CODE_USE_BEDROCK",
                    "CLAUDE_CODE_USE_VERTEX",
                ]
                .map(String::from)
                .to_vec(),
                description: "An Anthropic API key, an OAuth token from `claude setup-token`, \
                              a gateway's ANTHROPIC_AUTH_TOKEN, or CLAUDE_CODE_USE_BEDROCK or \
                              CLAUDE_CODE_USE_VERTEX with that cloud's credentials"
                    .into(),
            }],
            // Honoured when set: gateways and proxies, the model, Bedrock
            // and Vertex credentials, telemetry opt-outs.
            optional_env: [
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_CUSTOM_HEADERS",
                "ANTHROPIC_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "AWS_REGION",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_BEARER_TOKEN_BEDROCK",
                "ANTHROPIC_VERTEX_PROJECT_ID",
                "CLOUD_ML_REGION",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "DISABLE_AUTOUPDATER",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "NO_PROXY",
            ]
            .map(String::from)
            .to_vec(),
            session_files: true,
            // What its CLI reaches to think: let through under an egress policy.
            egress_hosts: ["api.anthropic.com"].map(String::from).to_vec(),
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

    fn usage_from_session(content: &str) -> Option<Usage> {
        session::usage_from_session(content)
    }
}

impl sanddune_agent_sdk::Parser for parser::Parser {
    fn for_request(request: &Request) -> Self {
        parser::Parser::for_request(request)
    }

    fn push_line(&mut self, line: &str) -> Vec<Event> {
        parser::Parser::push_line(self, line)
    }

    fn finish(&mut self) -> Vec<Event> {
        parser::Parser::finish(self)
    }
}

// Only for wasm32: natively the exported symbol names (which contain `:`)
// break the cdylib link of the test build.
#[cfg(target_arch = "wasm32")]
sanddune_agent_sdk::export_agent!(ClaudeCode);
