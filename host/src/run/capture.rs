//! Session capture and resume, through the agent provider's session helpers.
//! Capture: after an iteration, the agent's session file is copied out of the
//! sandbox to where the agent keeps it on the host, with its working
//! directory rewritten to the host repository root, so the agent's own
//! resume works there. Resume: the reverse, before iteration 1.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::sync::q;
use crate::error::{Error, Result};
use crate::plugin::agent::AgentProvider;
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox};

/// The host side of session files: whose home, which repository.
#[derive(Clone, Debug)]
pub struct HostSessions {
    pub home: PathBuf,
    pub repo_root: PathBuf,
}

impl HostSessions {
    /// The user's home from `HOME`; None when it is unset.
    pub fn from_env(repo_root: &Path) -> Option<Self> {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
        Some(Self {
            home: PathBuf::from(home),
            // No trailing `/`: agents key sessions by the plain path.
            repo_root: repo_root.components().collect(),
        })
    }
}

fn utf8(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| Error::input(format!("non-UTF-8 path {}", path.display())))
}

/// The sandbox's worktree as the agent's working directory: without a
/// trailing `/` (a bind-mount sandbox under head gets the repository root
/// with one), as agents key sessions by the plain path.
fn agent_cwd(sandbox: &Sandbox) -> String {
    match sandbox.worktree_path().trim_end_matches('/') {
        "" => "/".into(),
        path => path.into(),
    }
}

/// The sandbox user's home, as its commands see it.
pub async fn sandbox_home(sandbox: &mut Sandbox) -> Result<String> {
    let out = sandbox
        .exec(
            ExecRequest {
                command: Command::Shell("printf '%s' \"$HOME\"".into()),
                cwd: None,
                env: vec![],
                stdin: None,
                sudo: false,
                timeout_ms: Some(10_000),
            },
            |_| {},
        )
        .await?;
    let home = out.stdout.trim_end_matches('\n').to_string();
    if out.exit_code != 0 || home.is_empty() {
        return Err(Error::Plugin(format!(
            "cannot find the sandbox user's home (HOME is {})",
            if home.is_empty() {
                "unset"
            } else {
                "unreadable"
            }
        )));
    }
    Ok(home)
}

/// Copy the session file of `session_id` out of the sandbox. Returns the
/// host path and the file's content; Ok(None) when the agent keeps no
/// session files.
pub async fn capture(
    agent: &mut AgentProvider,
    sandbox: &mut Sandbox,
    sandbox_home: &str,
    host: &HostSessions,
    session_id: &str,
) -> Result<Option<(PathBuf, String)>> {
    let sandbox_cwd = agent_cwd(sandbox);
    let Some(inside) = agent
        .session_file_path(sandbox_home, &sandbox_cwd, session_id)
        .await?
    else {
        return Ok(None);
    };
    let root = utf8(&host.repo_root)?;
    let Some(outside) = agent
        .session_file_path(utf8(&host.home)?, root, session_id)
        .await?
    else {
        return Ok(None);
    };
    let outside = PathBuf::from(outside);
    let dir = outside
        .parent()
        .ok_or_else(|| Error::Other(anyhow::anyhow!("bad session path {}", outside.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::Other(anyhow::anyhow!("create {}: {e}", dir.display())))?;
    // Copied beside its destination, rewritten, then renamed into place: a
    // failure never leaves a half-written session where the agent looks.
    let staged = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::Other(anyhow::anyhow!("create a file in {}: {e}", dir.display())))?;
    // Where the agent names it, in one round trip; else look for it.
    let inside = match sandbox.copy_file_out(&inside, staged.path()).await {
        Ok(()) => inside,
        Err(_) => {
            let found = locate(sandbox, &inside, sandbox_home, session_id).await?;
            sandbox.copy_file_out(&found, staged.path()).await?;
            found
        }
    };
    let content = std::fs::read_to_string(staged.path())
        .map_err(|e| Error::Other(anyhow::anyhow!("read the session {inside}: {e}")))?;
    let content = agent
        .rewrite_session_cwd(&crate::secrets::mask(&content), &sandbox_cwd, root)
        .await?;
    // Private, as the agent CLIs keep them: a session holds the whole
    // conversation, and a provider's copy-out may have made the file anew.
    std::fs::write(staged.path(), &content)
        .and_then(|_| {
            std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o600))
        })
        .and_then(|_| staged.persist(&outside).map_err(|e| e.error))
        .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", outside.display())))?;
    Ok(Some((outside, content)))
}

