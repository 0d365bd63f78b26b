//! The git identity an agent commits with in a sandbox. A sandbox's HOME is
//! its own, so the user's git config is not there: the host reads the
//! repository's effective `user.name` and `user.email` and hands only those
//! in, as git's command-line config in the env (`GIT_CONFIG_COUNT`), so a
//! plain `git commit` works in any sandbox and is attributed to the user.
//! The project config may name a separate agent identity (the author; the
//! user stays the committer) and a `Co-authored-by` trailer, which a
//! `commit-msg` hook installed in the sandbox adds (ADR 0010).

use std::path::Path;

use super::env::EnvMap;
use super::sync::q;
use crate::error::{Error, Result};
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};

/// A git author or committer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitIdentity {
    pub name: String,
    pub email: String,
}

impl GitIdentity {
    /// `Name <email>`, as in a trailer.
    pub fn parse(text: &str) -> Option<Self> {
        let (name, rest) = text.trim().split_once('<')?;
        let email = rest.strip_suffix('>')?.trim();
        let name = name.trim();
        (!name.is_empty() && !email.is_empty() && !email.contains(['<', '>'])).then(|| Self {
            name: name.into(),
            email: email.into(),
        })
    }
}

impl std::fmt::Display for GitIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>", self.name, self.email)
    }
}

/// Who a `Co-authored-by` trailer names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoAuthor {
    /// The user's own identity (with an agent identity as the author).
    User,
    Identity(GitIdentity),
}

/// How the agent's commits are attributed, beyond the user's identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitOptions {
    /// The author of the agent's commits instead of the user, who stays the
    /// committer.
    pub agent_identity: Option<GitIdentity>,
    /// A `Co-authored-by` trailer on each of the agent's commits.
    pub co_authored_by: Option<CoAuthor>,
}

/// The identities a sandbox's commits get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitIdentity {
    pub user: GitIdentity,
    pub agent: Option<GitIdentity>,
    /// The whole trailer line, `Co-authored-by: Name <email>`.
    pub trailer: Option<String>,
}

/// The repository's effective `user.name` and `user.email` (local, global,
/// system and included config, as git itself reads them). None for a
/// setting that is not set.
fn read_config(root: &Path, key: &str) -> Result<Option<String>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["config", "--get", key])
        .output()
        .map_err(|e| Error::input(format!("cannot run git (is it on PATH?): {e}")))?;
    let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !value.is_empty()).then_some(value))
}

/// The identity of the agent's commits in repository `root`; an error
/// naming what is missing when the repository has no identity, before any
/// sandbox exists.
pub fn resolve(root: &Path, options: &CommitOptions) -> Result<CommitIdentity> {
    let name = read_config(root, "user.name")?;
    let email = read_config(root, "user.email")?;
    let user = match (name, email) {
        (Some(name), Some(email)) => GitIdentity { name, email },
        (name, email) => {
            let missing: Vec<&str> = [
                name.is_none().then_some("user.name"),
                email.is_none().then_some("user.email"),
            ]
            .into_iter()
            .flatten()
            .collect();
            return Err(Error::input(format!(
                "git has no {} for {}: the agent's commits in the sandbox are made with your identity. Set it with\n  git config --global user.name \"Your Name\"\n  git config --global user.email you@example.com\n(or without --global for this repository only)",
                missing.join(" and no "),
                root.display()
            )));
        }
    };
    let trailer = options.co_authored_by.as_ref().map(|c| {
        let who = match c {
            CoAuthor::User => &user,
            CoAuthor::Identity(id) => id,
        };
        format!("Co-authored-by: {who}")
    });
    Ok(CommitIdentity {
        user,
        agent: options.agent_identity.clone(),
        trailer,
    })
}

impl CommitIdentity {
    /// The env that gives a sandbox's git this identity: the user as
    /// command-line config (so `git config user.name` answers too), the
    /// agent as author, and the trailer hook directory when installed.
    pub fn env(&self, hooks_dir: Option<&str>) -> EnvMap {
        let mut config = vec![
            ("user.name", self.user.name.as_str()),
            ("user.email", self.user.email.as_str()),
        ];
        if let Some(dir) = hooks_dir {
            config.push(("core.hooksPath", dir));
        }
        let mut env = EnvMap::new();
        env.insert("GIT_CONFIG_COUNT".into(), config.len().to_string());
        for (i, (key, value)) in config.into_iter().enumerate() {
            env.insert(format!("GIT_CONFIG_KEY_{i}"), key.into());
            env.insert(format!("GIT_CONFIG_VALUE_{i}"), value.into());
        }
        if let Some(agent) = &self.agent {
            env.insert("GIT_AUTHOR_NAME".into(), agent.name.clone());
            env.insert("GIT_AUTHOR_EMAIL".into(), agent.email.clone());
        }
        env
    }
}

