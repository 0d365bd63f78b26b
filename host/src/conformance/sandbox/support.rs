//! What the checks share: the host side, and commands run in the sandbox.

use std::path::Path;
use std::process::Command as HostCommand;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Ctx;
use crate::plugin::sandbox::{Command, ExecOutput, ExecRequest, SandboxProvider};

/// The sandbox's env: the keys the provider declares (its credentials),
/// read from the process environment as a run reads them (ADR 0002), and a
/// marker the `exec-env` check looks for.
pub(super) fn declared_env(provider: &SandboxProvider) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = provider
        .capabilities()
        .env_keys
        .into_iter()
        .filter_map(|key| std::env::var(&key).ok().map(|value| (key, value)))
        .collect();
    env.push(("SANDDUNE_CONFORMANCE_CREATE".into(), "from-create".into()));
    env
}

/// The host side: a throwaway repository with one commit, a directory
/// outside the sandbox, and scratch space. Removed on drop.
pub(super) struct HostDirs {
    pub(super) repo: tempfile::TempDir,
    pub(super) outside: tempfile::TempDir,
    pub(super) tmp: tempfile::TempDir,
}

impl HostDirs {
    pub(super) fn new() -> Result<Self, String> {
        let dir = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| format!("cannot create a temporary directory: {e}"))
        };
        let dirs = HostDirs {
            repo: dir("sanddune-conformance-repo-")?,
            outside: dir("sanddune-conformance-outside-")?,
            tmp: dir("sanddune-conformance-tmp-")?,
        };
        let repo = dirs.repo.path();
        std::fs::write(repo.join("README.md"), "conformance\n").map_err(|e| e.to_string())?;
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["add", "README.md"],
            &[
                "-c",
                "user.name=sanddune",
                "-c",
                "user.email=conformance@sanddune.invalid",
                "commit",
                "-q",
                "-m",
                "conformance",
            ],
        ] {
            let out = HostCommand::new("git")
                .arg("-C")
                .arg(repo)
                .args(args)
                .output()
                .map_err(|e| format!("cannot run git (is it installed?): {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "git {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
        Ok(dirs)
    }
}

/// Unique enough for names in one machine's temp dir.
pub(super) fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}", std::process::id())
}

pub(super) fn request(command: Command) -> ExecRequest {
    ExecRequest {
        command,
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(60_000),
    }
}

pub(super) fn shell(script: &str) -> ExecRequest {
    request(Command::Shell(script.into()))
}

/// Run `request`, turning a provider error into the check's failure.
pub(super) async fn exec(ctx: &mut Ctx, request: ExecRequest) -> Result<ExecOutput, String> {
    ctx.sandbox
        .exec(request, |_| {})
        .await
        .map_err(|e| format!("exec failed: {e}"))
}

/// Run a setup script that must succeed.
pub(super) async fn setup(ctx: &mut Ctx, script: &str) -> Result<(), String> {
    let out = exec(ctx, shell(script)).await?;
    ensure!(
        out.exit_code == 0,
        "setup `{script}` exited {}: {}",
        out.exit_code,
        out.stderr.trim()
    );
    Ok(())
}

/// Whether `path` (relative to the worktree) exists, asked of a command in
/// the sandbox rather than of the file operations under test.
pub(super) async fn sh_exists(ctx: &mut Ctx, path: &str) -> Result<bool, String> {
    let out = exec(ctx, shell(&format!("[ -e {} ] || [ -L {0} ]", q(path)))).await?;
    Ok(out.exit_code == 0)
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A relative path from the sandbox's worktree up past `/` and down into
/// the host's `outside` directory: where a `../` escape would land.
pub(super) fn escape_path(ctx: &Ctx, leaf: &str) -> String {
    let depth = Path::new(ctx.sandbox.worktree_path()).components().count();
    format!(
        "{}{}/{leaf}",
        "../".repeat(depth + 1),
        ctx.outside.display().to_string().trim_start_matches('/')
    )
}

/// Bytes with every value, a NUL, invalid UTF-8 and no trailing newline.
pub(super) fn binary(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 256) as u8).collect()
}