/// The session file as the agent wrote it, when it is not where the agent
/// provider says. Some agents stamp the name with
/// a creation time nobody can derive from the id (codex, pi): where
/// `expected` is missing, the file ending in `<id>.jsonl` is looked for
/// within three directories above it, never above the sandbox home.
async fn locate(
    sandbox: &mut Sandbox,
    expected: &str,
    home: &str,
    session_id: &str,
) -> Result<String> {
    let mut root = Path::new(expected);
    for _ in 0..4 {
        match root.parent() {
            Some(parent) if parent.starts_with(home) && parent != Path::new(home) => root = parent,
            _ => break,
        }
    }
    let script = format!(
        "if [ -f {e} ]; then printf '%s' {e}; else find {r} -maxdepth 4 -type f -name {n} 2>/dev/null | head -n 1; fi",
        e = q(expected),
        r = q(&root.display().to_string()),
        n = q(&format!("*{session_id}.jsonl")),
    );
    let out = sandbox
        .exec(
            ExecRequest {
                command: Command::Shell(script),
                cwd: None,
                env: vec![],
                stdin: None,
                sudo: false,
                timeout_ms: Some(30_000),
            },
            |_| {},
        )
        .await?;
    let found = out.stdout.trim_end_matches('\n');
    if found.is_empty() {
        return Err(Error::Plugin(format!(
            "the agent left no session file for {session_id} (looked for {expected})"
        )));
    }
    Ok(found.to_string())
}

/// The host session file a resume needs, validated before anything is
/// created: it must exist where the agent keeps it for this repository.
pub async fn resume_source(
    agent: &mut AgentProvider,
    host: &HostSessions,
    session_id: &str,
) -> Result<PathBuf> {
    if !agent.info().session_files {
        return Err(Error::input(format!(
            "agent provider `{}` keeps no session files, so it cannot resume a session",
            agent.name()
        )));
    }
    let path = agent
        .session_file_path(utf8(&host.home)?, utf8(&host.repo_root)?, session_id)
        .await?
        .ok_or_else(|| Error::input(format!("`{session_id}` is not a valid session id")))?;
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(Error::input(format!(
            "no session `{session_id}` to resume: {} does not exist (sessions are captured per repository; check the id and the repository)",
            path.display()
        )));
    }
    Ok(path)
}

/// Put a host session file into the sandbox where the agent will look for
/// it, its working directory rewritten to the sandbox's.
pub async fn transfer_in(
    agent: &mut AgentProvider,
    sandbox: &mut Sandbox,
    sandbox_home: &str,
    host: &HostSessions,
    source: &Path,
    session_id: &str,
) -> Result<()> {
    let sandbox_cwd = agent_cwd(sandbox);
    let inside = agent
        .session_file_path(sandbox_home, &sandbox_cwd, session_id)
        .await?
        .ok_or_else(|| Error::input(format!("`{session_id}` is not a valid session id")))?;
    let content = std::fs::read_to_string(source)
        .map_err(|e| Error::input(format!("cannot read {}: {e}", source.display())))?;
    let content = agent
        .rewrite_session_cwd(&content, utf8(&host.repo_root)?, &sandbox_cwd)
        .await?;
    let staged = tempfile::NamedTempFile::new()
        .map_err(|e| Error::Other(anyhow::anyhow!("create a temporary file: {e}")))?;
    std::fs::write(staged.path(), content)
        .map_err(|e| Error::Other(anyhow::anyhow!("write a temporary file: {e}")))?;
    sandbox.copy_file_in(staged.path(), &inside).await
}
