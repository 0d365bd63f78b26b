//! `.sanddune/config.toml`: a repository's own defaults for the CLI (hooks,
//! copyToWorktree, env, timeouts), so a team commits them once instead of
//! repeating flags. Flags add to it; `--env` wins over its `[env]`.
//!
//! ```toml
//! copyToWorktree = ["node_modules", ".env.example"]
//!
//! [env]
//! NODE_ENV = "test"
//!
//! [timeouts]
//! copyToWorktreeMs = 120000
//!
//! [[hooks.host.onWorktreeReady]]
//! command = "cp .env.example .env"
//!
//! [[hooks.sandbox.onSandboxReady]]
//! command = "npm ci"
//! timeoutMs = 300000
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::run::{Hooks, HostHook, SandboxHook};

/// Where the file lives in a repository.
pub const CONFIG_FILE: &str = ".sanddune/config.toml";

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProjectConfig {
    #[serde(default)]
    pub copy_to_worktree: Vec<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    #[serde(default)]
    pub hooks: HooksConfig,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimeoutsConfig {
    pub copy_to_worktree_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    #[serde(default)]
    pub host: HostHooksConfig,
    #[serde(default)]
    pub sandbox: SandboxHooksConfig,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostHooksConfig {
    #[serde(default)]
    pub on_worktree_ready: Vec<HostHook>,
    #[serde(default)]
    pub on_sandbox_ready: Vec<HostHook>,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxHooksConfig {
    #[serde(default)]
    pub on_sandbox_ready: Vec<SandboxHook>,
}

impl ProjectConfig {
    /// The repository's config; the default when there is none.
    pub fn load(repo_root: &Path) -> Result<Self> {
        let path = repo_root.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::input(format!("cannot read {}: {e}", path.display()))),
        };
        Self::parse(&text, &path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let config: Self = toml::from_str(text)
            .map_err(|e| Error::input(format!("{} is not valid: {e}", path.display())))?;
        let hooks = config.hooks();
        let commands = hooks
            .host_on_worktree_ready
            .iter()
            .chain(&hooks.host_on_sandbox_ready)
            .map(|h| &h.command)
            .chain(hooks.sandbox_on_sandbox_ready.iter().map(|h| &h.command));
        for command in commands {
            if command.trim().is_empty() {
                return Err(Error::input(format!(
                    "{} has a hook with an empty command",
                    path.display()
                )));
            }
        }
        Ok(config)
    }

    pub fn hooks(&self) -> Hooks {
        Hooks {
            host_on_worktree_ready: self.hooks.host.on_worktree_ready.clone(),
            host_on_sandbox_ready: self.hooks.host.on_sandbox_ready.clone(),
            sandbox_on_sandbox_ready: self.hooks.sandbox.on_sandbox_ready.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_config_parses() {
        let text = r#"
copyToWorktree = ["node_modules"]
[env]
A = "1"
[timeouts]
copyToWorktreeMs = 5000
[[hooks.host.onWorktreeReady]]
command = "cp .env.example .env"
[[hooks.host.onSandboxReady]]
command = "echo up"
timeoutMs = 10
[[hooks.sandbox.onSandboxReady]]
command = "apt-get install -y jq"
sudo = true
"#;
        let c = ProjectConfig::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(c.copy_to_worktree, vec![PathBuf::from("node_modules")]);
        assert_eq!(c.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(c.timeouts.copy_to_worktree_ms, Some(5000));
        let hooks = c.hooks();
        assert_eq!(
            hooks.host_on_worktree_ready[0].command,
            "cp .env.example .env"
        );
        assert_eq!(hooks.host_on_sandbox_ready[0].timeout_ms, Some(10));
        assert!(hooks.sandbox_on_sandbox_ready[0].sudo);
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            ("copyToWorktre = []", "unknown field `copyToWorktre`"),
            (
                "[[hooks.host.onWorktreeReady]]\ncommand = \"x\"\nsudo = true",
                "unknown field `sudo`",
            ),
            (
                "[[hooks.sandbox.onSandboxReady]]\ncommand = \"  \"",
                "empty command",
            ),
            ("[hooks.host]\nonWorktreeReady = \"x\"", "invalid type"),
        ];
        for (text, expected) in cases {
            let e = ProjectConfig::parse(text, Path::new("/r/.sanddune/config.toml")).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(expected) && msg.contains("/r/.sanddune/config.toml"),
                "{text}: {msg}"
            );
            assert_eq!(e.exit_code(), 2);
        }
    }
}
