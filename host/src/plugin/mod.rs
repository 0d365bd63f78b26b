//! The plugin runtime: loads components (built-in or from files), checks that
//! they fit a sanddune world and version, and instantiates them with exactly
//! the capabilities granted.

pub mod agent;
pub mod api;
pub mod approval;
pub mod builtin;
pub mod cache;
mod described;
pub mod engine;
pub mod sandbox;
mod staging;
pub mod store;
pub mod wit;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use wasmtime::component::{Component, InstancePre};
use wasmtime::{Engine, Store};

use crate::capability::{Grants, Limits, PluginState, filesystem};
use crate::error::{Error, Result};

pub use approval::{Approval, FileApproval};
pub use wit::ApiVersion;

/// The two kinds of provider, one world each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    Sandbox,
    Agent,
}

impl PluginKind {
    fn interface(self) -> &'static str {
        match self {
            PluginKind::Sandbox => "sandbox-provider",
            PluginKind::Agent => "agent-provider",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            PluginKind::Sandbox => "sandbox provider",
            PluginKind::Agent => "agent provider",
        }
    }

    /// As the plugin store records it: `sandbox` or `agent`.
    pub fn word(self) -> &'static str {
        match self {
            PluginKind::Sandbox => "sandbox",
            PluginKind::Agent => "agent",
        }
    }
}

