//! A loaded sandbox provider and the live sandboxes it creates.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::api::EnvVar;
use super::approval::{self, Approval};
use super::staging::Staging;
use super::wit::SandboxBindings;
use super::{Plugin, PluginKind, PluginRef, PluginRuntime, one_line};
use crate::capability::output::{OutputLine, OutputSink, OutputStream};
use crate::capability::{
    Brokered, Capabilities, ContainerGrant, DirectoryAccess, Grants, HttpGrant, PluginState,
};
use crate::error::{Error, Result};

pub use super::api::{Command, CreateOptions, ExecRequest, FileStat, ProviderInfo, SandboxKind};

/// How long a provider has to end a command after its timeout, or after
/// the host killed it, before the host gives up on its instance.
const ABANDON_GRACE: Duration = Duration::from_secs(10);

/// How the names of a run's scratch dirs in the temp dir begin: a run
/// killed while its provider created a sandbox leaves gc only this.
pub fn scratch_prefix(provider: &str, run_id: &str) -> String {
    format!("sanddune-{provider}-{run_id}-")
}

/// The extension of a sandbox record (see `remove_on_close`) once its
/// sandbox's close has begun.
pub const CLOSING: &str = "closing";

/// Output kept per stream of one exec; lines past it still stream to the
/// consumer, they are just not accumulated.
pub const MAX_CAPTURED_BYTES: usize = 16 << 20;

/// A sandbox provider, loaded and described.
pub struct SandboxProvider {
    plugin: Plugin,
    info: ProviderInfo,
}

/// What one exec produced.
#[derive(Clone, Debug, Default)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Where a new sandbox comes from: the host side of `create-options`.
#[derive(Clone, Debug)]
pub struct SandboxSpec {
    pub run_id: String,
    pub name: String,
    pub worktree: PathBuf,
    pub git_dir: PathBuf,
    pub branch: String,
    pub env: Vec<(String, String)>,
    pub config: Vec<(String, String)>,
}

impl SandboxSpec {
    /// What the provider's `create` (or `attach`) is told, with its options
    /// (mounts resolved) and the granted scratch dir.
    fn create_options(&self, config: ProviderConfig, scratch: Option<&Path>) -> CreateOptions {
        CreateOptions {
            run_id: self.run_id.clone(),
            name: self.name.clone(),
            host_worktree_path: self.worktree.display().to_string(),
            host_git_dir: self.git_dir.display().to_string(),
            branch: self.branch.clone(),
            env: env_vars(&self.env),
            config,
            scratch_dir: scratch.map(|p| p.display().to_string()),
        }
    }
}

