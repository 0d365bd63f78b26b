//! Conversions between a WIT version's provider records and the host-owned
//! `plugin::api` types, for the records every version shares. Expanded
//! inside a version module, where `sandbox`, `agent` and `types` name that
//! version's generated interfaces.

macro_rules! shared_conversions {
    // Since 0.8 the create options name a snapshot to start from:
    // `shared_conversions!(snapshot)`.
    ($($since_0_8:ident)?) => {
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
                    $($since_0_8: o.$since_0_8,)?
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

/// What 0.2 and every later version share: the provider's capabilities are
/// a list of requests, agents declare optional env, and the sandbox world
/// imports wasi:http. Expanded inside a version module like
/// `shared_conversions!`.
macro_rules! since_0_2 {
    ($($imports:ident),*) => {
        /// This version's imports, beside WASI: the sanddune interfaces one by one
        /// (the world's own `add_to_linker` would want wasi:http's host traits on
        /// `PluginState`), then wasi:http through the `http` capability.
        pub fn add_to_linkers(
            sandbox: &mut wasmtime::component::Linker<PluginState>,
            agent: &mut wasmtime::component::Linker<PluginState>,
        ) -> wasmtime::Result<()> {
            use wasmtime::component::HasSelf;
            fn get(s: &mut PluginState) -> &mut PluginState {
                s
            }
            types::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;
            logging::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;
            output::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;
            process::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;
            containers::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;
            $($imports::add_to_linker::<_, HasSelf<PluginState>>(sandbox, get)?;)*
            crate::capability::http::add_to_linker(sandbox)?;
            AgentPlugin::add_to_linker::<_, HasSelf<PluginState>>(agent, get)
        }

        /// What every version since 0.2 says of an agent; no egress hosts.
        fn agent_info(i: agent::AgentInfo) -> api::AgentInfo {
            api::AgentInfo {
                name: i.name,
                version: i.version,
                description: i.description,
                program: i.program,
                default_model: i.default_model,
                options: i.options.into_iter().map(Into::into).collect(),
                env: i.env.into_iter().map(Into::into).collect(),
                optional_env: i.optional_env,
                session_files: i.session_files,
                egress_hosts: Vec::new(),
            }
        }
    };
}

/// The provider's info since 0.2: `capabilities` is a list of requests.
/// Before 0.6 it declares no container engine; `since_0_6` reads the one
/// it declares.
macro_rules! provider_info {
    () => {
        provider_info!(@with |_: &sandbox::ProviderInfo| None, |_: &sandbox::ProviderInfo| false);
    };
    (since_0_6) => {
        provider_info!(@with provider_info!(@engine), |_: &sandbox::ProviderInfo| false);
    };
    // Since 0.8 a provider says whether it keeps snapshots.
    (since_0_8) => {
        provider_info!(@with provider_info!(@engine), |i: &sandbox::ProviderInfo| i.snapshots);
    };
    (@engine) => {
        |i: &sandbox::ProviderInfo| {
            i.container_engine.map(|e| match e {
                sandbox::ContainerEngine::Docker => api::Engine::Docker,
                sandbox::ContainerEngine::Podman => api::Engine::Podman,
            })
        }
    };
    (@with $engine:expr, $snapshots:expr) => {
        impl sandbox::ProviderInfo {
            /// The host's view; a capability request it cannot read is an error.
            pub fn into_api(self) -> Result<api::ProviderInfo, String> {
                let capabilities = api::Capabilities::from_requests(
                    self.capabilities
                        .iter()
                        .map(|r| (r.kind.as_str(), r.value.as_str())),
                )?;
                let engine: fn(&sandbox::ProviderInfo) -> Option<api::Engine> = $engine;
                let container_engine = engine(&self);
                let snapshots: fn(&sandbox::ProviderInfo) -> bool = $snapshots;
                let snapshots = snapshots(&self);
                Ok(api::ProviderInfo {
                    name: self.name,
                    version: self.version,
                    description: self.description,
                    kind: self.kind.into(),
                    config: self.config.into_iter().map(Into::into).collect(),
                    capabilities,
                    container_engine,
                    snapshots,
                })
            }
        }
    };
}

/// The agent's info before 0.5: it declares no egress hosts.
macro_rules! before_0_5 {
    () => {
        impl From<agent::AgentInfo> for api::AgentInfo {
            fn from(i: agent::AgentInfo) -> Self {
                agent_info(i)
            }
        }
    };
}

/// The agent's command request and command before 0.4: no env values in,
/// no config files out.
macro_rules! before_0_4 {
    () => {
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
                    files: Vec::new(),
                }
            }
        }
    };
}