/// Which provider world a component exports, read from its top-level
/// export section without compiling it: quick enough for shell completion.
/// `identify` is the check that counts.
pub fn exported_kind(bytes: &[u8]) -> Option<PluginKind> {
    use wasmtime::wasmparser::{Parser, Payload};
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.ok()? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentExportSection(exports) if depth == 0 => {
                for export in exports {
                    let name = export.ok()?.name.name;
                    for kind in [PluginKind::Sandbox, PluginKind::Agent] {
                        if name.starts_with(&format!("{}/{}@", wit::PACKAGE, kind.interface())) {
                            return Some(kind);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// How the user named a plugin: a built-in name or a component file.
#[derive(Clone, Debug)]
pub enum PluginRef {
    Builtin(String),
    File(PathBuf),
}

impl PluginRef {
    /// `./x.wasm`, `/abs/x.wasm` and anything with a `/` or a `.wasm` suffix
    /// is a file; anything else a name.
    pub fn parse(text: &str) -> Self {
        if text.ends_with(".wasm") || text.contains('/') {
            PluginRef::File(PathBuf::from(text))
        } else {
            PluginRef::Builtin(text.to_string())
        }
    }
}

impl std::fmt::Display for PluginRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginRef::Builtin(name) => write!(f, "{name}"),
            PluginRef::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Runtime settings.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Compiled-component cache; `None` compiles on every load.
    pub cache_dir: Option<PathBuf>,
    /// Installed plugins (`sanddune plugin add`); `None`: none are.
    pub store_dir: Option<PathBuf>,
    pub limits: Limits,
    /// How a component file named by the user is approved to run.
    pub file_approval: FileApproval,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: cache::default_cache_dir(),
            store_dir: store::default_dir(),
            limits: Limits {
                memory_bytes: 256 << 20,
                cpu_time_per_call: Duration::from_secs(30),
                http: Default::default(),
            },
            file_approval: FileApproval::Refuse,
        }
    }
}

/// Shared by every plugin loaded from it. Cheap to clone.
#[derive(Clone)]
pub struct PluginRuntime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    /// One per supported version, in `ApiVersion::ALL` order.
    linkers: Vec<wit::Linkers>,
    cache: cache::ComponentCache,
    store: Option<store::PluginStore>,
    limits: Limits,
    file_approval: FileApproval,
    ticker: engine::EpochTicker,
}

/// A loaded, linked component, ready to instantiate.
#[derive(Clone)]
pub struct Plugin {
    /// How the user named it (built-in name or file path).
    pub source: String,
    pub kind: PluginKind,
    /// The `sanddune:plugin` version it was built against, as it says
    /// (`0.1.0`), and the supported version that binds it.
    pub api_version: String,
    pub api: ApiVersion,
    pub sha256: String,
    /// Where its grants come from (see `approval`).
    pub approval: Approval,
    pub component: Component,
    pre: InstancePre<PluginState>,
    runtime: PluginRuntime,
}

impl PluginRuntime {
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let engine = engine::new_engine()?;
        let linkers = ApiVersion::ALL
            .into_iter()
            .map(|v| wit::Linkers::new(&engine, v))
            .collect::<wasmtime::Result<Vec<_>>>()
            .map_err(anyhow::Error::from)?;
        let cache = cache::ComponentCache::new(&engine, config.cache_dir);
        let ticker = engine::EpochTicker::start(&engine);
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linkers,
                cache,
                store: config.store_dir.map(store::PluginStore::open),
                limits: config.limits,
                file_approval: config.file_approval,
                ticker,
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// How component files named by the user are approved.
    pub fn file_approval(&self) -> &FileApproval {
        &self.inner.file_approval
    }

    /// The installed plugins, when this runtime has a store for them.
    pub fn installed(&self) -> Option<&store::PluginStore> {
        self.inner.store.as_ref()
    }

    /// Load a plugin the user named; `expect` checks its kind when given.
    /// A name resolves to a built-in first, then to an installed plugin,
    /// unless the installed one was added to shadow the built-in. Built-ins
    /// and installed plugins load by the hash recorded for them (at build
    /// time, at install), so a cached load reads and hashes nothing.
    pub fn load(&self, plugin: &PluginRef, expect: Option<PluginKind>) -> Result<Plugin> {
        let path = match plugin {
            PluginRef::File(path) => path,
            PluginRef::Builtin(name) => {
                let installed = match self.installed() {
                    Some(store) => store.locate(name)?,
                    None => None,
                };
                let shadowed = installed.as_ref().is_some_and(|(r, _)| r.shadows_builtin);
                if let Some(b) = builtin::find(name).filter(|_| !shadowed) {
                    let bytes = || {
                        check_is_component(b.bytes, name)?;
                        Ok(Cow::Borrowed(b.bytes))
                    };
                    let mut plugin = self.load_hashed(b.sha256, name, expect, bytes)?;
                    plugin.approval = Approval::BuiltIn;
                    return Ok(plugin);
                }
                let Some((record, wasm)) = installed else {
                    return Err(self.unknown(name));
                };
                let bytes = || {
                    let bytes = store::read_installed(&record, &wasm)?;
                    check_is_component(&bytes, name)?;
                    Ok(Cow::Owned(bytes))
                };
                let mut plugin = self.load_hashed(&record.sha256, name, expect, bytes)?;
                plugin.approval = Approval::Approved(record.grants);
                return Ok(plugin);
            }
        };
        let bytes = read_component_file(path)?;
        let mut plugin = self.load_bytes(&bytes, &path.display().to_string(), expect)?;
        // A copy of a built-in (`sanddune plugin export`) is that built-in.
        if builtin::identical(&bytes).is_some() {
            plugin.approval = Approval::BuiltIn;
        }
        Ok(plugin)
    }

    fn unknown(&self, name: &str) -> Error {
        let installed: Vec<String> = self
            .installed()
            .and_then(|s| s.list().ok())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        Error::input(format!(
            "no plugin named `{name}` (built-ins: {}; installed: {}); to load a component file, pass its path, e.g. ./{name}.wasm, or install it with `sanddune plugin add`",
            builtin::names().join(", "),
            if installed.is_empty() {
                "none".into()
            } else {
                installed.join(", ")
            }
        ))
    }

    /// Load component bytes; `expect` checks the kind when given.
    pub fn load_bytes(
        &self,
        bytes: &[u8],
        source: &str,
        expect: Option<PluginKind>,
    ) -> Result<Plugin> {
        check_is_component(bytes, source)?;
        let sha256 = cache::sha256_hex(bytes);
        self.load_hashed(&sha256, source, expect, || Ok(Cow::Borrowed(bytes)))
    }

    /// Load the component whose sha256 is `sha256`; `bytes` is called only
    /// when it is not in the compiled-component cache.
    fn load_hashed<'a>(
        &self,
        sha256: &str,
        source: &str,
        expect: Option<PluginKind>,
        bytes: impl FnOnce() -> Result<Cow<'a, [u8]>>,
    ) -> Result<Plugin> {
        let engine = &self.inner.engine;
        // Refusals found while reading the bytes keep their own message.
        let mut refused = None;
        let component = self
            .inner
            .cache
            .load_hashed(engine, sha256, || {
                bytes().map_err(|e| {
                    let msg = e.to_string();
                    refused = Some(e);
                    anyhow::anyhow!(msg)
                })
            })
            .map_err(|e| {
                refused.take().unwrap_or_else(|| {
                    Error::input(format!(
                        "`{source}` is not a valid WebAssembly component: {}",
                        one_line(&e)
                    ))
                })
            })?;
        let (kind, api, api_version) = identify(engine, &component, source)?;
        if let Some(expect) = expect.filter(|e| *e != kind) {
            return Err(Error::input(format!(
                "`{source}` is an {}, not a {}",
                kind.noun(),
                expect.noun()
            )));
        }
        let linkers = &self.inner.linkers[api as usize];
        let linker = match kind {
            PluginKind::Sandbox => &linkers.sandbox,
            PluginKind::Agent => &linkers.agent,
        };
        let pre = linker.instantiate_pre(&component).map_err(|e| {
            Error::input(format!(
                "`{source}` does not fit the sanddune {} world of {}@{api}: {}",
                kind.noun(),
                wit::PACKAGE,
                one_line(&e.into())
            ))
        })?;
        Ok(Plugin {
            source: source.to_string(),
            kind,
            api_version,
            api,
            sha256: sha256.to_string(),
            approval: Approval::Unapproved,
            component,
            pre,
            runtime: self.clone(),
        })
    }

    /// A fresh store for a plugin, with only `grants` visible to it.
    fn store(&self, name: &str, grants: Grants) -> Result<Store<PluginState>> {
        let wasi = filesystem::wasi_ctx(name, &grants)?;
        let state = PluginState::new(name.into(), Arc::new(grants), wasi, self.inner.limits);
        let mut store = Store::new(&self.inner.engine, state);
        store.limiter(|s| s);
        // Time in the host (waiting for a line, a sleep, a response) is not
        // wasm execution: entering wasm again (the return, or the host's
        // `cabi_realloc` call lowering the result), the next tick starts
        // afresh. Without this every wait of 10 ms or more cost a tick, and
        // an agent printing 300 lines 20 ms apart ran out of a 2 s budget.
        // The hook notes the epoch wasm was entered at (it may not move the
        // deadline itself); a deadline that passed while in the host fires
        // in that same epoch and only moves the deadline to the next tick.
        let epoch = self.inner.ticker.epoch();
        let entered = Arc::new(AtomicU64::new(u64::MAX));
        store.epoch_deadline_callback({
            let (epoch, entered) = (epoch.clone(), entered.clone());
            move |mut ctx| {
                if epoch.now() == entered.load(Ordering::Relaxed) {
                    return Ok(wasmtime::UpdateDeadline::Continue(1));
                }
                ctx.data_mut().charge_cpu_tick(engine::EPOCH_TICK)?;
                Ok(wasmtime::UpdateDeadline::Yield(1))
            }
        });
        store.call_hook(move |_, hook| {
            if hook.exiting_host() {
                entered.store(epoch.now(), Ordering::Relaxed);
            }
            Ok(())
        });
        Ok(store)
    }
}

