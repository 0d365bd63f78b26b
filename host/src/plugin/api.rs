//! The provider contract in host-owned types. Every supported WIT version
//! converts into these (`plugin::wit`), so the run layer, the CLI and the
//! conformance kit never see generated bindings, and a new WIT version
//! changes one binding module, not the callers.

pub use crate::capability::containers::Engine;
pub use crate::capability::output::{OutputLine, OutputStream};
pub use crate::capability::request::{Capabilities, DirectoryAccess};

/// One environment variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvVar {
    pub key: String,
    pub value: String,
}

// ---- sandbox providers ----

/// bind-mount: the host worktree is mounted in; isolated: the host syncs the
/// repository in and the commits out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxKind {
    BindMount,
    Isolated,
}

#[derive(Clone, Debug)]
pub struct ConfigOption {
    pub name: String,
    pub description: String,
    pub default_value: Option<String>,
}

#[derive(Clone, Debug)]
pub struct ProviderInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub kind: SandboxKind,
    pub config: Vec<ConfigOption>,
    /// What it asks for, parsed from its capability requests.
    pub capabilities: Capabilities,
    /// The engine its sandboxes are containers of (declared since 0.6):
    /// where a dev container's image is built.
    pub container_engine: Option<Engine>,
    /// Whether it keeps snapshots (declared since 0.8).
    pub snapshots: bool,
}

/// What `preflight` is told (since 0.6).
#[derive(Clone, Debug)]
pub struct PreflightOptions {
    pub host_git_dir: String,
    pub config: Vec<(String, String)>,
}

/// Why a run cannot create a sandbox with a provider here (since 0.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreflightError {
    /// Credentials from its env keys are missing or unusable.
    Credentials(String),
    /// An option is unknown or has an unusable value.
    Options(String),
    /// Something the machine must have is missing or does not answer.
    Host(String),
}

#[derive(Clone, Debug)]
pub struct CreateOptions {
    pub run_id: String,
    pub name: String,
    pub host_worktree_path: String,
    pub host_git_dir: String,
    pub branch: String,
    pub env: Vec<EnvVar>,
    pub config: Vec<(String, String)>,
    pub scratch_dir: Option<String>,
    /// The provider's snapshot to start from (since 0.8).
    pub snapshot: Option<String>,
}

#[derive(Clone, Debug)]
pub enum Command {
    /// Program and arguments, no shell.
    Argv(Vec<String>),
    /// A command line for `sh -c`.
    Shell(String),
}

#[derive(Clone, Debug)]
pub struct ExecRequest {
    pub command: Command,
    pub cwd: Option<String>,
    pub env: Vec<EnvVar>,
    pub stdin: Option<Vec<u8>>,
    pub sudo: bool,
    pub timeout_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
pub struct ExecResult {
    pub exit_code: i32,
    pub timed_out: bool,
}

/// What `stat` knows; absent fields are unknown.
#[derive(Clone, Debug)]
pub struct FileStat {
    pub is_file: bool,
    pub is_directory: bool,
    pub is_symlink: Option<bool>,
    pub size: Option<u64>,
    pub mtime_ms: Option<u64>,
}

// ---- agent providers ----

#[derive(Clone, Debug)]
pub struct AgentOption {
    pub name: String,
    pub description: String,
    pub allowed_values: Vec<String>,
}

/// Satisfied when any one of its keys is set.
#[derive(Clone, Debug)]
pub struct EnvRequirement {
    pub any_of: Vec<String>,
    pub description: String,
}

#[derive(Clone, Debug)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub program: String,
    pub default_model: Option<String>,
    pub options: Vec<AgentOption>,
    pub env: Vec<EnvRequirement>,
    /// Keys the CLI honours when set; none before 0.2.
    pub optional_env: Vec<String>,
    pub session_files: bool,
    /// Hosts the CLI must reach (its model API), let through under an
    /// egress policy; none before 0.5.
    pub egress_hosts: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandRequest {
    pub prompt: String,
    pub model: Option<String>,
    pub options: Vec<(String, String)>,
    pub resume_session: Option<String>,
    pub skip_permissions: bool,
    /// The run's values of the agent's declared keys that are set (0.4 on).
    pub env: Vec<EnvVar>,
}

#[derive(Clone, Debug)]
pub struct AgentCommand {
    pub argv: Vec<String>,
    pub stdin: Option<Vec<u8>>,
    pub env: Vec<EnvVar>,
    /// Config files for the sandbox's HOME (0.4 on).
    pub files: Vec<AgentFile>,
}

/// A config file an agent's CLI reads, relative to the sandbox's HOME.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFile {
    pub path: String,
    pub contents: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    /// The tool input as JSON text.
    pub input: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentResult {
    pub is_error: bool,
    pub text: String,
}

/// Token usage of one iteration, normalised across agents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentEvent {
    Text(String),
    ToolCall(ToolCall),
    SessionId(String),
    Usage(Usage),
    Result(AgentResult),
    Error(String),
}
