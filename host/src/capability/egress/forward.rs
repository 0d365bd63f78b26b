//! How a container sandbox reaches the host's egress proxy without the host
//! entering its network namespace (which needs root over it, so a user in
//! the docker group or on rootless Podman could not; ADR 0031).
//!
//! Per sandbox, a host directory holds the proxy's unix socket and a copy
//! of `sanddune-egress-forward` (a static binary built from
//! `egress-forward/`, embedded here). The directory is bind-mounted
//! read-only at [`MOUNT`], and the forwarder, started by the host in the
//! container, listens on 127.0.0.1:3128 and splices each connection to the
//! socket. The container has no other network: the socket is the way out,
//! and the policy is enforced behind it, so a program that kills the
//! forwarder or talks to the socket itself gains nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::proxy::PROXY_PORT;

/// `sanddune-egress-forward`, static, for this machine's architecture.
const FORWARDER: &[u8] = include_bytes!(env!("SANDDUNE_EGRESS_FORWARD"));

/// Where the link's directory appears in the container.
pub const MOUNT: &str = "/run/sanddune";

const SOCKET: &str = "proxy.sock";
const PROGRAM: &str = "forward";

/// One sandbox's link directory; removed when dropped.
#[derive(Debug)]
pub struct SandboxLink {
    dir: tempfile::TempDir,
}

impl SandboxLink {
    /// A new directory with the forwarder in it, under the user's runtime
    /// dir (private to them) or else the temp dir; a unix socket's path
    /// must stay short.
    pub fn new() -> std::io::Result<Self> {
        let parent = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("sanddune-egress-")
            .tempdir_in(parent)?;
        let path = dir.path().to_string_lossy();
        if path.contains([':', ',']) {
            return Err(std::io::Error::other(format!(
                "`{path}` holds `:` or `,`, which an engine's bind cannot carry: set XDG_RUNTIME_DIR or TMPDIR to a plain path"
            )));
        }
        // Traversable by whatever uid the container's programs run as, not
        // listable; the forwarder readable and runnable by them too.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711))?;
        let program = dir.path().join(PROGRAM);
        std::fs::write(&program, FORWARDER)?;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))?;
        Ok(Self { dir })
    }

    /// The host path the proxy listens on.
    pub fn proxy_socket(&self) -> PathBuf {
        self.dir.path().join(SOCKET)
    }

    /// The engine's bind of the directory: `host:/run/sanddune:ro`.
    pub fn bind(&self) -> String {
        format!("{}:{MOUNT}:ro", self.dir.path().display())
    }

    /// The forwarder's command line inside the container.
    pub fn forwarder_argv() -> Vec<String> {
        vec![
            format!("{MOUNT}/{PROGRAM}"),
            format!("{PROXY_PORT}={MOUNT}/{SOCKET}"),
        ]
    }
}
