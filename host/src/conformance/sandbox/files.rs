//! Seed 002: the file operations, and copies between host and sandbox.

use super::support::{binary, exec, setup, sh_exists, shell};
use super::{Checked, Ctx};

pub(super) async fn mkdir(ctx: &mut Ctx) -> Checked {
    ensure!(
        ctx.sandbox.mkdir("mk/a/b", false).await.is_err(),
        "mkdir mk/a/b without recursive must fail when mk/a is missing"
    );
    ensure!(
        !sh_exists(ctx, "mk").await?,
        "mkdir mk/a/b without recursive failed but created mk: refuse before any change"
    );
    ctx.sandbox
        .mkdir("mk", false)
        .await
        .map_err(|e| format!("mkdir mk: {e}"))?;
    ctx.sandbox
        .mkdir("mk/a/b", true)
        .await
        .map_err(|e| format!("mkdir mk/a/b recursive: {e}"))?;
    ensure!(
        exec(ctx, shell("[ -d mk/a/b ]")).await?.exit_code == 0,
        "mkdir mk/a/b recursive succeeded but mk/a/b is not a directory in the sandbox"
    );
    ctx.sandbox
        .mkdir("mk/a/b", true)
        .await
        .map_err(|e| format!("mkdir recursive on an existing directory must succeed: {e}"))?;
    Ok(String::new())
}

pub(super) async fn write_read(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p rw").await?;
    let data = binary(1024);
    ctx.sandbox
        .write_file("rw/bytes.bin", &data)
        .await
        .map_err(|e| format!("write-file rw/bytes.bin: {e}"))?;
    let size = exec(ctx, shell("wc -c < rw/bytes.bin | tr -d ' '")).await?;
    ensure!(
        size.stdout.trim() == "1024",
        "wrote 1024 bytes, a command in the sandbox sees {:?}",
        size.stdout.trim()
    );
    let back = ctx
        .sandbox
        .read_file("rw/bytes.bin")
        .await
        .map_err(|e| format!("read-file rw/bytes.bin: {e}"))?;
    ensure!(
        back == data,
        "read-file returned other bytes than were written ({} bytes)",
        back.len()
    );
    let wt = ctx.sandbox.worktree_path().to_string();
    let abs = ctx
        .sandbox
        .read_file(&format!("{wt}/rw/bytes.bin"))
        .await
        .map_err(|e| format!("read-file by absolute path: {e}"))?;
    ensure!(
        abs == data,
        "read-file by absolute path returned other bytes"
    );
    ctx.sandbox
        .write_file("rw/bytes.bin", b"short")
        .await
        .map_err(|e| format!("overwriting: {e}"))?;
    let back = ctx
        .sandbox
        .read_file("rw/bytes.bin")
        .await
        .map_err(|e| e.to_string())?;
    ensure!(
        back == b"short",
        "overwriting with 5 bytes must truncate, read back {} bytes",
        back.len()
    );
    ensure!(
        ctx.sandbox.read_file("rw/missing").await.is_err(),
        "read-file of a missing file must fail"
    );
    Ok(String::new())
}

/// Seed 002: stat never makes fields up. A field is either absent or true.
pub(super) async fn stat(ctx: &mut Ctx) -> Checked {
    setup(
        ctx,
        "mkdir -p st/dir && printf 0123456789 > st/file && ln -s file st/link && : > st/old && touch -t 200001020304 st/old",
    )
    .await?;
    let s = &mut ctx.sandbox;
    let file = s
        .stat("st/file")
        .await
        .map_err(|e| format!("stat st/file: {e}"))?;
    ensure!(
        file.is_file && !file.is_directory,
        "a regular file: is-file {} is-directory {}",
        file.is_file,
        file.is_directory
    );
    ensure!(
        file.size.is_none_or(|n| n == 10),
        "a 10-byte file reported size {:?}: report the real size or none",
        file.size
    );
    ensure!(
        file.is_symlink != Some(true),
        "a regular file reported is-symlink true"
    );
    let dir = s
        .stat("st/dir")
        .await
        .map_err(|e| format!("stat st/dir: {e}"))?;
    ensure!(
        dir.is_directory && !dir.is_file,
        "a directory: is-file {} is-directory {}",
        dir.is_file,
        dir.is_directory
    );
    let link = s
        .stat("st/link")
        .await
        .map_err(|e| format!("stat st/link: {e}"))?;
    ensure!(
        link.is_symlink != Some(false),
        "a symlink reported is-symlink false: report it, or leave it absent when unknown"
    );
    let old = s
        .stat("st/old")
        .await
        .map_err(|e| format!("stat st/old: {e}"))?;
    // 2000-01-02 03:04 in any time zone.
    let (lo, hi) = (946_598_400_000u64, 946_857_600_000u64);
    ensure!(
        old.mtime_ms.is_none_or(|t| (lo..=hi).contains(&t)),
        "a file touched to 2000-01-02 reported mtime-ms {:?}: report the real time or none, never a made-up one",
        old.mtime_ms
    );
    ensure!(
        s.stat("st/missing").await.is_err(),
        "stat of a missing path must fail, not describe something"
    );
    let absent: Vec<&str> = [
        ("size", file.size.is_none()),
        ("mtime", old.mtime_ms.is_none()),
        ("is-symlink", link.is_symlink.is_none()),
    ]
    .iter()
    .filter(|(_, none)| *none)
    .map(|(name, _)| *name)
    .collect();
    Ok(if absent.is_empty() {
        String::new()
    } else {
        format!("leaves {} absent", absent.join(", "))
    })
}

