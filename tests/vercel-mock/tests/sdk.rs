//! The mock speaks the real protocol: the official `@vercel/sandbox` SDK
//! (pinned in tests/sdk/vercel) runs create, streamed exec, file write and
//! read, mkdir, kill, list, stop and delete against it, then snapshot,
//! get, list and delete snapshots and create from one, and fails on any
//! response its schemas reject.
//!
//! The SDK is installed by the test itself (`npm ci` from the pinned
//! lockfile) under `target/tmp/vercel-sdk`, so a cached target dir skips
//! the install; a changed lockfile installs again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// The host's test harness, which counts a test that cannot run here as
// ignored (`crate::common::trials` to its macro); not every helper is used.
#[allow(dead_code)]
#[path = "../../common/trials.rs"]
mod trials;
mod common {
    pub(crate) use super::trials;
}
use trials::{skip, trial};

use sanddune_vercel_mock::VercelMock;

/// The pinned SDK's sources: package.json, package-lock.json, the scripts.
fn sdk_sources() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdk/vercel")
}

const SDK_FILES: &[&str] = &[
    "package.json",
    "package-lock.json",
    "check.mjs",
    "faults.mjs",
];

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The directory the scripts run in, with the pinned SDK installed beside
/// them; the test is skipped without node.
fn sdk_dir() -> PathBuf {
    if !have("node") {
        skip("node is not installed, so the @vercel/sandbox SDK cannot run against the mock");
    }
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let installed = INSTALLED
        .get_or_init(|| install(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vercel-sdk")));
    installed.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// Copy the SDK's files to `dir` and `npm ci` there unless the same
/// lockfile is already installed.
fn install(dir: &Path) -> Result<PathBuf, String> {
    let src = sdk_sources();
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let lock = std::fs::read(src.join("package-lock.json"))
        .map_err(|e| format!("reading the lockfile: {e}"))?;
    let installed_lock = dir.join("node_modules/.sanddune-installed-lock.json");
    let current = std::fs::read(&installed_lock).is_ok_and(|l| l == lock)
        && dir
            .join("node_modules/@vercel/sandbox/package.json")
            .exists();
    for file in SDK_FILES {
        std::fs::copy(src.join(file), dir.join(file))
            .map_err(|e| format!("copying {file}: {e}"))?;
    }
    if !current {
        let started = std::time::Instant::now();
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--quiet"])
            .current_dir(dir)
            .status()
            .map_err(|e| {
                format!(
                    "npm is needed to install the pinned SDK (npm ci in {}): {e}",
                    dir.display()
                )
            })?;
        if !status.success() {
            return Err(format!("npm ci in {} failed: {status}", dir.display()));
        }
        std::fs::write(&installed_lock, &lock)
            .map_err(|e| format!("writing {}: {e}", installed_lock.display()))?;
        eprintln!(
            "installed @vercel/sandbox in {} in {:.1?}",
            dir.display(),
            started.elapsed()
        );
    }
    Ok(dir.to_path_buf())
}

fn the_official_sdk_accepts_the_mock() {
    let dir = sdk_dir();
    let mock = VercelMock::start();
    let out = Command::new("node")
        .arg("check.mjs")
        .current_dir(&dir)
        .env("VERCEL_MOCK_URL", mock.url())
        .env("VERCEL_SANDBOX_TELEMETRY_DISABLED", "1")
        .env_remove("VERCEL_OIDC_TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK rejected the mock:\n{stdout}\n{stderr}"
    );
    for step in [
        "create",
        "exec streamed",
        "exec env",
        "files",
        "kill",
        "list",
        "stop",
        "delete",
        "snapshot",
        "snapshot get and list",
        "snapshot of a stopped session",
        "create from snapshot",
        "snapshot delete",
        "snapshot cleanup",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok {step}")),
            "step {step} missing:\n{stdout}\n{stderr}"
        );
    }
    // What the SDK sent, as the mock saw it: the documented endpoints.
    let seen: Vec<String> = mock
        .seen()
        .iter()
        .map(|s| format!("{} {} {}", s.status, s.method, s.path))
        .collect();
    for want in [
        "200 POST /v3/sandboxes",
        "/cmd",
        "/fs/write",
        "/fs/read",
        "/fs/mkdir",
        "/kill",
        "/stop",
        "200 DELETE /v2/sandboxes/",
        "/snapshot",
        "200 GET /v2/sandboxes/snapshots/snap_",
        "200 GET /v2/sandboxes/snapshots",
        "200 DELETE /v2/sandboxes/snapshots/snap_",
        "410 POST /v3/sandboxes",
    ] {
        assert!(
            seen.iter().any(|s| s.contains(want)),
            "{want} not in {seen:#?}"
        );
    }
    let view = &mock.sandboxes()[0];
    assert!(view.deleted && view.status == "stopped");
    // One snapshot, deleted; one sandbox started from it, none from the
    // deleted one.
    let snaps = mock.snapshots();
    assert_eq!(snaps.len(), 1, "{snaps:#?}");
    assert!(snaps[0].deleted && snaps[0].status == "deleted");
    let from: Vec<_> = mock
        .sandboxes()
        .into_iter()
        .filter(|s| s.source_snapshot.as_deref() == Some(snaps[0].id.as_str()))
        .collect();
    assert_eq!(from.len(), 1, "{from:#?}");
    assert!(mock.running_commands().is_empty());
}

fn the_official_sdk_takes_the_mocks_faults_as_the_real_apis() {
    use sanddune_vercel_mock::{Fault, Op};
    let dir = sdk_dir();
    let mock = VercelMock::start();
    mock.inject(Fault::status(Op::Create, 503, "unavailable"));
    mock.inject(Fault::Status {
        op: Op::RunCommand,
        status: 429,
        code: "rate_limited".into(),
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::EndStreamEarly {
        command_contains: "early-end".into(),
    });
    mock.inject(Fault::Status {
        op: Op::ReadFile,
        status: 500,
        code: "internal".into(),
        retry_after: None,
        times: 3,
    });
    let out = Command::new("node")
        .arg("faults.mjs")
        .current_dir(&dir)
        .env("VERCEL_MOCK_URL", mock.url())
        .env("VERCEL_SANDBOX_TELEMETRY_DISABLED", "1")
        .env_remove("VERCEL_OIDC_TOKEN")
        // The 410 is injected once the steps before it are through.
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = out;
    let mut go = out.stdin.take();
    let mut stdout = std::io::BufReader::new(out.stdout.take().unwrap());
    let mut text = String::new();
    use std::io::BufRead;
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.trim() == "ok 500 after retries" {
            mock.inject(Fault::status(Op::RunCommand, 410, "sandbox_stopped"));
            if let Some(mut stdin) = go.take() {
                std::io::Write::write_all(&mut stdin, b"go\n").unwrap();
            }
        }
        text.push_str(&line);
    }
    let status = out.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut out.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        status.success(),
        "the SDK took a fault differently:\n{text}\n{err}"
    );
    for step in [
        "create retried after 503",
        "429 retried after Retry-After",
        "stream ended early",
        "500 after retries",
        "410 sandbox_stopped",
        "stop",
    ] {
        assert!(
            text.lines().any(|l| l == format!("ok {step}")),
            "step {step} missing:\n{text}\n{err}"
        );
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(the_official_sdk_accepts_the_mock),
        trial!(the_official_sdk_takes_the_mocks_faults_as_the_real_apis),
    ])
}
