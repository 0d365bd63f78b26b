//! `sanddune:plugin@0.2.x` (`wit/`): the current version.

mod generated {
    wasmtime::component::bindgen!({
        world: "sandbox-plugin",
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sanddune:plugin/process.child": crate::capability::process::Child,
            "sanddune:plugin/output.output-sink": crate::capability::output::OutputSink,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}

mod agent_generated {
    wasmtime::component::bindgen!({
        world: "agent-plugin",
        path: "../wit",
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

host_imports!({
    async fn exec_interactive(
        &mut self,
        container: String,
        options: containers::InteractiveExecOptions,
    ) -> wasmtime::Result<Result<i32, String>> {
        let options = cap_containers::InteractiveExecOptions {
            argv: options.argv,
            env: env_pairs(options.env),
            user: options.user,
            workdir: options.workdir,
        };
        Ok(self.containers_exec_interactive(container, options).await)
    }
});
shared_conversions!();

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
    crate::capability::http::add_to_linker(sandbox)?;
    AgentPlugin::add_to_linker::<_, HasSelf<PluginState>>(agent, get)
}

impl sandbox::ProviderInfo {
    /// The host's view; a capability request it cannot read is an error.
    pub fn into_api(self) -> Result<api::ProviderInfo, String> {
        let capabilities = api::Capabilities::from_requests(
            self.capabilities
                .iter()
                .map(|r| (r.kind.as_str(), r.value.as_str())),
        )?;
        Ok(api::ProviderInfo {
            name: self.name,
            version: self.version,
            description: self.description,
            kind: self.kind.into(),
            config: self.config.into_iter().map(Into::into).collect(),
            capabilities,
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
            optional_env: i.optional_env,
            session_files: i.session_files,
        }
    }
}
