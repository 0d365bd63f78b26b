//! What a cloud provider's exec is asked and answers: the host's
//! `exec-request` in plain types, the same for every cloud API.

pub enum Command {
    Argv(Vec<String>),
    Shell(String),
}

pub struct ExecSpec {
    pub command: Command,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub sudo: bool,
    pub timeout_ms: Option<u64>,
}

pub struct ExecOutcome {
    pub exit_code: i32,
    pub timed_out: bool,
}

impl ExecSpec {
    /// `sh -c SCRIPT sh ARGS...` in the worktree, no stdin, ten minutes at
    /// most: how [`crate::shell_fs::ShellFs::run_script`] runs its scripts.
    pub fn script(script: &str, args: &[&str]) -> ExecSpec {
        let mut argv: Vec<String> = ["sh", "-c", script, "sh"].map(String::from).to_vec();
        argv.extend(args.iter().map(|a| a.to_string()));
        ExecSpec {
            command: Command::Argv(argv),
            cwd: None,
            env: vec![],
            stdin: None,
            sudo: false,
            timeout_ms: Some(600_000),
        }
    }
}
