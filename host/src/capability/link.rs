//! How a container sandbox reaches the host's services (the egress proxy,
//! the credential gateway) without the host entering its network namespace,
//! which needs root over it, so a user in the docker group or on rootless
//! Podman could not (ADR 0031).
//!
//! Per sandbox, a host directory holds a unix socket per service and a
//! copy of `sanddune-egress-forward` (a static binary built from
//! `egress-forward/`, embedded here). The directory is bind-mounted
//! read-only at [`MOUNT`], and the forwarder, started by the host in the
//! container, listens on a loopback port per service and splices each
//! connection to its socket. Each service decides on the host, behind its
//! socket: a program that kills the forwarder or talks to a socket itself
//! gains nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::UnixListener;

use super::egress::{EgressLog, PROXY_PORT, Proxy};
use super::gateway::{GATEWAY_PORT, Gateway, GatewayServer};

/// `sanddune-egress-forward`, static, for this machine's architecture.
const FORWARDER: &[u8] = include_bytes!(env!("SANDDUNE_EGRESS_FORWARD"));

/// Where the link's directory appears in the container.
pub const MOUNT: &str = "/run/sanddune";

const PROXY_SOCKET: &str = "proxy.sock";
const GATEWAY_SOCKET: &str = "gateway.sock";
const PROGRAM: &str = "forward";

/// One sandbox's link: its directory and the services served in it.
/// Dropping it stops them and removes the directory.
pub struct SandboxLink {
    // Fields drop in order: the servers before their directory.
    proxy: Option<Proxy>,
    gateway: Option<GatewayServer>,
    dir: LinkDir,
}

/// A link's directory, removed when dropped.
struct LinkDir(PathBuf);

impl Drop for LinkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Make `dir` a link directory: the forwarder in it, traversable by
/// whatever uid the container's programs run as. Returns the engine's bind
/// of it.
pub fn prepare(dir: &Path) -> std::io::Result<String> {
    let path = dir.to_string_lossy();
    if path.contains([':', ',']) {
        return Err(std::io::Error::other(format!(
            "`{path}` holds `:` or `,`, which an engine's bind cannot carry: set XDG_RUNTIME_DIR or TMPDIR to a plain path"
        )));
    }
    std::fs::create_dir_all(dir)?;
    // Traversable, not listable; the forwarder readable and runnable.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
    let program = dir.join(PROGRAM);
    std::fs::write(&program, FORWARDER)?;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))?;
    Ok(bind_of(dir))
}

fn bind_of(dir: &Path) -> String {
    format!("{}:{MOUNT}:ro", dir.display())
}

/// Where the link directory of the warm container reserved for run
/// `run_id` goes: named like the run's own, so gc finds it the same way.
pub fn pooled_dir(run_id: &str) -> PathBuf {
    parents(&std::env::temp_dir())
        .remove(0)
        .join(format!("{}pool", prefix(run_id)))
}

impl SandboxLink {
    /// A new directory for run `run_id` with the forwarder in it, serving
    /// the egress proxy by `egress`'s rules and the credential gateway,
    /// each when given.
    pub fn open(
        run_id: &str,
        egress: Option<Arc<EgressLog>>,
        gateway: Option<Arc<Gateway>>,
    ) -> std::io::Result<Self> {
        let parent = parents(&std::env::temp_dir()).remove(0);
        let dir = LinkDir(
            tempfile::Builder::new()
                .prefix(&prefix(run_id))
                .tempdir_in(parent)?
                .keep(),
        );
        prepare(&dir.0)?;
        Self::serve(dir, egress, gateway)
    }

    /// The link of a warm container (ADR 0037), in the directory [`prepare`]
    /// made for it when the container was started ahead: served from now
    /// on, and removed with the link.
    pub fn open_at(
        dir: &Path,
        egress: Option<Arc<EgressLog>>,
        gateway: Option<Arc<Gateway>>,
    ) -> std::io::Result<Self> {
        if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            return Err(std::io::Error::other(format!(
                "{} is not the directory made for the warm container",
                dir.display()
            )));
        }
        Self::serve(LinkDir(dir.to_path_buf()), egress, gateway)
    }

    fn serve(
        dir: LinkDir,
        egress: Option<Arc<EgressLog>>,
        gateway: Option<Arc<Gateway>>,
    ) -> std::io::Result<Self> {
        let proxy = match egress {
            Some(log) => Some(Proxy::serve(listen(&dir.0.join(PROXY_SOCKET))?, log)),
            None => None,
        };
        let gateway = match gateway {
            Some(gateway) => Some(gateway.serve(listen(&dir.0.join(GATEWAY_SOCKET))?)),
            None => None,
        };
        Ok(Self {
            proxy,
            gateway,
            dir,
        })
    }

    /// The directory on the host.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The engine's bind of the directory: `host:/run/sanddune:ro`.
    pub fn bind(&self) -> String {
        bind_of(&self.dir.0)
    }

    /// The forwarder's command line inside the container: a loopback port
    /// per service served.
    pub fn forwarder_argv(&self) -> Vec<String> {
        forwarder_argv(self.proxy.is_some(), self.gateway.is_some(), false)
    }
}

/// The forwarder's command line for a warm container's link (ADR 0037):
/// started ahead (`--later`: its sockets are served from the claim on),
/// with a port for each service its runs will have.
pub fn waiting_forwarder_argv(proxy: bool, gateway: bool) -> Vec<String> {
    forwarder_argv(proxy, gateway, true)
}

fn forwarder_argv(proxy: bool, gateway: bool, later: bool) -> Vec<String> {
    let mut argv = vec![format!("{MOUNT}/{PROGRAM}")];
    if later {
        argv.push("--later".into());
    }
    if proxy {
        argv.push(format!("{PROXY_PORT}={MOUNT}/{PROXY_SOCKET}"));
    }
    if gateway {
        argv.push(format!("{GATEWAY_PORT}={MOUNT}/{GATEWAY_SOCKET}"));
    }
    argv
}

/// How run `run_id`'s link directories are named.
fn prefix(run_id: &str) -> String {
    format!("sanddune-link-{run_id}-")
}

/// Where link directories go: the user's runtime dir (private to them)
/// when there is one, else `tmp` (a unix socket's path must stay short).
fn parents(tmp: &Path) -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir());
    runtime.into_iter().chain([tmp.to_path_buf()]).collect()
}

/// Remove the link directories run `run_id` left (it was killed before
/// its links were dropped), `tmp` being the temp dir it had. For `gc`.
pub fn remove_left_by(run_id: &str, tmp: &Path) {
    let prefix = prefix(run_id);
    for parent in parents(tmp) {
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            let is_link = entry.file_name().to_string_lossy().starts_with(&prefix)
                && entry.file_type().is_ok_and(|t| t.is_dir());
            if is_link {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// A unix socket any uid in the container may connect to: the directory is
/// the sandbox's alone, and the service decides behind it.
fn listen(path: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}
