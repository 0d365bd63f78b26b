//! A live instance's exports, whatever its WIT version: one enum per world
//! whose methods call the version's export and convert to `plugin::api`.
//! The `sandbox` resource's functions are declared in
//! `plugin::sandbox::calls`, which makes their methods with `each!`.

use wasmtime::Store;
use wasmtime::component::{InstancePre, ResourceAny};

use super::{ApiVersion, v0_1, v0_2, v0_3, v0_4, v0_5, v0_6, v0_7, v0_8};
use crate::capability::PluginState;
use crate::plugin::api;

type Call<T> = wasmtime::Result<Result<T, String>>;

/// The same body for every version: `$b` is that version's bindings, and
/// `.into()` picks that version's record types.
macro_rules! each {
    ($self:expr, $enum:ident, $b:ident => $body:expr) => {
        match $self {
            $enum::V0_1($b) => $body,
            $enum::V0_2($b) => $body,
            $enum::V0_3($b) => $body,
            $enum::V0_4($b) => $body,
            $enum::V0_5($b) => $body,
            $enum::V0_6($b) => $body,
            $enum::V0_7($b) => $body,
            $enum::V0_8($b) => $body,
        }
    };
}
pub(crate) use each;

/// `version`'s bindings of one world (`$pre_type`: `SandboxPluginPre` or
/// `AgentPluginPre`), as that world's enum.
macro_rules! instantiate {
    ($version:expr, $pre:expr, $store:expr, $pre_type:ident) => {
        Ok(match $version {
            ApiVersion::V0_1 => Self::V0_1(
                v0_1::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_2 => Self::V0_2(
                v0_2::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_3 => Self::V0_3(
                v0_3::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_4 => Self::V0_4(
                v0_4::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_5 => Self::V0_5(
                v0_5::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_6 => Self::V0_6(
                v0_6::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_7 => Self::V0_7(
                v0_7::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
            ApiVersion::V0_8 => Self::V0_8(
                v0_8::$pre_type::new($pre.clone())?
                    .instantiate_async($store)
                    .await?,
            ),
        })
    };
}

pub enum SandboxBindings {
    V0_1(v0_1::SandboxPlugin),
    V0_2(v0_2::SandboxPlugin),
    V0_3(v0_3::SandboxPlugin),
    V0_4(v0_4::SandboxPlugin),
    V0_5(v0_5::SandboxPlugin),
    V0_6(v0_6::SandboxPlugin),
    V0_7(v0_7::SandboxPlugin),
    V0_8(v0_8::SandboxPlugin),
}

impl SandboxBindings {
    pub async fn instantiate(
        version: ApiVersion,
        pre: &InstancePre<PluginState>,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self> {
        instantiate!(version, pre, store, SandboxPluginPre)
    }

    pub async fn describe(&self, s: &mut Store<PluginState>) -> Call<api::ProviderInfo> {
        each!(self, Self, b => b.sanddune_plugin_sandbox_provider().call_describe(s).await.map(|i| i.into_api()))
    }

    pub async fn create(
        &self,
        s: &mut Store<PluginState>,
        o: &api::CreateOptions,
    ) -> Call<ResourceAny> {
        each!(self, Self, b => b.sanddune_plugin_sandbox_provider().call_create(s, &o.clone().into()).await)
    }

    pub async fn attach(
        &self,
        s: &mut Store<PluginState>,
        state: &str,
        o: &api::CreateOptions,
    ) -> Call<ResourceAny> {
        each!(self, Self, b => b.sanddune_plugin_sandbox_provider().call_attach(s, state, &o.clone().into()).await)
    }

    /// The states of the run's sandboxes the provider finds; None before
    /// 0.3, which has no `find`.
    pub async fn find(
        &self,
        s: &mut Store<PluginState>,
        o: &api::CreateOptions,
    ) -> wasmtime::Result<Option<Result<Vec<String>, String>>> {
        match self {
            Self::V0_1(_) | Self::V0_2(_) => Ok(None),
            Self::V0_3(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
            Self::V0_4(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
            Self::V0_5(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
            Self::V0_6(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
            Self::V0_7(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
            Self::V0_8(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_find(s, &o.clone().into())
                .await
                .map(Some),
        }
    }

    /// The provider's up-front check; None before 0.6, which has no
    /// `preflight`.
    pub async fn preflight(
        &self,
        s: &mut Store<PluginState>,
        o: &api::PreflightOptions,
    ) -> wasmtime::Result<Option<Result<(), api::PreflightError>>> {
        match self {
            Self::V0_6(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_preflight(s, &o.clone().into())
                .await
                .map(|r| Some(r.map_err(Into::into))),
            Self::V0_7(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_preflight(s, &o.clone().into())
                .await
                .map(|r| Some(r.map_err(Into::into))),
            Self::V0_8(b) => b
                .sanddune_plugin_sandbox_provider()
                .call_preflight(s, &o.clone().into())
                .await
                .map(|r| Some(r.map_err(Into::into))),
            _ => Ok(None),
        }
    }

    /// Keep the sandbox `h` as a snapshot (since 0.8); an older provider
    /// keeps none, and the host never asks one whose info says so.
    pub async fn keep(
        &self,
        s: &mut Store<PluginState>,
        h: ResourceAny,
        name: &str,
    ) -> Call<String> {
        match self {
            Self::V0_8(b) => {
                b.sanddune_plugin_sandbox_provider()
                    .sandbox()
                    .call_keep(s, h, name)
                    .await
            }
            _ => Ok(Err("its contract version keeps no snapshots".into())),
        }
    }

    /// Remove a snapshot `keep` returned (since 0.8).
    pub async fn remove_snapshot(
        &self,
        s: &mut Store<PluginState>,
        o: &api::CreateOptions,
        id: &str,
    ) -> Call<()> {
        match self {
            Self::V0_8(b) => {
                b.sanddune_plugin_sandbox_provider()
                    .call_remove_snapshot(s, &o.clone().into(), id)
                    .await
            }
            _ => Ok(Err("its contract version keeps no snapshots".into())),
        }
    }
}

pub enum AgentBindings {
    V0_1(v0_1::AgentPlugin),
    V0_2(v0_2::AgentPlugin),
    V0_3(v0_3::AgentPlugin),
    V0_4(v0_4::AgentPlugin),
    V0_5(v0_5::AgentPlugin),
    V0_6(v0_6::AgentPlugin),
    V0_7(v0_7::AgentPlugin),
    V0_8(v0_8::AgentPlugin),
}

impl AgentBindings {
    pub async fn instantiate(
        version: ApiVersion,
        pre: &InstancePre<PluginState>,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self> {
        instantiate!(version, pre, store, AgentPluginPre)
    }

    pub async fn describe(&self, s: &mut Store<PluginState>) -> wasmtime::Result<api::AgentInfo> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_describe(s).await.map(Into::into))
    }

    pub async fn build_print_command(
        &self,
        s: &mut Store<PluginState>,
        r: &api::CommandRequest,
    ) -> Call<api::AgentCommand> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_build_print_command(s, &r.clone().into()).await.map(|r| r.map(Into::into)))
    }

    pub async fn build_interactive_command(
        &self,
        s: &mut Store<PluginState>,
        r: &api::CommandRequest,
    ) -> Call<api::AgentCommand> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_build_interactive_command(s, &r.clone().into()).await.map(|r| r.map(Into::into)))
    }

    pub async fn session_file_path(
        &self,
        s: &mut Store<PluginState>,
        home: &str,
        cwd: &str,
        id: &str,
    ) -> wasmtime::Result<Option<String>> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_session_file_path(s, home, cwd, id).await)
    }

    pub async fn rewrite_session_cwd(
        &self,
        s: &mut Store<PluginState>,
        content: &str,
        from: &str,
        to: &str,
    ) -> wasmtime::Result<String> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_rewrite_session_cwd(s, content, from, to).await)
    }

    pub async fn usage_from_session(
        &self,
        s: &mut Store<PluginState>,
        content: &str,
    ) -> wasmtime::Result<Option<api::Usage>> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().call_usage_from_session(s, content).await.map(|u| u.map(Into::into)))
    }

    pub async fn new_parser(
        &self,
        s: &mut Store<PluginState>,
        r: &api::CommandRequest,
    ) -> wasmtime::Result<ResourceAny> {
        // Before 0.4 a parser is made from nothing.
        macro_rules! unaware {
            ($b:ident) => {
                $b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s)
                    .await
            };
        }
        match self {
            Self::V0_1(b) => unaware!(b),
            Self::V0_2(b) => unaware!(b),
            Self::V0_3(b) => unaware!(b),
            Self::V0_4(b) => {
                b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s, &r.clone().into())
                    .await
            }
            Self::V0_5(b) => {
                b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s, &r.clone().into())
                    .await
            }
            Self::V0_6(b) => {
                b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s, &r.clone().into())
                    .await
            }
            Self::V0_7(b) => {
                b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s, &r.clone().into())
                    .await
            }
            Self::V0_8(b) => {
                b.sanddune_plugin_agent_provider()
                    .stream_parser()
                    .call_constructor(s, &r.clone().into())
                    .await
            }
        }
    }

    pub async fn push_line(
        &self,
        s: &mut Store<PluginState>,
        p: ResourceAny,
        line: &str,
    ) -> wasmtime::Result<Vec<api::AgentEvent>> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().stream_parser().call_push_line(s, p, line).await.map(events))
    }

    pub async fn push_lines(
        &self,
        s: &mut Store<PluginState>,
        p: ResourceAny,
        lines: &[String],
    ) -> wasmtime::Result<Vec<api::AgentEvent>> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().stream_parser().call_push_lines(s, p, lines).await.map(events))
    }

    pub async fn finish(
        &self,
        s: &mut Store<PluginState>,
        p: ResourceAny,
    ) -> wasmtime::Result<Vec<api::AgentEvent>> {
        each!(self, Self, b => b.sanddune_plugin_agent_provider().stream_parser().call_finish(s, p).await.map(events))
    }
}

fn events<E: Into<api::AgentEvent>>(events: Vec<E>) -> Vec<api::AgentEvent> {
    events.into_iter().map(Into::into).collect()
}
