//! The `sandbox` resource's functions, each declared once: the table below
//! makes the version dispatch on `SandboxBindings` and, for the ones the
//! host calls as they are, the `Sandbox` method. A new function is a row
//! here (and, for a new contract version, its records in `wit::convert`).

use wasmtime::Store;
use wasmtime::component::{Resource, ResourceAny};

use super::live::Sandbox;
use crate::capability::PluginState;
use crate::capability::output::OutputSink;
use crate::error::Result;
use crate::plugin::api;
use crate::plugin::wit::{SandboxBindings, each};

/// Each row: the function's arguments and what it returns, its WIT name
/// (for errors), and the call into one version's `sandbox` interface `g`
/// with store `s` and handle `h` (converting with `.into()`, which picks
/// that version's records). Rows under `sandbox:` are `Sandbox` methods
/// too; rows under `bindings only:` back a `Sandbox` method that does more
/// (`exec`, `files`, `live`).
macro_rules! sandbox_functions {
    (
        sandbox: $(
            $(#[$doc:meta])*
            fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $wit:literal,
                |$g:ident, $s:ident, $h:ident| $call:expr;
        )*
        bindings only: $(
            fn $bname:ident($($barg:ident: $bty:ty),*) -> $bret:ty,
                |$bg:ident, $bs:ident, $bh:ident| $bcall:expr;
        )*
    ) => {
        impl SandboxBindings {
            $(sandbox_functions!(@binding $name($($arg: $ty),*) -> $ret, |$g, $s, $h| $call);)*
            $(sandbox_functions!(@binding $bname($($barg: $bty),*) -> $bret, |$bg, $bs, $bh| $bcall);)*
        }

        impl Sandbox {
            $(
                $(#[$doc])*
                pub async fn $name(&mut self, $($arg: $ty),*) -> Result<$ret> {
                    let (bindings, store, handle) = self.begin()?;
                    let r = bindings.$name(store, handle, $($arg),*).await;
                    self.end($wit, r)
                }
            )*
        }
    };
    // One function's version dispatch.
    (@binding $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty,
        |$g:ident, $s:ident, $h:ident| $call:expr) => {
        pub async fn $name(
            &self,
            $s: &mut Store<PluginState>,
            $h: ResourceAny,
            $($arg: $ty),*
        ) -> wasmtime::Result<std::result::Result<$ret, String>> {
            each!(self, SandboxBindings, b => {
                let $g = b.sanddune_plugin_sandbox_provider().sandbox();
                $call
            })
        }
    };
}

sandbox_functions! {
    sandbox:
    /// Run a command with the host's terminal attached (stdin, stdout and
    /// stderr are the user's); returns its exit code.
    fn interactive_exec(request: api::ExecRequest) -> i32 = "interactive-exec",
        |g, s, h| g.call_interactive_exec(s, h, &request.into()).await;
    fn read_file(path: &str) -> Vec<u8> = "read-file",
        |g, s, h| g.call_read_file(s, h, path).await;
    fn write_file(path: &str, data: &[u8]) -> () = "write-file",
        |g, s, h| g.call_write_file(s, h, path, data).await;
    fn stat(path: &str) -> api::FileStat = "stat",
        |g, s, h| g.call_stat(s, h, path).await.map(|r| r.map(Into::into));
    fn read_dir(path: &str) -> Vec<String> = "read-dir",
        |g, s, h| g.call_read_dir(s, h, path).await;
    fn exists(path: &str) -> bool = "exists",
        |g, s, h| g.call_exists(s, h, path).await;
    fn mkdir(path: &str, recursive: bool) -> () = "mkdir",
        |g, s, h| g.call_mkdir(s, h, path, recursive).await;
    /// Remove a file or directory; the provider honours `recursive` and
    /// `force` exactly or refuses before removing anything.
    fn remove(path: &str, recursive: bool, force: bool) -> () = "remove",
        |g, s, h| g.call_remove(s, h, path, recursive, force).await;

    bindings only:
    fn worktree_path() -> String, |g, s, h| g.call_worktree_path(s, h).await.map(Ok);
    fn state() -> String, |g, s, h| g.call_state(s, h).await.map(Ok);
    fn exec(request: api::ExecRequest, sink: Resource<OutputSink>) -> api::ExecResult,
        |g, s, h| g.call_exec(s, h, &request.into(), sink).await.map(|r| r.map(Into::into));
    fn copy_in(host: &str, path: &str) -> (), |g, s, h| g.call_copy_in(s, h, host, path).await;
    fn copy_file_in(host: &str, path: &str) -> (),
        |g, s, h| g.call_copy_file_in(s, h, host, path).await;
    fn copy_file_out(path: &str, host: &str) -> (),
        |g, s, h| g.call_copy_file_out(s, h, path, host).await;
    fn close() -> (), |g, s, h| g.call_close(s, h).await;
}