/// Key-value pairs as the WIT's env records.
pub fn env_vars(env: &[(String, String)]) -> Vec<EnvVar> {
    env.iter()
        .map(|(k, v)| EnvVar {
            key: k.clone(),
            value: v.clone(),
        })
        .collect()
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
        super::begin_call(&mut store);
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
        super::described::check_provider(&plugin.source, &info)?;
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

    /// What this provider gets: what it declared (built-ins are pre-approved),
    /// resolved against this sandbox's worktree and scratch directory.
    fn grants(
        &self,
        spec: &SandboxSpec,
        scratch: Option<&Path>,
        mounts: &[PathBuf],
    ) -> Result<Grants> {
        let (worktree, env) = (spec.worktree.as_path(), &spec.env);
        if self.plugin.approval == Approval::Unapproved && !self.info.capabilities.is_empty() {
            // `load` approves; after `from_plugin`, the caller must.
            return Err(Error::input(format!(
                "`{}` was not approved: load it with `SandboxProvider::load` or call `approve`",
                self.plugin.source
            )));
        }
        let caps = &self.capabilities();
        let containers = if caps.containers {
            Some(container_grant(spec, scratch, mounts)?)
        } else {
            None
        };
        let mut directories = Vec::new();
        match caps.worktree {
            DirectoryAccess::None => {}
            DirectoryAccess::ReadOnly => directories.push((worktree.to_path_buf(), false)),
            DirectoryAccess::ReadWrite => directories.push((worktree.to_path_buf(), true)),
        }
        Ok(Grants {
            programs: caps.programs.clone(),
            scratch_dir: scratch.map(Path::to_path_buf),
            directories,
            env: env
                .iter()
                .filter(|(k, _)| caps.env_keys.contains(k))
                .cloned()
                .collect(),
            containers,
            http: {
                let origins = self.http_origins(&spec.config).map_err(|e| {
                    Error::input(format!("sandbox provider `{}`: {e}", self.info.name))
                })?;
                if origins.is_empty() {
                    None
                } else {
                    Some(HttpGrant::parse(&origins).map_err(Error::input)?)
                }
            },
        })
    }

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
        let (config, mounts) = match resolve_mounts(&spec.config) {
            Ok(resolved) => resolved,
            Err(e) => {
                remove_scratch();
                return Err(e);
            }
        };
        let grants = match self.grants(spec, scratch.as_deref(), &mounts) {
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
        let options = spec.create_options(config, scratch.as_deref());
        super::begin_call(&mut store);
        let created = bindings.create(&mut store, &options).await;
        let name = self.info.name.clone();
        let created = flatten(&name, "create", created)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()));
        let handle = match created {
            Ok(handle) => handle,
            Err(e) => {
                // Whatever the provider created before failing goes too.
                store.data_mut().containers.remove_all().await;
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
        let (config, mounts) = resolve_mounts(&spec.config)?;
        let grants = self.grants(spec, scratch.as_deref(), &mounts)?;
        let (mut store, bindings) =
            instantiate(&self.plugin, &self.info.name, grants.clone()).await?;
        let options = spec.create_options(config, scratch.as_deref());
        super::begin_call(&mut store);
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

    /// The states of the sandboxes the provider holds for `spec.run_id`
    /// (`find`, since 0.3): how `sanddune gc` reaches a sandbox whose run
    /// died inside `create`. None when the provider's contract has no
    /// `find`.
    pub async fn find(&self, spec: &SandboxSpec) -> Result<Option<Vec<String>>> {
        let (config, mounts) = resolve_mounts(&spec.config)?;
        let grants = self.grants(spec, None, &mounts)?;
        let (mut store, bindings) = instantiate(&self.plugin, &self.info.name, grants).await?;
        let options = spec.create_options(config, None);
        super::begin_call(&mut store);
        let Some(found) = bindings.find(&mut store, &options).await.transpose() else {
            return Ok(None);
        };
        flatten(&self.info.name, "find", found)
            .map(Some)
            .map_err(|e| with_refusals(e, store.data().http.take_refusals()))
    }
}

async fn instantiate(
    plugin: &Plugin,
    name: &str,
    grants: Grants,
) -> Result<(Store<PluginState>, SandboxBindings)> {
    let mut store = plugin.runtime().store(name, grants)?;
    super::begin_call(&mut store);
    let bindings = SandboxBindings::instantiate(plugin.api, &plugin.pre, &mut store)
        .await
        .map_err(|e| plugin.instantiate_error(e))?;
    Ok((store, bindings))
}

/// A guest call's two failure layers (trap, provider error) as one error.
fn flatten<T>(name: &str, what: &str, r: wasmtime::Result<Result<T, String>>) -> Result<T> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(msg)) => Err(Error::Plugin(format!(
            "sandbox provider `{name}` failed in {what}: {msg}"
        ))),
        Err(trap) => Err(Error::Plugin(format!(
            "sandbox provider `{name}` stopped in {what}: {}",
            one_line(&trap.into())
        ))),
    }
}

/// A provider's failure with what the host refused it during the call: the
/// guest only got an error code, the user gets the reason.
fn with_refusals(e: Error, refusals: Vec<String>) -> Error {
    match e {
        Error::Plugin(msg) if !refusals.is_empty() => {
            Error::Plugin(format!("{msg} (the host refused: {})", refusals.join("; ")))
        }
        e => e,
    }
}

