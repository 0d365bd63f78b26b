//! `sanddune:plugin@0.1.x` (`wit/v0.1/`, frozen). Supported until 1.0 (ADR
//! 0009). It differs from 0.2 in three places: capabilities are a record
//! (its `hosts` were never granted, and still are not), agents declare no
//! optional env, and `containers` has no `exec-interactive`.

mod generated {
    wasmtime::component::bindgen!({
        world: "sandbox-plugin",
        path: "../wit/v0.1",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sanddune:plugin/process.child": crate::capability::process::Child,
            "sanddune:plugin/output.output-sink": crate::capability::output::OutputSink,
        },
    });
}

mod agent_generated {
    wasmtime::component::bindgen!({
        world: "agent-plugin",
        path: "../wit/v0.1",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sanddune:plugin/types": super::generated::sanddune::plugin::types,
            "sanddune:plugin/logging": super::generated::sanddune::plugin::logging,
        },
    });
}

pub use agent_generated::{AgentPlugin, AgentPluginPre};
pub use generated::{SandboxPlugin, SandboxPluginPre};

use agent_generated::exports::sanddune::plugin::agent_provider as agent;
use generated::exports::sanddune::plugin::sandbox_provider as sandbox;
use generated::sanddune::plugin::{containers, logging, output, process, types};

use crate::capability::containers as cap_containers;
use crate::plugin::api;

host_imports!({});

/// This version's imports, beside WASI.
pub fn add_to_linkers(
    sandbox: &mut wasmtime::component::Linker<PluginState>,
    agent: &mut wasmtime::component::Linker<PluginState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    SandboxPlugin::add_to_linker::<_, HasSelf<PluginState>>(sandbox, |s| s)?;
    AgentPlugin::add_to_linker::<_, HasSelf<PluginState>>(agent, |s| s)
}
shared_conversions!();
before_0_4!();

impl sandbox::ProviderInfo {
    /// The host's view. 0.1's `hosts` are dropped: that version granted
    /// nothing for them, and its plugins keep that promise.
    pub fn into_api(self) -> Result<api::ProviderInfo, String> {
        let caps = self.capabilities;
        let capabilities = api::Capabilities {
            programs: caps.programs,
            scratch_dir: caps.scratch_dir,
            worktree: match caps.worktree {
                types::DirectoryAccess::None => api::DirectoryAccess::None,
                types::DirectoryAccess::ReadOnly => api::DirectoryAccess::ReadOnly,
                types::DirectoryAccess::ReadWrite => api::DirectoryAccess::ReadWrite,
            },
            http: Vec::new(),
            http_options: Vec::new(),
            env_keys: caps.env_keys,
            containers: caps.containers,
            pods: false,
            jail: false,
        };
        Ok(api::ProviderInfo {
            name: self.name,
            version: self.version,
            description: self.description,
            kind: self.kind.into(),
            config: self.config.into_iter().map(Into::into).collect(),
            capabilities,
            container_engine: None,
            snapshots: false,
        })
    }
}

impl From<agent::AgentInfo> for api::AgentInfo {
    fn from(i: agent::AgentInfo) -> Self {
        Self {
            name: i.name,
            version: i.version,
            description: i.description,
            program: i.program,
            default_model: i.default_model,
            options: i.options.into_iter().map(Into::into).collect(),
            env: i.env.into_iter().map(Into::into).collect(),
            optional_env: Vec::new(),
            egress_hosts: Vec::new(),
            session_files: i.session_files,
        }
    }
}
