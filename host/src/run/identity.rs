//! The git identity an agent commits with in a sandbox. A sandbox's HOME is
//! its own, so the user's git config is not there: the host asks git which
//! author and committer it would put on a commit in the repository (`git
//! var GIT_AUTHOR_IDENT` and `GIT_COMMITTER_IDENT`: the `GIT_AUTHOR_*` and
//! `GIT_COMMITTER_*` env, then `author.*`, `committer.*` and `user.*` config
//! of every scope, then `EMAIL`) and hands only those in: the committer as
//! git's command-line config in the env (`GIT_CONFIG_COUNT`), the author as
//! `GIT_AUTHOR_*` when it is someone else. So a plain `git commit` works in
//! any sandbox and is attributed as it would be on the host. An identity
//! git would only guess from the account and host name is refused. The
//! project config may name a separate agent identity (the author; the user
//! stays the committer) and a `Co-authored-by` trailer, which a
//! `commit-msg` hook installed in the sandbox adds (ADR 0010).

use std::path::Path;

use super::env::EnvMap;
use super::sync::q;
use crate::attribution::{CoAuthor, CommitOptions, GitIdentity};
use crate::error::{Error, Result};
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};

/// The identities a sandbox's commits get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitIdentity {
    /// The user as the author of a commit, as git computes it.
    pub user: GitIdentity,
    /// The committer, as git computes it: the user too, unless their env
    /// or config says otherwise.
    pub committer: GitIdentity,
    pub agent: Option<GitIdentity>,
    /// The whole trailer line, `Co-authored-by: Name <email>`.
    pub trailer: Option<String>,
}

/// Env keys that change who git says a commit is by. The run's env layers
/// above the identity may set them (a CI's `.sanddune/.env`, `--env`), so
/// they count here as they will in the sandbox.
fn is_identity_key(key: &str) -> bool {
    matches!(
        key,
        "GIT_AUTHOR_NAME"
            | "GIT_AUTHOR_EMAIL"
            | "GIT_COMMITTER_NAME"
            | "GIT_COMMITTER_EMAIL"
            | "EMAIL"
            | "GIT_CONFIG_COUNT"
    ) || key.starts_with("GIT_CONFIG_KEY_")
        || key.starts_with("GIT_CONFIG_VALUE_")
}

/// `git -C root ARGS` with `env` over the process's environment, started:
/// the asks of [`resolve`] are independent, and started together they
/// cost about one git start on a run's path instead of three.
fn git(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<std::process::Child> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::input(format!("cannot run git (is it on PATH?): {e}")))
}

fn finished(git: std::process::Child) -> Result<std::process::Output> {
    git.wait_with_output()
        .map_err(|e| Error::input(format!("cannot read git's answer: {e}")))
}

/// `Name <email> <time> <zone>`, as `git var` prints an ident.
fn parse_ident(line: &str) -> Option<GitIdentity> {
    let end = line.rfind('>')?;
    let start = line[..end].rfind('<')?;
    let name = line[..start].trim();
    let email = line[start + 1..end].trim();
    (!name.is_empty() && !email.is_empty()).then(|| GitIdentity {
        name: name.into(),
        email: email.into(),
    })
}

/// Whether the user gave git each part of the author and the committer,
/// by git's own precedence (env, `author.*`/`committer.*`, `user.*`, and
/// `EMAIL` for an email), rather than leaving git to guess one from the
/// account and host name.
#[derive(Debug, PartialEq, Eq)]
struct Given {
    /// (name, email)
    author: (bool, bool),
    committer: (bool, bool),
}

impl Given {
    /// From `out`, what `git config --get-regexp` ([`Given::ASK`]) said,
    /// and `env`.
    fn read(out: &std::process::Output, env: &[(&str, &str)]) -> Self {
        // Each key's last value is the one git uses.
        let mut config = std::collections::BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            config.insert(key.to_string(), value.trim().to_string());
        }
        let from_env = |key: &str| {
            env.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
                .or_else(|| std::env::var(key).ok())
                .is_some_and(|v| !v.trim().is_empty())
        };
        let from_config = |key: &str| config.get(key).is_some_and(|v: &String| !v.is_empty());
        let part = |who: &str, what: &str| {
            from_env(&format!(
                "GIT_{}_{}",
                who.to_uppercase(),
                what.to_uppercase()
            )) || from_config(&format!("{who}.{what}"))
                || from_config(&format!("user.{what}"))
                || (what == "email" && from_env("EMAIL"))
        };
        Self {
            author: (part("author", "name"), part("author", "email")),
            committer: (part("committer", "name"), part("committer", "email")),
        }
    }

    const ASK: [&str; 3] = [
        "config",
        "--get-regexp",
        r"^(user|author|committer)\.(name|email)$",
    ];

    /// What is missing, in the words of the setting that would give it.
    fn missing(&self) -> Vec<&'static str> {
        let one =
            |author: bool, committer: bool, texts: [&'static str; 3]| match (author, committer) {
                (true, true) => None,
                (false, false) => Some(texts[0]),
                (false, true) => Some(texts[1]),
                (true, false) => Some(texts[2]),
            };
        [
            one(
                self.author.0,
                self.committer.0,
                [
                    "user.name",
                    "author name (GIT_AUTHOR_NAME, author.name or user.name)",
                    "committer name (GIT_COMMITTER_NAME, committer.name or user.name)",
                ],
            ),
            one(
                self.author.1,
                self.committer.1,
                [
                    "user.email",
                    "author email (GIT_AUTHOR_EMAIL, author.email or user.email)",
                    "committer email (GIT_COMMITTER_EMAIL, committer.email or user.email)",
                ],
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

const HOW_TO_SET: &str = "Set it with\n  git config --global user.name \"Your Name\"\n  git config --global user.email you@example.com\n(or without --global for this repository only; or, as in CI, GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME and GIT_COMMITTER_EMAIL in the environment)";

/// The identity of the agent's commits in repository `root`: the author
/// and the committer git computes there, with `above` (the env layers over
/// the identity: `.sanddune/.env`, provider env, call-site env) as the
/// sandbox will see them. An error naming what is missing when git was
/// given no identity, before any sandbox exists.
pub fn resolve(root: &Path, options: &CommitOptions, above: &EnvMap) -> Result<CommitIdentity> {
    let env: Vec<(&str, &str)> = above
        .iter()
        .filter(|(k, _)| is_identity_key(k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let asks = [
        git(root, &Given::ASK, &env)?,
        git(root, &["var", "GIT_AUTHOR_IDENT"], &env)?,
        git(root, &["var", "GIT_COMMITTER_IDENT"], &env)?,
    ];
    let [config, author, committer] = asks.map(finished);
    let missing = Given::read(&config?, &env).missing();
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "git has no {} for {}: the agent's commits in the sandbox are made with your identity, as git would make them here. {HOW_TO_SET}",
            missing.join(" and no "),
            root.display()
        )));
    }
    let ident = |out: Result<std::process::Output>| -> Result<GitIdentity> {
        let out = out?;
        let text = String::from_utf8_lossy(&out.stdout);
        match parse_ident(text.trim()).filter(|_| out.status.success()) {
            Some(id) => Ok(id),
            None => Err(Error::input(format!(
                "git cannot tell who commits in {}: {}. {HOW_TO_SET}",
                root.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("`git var` failed")
                    .trim()
            ))),
        }
    };
    let user = ident(author)?;
    let committer = ident(committer)?;
    let trailer = options.co_authored_by.as_ref().map(|c| {
        let who = match c {
            CoAuthor::User => &user,
            CoAuthor::Identity(id) => id,
        };
        format!("Co-authored-by: {who}")
    });
    Ok(CommitIdentity {
        user,
        committer,
        agent: options.agent_identity.clone(),
        trailer,
    })
}