type CallFuture<'a, T> = std::pin::Pin<
    Box<dyn std::future::Future<Output = wasmtime::Result<Result<T, String>>> + Send + 'a>,
>;

/// A live sandbox. Close it with `close`; dropping it unclosed still kills
/// its processes and removes its scratch directory.
pub struct Sandbox {
    store: Store<PluginState>,
    bindings: SandboxBindings,
    handle: ResourceAny,
    name: String,
    worktree_path: String,
    scratch: Option<PathBuf>,
    closed: bool,
    /// Set on a lane: the state it attached to. A lane never tears the
    /// sandbox down.
    lane: Option<String>,
    /// A file that says this sandbox is up (see `run::leftover`): removed
    /// once `close` has torn it down.
    record: Option<PathBuf>,
    /// The provider's `state`, once asked: what a fresh instance attaches to.
    state: Option<String>,
    /// Why this instance was given up (a call that would not end); no call
    /// goes into it again.
    abandoned: Option<String>,
    /// A call is under way; still set at the next call, it was dropped
    /// half-way, which leaves the instance unable to take another.
    in_flight: bool,
    /// What made this sandbox, so lanes can attach to it.
    origin: Origin,
}

#[derive(Clone)]
struct Origin {
    plugin: Plugin,
    grants: Grants,
    options: CreateOptions,
}

impl Sandbox {
    /// The sandbox a provider instance created or re-opened, owned: `close`
    /// tears it down.
    async fn owned(
        store: Store<PluginState>,
        bindings: SandboxBindings,
        handle: ResourceAny,
        name: String,
        scratch: Option<PathBuf>,
        origin: Origin,
    ) -> Result<Sandbox> {
        let mut sandbox = Sandbox {
            store,
            bindings,
            handle,
            name,
            worktree_path: String::new(),
            scratch,
            closed: false,
            lane: None,
            record: None,
            state: None,
            abandoned: None,
            in_flight: false,
            origin,
        };
        sandbox.worktree_path = sandbox
            .call("worktree-path", |b, s, h| {
                Box::pin(async move { b.worktree_path(s, h).await })
            })
            .await?;
        // Asked now, while the instance surely answers: a fresh instance
        // attaches to it if this one has to be given up.
        sandbox.state().await?;
        Ok(sandbox)
    }

    /// The repository's path inside the sandbox.
    pub fn worktree_path(&self) -> &str {
        &self.worktree_path
    }

    pub fn provider_name(&self) -> &str {
        &self.name
    }

    /// Kills what this sandbox's provider is running, from anywhere: its
    /// current call returns and the sandbox stays usable.
    pub fn canceller(&self) -> Brokered {
        self.store.data().brokered.clone()
    }

    /// The provider's opaque handle on this sandbox (e.g. a container id).
    pub async fn state(&mut self) -> Result<String> {
        if let Some(state) = &self.state {
            return Ok(state.clone());
        }
        let state = self
            .call("state", |b, s, h| {
                Box::pin(async move { b.state(s, h).await })
            })
            .await?;
        self.state = Some(state.clone());
        Ok(state)
    }

    /// Another handle on this same sandbox, in a fresh instance of the
    /// provider (through `attach`), so commands can run side by side: one
    /// instance serves one call at a time. Closing a lane, or dropping it,
    /// kills only what the lane runs; the sandbox stays up.
    pub async fn lane(&mut self) -> Result<Sandbox> {
        let state = match &self.lane {
            Some(state) => state.clone(),
            None => self.state().await?,
        };
        Self::attached(
            self.origin.clone(),
            self.name.clone(),
            self.worktree_path.clone(),
            state,
        )
        .await
    }