impl Plugin {
    /// Every import the component declares, as `name` strings.
    pub fn imports(&self) -> Vec<String> {
        let engine = self.runtime.engine();
        self.component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    pub(crate) fn runtime(&self) -> &PluginRuntime {
        &self.runtime
    }

    pub(crate) fn instantiate_error(&self, e: wasmtime::Error) -> Error {
        Error::Plugin(format!(
            "cannot instantiate `{}`: {}",
            self.source,
            one_line(&e.into())
        ))
    }
}

/// Before every top-level call into a plugin: a fresh CPU budget, and
/// processes may be spawned again after an earlier cancellation.
pub(crate) fn begin_call(store: &mut Store<PluginState>) {
    store.data_mut().begin_call();
    store.set_epoch_deadline(1);
}

fn read_component_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::input(format!("cannot read plugin file {}: {e}", path.display())))
}

/// Tell "not wasm" and "a core module" apart from a component before compiling.
fn check_is_component(bytes: &[u8], source: &str) -> Result<()> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(Error::input(format!(
            "`{source}` is not a WebAssembly component (no wasm header); build the plugin for wasm32-wasip2"
        )));
    }
    if !wasmtime::wasmparser::Parser::is_component(bytes) {
        return Err(Error::input(format!(
            "`{source}` is a core WebAssembly module, not a component; build it for wasm32-wasip2 (or run `wasm-tools component new`)"
        )));
    }
    Ok(())
}

/// Which sanddune world a component exports, and at what API version.
fn identify(
    engine: &Engine,
    component: &Component,
    source: &str,
) -> Result<(PluginKind, ApiVersion, String)> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(n, _)| n.to_string())
        .collect();
    let package = wit::PACKAGE;
    for kind in [PluginKind::Sandbox, PluginKind::Agent] {
        let prefix = format!("{package}/{}@", kind.interface());
        let Some(version) = exports.iter().find_map(|e| e.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(api) = ApiVersion::of(version) else {
            return Err(Error::input(format!(
                "`{source}` was built against {package}@{version}, but this sanddune speaks {package} {}; rebuild the plugin against {package}@{}.0 (`sanddune plugin new` scaffolds one)",
                ApiVersion::supported(),
                ApiVersion::CURRENT
            )));
        };
        return Ok((kind, api, version.to_string()));
    }
    let shown = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    Err(Error::input(format!(
        "`{source}` is a component but not a sanddune plugin: it exports {shown}, not {package}/sandbox-provider or {package}/agent-provider"
    )))
}

/// An error chain on one line.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}
