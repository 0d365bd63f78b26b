//! Lifecycle hooks as a repository or a caller declares them: a host hook
//! runs on the host in the worktree, a sandbox hook inside the sandbox
//! (`run::hook_runner` runs them). The project config, a workflow and a
//! dev container all give hooks of these shapes.

use serde::Deserialize;

/// A hook run on the host: a `sh -c` command line in the worktree (the
/// repository root under head). No sudo, no cwd: use `cd` or inline env.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostHook {
    pub command: String,
    /// Default 60 s.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A hook run inside the sandbox, in its worktree path.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxHook {
    pub command: String,
    /// Run as root inside the sandbox (e.g. `apt-get install`).
    #[serde(default)]
    pub sudo: bool,
    /// Default 60 s.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A sandbox hook with the name its failure is reported under (a dev
/// container's `postCreateCommand`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedSandboxHook {
    pub name: String,
    pub hook: SandboxHook,
}

/// Every hook of a sandbox's setup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hooks {
    /// host.onWorktreeReady: after copyToWorktree, before the sandbox, in order.
    pub host_on_worktree_ready: Vec<HostHook>,
    /// host.onSandboxReady: after the sandbox is up, all at once.
    pub host_on_sandbox_ready: Vec<HostHook>,
    /// sandbox.onSandboxReady: after the sandbox is up, all at once (and at
    /// once with the host ones).
    pub sandbox_on_sandbox_ready: Vec<SandboxHook>,
    /// A dev container's workspace link and lifecycle commands: after the
    /// sandbox is up, one by one in order, before the onSandboxReady ones
    /// (which may rely on what they installed).
    pub devcontainer: Vec<NamedSandboxHook>,
}

impl Hooks {
    pub fn is_empty(&self) -> bool {
        self.host_on_worktree_ready.is_empty()
            && self.host_on_sandbox_ready.is_empty()
            && self.sandbox_on_sandbox_ready.is_empty()
            && self.devcontainer.is_empty()
    }

    /// The set-up run in the sandbox, in the order it runs (the dev
    /// container's hooks, then sandbox.onSandboxReady), each as `sudo?
    /// command`: what a prepared snapshot stands for.
    pub fn sandbox_setup(&self) -> Vec<String> {
        self.devcontainer
            .iter()
            .map(|named| &named.hook)
            .chain(&self.sandbox_on_sandbox_ready)
            .map(|hook| {
                let sudo = if hook.sudo { "sudo " } else { "" };
                format!("{sudo}{}", hook.command)
            })
            .collect()
    }

    /// These hooks without the ones that run in the sandbox.
    pub fn host_only(&self) -> Hooks {
        Hooks {
            host_on_worktree_ready: self.host_on_worktree_ready.clone(),
            host_on_sandbox_ready: self.host_on_sandbox_ready.clone(),
            ..Hooks::default()
        }
    }

    /// Every hook's command, host hooks first.
    pub fn commands(&self) -> impl Iterator<Item = &String> {
        self.host_on_worktree_ready
            .iter()
            .chain(&self.host_on_sandbox_ready)
            .map(|h| &h.command)
            .chain(self.sandbox_on_sandbox_ready.iter().map(|h| &h.command))
            .chain(self.devcontainer.iter().map(|h| &h.hook.command))
    }
}
