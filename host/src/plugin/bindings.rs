//! Rust bindings for the WIT package (`wit/`), one module per world.
//! Every import is async (the guest fiber blocks, tokio does not) and
//! trappable (a host bug or a denied capability can end the call).

pub mod sandbox {
    wasmtime::component::bindgen!({
        world: "sandbox-plugin",
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sanddune:plugin/process.child": crate::capability::process::Child,
            "sanddune:plugin/output.output-sink": crate::capability::output::OutputSink,
        },
    });
}

pub mod agent {
    wasmtime::component::bindgen!({
        world: "agent-plugin",
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "sanddune:plugin/types": super::sandbox::sanddune::plugin::types,
            "sanddune:plugin/logging": super::sandbox::sanddune::plugin::logging,
        },
    });
}

pub use agent::exports::sanddune::plugin::agent_provider as agent_api;
pub use sandbox::exports::sanddune::plugin::sandbox_provider as sandbox_api;
pub use sandbox::sanddune::plugin::types;
pub use sandbox::sanddune::plugin::{containers, logging, output, process};
