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
//!
//! [sandboxOptions]                   # --sandbox-opt defaults, e.g. containment
//! egress = "deny-all"
//! memory = "4g"
//!
//! [git]
//! agentName = "sanddune agent"        # the author of the agent's commits
//! agentEmail = "agent@example.com"    # (you stay the committer)
//! coAuthoredBy = "user"               # or "Name <email>": a trailer on each
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::attribution::{CoAuthor, CommitOptions, GitIdentity};
use crate::error::{Error, Result};
use crate::hooks::{Hooks, HostHook, SandboxHook};

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
    #[serde(default)]
    pub git: GitConfig,
    /// `--sandbox-opt` defaults for every run (`egress`, `memory`, ...):
    /// flags and a workflow's own options win over them.
    #[serde(default)]
    pub sandbox_options: BTreeMap<String, String>,
}

/// How the agent's commits are attributed (ADR 0010).
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GitConfig {
    pub agent_name: Option<String>,
    pub agent_email: Option<String>,
    /// `"user"` or `"Name <email>"`.
    pub co_authored_by: Option<String>,
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
    /// The repository's config with its secret references resolved; the
    /// default when there is none. Resolving runs `cmd:` references: check
    /// workspace trust (`trust`) first.
    pub fn load(repo_root: &Path) -> Result<Self> {
        let mut config = Self::read(repo_root)?;
        // Secrets by reference (`file:`, `env:`, `cmd:`) resolve here, once.
        for (key, value) in config.env.iter_mut() {
            *value = crate::secrets::resolve(key, value, repo_root, CONFIG_FILE)?;
        }
        Ok(config)
    }

    /// The repository's config as written, references unresolved.
    pub fn read(repo_root: &Path) -> Result<Self> {
        let path = repo_root.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(Error::input(format!("cannot read {}: {e}", path.display()))),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let config: Self = toml::from_str(text)
            .map_err(|e| Error::input(format!("{} is not valid: {e}", path.display())))?;
        for command in config.hooks().commands() {
            if command.trim().is_empty() {
                return Err(Error::input(format!(
                    "{} has a hook with an empty command",
                    path.display()
                )));
            }
        }
        config.commit_options(path)?;
        Ok(config)
    }

    /// The `[sandboxOptions]` table, before the caller's own options.
    pub fn sandbox_options(&self, then: Vec<(String, String)>) -> Vec<(String, String)> {
        self.sandbox_options
            .clone()
            .into_iter()
            .chain(then)
            .collect()
    }

    /// The `[git]` table as run options; a half-given identity or a
    /// trailer that is not `Name <email>` is an error naming the file.
    pub fn commit_options(&self, path: &Path) -> Result<CommitOptions> {
        let git = &self.git;
        let bad = |what: &str| Error::input(format!("{}: {what}", path.display()));
        let agent_identity = match (&git.agent_name, &git.agent_email) {
            (None, None) => None,
            (Some(name), Some(email)) if !name.trim().is_empty() && !email.trim().is_empty() => {
                Some(GitIdentity {
                    name: name.trim().into(),
                    email: email.trim().into(),
                })
            }
            _ => {
                return Err(bad(
                    "[git] agentName and agentEmail go together, and neither may be empty",
                ));
            }
        };
        let co_authored_by = match git.co_authored_by.as_deref() {
            None => None,
            Some("user") => Some(CoAuthor::User),
            Some(text) => Some(CoAuthor::Identity(GitIdentity::parse(text).ok_or_else(
                || {
                    bad(&format!(
                        "[git] coAuthoredBy is \"{text}\": give \"user\" or \"Name <email>\""
                    ))
                },
            )?)),
        };
        Ok(CommitOptions {
            agent_identity,
            co_authored_by,
        })
    }

    pub fn hooks(&self) -> Hooks {
        Hooks {
            host_on_worktree_ready: self.hooks.host.on_worktree_ready.clone(),
            host_on_sandbox_ready: self.hooks.host.on_sandbox_ready.clone(),
            sandbox_on_sandbox_ready: self.hooks.sandbox.on_sandbox_ready.clone(),
            devcontainer: vec![],
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
        assert_eq!(
            c.commit_options(Path::new("c.toml")).unwrap(),
            CommitOptions::default()
        );
    }

    #[test]
    fn the_git_table_gives_commit_options() {
        let text = "[git]\nagentName = \"Bot\"\nagentEmail = \"bot@example.com\"\ncoAuthoredBy = \"user\"\n";
        let c = ProjectConfig::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(
            c.commit_options(Path::new("c.toml")).unwrap(),
            CommitOptions {
                agent_identity: Some(GitIdentity {
                    name: "Bot".into(),
                    email: "bot@example.com".into()
                }),
                co_authored_by: Some(CoAuthor::User),
            }
        );
        let text = "[git]\ncoAuthoredBy = \"Claude <noreply@anthropic.com>\"\n";
        let c = ProjectConfig::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(
            c.commit_options(Path::new("c.toml"))
                .unwrap()
                .co_authored_by,
            Some(CoAuthor::Identity(GitIdentity {
                name: "Claude".into(),
                email: "noreply@anthropic.com".into()
            }))
        );
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
            (
                "[git]\nagentName = \"Bot\"",
                "agentName and agentEmail go together",
            ),
            (
                "[git]\ncoAuthoredBy = \"bot@example.com\"",
                "give \"user\" or \"Name <email>\"",
            ),
            ("[git]\nauthor = \"x\"", "unknown field `author`"),
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
