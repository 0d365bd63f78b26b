//! Host implementations of the capability imports, and the per-store state
//! they check every call against: what this plugin was granted.

pub mod containers;
pub mod egress;
pub(crate) mod exec_mark;
pub mod filesystem;
pub mod gateway;
pub mod http;
pub mod jail;
pub mod link;
pub mod logging;
pub mod output;
pub mod pods;
pub mod pool;
pub mod process;
pub mod request;
pub mod tty;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub use containers::{ContainerGrant, ContainerState};
pub use http::{HttpGrant, HttpLimits, HttpState};
pub use pods::{PodGrant, PodState};
pub use process::Brokered;
pub use request::{Capabilities, DirectoryAccess};

/// What the host lets one plugin instance do. Built-in plugins get what they
/// declare; third-party plugins get what the user approved.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    /// Programs the plugin may spawn, as named in its request.
    pub programs: Vec<String>,
    /// A private scratch directory, preopened read-write at the same path.
    pub scratch_dir: Option<PathBuf>,
    /// Directories preopened at the same path: (path, writable).
    pub directories: Vec<(PathBuf, bool)>,
    /// Environment visible through wasi:cli/environment.
    pub env: Vec<(String, String)>,
    /// The `containers` capability, confined to this grant; None: refused.
    pub containers: Option<ContainerGrant>,
    /// Outgoing HTTP to these origins; None: every request is refused.
    pub http: Option<HttpGrant>,
    /// The `pods` capability, confined to this grant; None: refused.
    pub pods: Option<PodGrant>,
    /// The `jail` capability (0.7): the sandbox's paths, git shield and
    /// containment, held as a container provider's grant holds them;
    /// None: refused.
    pub jail: Option<ContainerGrant>,
}

/// Limits that bound a plugin that computes or allocates without end.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Wasm execution time per call, counted in the engine's epoch ticks.
    pub cpu_time_per_call: Duration,
    /// Timeouts and the response body cap of outgoing HTTP.
    pub http: HttpLimits,
}

/// The data of one plugin store.
pub struct PluginState {
    /// The plugin's name, for every message about it.
    pub plugin: Arc<str>,
    pub grants: Arc<Grants>,
    pub brokered: Brokered,
    pub(crate) containers: ContainerState,
    pub(crate) pods: PodState,
    pub(crate) jail: jail::JailState,
    pub(crate) http: HttpState,
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    limits: Limits,
    cpu_time: Duration,
    log_messages: u64,
}

impl PluginState {
    pub fn new(plugin: Arc<str>, grants: Arc<Grants>, wasi: WasiCtx, limits: Limits) -> Self {
        let brokered = Brokered::default();
        let http = HttpState::new(
            plugin.clone(),
            grants.http.clone(),
            limits.http,
            brokered.clone(),
        );
        Self {
            plugin,
            grants,
            brokered,
            containers: ContainerState::default(),
            pods: PodState::default(),
            jail: jail::JailState::default(),
            http,
            wasi,
            table: ResourceTable::new(),
            limits,
            cpu_time: Duration::ZERO,
            log_messages: 0,
        }
    }

    /// Called before every top-level call into the plugin.
    pub fn begin_call(&mut self) {
        self.cpu_time = Duration::ZERO;
        self.log_messages = 0;
        self.brokered.reset();
        self.http.begin_call();
    }

    /// Called by the epoch callback on every tick (of length `tick`) the
    /// plugin spends in wasm.
    pub fn charge_cpu_tick(&mut self, tick: Duration) -> Result<()> {
        self.cpu_time += tick;
        if self.cpu_time > self.limits.cpu_time_per_call {
            return Err(wasmtime::format_err!(
                "plugin `{}` exceeded its CPU time budget of {} ms for one call and was stopped",
                self.plugin,
                self.limits.cpu_time_per_call.as_millis()
            ));
        }
        Ok(())
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ResourceLimiter for PluginState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> Result<bool> {
        if desired > self.limits.memory_bytes {
            return Err(wasmtime::format_err!(
                "plugin `{}` exceeded its memory limit of {} MiB and was stopped",
                self.plugin,
                self.limits.memory_bytes >> 20
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> Result<bool> {
        Ok(desired <= 1_000_000)
    }
}
