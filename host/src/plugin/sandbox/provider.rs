//! A sandbox provider: loading it, what it may do, and the sandboxes it
//! creates, re-opens and finds.

use std::path::{Path, PathBuf};

use super::grants::{self, Resolved};
use super::live::{Origin, Sandbox};
use super::spec::SandboxSpec;
use super::{flatten, instantiate, scratch_prefix, with_refusals};
use crate::capability::containers::snapshot::SnapshotOptions;
use crate::capability::{Capabilities, Grants, HttpGrant};
use crate::error::{Error, Result};
use crate::plugin::api::{PreflightError, PreflightOptions, ProviderInfo};
use crate::plugin::approval::{self, Approval};
use crate::plugin::wit::ApiVersion;
use crate::plugin::{
    Plugin, PluginKind, PluginRef, PluginRuntime, begin_call, described, one_line,
};

/// A sandbox provider, loaded and described.
#[derive(Clone)]
pub struct SandboxProvider {
    plugin: Plugin,
    info: ProviderInfo,
}

impl SandboxProvider {
    /// Load a provider to run it: a component file gets what the user
    /// approves under the runtime's policy, or is refused here, before
    /// anything exists.
    pub async fn load(runtime: &PluginRuntime, plugin: &PluginRef) -> Result<Self> {
        let plugin = runtime.load(plugin, Some(PluginKind::Sandbox))?;
        let mut provider = Self::from_plugin(plugin).await?;
        provider.approve(runtime.file_approval())?;
        Ok(provider)
    }

    /// Approve an unapproved component file under `policy` (built-ins and
    /// installed plugins are approved already); refused: an input error
    /// naming what it asks for.
    pub fn approve(&mut self, policy: &approval::FileApproval) -> Result<()> {
        if self.plugin.approval == Approval::Unapproved {
            let approved = approval::approve(&self.plugin.source, &self.info.capabilities, policy)?;
            self.plugin.approval = Approval::Approved(approved);
        }
        Ok(())
    }

