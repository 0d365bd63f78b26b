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

#[test]
fn the_official_sdk_takes_the_mocks_faults_as_the_real_apis() {
    use sanddune_vercel_mock::{Fault, Op};
    if !have("node") {
        assert!(std::env::var_os("CI").is_none(), "node is missing under CI: .ci/run installs nodejs");
        eprintln!("SKIPPED: node is not installed");
        return;
    }
    let dir = sdk_dir();
    if !dir.join("node_modules/@vercel/sandbox").exists() {
        let status = Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--quiet"]).current_dir(&dir).status().unwrap();
        assert!(status.success());
    }
    let mock = VercelMock::start();
    mock.inject(Fault::status(Op::Create, 503, "unavailable"));
    mock.inject(Fault::Status { op: Op::RunCommand, status: 429, code: "rate_limited".into(), retry_after: Some(1), times: 1 });
    mock.inject(Fault::EndStreamEarly { command_contains: "early-end".into() });
    mock.inject(Fault::Status { op: Op::ReadFile, status: 500, code: "internal".into(), retry_after: None, times: 3 });
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
    assert!(status.success(), "the SDK took a fault differently:\n{text}\n{err}");
    for step in ["create retried after 503", "429 retried after Retry-After", "stream ended early", "500 after retries", "410 sandbox_stopped", "stop"] {
        assert!(text.lines().any(|l| l == format!("ok {step}")), "step {step} missing:\n{text}\n{err}");
    }
}
