//! `--push`: the host pushes the branch that holds a run's commits, with
//! the user's own git credentials (credential helper, ssh agent), so no
//! token ever enters the sandbox (issue 35, part 4). The sandbox never
//! needs one otherwise: its commits come out through the host.
//!
//! The branch's commits are the agent's writing, and under head or
//! merge-to-head so are the files in the checkout: the push runs no hook
//! (`core.hooksPath` may point into the tree, as husky sets it) and enters
//! no submodule (see `git_command`).

use git2::BranchType;
use serde::Serialize;

use super::{Repo, git_command, git_err};
use crate::error::{Error, Result};

/// Where `--push` sends the branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushTo {
    /// The branch's upstream remote (`branch.<name>.remote`), else
    /// `origin`, else the repository's only remote.
    Default,
    /// A remote by its configured name.
    Remote(String),
}

/// A branch the host pushed after the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pushed {
    pub remote: String,
    pub branch: String,
    /// The commit the remote branch now points at.
    pub commit: String,
}

impl Repo {
    /// The remote `to` names for `branch`, checked before the run starts:
    /// a name that is no configured remote is refused, listing the ones
    /// there are.
    pub fn push_remote(&self, to: &PushTo, branch: &str) -> Result<String> {
        let remotes = self
            .repo
            .remotes()
            .map_err(|e| git_err("list remotes", e))?;
        let remotes: Vec<&str> = remotes.iter().filter_map(|r| r.ok().flatten()).collect();
        let listed = || {
            if remotes.is_empty() {
                "it has none (add one with `git remote add`)".to_string()
            } else {
                format!("it has {}", remotes.join(", "))
            }
        };
        match to {
            PushTo::Remote(name) if remotes.contains(&name.as_str()) => Ok(name.clone()),
            PushTo::Remote(name) => Err(Error::input(format!(
                "--push={name}: the repository has no remote `{name}`; {}",
                listed()
            ))),
            PushTo::Default => {
                let upstream = self
                    .repo
                    .config()
                    .and_then(|c| c.get_string(&format!("branch.{branch}.remote")))
                    .ok()
                    .filter(|r| remotes.contains(&r.as_str()));
                upstream
                    .or_else(|| remotes.contains(&"origin").then(|| "origin".to_string()))
                    .or_else(|| (remotes.len() == 1).then(|| remotes[0].to_string()))
                    .ok_or_else(|| {
                        Error::input(format!(
                            "--push: `{branch}` has no upstream and the repository no `origin`; name the remote with --push=REMOTE ({})",
                            listed()
                        ))
                    })
            }
        }
    }

    /// Push `branch` to `remote` as the user would, never forced: a remote
    /// branch that moved elsewhere is an error that names it, and the
    /// commits stay on the local branch. No terminal prompt: without a
    /// credential helper or key, git fails and says so. Dropping the
    /// future kills git.
    pub async fn push(&self, remote: &str, branch: &str) -> Result<Pushed> {
        let commit = self
            .repo
            .find_branch(branch, BranchType::Local)
            .and_then(|b| b.get().peel_to_commit())
            .map_err(|e| git_err(&format!("read branch `{branch}`"), e))?
            .id()
            .to_string();
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let args = [
            "push",
            "--porcelain",
            "--no-verify",
            "--no-recurse-submodules",
            remote,
            &refspec,
        ];
        let mut cmd = tokio::process::Command::from(git_command(self.root(), &args));
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let failed = |why: String| {
            Error::Other(anyhow::anyhow!(
                "the run's commits are on `{branch}` ({}), but pushing it to `{remote}` failed: {why}\n  push it yourself: git push {remote} {branch}",
                &commit[..12]
            ))
        };
        let out = cmd
            .output()
            .await
            .map_err(|e| failed(format!("cannot run git: {e}")))?;
        if !out.status.success() {
            return Err(failed(why_rejected(&out.stdout, &out.stderr)));
        }
        tracing::info!(%remote, %branch, %commit, "pushed the run's branch from the host");
        Ok(Pushed {
            remote: remote.to_string(),
            branch: branch.to_string(),
            commit,
        })
    }
}

/// Why git refused: the porcelain line of a rejected ref (`!`), else git's
/// own last words (no credentials, no such host).
fn why_rejected(stdout: &[u8], stderr: &[u8]) -> String {
    let stdout = String::from_utf8_lossy(stdout);
    let rejected = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("!\t"))
        .filter_map(|l| l.split('\t').nth(1))
        .next();
    match rejected {
        Some("[rejected] (non-fast-forward)") | Some("[rejected] (fetch first)") => {
            "the remote branch has commits the run's branch lacks (not a fast-forward); merge or rebase them, then push".to_string()
        }
        Some(reason) => reason.to_string(),
        None => {
            let stderr = String::from_utf8_lossy(stderr);
            let said: Vec<&str> = stderr
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("To "))
                .collect();
            said[said.len().saturating_sub(3)..].join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Whether `dir`, a bare repository, holds `branch` at `commit`.
    fn remote_has(dir: &Path, branch: &str, commit: &str) -> bool {
        git2::Repository::open_bare(dir)
            .and_then(|r| r.refname_to_id(&format!("refs/heads/{branch}")))
            .is_ok_and(|id| id.to_string() == commit)
    }

    #[test]
    fn a_rejected_push_says_why_in_words() {
        let stdout =
            b"To /tmp/r.git\n!\trefs/heads/b:refs/heads/b\t[rejected] (fetch first)\nDone\n";
        assert!(why_rejected(stdout, b"").contains("not a fast-forward"));
        let stderr = b"fatal: could not read Username for 'http://h': terminal prompts disabled\n";
        assert_eq!(
            why_rejected(b"", stderr),
            "fatal: could not read Username for 'http://h': terminal prompts disabled"
        );
    }

    #[tokio::test]
    async fn pushes_to_the_default_remote_and_refuses_an_unknown_one() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let bare = dir.path().join("remote.git");
        let git = |cwd: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(cwd)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        std::fs::create_dir(&work).unwrap();
        git(dir.path(), &["init", "-q", "--bare", "remote.git"]);
        git(&work, &["init", "-q", "-b", "main"]);
        git(
            &work,
            &[
                "-c",
                "user.name=U",
                "-c",
                "user.email=u@e",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "one",
            ],
        );
        let repo = Repo::discover(&work).unwrap();
        assert!(
            repo.push_remote(&PushTo::Default, "main")
                .unwrap_err()
                .to_string()
                .contains("it has none")
        );
        git(&work, &["remote", "add", "mirror", bare.to_str().unwrap()]);
        assert_eq!(
            repo.push_remote(&PushTo::Default, "main").unwrap(),
            "mirror"
        );
        let e = repo
            .push_remote(&PushTo::Remote("nope".into()), "main")
            .unwrap_err();
        assert!(
            matches!(e, Error::Input(_)) && e.to_string().contains("it has mirror"),
            "{e}"
        );

        let pushed = repo.push("mirror", "main").await.unwrap();
        assert!(remote_has(&bare, "main", &pushed.commit));
    }
}
