//! Where a new sandbox comes from: the host side of `create-options`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::capability::containers::GitShield;
use crate::capability::gateway::Gateway;
use crate::capability::pool::PoolTicket;
use crate::plugin::api::{CreateOptions, EnvVar};

/// A provider's options as the user gave them, in order (keys may repeat).
pub(super) type ProviderConfig = Vec<(String, String)>;

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
    /// How many sandboxes run side by side with this one (a workflow's
    /// fan-out): a container provider gives each an equal share of the
    /// machine's memory unless `memory=` says otherwise. 1 when alone.
    pub side_by_side: u32,
    /// The agent git dir a container sandbox gets in place of the
    /// repository's git dir (ADR 0025); `None` only where the worktree is
    /// no repository of the user's (the conformance kit's).
    pub git_shield: Option<GitShield>,
    /// The run's credential gateway, which a container sandbox reaches
    /// through its link; `None` where the run keeps no key outside.
    pub gateway: Option<Arc<Gateway>>,
    /// The set-up run in the sandbox once it is up (its hooks, each as
    /// `sudo? command`): what a prepared snapshot skips, so part of its key
    /// (ADR 0035). Empty where there is none.
    pub setup: Vec<String>,
    /// The warm container this sandbox's create fills or uses (ADR 0037).
    pub pool: Option<Arc<PoolTicket>>,
    /// The provider's snapshot this sandbox starts from (ADR 0038).
    pub snapshot: Option<String>,
}

impl SandboxSpec {
    /// What the provider's `create` (or `attach`) is told, with its options
    /// (mounts resolved) and the granted scratch dir.
    pub(super) fn create_options(
        &self,
        config: ProviderConfig,
        scratch: Option<&Path>,
    ) -> CreateOptions {
        CreateOptions {
            run_id: self.run_id.clone(),
            name: self.name.clone(),
            host_worktree_path: self.worktree.display().to_string(),
            host_git_dir: self.git_dir.display().to_string(),
            branch: self.branch.clone(),
            env: env_vars(&self.env),
            config,
            scratch_dir: scratch.map(|p| p.display().to_string()),
            snapshot: self.snapshot.clone(),
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
