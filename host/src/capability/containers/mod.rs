//! The `containers` capability: a container engine (Docker Engine API through
//! bollard, to Docker or to Podman's compatible socket), confined.
//!
//! A container provider that may run the docker CLI is root on the host. This
//! capability is the engine minus that: every container the host creates for
//! a plugin carries the run's labels and every later operation checks them;
//! privileged mode, host namespaces, added capabilities, devices and bind
//! mounts outside the grant are refused before the engine sees the request.
//! Execs are brokered like host processes: the host can kill what an exec
//! started inside the container (a killed exec client would leave it running).
//!
//! `policy` decides what a plugin may ask, with no engine; `engine` makes
//! the calls it allowed; `exec` runs and kills execs inside a container.
//! `containment` is the user's policy on top: `limits` and the egress
//! policy (`capability::egress`), which the host applies to every container.
//! `keep_id` serializes the creates a rootless Podman cannot take at once.
//! `snapshot` keeps a prepared container as an image a later one starts
//! from; `pool` keeps containers started ahead for the runs to come.

mod containment;
mod engine;
mod exec;
mod keep_id;
mod limits;
mod policy;
pub mod pool;
pub mod snapshot;

pub use containment::Containment;
pub use engine::{
    ContainerState, connect_negotiated, default_image, engine_name, engine_socket, force_remove,
    warm_up,
};
pub(crate) use engine::{archive, first_file};
pub use limits::{LimitHit, ResourceLimits};
pub use policy::{
    ContainerGrant, GitShield, NAME_LABEL, OWNER_LABEL, PLUGIN_LABEL, RUN_LABEL, check_spec,
    owner_alive, owner_id, process_start,
};
pub(crate) use policy::{checked_binds, readable_source, split_container_path, writable_target};

/// Which engine to speak to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

/// What `connect` found.
#[derive(Clone, Debug)]
pub struct EngineInfo {
    pub version: String,
    pub host_uid: u32,
    pub host_gid: u32,
    pub rootless: bool,
}

/// A bind mount; `source` is an absolute host path.
#[derive(Clone, Debug)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub read_only: bool,
    pub selinux_relabel: bool,
}

/// What a plugin asks to create (the WIT's `container-spec`).
#[derive(Clone, Debug, Default)]
pub struct ContainerSpec {
    pub image: String,
    pub cmd: Vec<String>,
    pub entrypoint: Option<Vec<String>>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub networks: Vec<String>,
    pub labels: Vec<(String, String)>,
    pub userns: Option<String>,
    pub privileged: bool,
    pub cap_add: Vec<String>,
    pub devices: Vec<String>,
    pub pid_mode: Option<String>,
    pub ipc_mode: Option<String>,
    pub network_mode: Option<String>,
}

/// One exec in a container.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: Option<u64>,
}

/// How an exec ended, and its output when there was no sink.
#[derive(Clone, Debug, Default)]
pub struct ExecStatus {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub killed: bool,
    pub stdout: String,
    pub stderr: String,
}

/// One exec with the user's terminal attached through a TTY.
#[derive(Clone, Debug, Default)]
pub struct InteractiveExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: Option<String>,
}