    /// A sandbox in a fresh instance of its provider, as a lane. (Owned
    /// arguments: a `&Sandbox` held across an await is not `Send`.)
    async fn attached(
        origin: Origin,
        name: String,
        worktree_path: String,
        state: String,
    ) -> Result<Sandbox> {
        let (mut store, bindings) =
            instantiate(&origin.plugin, &name, origin.grants.clone()).await?;
        super::begin_call(&mut store);
        let attached = bindings.attach(&mut store, &state, &origin.options).await;
        let handle = flatten(&name, "attach", attached)?;
        Ok(Sandbox {
            store,
            bindings,
            handle,
            name,
            worktree_path,
            scratch: None,
            closed: false,
            lane: Some(state.clone()),
            record: None,
            state: Some(state),
            abandoned: None,
            in_flight: false,
            origin,
        })
    }

    async fn call<T>(
        &mut self,
        what: &str,
        f: impl for<'a> FnOnce(
            &'a SandboxBindings,
            &'a mut Store<PluginState>,
            ResourceAny,
        ) -> CallFuture<'a, T>,
    ) -> Result<T> {
        if self.closed {
            return Err(Error::Plugin(format!("sandbox `{}` is closed", self.name)));
        }
        self.note_dropped_call();
        if let Some(why) = &self.abandoned {
            return Err(Error::Plugin(why.clone()));
        }
        super::begin_call(&mut self.store);
        self.in_flight = true;
        let r = f(&self.bindings, &mut self.store, self.handle).await;
        self.in_flight = false;
        flatten(&self.name, what, r)
            .map_err(|e| with_refusals(e, self.store.data().http.take_refusals()))
    }

    /// Run a command; `on_line` sees each output line as it arrives.
    pub async fn exec(
        &mut self,
        request: ExecRequest,
        mut on_line: impl FnMut(&OutputLine) + Send,
    ) -> Result<ExecOutput> {
        let (tx, mut rx) = mpsc::channel::<OutputLine>(256);
        let sink = self
            .store
            .data_mut()
            .table
            .push(OutputSink { tx })
            .map_err(|e| Error::Other(e.into()))?;
        let mut out = ExecOutput::default();
        let mut collect = |line: OutputLine, out: &mut ExecOutput| {
            on_line(&line);
            let buf = match line.stream {
                OutputStream::Stdout => &mut out.stdout,
                OutputStream::Stderr => &mut out.stderr,
            };
            if buf.len() + line.text.len() < MAX_CAPTURED_BYTES {
                buf.push_str(&line.text);
                buf.push('\n');
            } else if !buf.ends_with("[output truncated]\n") {
                buf.push_str("[output truncated]\n");
            }
        };
        let sink_rep = wasmtime::component::Resource::<OutputSink>::new_borrow(sink.rep());
        // The provider is trusted to end the command at its timeout and
        // when killed; one that does not (slow-loris output, a loop that
        // sleeps) is given up after a grace, so it cannot hang the run.
        let brokered = self.canceller();
        let started = Instant::now();
        let timeout = request.timeout_ms.map(Duration::from_millis);
        let result = {
            let call = self.call("exec", move |b, s, h| {
                Box::pin(async move { b.exec(s, h, request, sink_rep).await })
            });
            tokio::pin!(call);
            let mut watch = tokio::time::interval(Duration::from_millis(100));
            let mut killed: Option<Instant> = None;
            loop {
                tokio::select! {
                    r = &mut call => break Ok(r),
                    Some(line) = rx.recv() => collect(line, &mut out),
                    _ = watch.tick() => {
                        if killed.is_none() && brokered.is_cancelled() {
                            killed = Some(Instant::now());
                        }
                        if killed.is_some_and(|k| k.elapsed() > ABANDON_GRACE) {
                            break Err("was killed");
                        }
                        if timeout.is_some_and(|t| started.elapsed() > t + ABANDON_GRACE) {
                            break Err("reached its timeout");
                        }
                    }
                }
            }
        };
        let result = match result {
            Ok(result) => result,
            Err(when) => {
                // Dropping the call cancelled it mid-way: the instance can
                // take no other call, but a fresh one can still close it.
                let why = format!(
                    "sandbox provider `{}` did not end a command {} s after it {when}; sanddune gave up on it",
                    self.name,
                    ABANDON_GRACE.as_secs()
                );
                self.abandoned = Some(why.clone());
                brokered.kill_all();
                return Err(Error::Plugin(why));
            }
        };
        let _ = self.store.data_mut().table.delete(sink);
        while let Ok(line) = rx.try_recv() {
            collect(line, &mut out);
        }
        let result = result?;
        out.exit_code = result.exit_code;
        out.timed_out = result.timed_out;
        Ok(out)
    }

    /// Host files pass through a staging dir in the scratch dir (see
    /// `staging`) when the provider cannot open `host` itself: one granted
    /// neither `program` nor `containers` (a cloud provider) never can, a
    /// `containers` one only within its grant (a session file under the
    /// user's home is outside). `write`: the provider is to write it.
    fn staging(&self, host: &Path, write: bool) -> Result<Option<Staging>> {
        let grants = &self.origin.grants;
        let Some(dir) = &grants.scratch_dir else {
            return Ok(None);
        };
        let reachable = !grants.programs.is_empty()
            || grants.containers.as_ref().is_some_and(|grant| {
                if write {
                    grant.may_write(host)
                } else {
                    grant.may_read(host)
                }
            });
        if reachable {
            return Ok(None);
        }
        Staging::new(dir).map(Some).map_err(|e| {
            Error::Other(anyhow::anyhow!(
                "cannot stage host files for `{}` in {}: {e}",
                self.name,
                dir.display()
            ))
        })
    }

    /// `host` as the provider may open it: itself, or a staged copy.
    fn staged_in(&self, host: &Path) -> Result<(Option<Staging>, String)> {
        let staging = self.staging(host, false)?;
        let path = match &staging {
            Some(st) => st.stage_in(host).map_err(|e| {
                Error::Other(anyhow::anyhow!("cannot stage {}: {e}", host.display()))
            })?,
            None => host.to_path_buf(),
        };
        Ok((staging, path.display().to_string()))
    }

    pub async fn copy_file_in(&mut self, host: &Path, sandbox_path: &str) -> Result<()> {
        let (_staging, h) = self.staged_in(host)?;
        let p = sandbox_path.to_string();
        self.call("copy-file-in", move |b, s, r| {
            Box::pin(async move { b.copy_file_in(s, r, &h, &p).await })
        })
        .await
    }

    pub async fn copy_file_out(&mut self, sandbox_path: &str, host: &Path) -> Result<()> {
        let staging = self.staging(host, true)?;
        let h = match &staging {
            Some(st) => st.out_path().display().to_string(),
            None => host.display().to_string(),
        };
        let p = sandbox_path.to_string();
        self.call("copy-file-out", move |b, s, r| {
            Box::pin(async move { b.copy_file_out(s, r, &p, &h).await })
        })
        .await?;
        if let Some(st) = staging {
            st.deliver(host).map_err(|e| {
                Error::Other(anyhow::anyhow!("cannot write {}: {e}", host.display()))
            })?;
        }
        Ok(())
    }

    /// Copy a host file or directory into the sandbox (a directory's
    /// contents land in `sandbox_path` itself).
    pub async fn copy_in(&mut self, host: &Path, sandbox_path: &str) -> Result<()> {
        let (_staging, h) = self.staged_in(host)?;
        let p = sandbox_path.to_string();
        self.call("copy-in", move |b, s, r| {
            Box::pin(async move { b.copy_in(s, r, &h, &p).await })
        })
        .await
    }

    pub async fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        let p = path.to_string();
        self.call("read-file", move |b, s, r| {
            Box::pin(async move { b.read_file(s, r, &p).await })
        })
        .await
    }

    pub async fn write_file(&mut self, path: &str, data: &[u8]) -> Result<()> {
        let (p, d) = (path.to_string(), data.to_vec());
        self.call("write-file", move |b, s, r| {
            Box::pin(async move { b.write_file(s, r, &p, &d).await })
        })
        .await
    }

    pub async fn stat(&mut self, path: &str) -> Result<FileStat> {
        let p = path.to_string();
        self.call("stat", move |b, s, r| {
            Box::pin(async move { b.stat(s, r, &p).await })
        })
        .await
    }

    pub async fn read_dir(&mut self, path: &str) -> Result<Vec<String>> {
        let p = path.to_string();
        self.call("read-dir", move |b, s, r| {
            Box::pin(async move { b.read_dir(s, r, &p).await })
        })
        .await
    }

    pub async fn exists(&mut self, path: &str) -> Result<bool> {
        let p = path.to_string();
        self.call("exists", move |b, s, r| {
            Box::pin(async move { b.exists(s, r, &p).await })
        })
        .await
    }

    pub async fn mkdir(&mut self, path: &str, recursive: bool) -> Result<()> {
        let p = path.to_string();
        self.call("mkdir", move |b, s, r| {
            Box::pin(async move { b.mkdir(s, r, &p, recursive).await })
        })
        .await
    }

    /// Remove a file or directory; the provider honours `recursive` and
    /// `force` exactly or refuses before removing anything.
    pub async fn remove(&mut self, path: &str, recursive: bool, force: bool) -> Result<()> {
        let p = path.to_string();
        self.call("remove", move |b, s, r| {
            Box::pin(async move { b.remove(s, r, &p, recursive, force).await })
        })
        .await
    }

    /// Run a command with the host's terminal attached (stdin, stdout and
    /// stderr are the user's); returns its exit code.
    pub async fn interactive_exec(&mut self, request: ExecRequest) -> Result<i32> {
        self.call("interactive-exec", move |b, s, h| {
            Box::pin(async move { b.interactive_exec(s, h, request).await })
        })
        .await
    }

    /// Tear the sandbox down (a lane: only stop what it runs). Idempotent.
    pub async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.lane.is_some() {
            self.closed = true;
            self.cleanup();
            return Ok(());
        }
        // A record says "closing" from here on: a kill during the close
        // leaves a sandbox gc need only finish closing.
        if let Some(record) = self.record.take() {
            let closing = record.with_extension(CLOSING);
            self.record = std::fs::rename(&record, &closing).ok().map(|_| closing);
        }
        self.note_dropped_call();
        let r = match (&self.abandoned, self.state.clone()) {
            (None, _) => {
                self.call("close", |b, s, h| {
                    Box::pin(async move { b.close(s, h).await })
                })
                .await
            }
            // A fresh instance closes what the abandoned one cannot.
            (Some(_), Some(state)) => match Self::attached(
                self.origin.clone(),
                self.name.clone(),
                self.worktree_path.clone(),
                state,
            )
            .await
            {
                Ok(mut fresh) => {
                    let r = fresh
                        .call("close", |b, s, h| {
                            Box::pin(async move { b.close(s, h).await })
                        })
                        .await;
                    fresh.closed = true;
                    r
                }
                Err(e) => Err(e),
            },
            (Some(why), None) => Err(Error::Plugin(why.clone())),
        };
        self.closed = true;
        // Containers the provider did not remove go now, whatever it did.
        self.store.data_mut().containers.remove_all().await;
        self.cleanup();
        if r.is_ok()
            && let Some(record) = self.record.take()
        {
            let _ = std::fs::remove_file(record);
        }
        r
    }

    /// A call whose future was dropped before it ended (a caller's own
    /// timeout) left the instance mid-call: give it up like one that would
    /// not end.
    fn note_dropped_call(&mut self) {
        if self.in_flight && self.abandoned.is_none() {
            self.abandoned = Some(format!(
                "sandbox provider `{}` was left in the middle of a call; sanddune gave up on it",
                self.name
            ));
        }
    }

    /// Let go of this handle and leave the sandbox up, its scratch dir
    /// included: `sanddune gc` leaves one it could not recover for its
    /// next pass.
    pub fn detach(mut self) {
        self.closed = true;
        self.scratch = None;
    }

    /// The host directory granted to the provider as its scratch dir.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch.as_deref()
    }

    /// Remove `record` once `close` has torn this sandbox down. While it is
    /// up the file stays for `sanddune gc`; during the close, and when the
    /// close failed, it is renamed to end in [`CLOSING`].
    pub fn remove_on_close(&mut self, record: PathBuf) {
        self.record = Some(record);
    }

    /// Call the provider's `close` on a sandbox `close` already closed:
    /// `close` itself never calls twice, so this is how the conformance kit
    /// checks that the provider's close is idempotent.
    pub async fn close_again(&mut self) -> Result<()> {
        if !self.closed || self.lane.is_some() {
            return Err(Error::Plugin(format!(
                "close_again on sandbox `{}` before close",
                self.name
            )));
        }
        super::begin_call(&mut self.store);
        let r = self.bindings.close(&mut self.store, self.handle).await;
        flatten(&self.name, "close", r)
    }

    fn cleanup(&mut self) {
        self.store.data().brokered.kill_all();
        let leftovers = self.store.data_mut().containers.remove_all();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(leftovers);
        }
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if !self.closed && self.lane.is_none() {
            tracing::warn!(
                "sandbox `{}` dropped without close; killing its processes",
                self.name
            );
        }
        if !self.closed {
            self.cleanup();
        }
    }
}

