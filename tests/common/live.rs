//! Live runs for the tests of the commands on them (`ps`, `logs`, `stop`,
//! `attach`, completions): a fake agent that hangs, and `ps` polled.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{TestRepo, stderr, stdout};

/// A run of the fake agent that hangs, started in the background.
pub fn hanging_run(repo: &TestRepo, name: &str, extra: &[&str]) -> Child {
    let mut args = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "note FAKE:hang",
        "--name",
        name,
    ];
    args.extend_from_slice(extra);
    repo.command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `ps --json`, parsed.
pub fn ps(repo: &TestRepo, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["ps", "--json"];
    args.extend_from_slice(extra);
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "ps: {}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Polls `ps` until `count` runs are running their agent (60 s at most).
pub fn wait_running(repo: &TestRepo, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = ps(repo, &[]);
        if runs.iter().filter(|r| r["state"] == "running").count() == count {
            return runs;
        }
        assert!(Instant::now() < deadline, "never {count} running: {runs:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn wait_exit(mut child: Child, within: Duration) -> std::process::Output {
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The pid of a process that has ended.
pub fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A run record as `sanddune ps` reads it, naming `log` as its log.
pub fn forge_run_record(repo: &TestRepo, id: &str, log: &Path) {
    let dir = repo.path().join(".git/sanddune-runs");
    std::fs::create_dir_all(&dir).unwrap();
    let record = serde_json::json!({
        "name": id, "runId": id, "workflow": null, "item": null,
        "sandbox": "test-isolated", "agent": "claude-code", "branch": "main",
        "iteration": 1, "maxIterations": 1, "state": "running",
        "started": 0, "tokens": 0, "logFile": log, "repo": repo.path(),
        "owner": format!("{}:1", dead_pid()),
    });
    std::fs::write(dir.join(format!("{id}.json")), record.to_string()).unwrap();
}
