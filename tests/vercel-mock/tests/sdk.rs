//! The mock speaks the real protocol: the official `@vercel/sandbox` SDK
//! (pinned in tests/sdk/vercel) runs create, streamed exec, file write and
//! read, mkdir, kill, list, stop and delete against it, and fails on any
//! response its schemas reject.

use std::path::PathBuf;
use std::process::Command;

use sanddune_vercel_mock::VercelMock;

fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sdk/vercel")
}

fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn the_official_sdk_accepts_the_mock() {
    if !have("node") {
        assert!(std::env::var_os("CI").is_none(), "node is missing under CI: .ci/run installs nodejs");
        eprintln!("SKIPPED: node is not installed, so the @vercel/sandbox SDK cannot run against the mock");
        return;
    }
    let dir = sdk_dir();
    if !dir.join("node_modules/@vercel/sandbox").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--quiet"])
            .current_dir(&dir)
            .status()
            .expect("npm is needed to install the pinned SDK (npm ci in tests/sdk/vercel)");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
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
    assert!(out.status.success(), "the SDK rejected the mock:\n{stdout}\n{stderr}");
    for step in ["create", "exec streamed", "exec env", "files", "kill", "list", "stop", "delete"] {
        assert!(stdout.lines().any(|l| l == format!("ok {step}")), "step {step} missing:\n{stdout}\n{stderr}");
    }
    // What the SDK sent, as the mock saw it: the documented endpoints.
    let seen: Vec<String> = mock.seen().iter().map(|s| format!("{} {} {}", s.status, s.method, s.path)).collect();
    for want in ["200 POST /v3/sandboxes", "/cmd", "/fs/write", "/fs/read", "/fs/mkdir", "/kill", "/stop", "200 DELETE /v2/sandboxes/"] {
        assert!(seen.iter().any(|s| s.contains(want)), "{want} not in {seen:#?}");
    }
    let view = &mock.sandboxes()[0];
    assert!(view.deleted && view.status == "stopped");
}
