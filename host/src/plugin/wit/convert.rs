//! Conversions between a WIT version's provider records and the host-owned
//! `plugin::api` types, for the records every version shares. Expanded
//! inside a version module, where `sandbox`, `agent` and `types` name that
//! version's generated interfaces.

macro_rules! shared_conversions {
    () => {
        fn env_vars(env: Vec<api::EnvVar>) -> Vec<types::EnvVar> {
            env.into_iter()
                .map(|v| types::EnvVar {
                    key: v.key,
                    value: v.value,
                })
                .collect()
        }

        fn api_env_vars(env: Vec<types::EnvVar>) -> Vec<api::EnvVar> {
            env.into_iter()
                .map(|v| api::EnvVar {
                    key: v.key,
                    value: v.value,
                })
                .collect()
        }

        impl From<sandbox::SandboxKind> for api::SandboxKind {
            fn from(k: sandbox::SandboxKind) -> Self {
                match k {
                    sandbox::SandboxKind::BindMount => api::SandboxKind::BindMount,
                    sandbox::SandboxKind::Isolated => api::SandboxKind::Isolated,
                }
            }
        }

        impl From<sandbox::ConfigOption> for api::ConfigOption {
            fn from(o: sandbox::ConfigOption) -> Self {
                Self {
                    name: o.name,
                    description: o.description,
                    default_value: o.default_value,
                }
            }
        }

        impl From<api::CreateOptions> for sandbox::CreateOptions {
            fn from(o: api::CreateOptions) -> Self {
                Self {
                    run_id: o.run_id,
                    name: o.name,
                    host_worktree_path: o.host_worktree_path,
                    host_git_dir: o.host_git_dir,
                    branch: o.branch,
                    env: env_vars(o.env),
                    config: o.config,
                    scratch_dir: o.scratch_dir,
                }
            }
        }

        impl From<api::ExecRequest> for sandbox::ExecRequest {
            fn from(r: api::ExecRequest) -> Self {
                Self {
                    command: match r.command {
                        api::Command::Argv(argv) => sandbox::Command::Argv(argv),
                        api::Command::Shell(line) => sandbox::Command::Shell(line),
                    },
                    cwd: r.cwd,
                    env: env_vars(r.env),
                    stdin: r.stdin,
                    sudo: r.sudo,
                    timeout_ms: r.timeout_ms,
                }
            }
        }

        impl From<sandbox::ExecResult> for api::ExecResult {
            fn from(r: sandbox::ExecResult) -> Self {
                Self {
                    exit_code: r.exit_code,
                    timed_out: r.timed_out,
                }
            }
        }

        impl From<sandbox::FileStat> for api::FileStat {
            fn from(s: sandbox::FileStat) -> Self {
                Self {
                    is_file: s.is_file,
                    is_directory: s.is_directory,
                    is_symlink: s.is_symlink,
                    size: s.size,
                    mtime_ms: s.mtime_ms,
                }
            }
        }

        impl From<agent::AgentOption> for api::AgentOption {
            fn from(o: agent::AgentOption) -> Self {
                Self {
                    name: o.name,
                    description: o.description,
                    allowed_values: o.allowed_values,
                }
            }
        }

        impl From<agent::EnvRequirement> for api::EnvRequirement {
            fn from(r: agent::EnvRequirement) -> Self {
                Self {
                    any_of: r.any_of,
                    description: r.description,
                }
            }
        }

        impl From<api::CommandRequest> for agent::CommandRequest {
            fn from(r: api::CommandRequest) -> Self {
                Self {
                    prompt: r.prompt,
                    model: r.model,
                    options: r.options,
                    resume_session: r.resume_session,
                    skip_permissions: r.skip_permissions,
                }
            }
        }

        impl From<agent::AgentCommand> for api::AgentCommand {
            fn from(c: agent::AgentCommand) -> Self {
                Self {
                    argv: c.argv,
                    stdin: c.stdin,
                    env: api_env_vars(c.env),
                }
            }
        }

        impl From<types::Usage> for api::Usage {
            fn from(u: types::Usage) -> Self {
                Self {
                    input_tokens: u.input_tokens,
                    cache_creation_input_tokens: u.cache_creation_input_tokens,
                    cache_read_input_tokens: u.cache_read_input_tokens,
                    output_tokens: u.output_tokens,
                }
            }
        }

        impl From<agent::AgentEvent> for api::AgentEvent {
            fn from(e: agent::AgentEvent) -> Self {
                match e {
                    agent::AgentEvent::Text(t) => api::AgentEvent::Text(t),
                    agent::AgentEvent::ToolCall(c) => api::AgentEvent::ToolCall(api::ToolCall {
                        name: c.name,
                        input: c.input,
                    }),
                    agent::AgentEvent::SessionId(id) => api::AgentEvent::SessionId(id),
                    agent::AgentEvent::Usage(u) => api::AgentEvent::Usage(u.into()),
                    agent::AgentEvent::Result(r) => api::AgentEvent::Result(api::AgentResult {
                        is_error: r.is_error,
                        text: r.text,
                    }),
                    agent::AgentEvent::Error(e) => api::AgentEvent::Error(e),
                }
            }
        }
    };
}