impl CommitIdentity {
    /// The env that gives a sandbox's git this identity: the committer as
    /// command-line config (so `git config user.name` answers too), the
    /// author (the agent, else the user) as `GIT_AUTHOR_*` when it is not
    /// the committer, and the trailer hook directory when installed.
    pub fn env(&self, hooks_dir: Option<&str>) -> EnvMap {
        let mut config = vec![
            ("user.name", self.committer.name.as_str()),
            ("user.email", self.committer.email.as_str()),
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
        let author = self.agent.as_ref().unwrap_or(&self.user);
        if *author != self.committer {
            env.insert("GIT_AUTHOR_NAME".into(), author.name.clone());
            env.insert("GIT_AUTHOR_EMAIL".into(), author.email.clone());
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
    fn env_carries_the_committer_the_author_and_the_hooks() {
        let identity = CommitIdentity {
            user: id("Ada", "ada@example.com"),
            committer: id("Ada", "ada@example.com"),
            agent: None,
            trailer: None,
        };
        let env = identity.env(None);
        assert_eq!(env["GIT_CONFIG_COUNT"], "2");
        assert_eq!(env["GIT_CONFIG_KEY_0"], "user.name");
        assert_eq!(env["GIT_CONFIG_VALUE_0"], "Ada");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "ada@example.com");
        assert!(!env.contains_key("GIT_AUTHOR_NAME"));

        let agent = CommitIdentity {
            agent: Some(id("Bot", "bot@example.com")),
            ..identity.clone()
        };
        let env = agent.env(Some("/r/.git/sanddune-hooks"));
        assert_eq!(env["GIT_CONFIG_COUNT"], "3");
        assert_eq!(env["GIT_CONFIG_KEY_2"], "core.hooksPath");
        assert_eq!(env["GIT_CONFIG_VALUE_2"], "/r/.git/sanddune-hooks");
        assert_eq!(env["GIT_AUTHOR_NAME"], "Bot");
        assert_eq!(env["GIT_AUTHOR_EMAIL"], "bot@example.com");

        // A user whose author is not their committer (CI env, author.*).
        let split = CommitIdentity {
            committer: id("CI", "ci@example.com"),
            ..identity
        };
        let env = split.env(None);
        assert_eq!(env["GIT_CONFIG_VALUE_0"], "CI");
        assert_eq!(env["GIT_CONFIG_VALUE_1"], "ci@example.com");
        assert_eq!(env["GIT_AUTHOR_NAME"], "Ada");
        assert_eq!(env["GIT_AUTHOR_EMAIL"], "ada@example.com");
    }

    #[test]
    fn idents_parse_as_git_var_prints_them() {
        assert_eq!(
            parse_ident("Ada Lovelace <ada@example.com> 1700000000 +0100"),
            Some(id("Ada Lovelace", "ada@example.com"))
        );
        assert_eq!(parse_ident("<ada@example.com> 1700000000 +0000"), None);
        assert_eq!(parse_ident(""), None);
    }

    #[test]
    fn what_is_missing_is_named_by_the_setting_that_gives_it() {
        let given = |author, committer| Given { author, committer };
        assert!(given((true, true), (true, true)).missing().is_empty());
        assert_eq!(
            given((false, false), (false, false)).missing(),
            ["user.name", "user.email"]
        );
        assert_eq!(
            given((true, false), (true, false)).missing(),
            ["user.email"]
        );
        let only_committer = given((true, true), (false, true)).missing();
        assert_eq!(only_committer.len(), 1);
        assert!(only_committer[0].starts_with("committer name (GIT_COMMITTER_NAME"));
    }
}
