//! Checks for sandbox providers, run in one real sandbox of a throwaway git
//! repository. Bind-mount providers get that repository as their worktree;
//! isolated ones are checked in their own `worktree-path` (the checks need
//! no repository inside). Every check sets up its own files with `exec`, so
//! one broken file operation fails one check, not the rest.
//!
//! This module keeps the list and order of the checks; each group of
//! checks is a module of its own, and `support` holds what they share.

use std::path::PathBuf;

use super::Report;
use crate::plugin::PluginKind;
use crate::plugin::sandbox::{Sandbox, SandboxKind, SandboxProvider, SandboxSpec};

type Checked = Result<String, String>;

/// Fail the check with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

mod confinement;
mod describe;
mod exec;
mod files;
mod lifecycle;
mod support;

use confinement::{cwd_inside, cwd_outside, upload_traversal};
use describe::{describe, http_origins, http_refusal};
use exec::{
    exec_argv, exec_env, exec_output, exec_streams, exec_timeout, stdin_empty, stdin_intact,
};
use files::{copy_in, copy_round_trip, exists, mkdir, read_dir, remove, stat, write_read};
use lifecycle::{attach, close, create, find, snapshot};
use support::{HostDirs, declared_env, unique};

/// What the checks share.
struct Ctx {
    sandbox: Sandbox,
    kind: SandboxKind,
    /// The worktree the kit made on the host (what a bind-mount provider mounts).
    host_worktree: PathBuf,
    /// A host directory outside the sandbox holding `OUTSIDE_FILE`, which no
    /// command or upload may reach.
    outside: PathBuf,
    token: String,
    /// Scratch space on the host for copies in and out.
    host_tmp: PathBuf,
}

const OUTSIDE_FILE: &str = "conformance-outside.txt";

/// Run every sandbox check against a fresh sandbox of `provider`.
pub async fn run(provider: &SandboxProvider, config: &[(String, String)]) -> Report {
    let mut report = Report {
        plugin: provider.name().to_string(),
        kind: PluginKind::Sandbox,
        checks: vec![],
    };
    report.push("describe", describe(provider));
    let caps = provider.capabilities();
    let asks_http = !caps.http.is_empty() || !caps.http_options.is_empty();
    const NO_HTTP: &str = "the provider asks for no outgoing HTTP";
    match asks_http {
        true => report.push("http-origins", http_origins(provider, config)),
        false => report.skip("http-origins", NO_HTTP),
    }
    let dirs = match HostDirs::new() {
        Ok(dirs) => dirs,
        Err(e) => {
            report.push("create", Err(format!("cannot prepare the host side: {e}")));
            return report;
        }
    };
    let token = format!("conformance-{}", unique());
    if let Err(e) = std::fs::write(dirs.outside.path().join(OUTSIDE_FILE), &token) {
        report.push("create", Err(format!("cannot prepare the host side: {e}")));
        return report;
    }
    let worktree = dirs.repo.path().to_path_buf();
    let spec = SandboxSpec {
        run_id: format!("conformance-{}", unique()),
        name: "conformance".into(),
        git_dir: worktree.join(".git"),
        worktree: worktree.clone(),
        branch: "main".into(),
        env: declared_env(provider),
        config: config.to_vec(),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    let sandbox = match provider.create(&spec).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            report.push("create", Err(e.to_string()));
            return report;
        }
    };
    let mut ctx = Ctx {
        sandbox,
        kind: provider.info().kind,
        host_worktree: worktree,
        outside: dirs.outside.path().to_path_buf(),
        token,
        host_tmp: dirs.tmp.path().to_path_buf(),
    };
    report.push("create", create(&ctx));
    report.push("exec-output-and-exit-code", exec_output(&mut ctx).await);
    report.push("exec-argv-not-shell", exec_argv(&mut ctx).await);
    report.push("exec-env", exec_env(&mut ctx).await);
    // A provider may refuse `attach`: the host then runs hooks one after
    // another (ADR 0006), so that is a skip, not a failure.
    let attach_refused = match ctx.sandbox.lane().await {
        Ok(mut lane) => {
            let _ = lane.close().await;
            None
        }
        Err(e) => Some(e.to_string()),
    };
    match (&attach_refused, ctx.kind) {
        (Some(e), SandboxKind::Isolated) => report.skip(
            "exec-streams-lines",
            &format!("only a lane can create the marker inside an isolated sandbox, and attach was refused: {e}"),
        ),
        _ => report.push("exec-streams-lines", exec_streams(&mut ctx).await),
    }
    report.push("stdin-intact", stdin_intact(&mut ctx).await);
    report.push("stdin-empty", stdin_empty(&mut ctx).await);
    report.push("exec-timeout", exec_timeout(&mut ctx).await);
    report.push("cwd-inside", cwd_inside(&mut ctx).await);
    report.push("cwd-outside-refused", cwd_outside(&mut ctx).await);
    report.push("upload-traversal-refused", upload_traversal(&mut ctx).await);
    report.push("mkdir", mkdir(&mut ctx).await);
    report.push("write-read-file", write_read(&mut ctx).await);
    report.push("stat", stat(&mut ctx).await);
    report.push("read-dir", read_dir(&mut ctx).await);
    report.push("exists", exists(&mut ctx).await);
    report.push("remove", remove(&mut ctx).await);
    report.push("copy-file-round-trip", copy_round_trip(&mut ctx).await);
    match ctx.kind {
        SandboxKind::Isolated => report.push("copy-in", copy_in(&mut ctx).await),
        SandboxKind::BindMount => report.skip(
            "copy-in",
            "copy-in is for isolated providers; a bind-mount sandbox sees the host worktree itself",
        ),
    }
    match &attach_refused {
        Some(e) => report.skip(
            "attach",
            &format!("attach was refused ({e}); the host then runs hooks and shell expressions one after another"),
        ),
        None => report.push("attach", attach(&mut ctx).await),
    }
    let found = find(provider, &spec, true).await;
    report.push("close-idempotent", close(&mut ctx).await);
    match found {
        None => report.skip(
            "find",
            "the provider speaks a contract before 0.3, which has no find",
        ),
        Some(Err(e)) => report.push("find", Err(e)),
        Some(Ok(note)) => report.push(
            "find",
            find(provider, &spec, false)
                .await
                .unwrap_or(Ok(String::new()))
                .map(|_| note),
        ),
    }
    match provider.info().snapshots {
        true => report.push("snapshot-keep-and-start", snapshot(provider, &spec).await),
        false => report.skip("snapshot-keep-and-start", "the provider keeps no snapshots"),
    }
    match asks_http {
        true => report.push("http-refusal-survived", http_refusal(provider, &spec).await),
        false => report.skip("http-refusal-survived", NO_HTTP),
    }
    report
}