/// A provider's options as the user gave them, in order (keys may repeat).
type ProviderConfig = Vec<(String, String)>;

/// The user's declared bind mounts: every `mount` entry of the provider's
/// config (`SRC:DST[:ro]`). The host resolves SRC (`~`, relative to the
/// current directory) before the provider sees it, and grants exactly these
/// sources to the containers capability besides the worktree and git dir.
fn resolve_mounts(config: &[(String, String)]) -> Result<(ProviderConfig, Vec<PathBuf>)> {
    let mut sources = Vec::new();
    let mut resolved = Vec::with_capacity(config.len());
    for (key, value) in config {
        if key != "mount" {
            resolved.push((key.clone(), value.clone()));
            continue;
        }
        let (source, rest) = value.split_once(':').ok_or_else(|| {
            Error::input(format!(
                "mount `{value}`: expected SOURCE:TARGET or SOURCE:TARGET:ro"
            ))
        })?;
        let expanded = match source.strip_prefix('~') {
            Some(tail) if tail.is_empty() || tail.starts_with('/') => {
                let home = std::env::var_os("HOME")
                    .ok_or_else(|| Error::input(format!("mount `{value}`: HOME is not set")))?;
                PathBuf::from(home).join(tail.trim_start_matches('/'))
            }
            _ => PathBuf::from(source),
        };
        let absolute = std::fs::canonicalize(&expanded).map_err(|e| {
            Error::input(format!(
                "mount `{value}`: source {} does not exist ({e})",
                expanded.display()
            ))
        })?;
        resolved.push((key.clone(), format!("{}:{rest}", absolute.display())));
        sources.push(absolute);
    }
    Ok((resolved, sources))
}

/// The containers grant for one sandbox: what its containers may mount,
/// what `copy-in` may read and `copy-file-out` may write.
fn container_grant(
    spec: &SandboxSpec,
    scratch: Option<&Path>,
    mounts: &[PathBuf],
) -> Result<ContainerGrant> {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p)
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot resolve {}: {e}", p.display())))
    };
    let mut mount_sources = vec![canonical(&spec.worktree)?, canonical(&spec.git_dir)?];
    mount_sources.extend(mounts.iter().cloned());
    let mut writable = vec![canonical(&spec.worktree)?];
    let mut readable = mount_sources.clone();
    if let Some(dir) = scratch {
        writable.push(canonical(dir)?);
        readable.push(canonical(dir)?);
    }
    Ok(ContainerGrant {
        run_id: spec.run_id.clone(),
        name: spec.name.clone(),
        mount_sources,
        readable,
        writable,
    })
}
