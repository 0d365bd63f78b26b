//! An agent provider built against the frozen `sanddune:plugin@0.7.0`
//! (`wit/v0.7/`), so CI proves a component of that version still loads and
//! runs. A `sh` script writes the prompt to V07.md and commits it with a
//! plain `git commit`; each output line is a text event.

wit_bindgen::generate!({ world: "agent-plugin", path: "../../../wit/v0.7" });

use std::cell::RefCell;

use exports::sanddune::plugin::agent_provider::{
    AgentCommand, AgentEvent, AgentInfo, AgentResult, CommandRequest, Guest, GuestStreamParser,
};

const SCRIPT: &str = r#"cat > V07.md
git add V07.md && git commit -q -m "v0.7 agent: wrote V07.md" >&2 || exit 1
echo "committed V07.md <promise>COMPLETE</promise>"
"#;

struct Agent;

impl Guest for Agent {
    type StreamParser = Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "v0-7-agent".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A 0.7 agent for the contract-version tests".into(),
            program: "sh".into(),
            default_model: None,
            options: vec![],
            env: vec![],
            optional_env: vec![],
            session_files: false,
            egress_hosts: vec![],
        }
    }

    fn build_print_command(request: CommandRequest) -> Result<AgentCommand, String> {
        Ok(AgentCommand {
            argv: vec!["sh".into(), "-c".into(), SCRIPT.into()],
            stdin: Some(request.prompt.into_bytes()),
            env: vec![],
            files: vec![],
        })
    }

    fn build_interactive_command(_request: CommandRequest) -> Result<AgentCommand, String> {
        Err("no interactive mode".into())
    }

    fn session_file_path(_home: String, _cwd: String, _session_id: String) -> Option<String> {
        None
    }

    fn rewrite_session_cwd(content: String, _from_cwd: String, _to_cwd: String) -> String {
        content
    }

    fn usage_from_session(_content: String) -> Option<sanddune::plugin::types::Usage> {
        None
    }
}

/// Every line is text; the last one is the result.
struct Parser {
    last: RefCell<String>,
}

impl GuestStreamParser for Parser {
    fn new(_request: CommandRequest) -> Self {
        Parser {
            last: RefCell::new(String::new()),
        }
    }

    fn push_line(&self, line: String) -> Vec<AgentEvent> {
        if line.trim().is_empty() {
            return vec![];
        }
        *self.last.borrow_mut() = line.clone();
        vec![AgentEvent::Text(line)]
    }

    fn push_lines(&self, lines: Vec<String>) -> Vec<AgentEvent> {
        lines.into_iter().flat_map(|l| self.push_line(l)).collect()
    }

    fn finish(&self) -> Vec<AgentEvent> {
        vec![AgentEvent::Result(AgentResult {
            is_error: false,
            text: self.last.borrow().clone(),
        })]
    }
}

export!(Agent);
