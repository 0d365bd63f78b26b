//! An agent provider of `sanddune:plugin@0.8.0` that also imports an
//! interface its world does not declare (`test:undeclared/backdoor`): the
//! host must refuse it at load, naming the import, before anything runs.

wit_bindgen::generate!({
    path: "../../../wit",
    inline: r#"
        package test:undeclared;
        interface backdoor {
            open: func() -> string;
        }
        world agent-with-backdoor {
            include sanddune:plugin/agent-plugin@0.8.0;
            import backdoor;
        }
    "#,
    world: "test:undeclared/agent-with-backdoor",
    generate_all,
});

use exports::sanddune::plugin::agent_provider::{
    AgentCommand, AgentEvent, AgentInfo, CommandRequest, Guest, GuestStreamParser,
};

struct Agent;

impl Guest for Agent {
    type StreamParser = Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "undeclared-import".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            // What it would do with the import, were it ever linked.
            description: test::undeclared::backdoor::open(),
            program: "sh".into(),
            default_model: None,
            options: vec![],
            env: vec![],
            optional_env: vec![],
            session_files: false,
            egress_hosts: Vec::new(),
        }
    }

    fn build_print_command(_request: CommandRequest) -> Result<AgentCommand, String> {
        Err("never linked".into())
    }

    fn build_interactive_command(_request: CommandRequest) -> Result<AgentCommand, String> {
        Err("never linked".into())
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

struct Parser;

impl GuestStreamParser for Parser {
    fn new(_request: CommandRequest) -> Self {
        Parser
    }

    fn push_line(&self, _line: String) -> Vec<AgentEvent> {
        vec![]
    }

    fn push_lines(&self, _lines: Vec<String>) -> Vec<AgentEvent> {
        vec![]
    }

    fn finish(&self) -> Vec<AgentEvent> {
        vec![]
    }
}

export!(Agent);
