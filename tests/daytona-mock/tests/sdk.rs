//! The mock speaks the real protocol: the official `@daytonaio/sdk`
//! (pinned in tests/sdk/daytona) runs create, a session with async and
//! synchronous commands whose state and log it follows, stdin, one-shot
//! execute, file upload, download, folder and delete, a snapshot of the
//! sandbox (taken, got, listed, created from, deleted), kill (deleting the
//! session), stop and delete against it, and meets its faults; any answer
//! the SDK cannot read fails the test.
//!
//! The SDK is installed by the test itself (`npm ci` from the pinned
//! lockfile) under `target/tmp/daytona-sdk`, so a cached target dir skips
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

use sanddune_daytona_mock::{DaytonaMock, Fault, Op};

/// The pinned SDK's sources: package.json, package-lock.json, the scripts.
fn sdk_sources() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdk/daytona")
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
        skip("node is not installed, so the @daytonaio/sdk cannot run against the mock");
    }
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let installed = INSTALLED
        .get_or_init(|| install(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("daytona-sdk")));
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
            .join("node_modules/@daytonaio/sdk/package.json")
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
            "installed @daytonaio/sdk in {} in {:.1?}",
            dir.display(),
            started.elapsed()
        );
    }
    Ok(dir.to_path_buf())
}

fn node(dir: &Path, script: &str, mock: &DaytonaMock) -> (bool, String, String) {
    let out = Command::new("node")
        .arg(script)
        .current_dir(dir)
        .env("DAYTONA_MOCK_URL", mock.url())
        .env_remove("DAYTONA_API_KEY")
        .env_remove("DAYTONA_API_URL")
        .env_remove("DAYTONA_JWT_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn the_official_sdk_accepts_the_mock() {
    let dir = sdk_dir();
    let mock = DaytonaMock::start();
    // Long enough that the SDK surely finds the sandbox snapshotting.
    mock.set_snapshotting_time(std::time::Duration::from_millis(400));
    let (success, stdout, stderr) = node(&dir, "check.mjs", &mock);
    assert!(success, "the SDK rejected the mock:\n{stdout}\n{stderr}");
    for step in [
        "create",
        "dirs",
        "exec streamed",
        "exec sync",
        "input",
        "execute",
        "files",
        "snapshot",
        "create from snapshot",
        "snapshot delete",
        "kill",
        "stop",
        "delete",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok {step}")),
            "step {step} missing:\n{stdout}\n{stderr}"
        );
    }
    // What the SDK sent, as the mock saw it: the documented endpoints, and
    // its version, which the toolbox reads.
    let seen = mock.seen();
    let lines: Vec<String> = seen
        .iter()
        .map(|s| format!("{} {} {}", s.status, s.method, s.path))
        .collect();
    for want in [
        "200 POST /api/sandbox",
        "201 POST /toolbox/",
        "202 POST /toolbox/",
        "/logs",
        "/files/bulk-upload",
        "/files/bulk-download",
        "201 POST /toolbox/",
        "204 DELETE /toolbox/",
        "/stop",
        "200 DELETE /api/sandbox/",
        "/snapshot",
        "200 GET /api/snapshots/sdk-check-snapshot",
        "200 GET /api/snapshots",
        "200 DELETE /api/snapshots/",
        "400 POST /api/sandbox",
    ] {
        assert!(
            lines.iter().any(|s| s.contains(want)),
            "{want} not in {lines:#?}"
        );
    }
    assert!(
        seen.iter()
            .any(|s| s.sdk_version.as_deref() == Some("0.190.1")),
        "the SDK names its version"
    );
    // After the snapshot's POST the SDK polled the sandbox until it was
    // back: a first look, then more while it was snapshotting.
    let at = lines
        .iter()
        .position(|l| l.starts_with("200 POST /api/sandbox/") && l.ends_with("/snapshot"))
        .unwrap();
    let polls = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("200 GET /api/sandbox/"))
        .count();
    assert!(polls >= 2, "{:#?}", &lines[at..]);
    let view = &mock.sandboxes()[0];
    assert!(view.deleted);
    assert_eq!(view.body["labels"]["sanddune-run"], "sdk-check");
    // The snapshot came from the first sandbox, the copy from the snapshot;
    // the failed create made nothing.
    let snapshots = mock.snapshots();
    assert_eq!(snapshots.len(), 1, "{snapshots:?}");
    assert_eq!(snapshots[0].sandbox, view.id);
    assert!(snapshots[0].deleted);
    let copies: Vec<_> = mock
        .sandboxes()
        .into_iter()
        .filter(|s| s.from_snapshot.is_some())
        .collect();
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].from_snapshot.as_ref(), Some(&snapshots[0].id));
    assert_eq!(
        mock.sandboxes().len(),
        3,
        "two created in check.mjs, one copy"
    );
}

fn the_official_sdk_takes_the_mocks_faults_as_daytonas() {
    let dir = sdk_dir();
    let mock = DaytonaMock::start();
    mock.inject(Fault::status(Op::Create, 503));
    mock.inject(Fault::Status {
        op: Op::Logs,
        status: 429,
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::SessionLost {
        command_contains: "lose-me".into(),
        after_lines: 2,
    });
    let (success, stdout, stderr) = node(&dir, "faults.mjs", &mock);
    assert!(
        success,
        "the SDK took a fault differently:\n{stdout}\n{stderr}"
    );
    for step in [
        "401 unauthorized",
        "503 on create",
        "429 rate limited",
        "session lost",
        "delete",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok {step}")),
            "step {step} missing:\n{stdout}\n{stderr}"
        );
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(the_official_sdk_accepts_the_mock),
        trial!(the_official_sdk_takes_the_mocks_faults_as_daytonas),
    ])
}
