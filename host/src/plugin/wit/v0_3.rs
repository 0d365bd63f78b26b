//! `sanddune:plugin@0.3.x` (`wit/v0.3/`, frozen). It differs from 0.4 in
//! one place: the agent's `command-request` has no `env` and its
//! `agent-command` no `files`.

mod generated {
    wasmtime::component::bindgen!({
        world: "sandbox-plugin",
        path: "../wit/v0.3",
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
        path: "../wit/v0.3",
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
    exec_interactive!();

    async fn image_label(
        &mut self,
        image: String,
        key: String,
    ) -> wasmtime::Result<Result<Option<String>, String>> {
        Ok(self.containers_image_label(image, key).await)
    }
});
shared_conversions!();
since_0_2!();
provider_info!();
before_0_5!();
before_0_4!();
