//! Repository sync for isolated sandbox providers, driven by the host over
//! the provider's generic operations (exec, copy-file-in, copy-file-out):
//! a pack of the branch's tip goes in (a shallow repository, so its size
//! follows the tree, not the history; `worktree::pack`), bundles of new
//! commits come out and are fast-forwarded into the host worktree, and a
//! reused sandbox gets only what the branch gained since. Providers never
//! implement sync.

use crate::error::{Error, Result};
use crate::plugin::sandbox::{Command, ExecOutput, ExecRequest, Sandbox};
use crate::worktree::{History, Worktree, git};

/// A shell script in the sandbox's worktree; a non-zero exit is an error.
pub(super) async fn sandbox_sh(sandbox: &mut Sandbox, script: String) -> Result<ExecOutput> {
    let request = ExecRequest {
        command: Command::Shell(script.clone()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(600_000),
    };
    let out = sandbox.exec(request, |_| {}).await?;
    if out.exit_code != 0 {
        return Err(Error::Plugin(format!(
            "in sandbox `{}`, `{script}` exited {}: {}",
            sandbox.provider_name(),
            out.exit_code,
            out.stderr.trim()
        )));
    }
    Ok(out)
}

/// Quote for `sh`.
pub(super) fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The host's own sandbox option, for isolated providers only: how much of
/// the branch's history sync in sends (`history=N|full`, default 1).
pub const HISTORY_OPTION: &str = "history";

/// Split [`HISTORY_OPTION`] from a sandbox provider's options: the host
/// reads it, the provider never sees it. Refused for a bind-mount provider,
/// whose sandbox has the repository itself.
pub fn take_history(
    provider: &str,
    isolated: bool,
    config: &[(String, String)],
) -> Result<(History, Vec<(String, String)>)> {
    let mut history = History::default();
    let mut rest = Vec::with_capacity(config.len());
    for (key, value) in config {
        if key != HISTORY_OPTION {
            rest.push((key.clone(), value.clone()));
            continue;
        }
        if !isolated {
            return Err(Error::input(format!(
                "--sandbox-opt history={value}: `{provider}` mounts the repository itself, with all its history; `history` is for isolated sandbox providers"
            )));
        }
        history = value.parse().map_err(Error::input)?;
    }
    Ok((history, rest))
}

/// Put the worktree's branch into an empty sandbox at its `worktree-path`:
/// a pack of its tip with `history` of it and the pack's index, made on the
/// host and laid in the sandbox's `.git/objects/pack/` as they are, the
/// cut-off commits marked shallow, the branch checked out; one exec in the
/// sandbox. Returns the bytes sent.
pub async fn sync_in(sandbox: &mut Sandbox, worktree: &Worktree, history: History) -> Result<u64> {
    let tip = git(&worktree.path, &["rev-parse", "HEAD"])?;
    let tmp = worktree.sync_tempdir()?;
    let pack = worktree.pack_branch(&tip, history, tmp.path())?;
    let wt = sandbox.worktree_path().to_string();
    // The index before the pack: git reads a pack through its index.
    for file in [&pack.index, &pack.pack] {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a pack's name is its hash");
        sandbox
            .copy_file_in(file, &format!("{wt}/.git/objects/pack/{name}"))
            .await?;
    }
    let shallow = if pack.shallow.is_empty() {
        String::new()
    } else {
        format!(
            " && printf '%s\\n' {} >>.git/shallow",
            pack.shallow.join(" ")
        )
    };
    // `git init` keeps the objects already there. A sandbox started from
    // a snapshot (ADR 0038) has the checkout its set-up ran in: `-f` puts
    // the tip's files over it, and what the set-up added (untracked,
    // ignored) stays.
    sandbox_sh(
        sandbox,
        format!(
            "git init -q {}{shallow} && git checkout -q -f -B {} {tip}",
            q(&wt),
            q(&worktree.branch)
        ),
    )
    .await?;
    Ok(pack.bytes)
}

/// Bring a sandbox that holds `have` up to the worktree's branch when the
/// branch moved on the host since (a reused sandbox): a thin pack of what
/// is new, fast-forwarded. Returns the tip and the bytes sent (none when
/// the sandbox is level).
pub async fn sync_in_since(
    sandbox: &mut Sandbox,
    worktree: &Worktree,
    have: &str,
) -> Result<(String, u64)> {
    let tip = git(&worktree.path, &["rev-parse", "HEAD"])?;
    if tip == have {
        return Ok((tip, 0));
    }
    let tmp = worktree.sync_tempdir()?;
    let file = tmp.path().join("since.pack");
    let bytes = worktree.pack_since(&tip, have, &file)?;
    let inside = format!("{}/.git/sanddune-in.pack", sandbox.worktree_path());
    sandbox.copy_file_in(&file, &inside).await?;
    sandbox_sh(
        sandbox,
        format!("{INDEX_PACK} && git merge -q --ff-only {tip}"),
    )
    .await?;
    Ok((tip, bytes))
}

/// Store the pack copied in as `.git/sanddune-in.pack` (completing a thin
/// one from the sandbox's objects), then remove the copy.
const INDEX_PACK: &str = "git index-pack --stdin --fix-thin <.git/sanddune-in.pack >/dev/null && rm -f .git/sanddune-in.pack";

/// Bring commits made in the sandbox since `synced` into the host worktree.
/// Returns the sandbox's HEAD, the next `synced`, and the bytes brought out.
pub async fn sync_out(
    sandbox: &mut Sandbox,
    worktree: &Worktree,
    synced: &str,
) -> Result<(String, u64)> {
    // One exec reads HEAD and bundles what is new (an exec is about
    // 100 ms on a cluster); nothing is new when HEAD is where it was.
    let out = sandbox_sh(
        sandbox,
        format!(
            "head=$(git rev-parse HEAD) && echo \"$head\" && \
             {{ [ \"$head\" = {s} ] || git bundle create -q .git/sanddune-out.bundle {s}..HEAD; }}",
            s = q(synced)
        ),
    )
    .await?;
    let head = out
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    if head == synced {
        return Ok((head, 0));
    }
    let tmp = worktree.sync_tempdir()?;
    let bundle = tmp.path().join("out.bundle");
    let inside = format!("{}/.git/sanddune-out.bundle", sandbox.worktree_path());
    sandbox.copy_file_out(&inside, &bundle).await?;
    let bytes = std::fs::metadata(&bundle).map(|m| m.len()).unwrap_or(0);
    if !worktree.fast_forward_from_bundle(&bundle, &head)? {
        return Err(Error::Agent(format!(
            "the agent rewrote commits that were already synced; its work stays in sandbox `{}`",
            sandbox.provider_name()
        )));
    }
    Ok((head, bytes))
}