pub(super) async fn read_dir(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p rd/sub && : > rd/a && : > 'rd/b c'").await?;
    let mut names = ctx
        .sandbox
        .read_dir("rd")
        .await
        .map_err(|e| format!("read-dir rd: {e}"))?;
    names.sort();
    ensure!(
        names == ["a", "b c", "sub"],
        "read-dir rd should list the names [\"a\", \"b c\", \"sub\"] (names, not paths; no . or ..), got {names:?}"
    );
    ensure!(
        ctx.sandbox.read_dir("rd/missing").await.is_err(),
        "read-dir of a missing directory must fail"
    );
    Ok(String::new())
}

pub(super) async fn exists(ctx: &mut Ctx) -> Checked {
    setup(ctx, "mkdir -p ex && : > ex/f").await?;
    for (path, want) in [("ex/f", true), ("ex", true), ("ex/missing", false)] {
        let got =
            ctx.sandbox.exists(path).await.map_err(|e| {
                format!("exists {path}: {e} (a missing path is false, not an error)")
            })?;
        ensure!(got == want, "exists {path} should be {want}, got {got}");
    }
    Ok(String::new())
}

/// Seed 002: `recursive` and `force` are honoured exactly, and a refused
/// removal changes nothing.
pub(super) async fn remove(ctx: &mut Ctx) -> Checked {
    setup(
        ctx,
        "mkdir -p rm/full/inner rm/target && : > rm/full/inner/f && : > rm/file && : > rm/target/keep && ln -s target rm/link",
    )
    .await?;
    ensure!(
        ctx.sandbox
            .remove("rm/missing", false, false)
            .await
            .is_err(),
        "removing a missing path without force must fail"
    );
    ctx.sandbox
        .remove("rm/missing", false, true)
        .await
        .map_err(|e| format!("removing a missing path with force must succeed: {e}"))?;
    for force in [false, true] {
        ensure!(
            ctx.sandbox.remove("rm/full", false, force).await.is_err(),
            "removing a non-empty directory without recursive (force {force}) must fail"
        );
        ensure!(
            sh_exists(ctx, "rm/full/inner/f").await?,
            "a refused non-recursive removal (force {force}) deleted rm/full/inner/f: refuse before removing anything"
        );
    }
    ctx.sandbox
        .remove("rm/file", false, false)
        .await
        .map_err(|e| format!("removing a file: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/file").await?, "rm/file is still there");
    ctx.sandbox
        .remove("rm/link", true, false)
        .await
        .map_err(|e| format!("removing a symlink to a directory: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/link").await?, "rm/link is still there");
    ensure!(
        sh_exists(ctx, "rm/target/keep").await?,
        "removing the symlink rm/link recursively deleted what it points to: remove the link itself"
    );
    ctx.sandbox
        .remove("rm/full", true, false)
        .await
        .map_err(|e| format!("removing a directory recursively: {e}"))?;
    ensure!(!sh_exists(ctx, "rm/full").await?, "rm/full is still there");
    Ok(String::new())
}

pub(super) async fn copy_round_trip(ctx: &mut Ctx) -> Checked {
    let data = binary(64 * 1024);
    let src = ctx.host_tmp.join("in.bin");
    std::fs::write(&src, &data).map_err(|e| e.to_string())?;
    ctx.sandbox
        .copy_file_in(&src, "cp/deep/in.bin")
        .await
        .map_err(|e| format!("copy-file-in (creating parents): {e}"))?;
    let inside = ctx
        .sandbox
        .read_file("cp/deep/in.bin")
        .await
        .map_err(|e| format!("read-file after copy-file-in: {e}"))?;
    ensure!(inside == data, "copy-file-in changed the bytes");
    let dest = ctx.host_tmp.join("out/nested/out.bin");
    ctx.sandbox
        .copy_file_out("cp/deep/in.bin", &dest)
        .await
        .map_err(|e| format!("copy-file-out (creating parents): {e}"))?;
    let out = std::fs::read(&dest).map_err(|e| format!("reading {}: {e}", dest.display()))?;
    ensure!(out == data, "the round trip changed the bytes");
    Ok(format!("{} bytes", data.len()))
}

pub(super) async fn copy_in(ctx: &mut Ctx) -> Checked {
    let tree = ctx.host_tmp.join("tree");
    std::fs::create_dir_all(tree.join("sub")).map_err(|e| e.to_string())?;
    std::fs::write(tree.join("a.txt"), "a").map_err(|e| e.to_string())?;
    std::fs::write(tree.join("sub/b.bin"), binary(300)).map_err(|e| e.to_string())?;
    ctx.sandbox
        .copy_in(&tree, "ci/tree")
        .await
        .map_err(|e| format!("copy-in of a directory: {e}"))?;
    let a = ctx.sandbox.read_file("ci/tree/a.txt").await;
    let b = ctx.sandbox.read_file("ci/tree/sub/b.bin").await;
    ensure!(
        a.as_deref().ok() == Some(b"a".as_slice()) && b.ok() == Some(binary(300)),
        "copy-in of a directory must put its contents in ci/tree itself (ci/tree/a.txt, ci/tree/sub/b.bin)"
    );
    ensure!(
        !sh_exists(ctx, "ci/tree/tree").await?,
        "copy-in nested the directory as ci/tree/tree"
    );
    ctx.sandbox
        .copy_in(&tree.join("a.txt"), "ci/one.txt")
        .await
        .map_err(|e| format!("copy-in of a file: {e}"))?;
    let one = ctx
        .sandbox
        .read_file("ci/one.txt")
        .await
        .map_err(|e| e.to_string())?;
    ensure!(one == b"a", "copy-in of a file changed its bytes");
    Ok(String::new())
}