/// Every client-side hook git runs: each is passed on to the repository's
/// own hook of that name, so installing ours hides none of them.
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-auto-gc",
    "post-rewrite",
    "post-index-change",
    "reference-transaction",
];

/// Install the trailer's `commit-msg` hook in the sandbox's repository
/// (its git dir, never the tracked tree); returns the directory for
/// `core.hooksPath`. The hook adds the trailer unless the message has it,
/// then runs the repository's own hook, found with our override off.
pub async fn install_trailer_hook(sandbox: &mut Sandbox, trailer: &str) -> Result<String> {
    let hook = format!(
        r#"#!/bin/sh
# sanddune: the Co-authored-by trailer, then the repository's own hook.
name=${{0##*/}}
if [ "$name" = commit-msg ]; then
    git interpret-trailers --in-place --if-exists addIfDifferent --trailer {} "$1" || exit 1
fi
own=$(GIT_CONFIG_COUNT=0 git rev-parse --git-path "hooks/$name")
if [ -f "$own" ] && [ -x "$own" ]; then exec "$own" "$@"; fi
exit 0
"#,
        q(trailer)
    );
    let script = format!(
        r#"set -e
dir=$(git rev-parse --absolute-git-dir)/sanddune-hooks
mkdir -p "$dir"
cat > "$dir/sanddune-hook"
chmod +x "$dir/sanddune-hook"
for name in {}; do ln -sf sanddune-hook "$dir/$name"; done
printf '%s' "$dir""#,
        HOOKS.join(" ")
    );
    let out = sandbox
        .exec(
            ExecRequest {
                command: Command::Shell(script),
                cwd: None,
                env: vec![],
                stdin: Some(hook.into_bytes()),
                sudo: false,
                timeout_ms: Some(60_000),
            },
            |_| {},
        )
        .await?;
    if out.exit_code != 0 || out.stdout.trim().is_empty() {
        return Err(Error::Plugin(format!(
            "installing the Co-authored-by hook in sandbox `{}` failed (exit {}): {}",
            sandbox.provider_name(),
            out.exit_code,
            out.stderr.trim()
        )));
    }
    Ok(out.stdout.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str, email: &str) -> GitIdentity {
        GitIdentity {
            name: name.into(),
            email: email.into(),
        }
    }

    #[test]
    fn identities_parse_as_in_a_trailer() {
        assert_eq!(
            GitIdentity::parse(" Ada Lovelace <ada@example.com> "),
            Some(id("Ada Lovelace", "ada@example.com"))
        );
        for bad in [
            "ada@example.com",
            "<a@b>",
            "Ada <>",
            "Ada <a@b",
            "Ada <a<b>",
        ] {
            assert_eq!(GitIdentity::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn env_carries_the_user_the_agent_and_the_hooks() {
        let identity = CommitIdentity {
            user: id("Ada", "ada@example.com"),
            agent: None,
            trailer: None,
        };
        let env = identity.env(None);
        assert_eq!(env["GIT_CONFIG_COUNT"], "2");
        assert_eq!(env["GIT_CONFIG_KEY_0"], "user.name");
        assert_eq!(env["GIT_CONFIG_VALUE_0"], "Ada");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "ada@example.com");
        assert!(!env.contains_key("GIT_AUTHOR_NAME"));

        let identity = CommitIdentity {
            agent: Some(id("Bot", "bot@example.com")),
            ..identity
        };
        let env = identity.env(Some("/r/.git/sanddune-hooks"));
        assert_eq!(env["GIT_CONFIG_COUNT"], "3");
        assert_eq!(env["GIT_CONFIG_KEY_2"], "core.hooksPath");
        assert_eq!(env["GIT_CONFIG_VALUE_2"], "/r/.git/sanddune-hooks");
        assert_eq!(env["GIT_AUTHOR_NAME"], "Bot");
        assert_eq!(env["GIT_AUTHOR_EMAIL"], "bot@example.com");
    }
}
