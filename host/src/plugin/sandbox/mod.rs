//! A loaded sandbox provider and the live sandboxes it creates.
//!
//! `provider` loads a provider and makes sandboxes with it from a `spec`,
//! `grants` says what a sandbox's instance may do, `live` is one live
//! sandbox and how a call goes into it, `exec` and `files` its calls that do
//! more than call, and `calls` declares the `sandbox` resource's functions,
//! each once.

mod calls;
mod exec;
mod files;
mod grants;
mod live;
mod provider;
mod spec;

use wasmtime::Store;

use super::wit::SandboxBindings;
use super::{Plugin, one_line};
use crate::capability::{Grants, PluginState};
use crate::error::{Error, Result};

pub use super::api::{Command, CreateOptions, ExecRequest, FileStat, ProviderInfo, SandboxKind};
pub use exec::{ExecOutput, MAX_CAPTURED_BYTES};
pub use live::Sandbox;
pub use provider::SandboxProvider;
pub use spec::{SandboxSpec, env_vars};

/// How the names of a run's scratch dirs in the temp dir begin: a run
/// killed while its provider created a sandbox leaves gc only this.
pub fn scratch_prefix(provider: &str, run_id: &str) -> String {
    format!("sanddune-{provider}-{run_id}-")
}

/// The extension of a sandbox record (see `remove_on_close`) once its
/// sandbox's close has begun.
pub const CLOSING: &str = "closing";

/// A fresh instance of the provider, granted `grants`.
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