    pub async fn from_plugin(plugin: Plugin) -> Result<Self> {
        // `describe` runs with nothing granted.
        let (mut store, bindings) = instantiate(&plugin, "describe", Grants::default()).await?;
        begin_call(&mut store);
        let info = match bindings.describe(&mut store).await {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                return Err(Error::input(format!(
                    "`{}` asks for what this sanddune cannot grant: {e}",
                    plugin.source
                )));
            }
            Err(e) => {
                return Err(Error::Plugin(format!(
                    "`{}` failed in describe: {}",
                    plugin.source,
                    one_line(&e.into())
                )));
            }
        };
        described::check_provider(&plugin.source, &info)?;
        Ok(Self { plugin, info })
    }

    pub fn info(&self) -> &ProviderInfo {
        &self.info
    }

    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The origins this provider may reach with outgoing HTTP under
    /// `config` (the user's `--sandbox-opt`s): its `http` items, and for
    /// each `http-option` the origin of the URL that option holds (the
    /// user's value, else the option's default). An option whose URL the
    /// HTTP policy could not grant is an error naming it.
    pub fn http_origins(
        &self,
        config: &[(String, String)],
    ) -> std::result::Result<Vec<String>, String> {
        let caps = self.capabilities();
        let mut origins = caps.http.clone();
        for option in &caps.http_options {
            let declared = self.info.config.iter().find(|o| &o.name == option);
            let Some(declared) = declared else {
                return Err(format!(
                    "it asks for `http-option={option}` but has no option `{option}`"
                ));
            };
            let default = declared.default_value.as_deref();
            let origin = crate::capability::http::origin_of_option(option, config, default)?;
            if let Some(origin) = origin.map(|o| o.to_string())
                && !origins.contains(&origin)
            {
                origins.push(origin);
            }
        }
        Ok(origins)
    }

    /// What the provider gets: what it asks for, cut down to what the user
    /// approved for an installed plugin.
    pub fn capabilities(&self) -> Capabilities {
        match &self.plugin.approval {
            Approval::BuiltIn => self.info.capabilities.clone(),
            Approval::Approved(approved) => approved.restrict(&self.info.capabilities),
            Approval::Unapproved => Capabilities::default(),
        }
    }

    /// What this provider gets for one sandbox (see `grants`); refused
    /// while it is unapproved.
    fn grants(
        &self,
        spec: &SandboxSpec,
        scratch: Option<&Path>,
        resolved: &Resolved,
    ) -> Result<Grants> {
        if self.plugin.approval == Approval::Unapproved && !self.info.capabilities.is_empty() {
            // `load` approves; after `from_plugin`, the caller must.
            return Err(Error::input(format!(
                "`{}` was not approved: load it with `SandboxProvider::load` or call `approve`",
                self.plugin.source
            )));
        }
        let origins = self
            .http_origins(&spec.config)
            .map_err(|e| Error::input(format!("sandbox provider `{}`: {e}", self.info.name)));
        grants::for_sandbox(&self.capabilities(), origins, spec, scratch, resolved)
    }

    /// Refuse, before anything is created, containment options (`egress`,
    /// `cpus`, `memory`, ...) this provider cannot have enforced or that do
    /// not parse (ADR 0022), and snapshot options it cannot keep (ADR 0035).
    pub fn check_containment(&self, config: &[(String, String)]) -> Result<()> {
        let mut config = config.to_vec();
        grants::take_prepared(&mut config, &self.capabilities(), &self.info)?;
        grants::take_containment(&mut config, &self.capabilities(), &self.info)?;
        Ok(())
    }

    /// The snapshot options `config` asks for, when this provider keeps
    /// snapshots itself (since 0.8, ADR 0038): the run looks for a match
    /// before the create and asks for one to be kept after the set-up.
    pub fn own_snapshots(&self, config: &[(String, String)]) -> Result<Option<SnapshotOptions>> {
        if !self.info.snapshots {
            return Ok(None);
        }
        let mut config = config.to_vec();
        let (snapshot, _) = grants::take_prepared(&mut config, &self.capabilities(), &self.info)?;
        Ok(snapshot)
    }

    /// `spec`'s options with the host's part taken out (`grants::resolve`).
    fn resolve(&self, spec: &SandboxSpec) -> Result<Resolved> {
        grants::resolve(spec, &self.capabilities(), &self.info)
    }

    /// The origins this provider may reach with outgoing HTTP under
    /// Create a sandbox for `spec`.
    pub async fn create(&self, spec: &SandboxSpec) -> Result<Sandbox> {
        self.create_granting(spec, true).await
    }

    /// Create a sandbox for `spec` with every HTTP request refused, so the
    /// conformance kit can see how the provider takes a refusal.
    pub async fn create_refusing_http(&self, spec: &SandboxSpec) -> Result<Sandbox> {
        self.create_granting(spec, false).await
    }

    async fn create_granting(&self, spec: &SandboxSpec, http: bool) -> Result<Sandbox> {
        let scratch = if self.capabilities().scratch_dir {
            let dir = tempfile::Builder::new()
                .prefix(&scratch_prefix(&self.info.name, &spec.run_id))
                .tempdir()
                .map_err(|e| {
                    Error::Other(anyhow::anyhow!("cannot create a scratch directory: {e}"))
                })?;
            Some(dir.keep())
        } else {
            None
        };
        let remove_scratch = || {
            if let Some(dir) = &scratch {
                let _ = std::fs::remove_dir_all(dir);
            }
        };
        let resolved = match self.resolve(spec) {
            Ok(resolved) => resolved,
            Err(e) => {
                remove_scratch();
                return Err(e);
            }
        };
        let grants = match self.grants(spec, scratch.as_deref(), &resolved) {
            Ok(grants) if !http => Grants {
                http: Some(HttpGrant::default()),
                ..grants
            },
            Ok(grants) => grants,
            Err(e) => {
                remove_scratch();
                return Err(e);
            }
        };
        let (mut store, bindings) =
            instantiate(&self.plugin, &self.info.name, grants.clone()).await?;
        let options = spec.create_options(resolved.config, scratch.as_deref());
        begin_call(&mut store);
        let created = bindings.create(&mut store, &options).await;
        let name = self.info.name.clone();
        let created = flatten(&name, "create", created)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()));
        let handle = match created {
            Ok(handle) => handle,
            Err(e) => {
                // Whatever the provider created before failing goes too.
                store.data_mut().containers.remove_all().await;
                store.data_mut().pods.remove_all().await;
                remove_scratch();
                return Err(e);
            }
        };
        let origin = Origin {
            plugin: self.plugin.clone(),
            grants,
            options,
        };
        Sandbox::owned(store, bindings, handle, name, scratch, origin).await
    }

    /// Re-open a sandbox that `create` made for `spec` in a process that is
    /// gone, from its `state` and scratch dir: the handle owns it as
    /// `create`'s does, so `close` tears it down and removes `scratch`.
    /// This is how `sanddune gc` reaches a dead run's sandbox.
    pub async fn reopen(
        &self,
        spec: &SandboxSpec,
        state: &str,
        scratch: Option<PathBuf>,
    ) -> Result<Sandbox> {
        let resolved = self.resolve(spec)?;
        let grants = self.grants(spec, scratch.as_deref(), &resolved)?;
        let (mut store, bindings) =
            instantiate(&self.plugin, &self.info.name, grants.clone()).await?;
        let options = spec.create_options(resolved.config, scratch.as_deref());
        begin_call(&mut store);
        let attached = bindings.attach(&mut store, state, &options).await;
        let name = self.info.name.clone();
        let handle = flatten(&name, "attach", attached)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()))?;
        let origin = Origin {
            plugin: self.plugin.clone(),
            grants,
            options,
        };
        Sandbox::owned(store, bindings, handle, name, scratch, origin).await
    }

    /// The provider's up-front check for a run of `spec` (`preflight`,
    /// since 0.6), with the grants `create` would get (no scratch dir: it
    /// creates nothing). None when its contract has no `preflight`; a
    /// provider's failure to check (a trap) is an error.
    pub async fn preflight(
        &self,
        spec: &SandboxSpec,
    ) -> Result<Option<std::result::Result<(), PreflightError>>> {
        // An older provider has nothing to ask: no instance for it.
        if self.plugin.api < ApiVersion::V0_6 {
            return Ok(None);
        }
        let resolved = self.resolve(spec)?;
        let grants = self.grants(spec, None, &resolved)?;
        let (mut store, bindings) = instantiate(&self.plugin, &self.info.name, grants).await?;
        let options = PreflightOptions {
            host_git_dir: spec.git_dir.display().to_string(),
            config: resolved.config,
        };
        begin_call(&mut store);
        let checked = bindings.preflight(&mut store, &options).await;
        // A check creates nothing: whatever a provider made anyway goes.
        store.data_mut().containers.remove_all().await;
        store.data_mut().pods.remove_all().await;
        flatten(&self.info.name, "preflight", checked.map(Ok))
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()))
    }

    /// The states of the sandboxes the provider holds for `spec.run_id`
    /// (`find`, since 0.3): how `sanddune gc` reaches a sandbox whose run
    /// died inside `create`. None when the provider's contract has no
    /// `find`.
    /// Remove the snapshot `id` this provider kept for a run of `spec`
    /// (since 0.8, ADR 0038).
    pub async fn remove_snapshot(&self, spec: &SandboxSpec, id: &str) -> Result<()> {
        let resolved = self.resolve(spec)?;
        let grants = self.grants(spec, None, &resolved)?;
        let (mut store, bindings) = instantiate(&self.plugin, &self.info.name, grants).await?;
        let options = spec.create_options(resolved.config, None);
        begin_call(&mut store);
        let removed = bindings.remove_snapshot(&mut store, &options, id).await;
        flatten(&self.info.name, "remove-snapshot", removed)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()))
    }

    pub async fn find(&self, spec: &SandboxSpec) -> Result<Option<Vec<String>>> {
        let resolved = self.resolve(spec)?;
        let grants = self.grants(spec, None, &resolved)?;
        let (mut store, bindings) = instantiate(&self.plugin, &self.info.name, grants).await?;
        let options = spec.create_options(resolved.config, None);
        begin_call(&mut store);
        let Some(found) = bindings.find(&mut store, &options).await.transpose() else {
            return Ok(None);
        };
        flatten(&self.info.name, "find", found)
            .map(Some)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()))
    }
}
