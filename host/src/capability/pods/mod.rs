//! The `pods` capability (contract 0.5): pods in one Kubernetes namespace,
//! confined the way `containers` confines a container engine (ADR 0024).
//!
//! The host holds the cluster's credentials: it reads the user's kubeconfig
//! (or the in-cluster config) with kube-rs, and the context and namespace
//! are the user's options, never the plugin's. Every pod it creates carries
//! the run's labels and every later call checks them, so a plugin touches
//! only its own pods; a privileged container, added capabilities, hostPath
//! volumes, the host's namespaces and another namespace are refused before
//! the API server sees the request. Execs ride the API server's exec stream
//! and carry the exec mark, so abort and timeouts kill what they started.
//!
//! `policy` decides what a plugin may ask, with no cluster; `cluster`
//! connects and names the errors; `lifecycle` waits for a pod to be ready
//! and says why it is not; `exec` runs commands and moves files; `pool`
//! starts pods ahead of their runs and wakes the one a run claims.

mod calls;
mod cluster;
mod exec;
mod lifecycle;
mod policy;
pub mod pool;

use std::path::PathBuf;
use std::sync::Arc;

use crate::capability::pool::PoolTicket;

pub use calls::PodState;
pub use cluster::default_target;
pub use policy::{NAME_LABEL, PLUGIN_LABEL, RUN_LABEL};

/// What one plugin instance may do with the capability.
#[derive(Clone, Debug)]
pub struct PodGrant {
    /// The run its pods are labelled with.
    pub run_id: String,
    /// The sandbox's name, labelled too.
    pub name: String,
    /// The kubeconfig context; the current one when None.
    pub context: Option<String>,
    /// The namespace; the context's when None, else `default`.
    pub namespace: Option<String>,
    /// Host paths `copy-in` may read (the worktree, the git dir, the
    /// scratch dir).
    pub readable: Vec<PathBuf>,
    /// Host paths `copy-file-out` may write (the worktree, the scratch dir).
    pub writable: Vec<PathBuf>,
    /// The run's warm pod (`pool=N`), or the slot a fill makes one for.
    pub pool: Option<Arc<PoolTicket>>,
}

/// What `connect` found.
#[derive(Clone, Debug)]
pub struct ClusterInfo {
    pub context: String,
    pub server: String,
    pub namespace: String,
    pub version: String,
}

/// What a plugin asks to create (the WIT's `pod-spec`).
#[derive(Clone, Debug, Default)]
pub struct PodSpec {
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub cpus: Option<String>,
    pub memory: Option<String>,
    pub service_account: Option<String>,
    pub node_selector: Vec<(String, String)>,
    pub runtime_class: Option<String>,
    pub image_pull_secrets: Vec<String>,
    pub active_deadline_seconds: Option<u64>,
    pub labels: Vec<(String, String)>,
    pub namespace: Option<String>,
    pub privileged: bool,
    pub host_network: bool,
    pub host_pid: bool,
    pub host_paths: Vec<String>,
    pub cap_add: Vec<String>,
}

/// One exec in a pod.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: Option<u64>,
}

pub use super::containers::ExecStatus;
