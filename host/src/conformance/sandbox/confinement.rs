//! Seed 001: commands and uploads stay inside the sandbox.

use super::support::{escape_path, exec, setup, shell};
use super::{Checked, Ctx, OUTSIDE_FILE};
use crate::plugin::sandbox::SandboxKind;

pub(super) async fn cwd_inside(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p cwd-sub").await?;
    let wt = ctx.sandbox.worktree_path().to_string();
    for cwd in ["cwd-sub".to_string(), format!("{wt}/cwd-sub")] {
        let mut req = shell("pwd");
        req.cwd = Some(cwd.clone());
        let out = exec(ctx, req).await?;
        ensure!(
            out.exit_code == 0 && out.stdout.trim_end().ends_with("/cwd-sub"),
            "cwd {cwd:?} should run in the worktree's cwd-sub, `pwd` said {:?} (exit {}, stderr {:?})",
            out.stdout.trim(),
            out.exit_code,
            out.stderr.trim()
        );
    }
    let out = exec(ctx, shell("pwd")).await?;
    ensure!(
        out.stdout.trim_end() == wt,
        "without a cwd the command must run in worktree-path {wt}, `pwd` said {:?}",
        out.stdout.trim()
    );
    Ok(String::new())
}

/// Seed 001: a cwd outside the sandbox is refused. Passing means the
/// command never ran in the kit's host directory outside the sandbox.
pub(super) async fn cwd_outside(ctx: &mut Ctx) -> Checked {
    let outside = ctx.outside.display().to_string();
    let mut refused = 0;
    for cwd in [outside.clone(), escape_path(ctx, "")] {
        let mut req = shell(&format!("cat {OUTSIDE_FILE}"));
        req.cwd = Some(cwd.clone());
        match ctx.sandbox.exec(req, |_| {}).await {
            Err(_) => refused += 1,
            Ok(out) => ensure!(
                !out.stdout.contains(&ctx.token),
                "cwd {cwd:?} ran the command in the host directory {outside}, outside the sandbox: refuse a cwd outside the sandbox (seed 001)"
            ),
        }
    }
    Ok(if refused == 2 {
        String::new()
    } else {
        "not refused, but the host directory was not reachable".into()
    })
}

/// Seed 001: uploads to a `../` path that climbs out of the sandbox are
/// refused, and nothing lands on the host.
pub(super) async fn upload_traversal(ctx: &mut Ctx) -> Checked {
    let src = ctx.host_tmp.join("upload.txt");
    std::fs::write(&src, "escaped").map_err(|e| e.to_string())?;
    let src_dir = ctx.host_tmp.join("upload-dir");
    std::fs::create_dir_all(&src_dir).map_err(|e| e.to_string())?;
    std::fs::write(src_dir.join("f.txt"), "escaped").map_err(|e| e.to_string())?;
    let mut problems = vec![];
    let mut attempts: Vec<(&str, &str)> = vec![
        ("write-file", "escaped-write.txt"),
        ("copy-file-in", "escaped-copy.txt"),
    ];
    if ctx.kind == SandboxKind::Isolated {
        attempts.push(("copy-in", "escaped-dir"));
    }
    for (op, leaf) in attempts {
        let target = escape_path(ctx, leaf);
        let r = match op {
            "write-file" => ctx.sandbox.write_file(&target, b"escaped").await,
            "copy-file-in" => ctx.sandbox.copy_file_in(&src, &target).await,
            _ => ctx.sandbox.copy_in(&src_dir, &target).await,
        };
        if ctx.outside.join(leaf).exists() {
            problems.push(format!(
                "{op} to {target:?} wrote {} on the host",
                ctx.outside.join(leaf).display()
            ));
        } else if r.is_ok() {
            problems.push(format!(
                "{op} accepted {target:?}, a `../` path that climbs out of the sandbox"
            ));
        }
    }
    ensure!(
        problems.is_empty(),
        "{}; refuse such paths (seed 001)",
        problems.join("; ")
    );
    Ok(String::new())
}
