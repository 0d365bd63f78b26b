//! `sanddune:plugin@0.8.x` (`wit/`): the current version. What it adds to
//! 0.7: a sandbox provider may keep snapshots (`snapshots` in its info,
//! `sandbox.keep`, `create-options.snapshot`, `remove-snapshot`; ADR 0038).

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
use generated::sanddune::plugin::{containers, jail, logging, output, pods, process, types};

use crate::capability::containers as cap_containers;
use crate::capability::pods as cap_pods;
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
shared_conversions!(snapshot);
since_0_2!(pods, jail);
provider_info!(since_0_8);

impl From<api::PreflightOptions> for sandbox::PreflightOptions {
    fn from(o: api::PreflightOptions) -> Self {
        Self {
            host_git_dir: o.host_git_dir,
            config: o.config,
        }
    }
}

impl From<sandbox::PreflightError> for api::PreflightError {
    fn from(e: sandbox::PreflightError) -> Self {
        match e {
            sandbox::PreflightError::Credentials(m) => Self::Credentials(m),
            sandbox::PreflightError::Options(m) => Self::Options(m),
            sandbox::PreflightError::Host(m) => Self::Host(m),
        }
    }
}
pods_imports!();
jail_imports!();

impl From<agent::AgentInfo> for api::AgentInfo {
    fn from(i: agent::AgentInfo) -> Self {
        let egress_hosts = i.egress_hosts.clone();
        Self {
            egress_hosts,
            ..agent_info(i)
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
            env: r
                .env
                .into_iter()
                .map(|v| types::EnvVar {
                    key: v.key,
                    value: v.value,
                })
                .collect(),
        }
    }
}

impl From<agent::AgentCommand> for api::AgentCommand {
    fn from(c: agent::AgentCommand) -> Self {
        Self {
            argv: c.argv,
            stdin: c.stdin,
            env: api_env_vars(c.env),
            files: c
                .files
                .into_iter()
                .map(|f| api::AgentFile {
                    path: f.path,
                    contents: f.contents,
                })
                .collect(),
        }
    }
}
