//! The `daytona` sandbox provider end to end: the real binary, the built-in
//! component, its requests through the host's wasi:http capability, and the
//! loopback mock of the Daytona API and toolbox (tests/daytona-mock), which
//! runs the commands for real. A fake `claude` edits and commits in the
//! mock sandbox; the repository goes in as a git bundle and the commit must
//! come back to the host repository.

mod common;

use std::process::Output;

use common::{TestRepo, kill_once, stderr, stdout};
use sanddune_daytona_mock::{API_KEY, DaytonaMock, Fault, Op};
use serde_json::Value;

/// The mock, with this test's fake agents first on its commands' PATH.
fn mock_for(repo: &TestRepo) -> DaytonaMock {
    let path = format!(
        "{}:{}",
        repo.bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    DaytonaMock::start_with_path(&path)
}

const CREDENTIALS: &[(&str, &str)] = &[("DAYTONA_API_KEY", API_KEY)];

const ENV_KEYS: &[&str] = &[
    "DAYTONA_API_KEY",
    "DAYTONA_JWT_TOKEN",
    "DAYTONA_ORGANIZATION_ID",
    "DAYTONA_API_URL",
    "DAYTONA_TARGET",
];

fn options(mock: &DaytonaMock) -> [String; 2] {
    [
        format!("api-url={}", mock.api_url()),
        format!("toolbox-url={}", mock.toolbox_url()),
    ]
}

fn run_on_daytona(
    repo: &TestRepo,
    mock: &DaytonaMock,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    daytona_command(repo, mock, extra, env).output().unwrap()
}

/// `sanddune run` on the mock with only `env`'s Daytona variables.
fn daytona_command(
    repo: &TestRepo,
    mock: &DaytonaMock,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Command {
    let [api, toolbox] = options(mock);
    let mut args = vec![
        "run",
        "--sandbox",
        "daytona",
        "--sandbox-opt",
        &api,
        "--sandbox-opt",
        &toolbox,
        "--agent",
        "claude-code",
        "--max-iterations",
        "2",
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut cmd = repo.command(&args);
    for key in ENV_KEYS {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied());
    cmd
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "sanddune failed:\n{}\n{}",
        stderr(out),
        stdout(out)
    );
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(out)))
}

#[test]
fn a_run_on_daytona_brings_the_agents_commit_to_head() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let before = repo.git(&["rev-parse", "HEAD"]);
    let out = run_on_daytona(
        &repo,
        &mock,
        &["--prompt", "fix the typo in README"],
        CREDENTIALS,
    );
    let result = json(&out);

    let commits = result["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{result}");
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"]),
        commits[0]["sha"].as_str().unwrap()
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), before);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Fix typo in README"
    );
    let readme = std::fs::read_to_string(repo.path().join("README.md")).unwrap();
    assert!(readme.contains("This is the readme."), "{readme}");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    // The agent ran inside the mock sandbox's worktree, its prompt on stdin.
    let calls = repo.calls("claude");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["prompt"], "fix the typo in README");
    let sandboxes = mock.sandboxes();
    assert_eq!(sandboxes.len(), 1);
    let sandbox = &sandboxes[0];
    assert_eq!(
        calls[0]["cwd"].as_str().unwrap(),
        sandbox.home.join("workspace").display().to_string()
    );

    // Labelled with the run, then stopped and deleted.
    assert!(
        sandbox
            .labels
            .get("sanddune-run")
            .is_some_and(|r| !r.is_empty()),
        "{:?}",
        sandbox.labels
    );
    assert!(sandbox.deleted, "{sandbox:?}");
    let seen = mock.seen();
    assert!(
        seen.iter()
            .any(|s| s.method == "POST" && s.path.ends_with("/stop")),
        "the sandbox was stopped"
    );
    // The bundle went in through the bulk upload and the commits came out
    // through the download; every request carried the key.
    for want in ["/files/bulk-upload", "/files/download", "/process/session"] {
        assert!(seen.iter().any(|s| s.path.contains(want)), "{want}");
    }
    for s in &seen {
        assert_eq!(
            s.authorization.as_deref(),
            Some(format!("Bearer {API_KEY}").as_str())
        );
        // (a 404 downloading a file is the API's "no such file")
        assert!(
            s.status < 400 || s.status == 404 && s.path.ends_with("/files/download"),
            "{s:?}"
        );
    }
    // The credentials are the provider's: none reached the agent's env.
    assert_eq!(
        calls[0]["cloud_keys"],
        serde_json::json!([]),
        "{}",
        calls[0]
    );
    assert!(
        !stdout(&out).contains(API_KEY) && !stderr(&out).contains(API_KEY),
        "the key leaked into the output"
    );
}

#[test]
fn a_missing_key_is_named_before_anything_is_created() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let out = run_on_daytona(&repo, &mock, &["--prompt", "fix the typo"], &[]);
    // A usage error, found before the run log, the worktree or a sandbox.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!repo.path().join(".sanddune").exists());
    let err = stderr(&out);
    assert!(err.contains("DAYTONA_API_KEY"), "{err}");
    assert!(
        mock.seen().is_empty(),
        "nothing may be sent without the credentials: {:?}",
        mock.seen()
    );
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn a_rejected_key_fails_the_run_and_names_it() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let out = run_on_daytona(
        &repo,
        &mock,
        &["--prompt", "fix the typo"],
        &[("DAYTONA_API_KEY", "expired")],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("401") && err.contains("DAYTONA_API_KEY"),
        "{err}"
    );
    assert!(mock.sandboxes().is_empty());
}

#[test]
fn faults_mid_run_lose_nothing() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    // The agent's log answer is cut mid-body, and the API answers a rate
    // limit and server errors along the way: the run still ends with the
    // commit on HEAD, every line of the agent's output delivered once.
    mock.inject(Fault::DropMidExec {
        command_contains: "claude".into(),
        after_lines: 2,
    });
    mock.inject(Fault::Status {
        op: Op::Download,
        status: 429,
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::status(Op::Upload, 502));
    mock.inject(Fault::status(Op::GetCommand, 503));
    mock.inject(Fault::status(Op::Create, 500));
    let out = run_on_daytona(
        &repo,
        &mock,
        &["--prompt", "fix the typo in README"],
        CREDENTIALS,
    );
    let result = json(&out);
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Fix typo in README"
    );
    assert_eq!(result["completionSignal"], "<promise>COMPLETE</promise>");
    let statuses: Vec<u16> = mock.seen().iter().map(|s| s.status).collect();
    for s in [429, 502, 503, 500] {
        assert!(statuses.contains(&s), "{s} not in {statuses:?}");
    }
    assert_eq!(mock.sandboxes().len(), 1, "a refused create made nothing");
    assert!(mock.sandboxes()[0].deleted);
}

#[test]
fn a_session_lost_mid_run_fails_the_run_clearly_and_the_sandbox_is_deleted() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    // The agent's session goes (the sandbox's daemon restarted) after two
    // lines of its output: the log ends, no exit code will come.
    mock.inject(Fault::SessionLost {
        command_contains: "claude".into(),
        after_lines: 2,
    });
    let out = run_on_daytona(
        &repo,
        &mock,
        &["--prompt", "fix the typo in README FAKE:slow"],
        CREDENTIALS,
    );
    assert!(!out.status.success());
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains("ended before the command exited"), "{err}");
    let sandboxes = mock.sandboxes();
    assert!(sandboxes.iter().all(|s| s.deleted), "{sandboxes:?}");
    assert!(mock.running_commands().is_empty());
}

#[test]
fn a_sandbox_that_is_gone_mid_run_fails_the_run_and_close_still_succeeds() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    // Every command is refused: the sandbox is gone (410).
    mock.inject(Fault::Status {
        op: Op::Exec,
        status: 410,
        retry_after: None,
        times: 50,
    });
    let out = run_on_daytona(
        &repo,
        &mock,
        &["--prompt", "fix the typo in README"],
        CREDENTIALS,
    );
    assert!(!out.status.success());
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains("410"), "{err}");
    let sandboxes = mock.sandboxes();
    assert!(sandboxes.iter().all(|s| s.deleted), "{sandboxes:?}");
}

#[test]
fn the_origins_come_from_the_url_options() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&["plugin", "inspect", "daytona"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for want in [
        "the origin of option `api-url` (default https://app.daytona.io/api)",
        "the origin of option `toolbox-url` (default https://proxy.app.daytona.io/toolbox)",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    // An origin the HTTP policy refuses (plain http off loopback) fails the
    // run before a request is made, naming the option.
    let out = repo
        .command(&[
            "run",
            "--sandbox",
            "daytona",
            "--sandbox-opt",
            "api-url=http://api.example.com/api",
            "--agent",
            "claude-code",
            "--prompt",
            "fix the typo",
        ])
        .envs(CREDENTIALS.iter().copied())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("option `api-url`"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty());
}

/// The conformance kit against the mock: every sandbox check passes, the
/// origin it reaches is the mock's, a refused request is an error, and
/// every sandbox the kit made is deleted.
#[test]
fn daytona_passes_the_conformance_kit_against_the_mock() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let [api, toolbox] = options(&mock);
    let out = repo.sanddune_with_env(
        &[
            "plugin",
            "test",
            "daytona",
            "--sandbox-opt",
            &api,
            "--sandbox-opt",
            &toolbox,
        ],
        CREDENTIALS,
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(!text.contains("FAIL"), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no {name} check:\n{text}"))
            .to_string()
    };
    for check in [
        "exec-streams-lines",
        "stdin-intact",
        "stdin-empty",
        "exec-timeout",
        "cwd-outside-refused",
        "upload-traversal-refused",
        "copy-in",
        "attach",
        "close-idempotent",
        "find",
        "snapshot-keep-and-start",
    ] {
        assert!(line(check).contains("PASS"), "{}", line(check));
    }
    // It found the open sandbox by its label, and not once it was closed.
    assert!(!line("find").contains("finds nothing"), "{}", line("find"));
    assert!(
        line("http-origins").contains(mock.url()),
        "{}",
        line("http-origins")
    );
    assert!(
        line("http-refusal-survived").contains("failed cleanly"),
        "{}",
        line("http-refusal-survived")
    );
    let sandboxes = mock.sandboxes();
    assert!(!sandboxes.is_empty());
    assert!(
        sandboxes.iter().all(|s| s.deleted),
        "every sandbox the kit made is deleted: {sandboxes:?}"
    );
}

/// A run killed with the agent's commit still in its Daytona sandbox: `gc`
/// (with the run's credentials) brings the commit onto the run's branch and
/// deletes the sandbox.
#[test]
fn gc_brings_a_killed_runs_commit_out_of_its_sandbox_and_deletes_it() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let child = daytona_command(
        &repo,
        &mock,
        &[
            "--prompt",
            "note stranded\nFAKE:file:notes/stranded.md\nFAKE:slow",
        ],
        CREDENTIALS,
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // The sandbox's clone: the directory under its home that gets the note.
    fn clone_with_note(dir: &std::path::Path) -> Option<std::path::PathBuf> {
        if dir.join("notes/stranded.md").exists() {
            return Some(dir.to_path_buf());
        }
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .find_map(|e| clone_with_note(&e.path()))
    }
    let committed = || {
        mock.sandboxes().iter().any(|s| {
            clone_with_note(&s.home).is_some_and(|clone| {
                std::process::Command::new("git")
                    .arg("-C")
                    .arg(clone)
                    .args(["log", "--format=%s"])
                    .output()
                    .is_ok_and(|o| stdout(&o).contains("Add a note"))
            })
        })
    };
    kill_once(child, "the agent's commit in its sandbox", committed);
    assert!(!mock.sandboxes()[0].deleted);

    let out = daytona_gc(&repo, CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("sandbox onto `sanddune/run-"),
        "{}",
        stdout(&out)
    );
    assert!(
        repo.git(&["log", "--all", "--format=%s"])
            .contains("Add a note")
    );
    assert!(mock.sandboxes()[0].deleted, "{:?}", mock.sandboxes());
}

/// A run killed inside `create` (Daytona made the sandbox; its answer never
/// reached sanddune) leaves a record without a state: gc finds the sandbox
/// by the run's label and deletes it.
#[test]
fn gc_finds_and_deletes_the_sandbox_of_a_run_killed_inside_create() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    mock.inject(Fault::SlowAnswer {
        op: Op::Create,
        ms: 60_000,
    });
    let child = daytona_command(&repo, &mock, &["--prompt", "x"], CREDENTIALS)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    kill_once(child, "the sandbox at Daytona", || {
        !mock.sandboxes().is_empty()
    });

    let out = daytona_gc(&repo, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("DAYTONA_API_KEY"), "{}", stderr(&out));
    assert!(!mock.sandboxes()[0].deleted);

    let out = daytona_gc(&repo, CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("closed 1 daytona sandbox(es) that run"),
        "{}",
        stdout(&out)
    );
    assert!(mock.sandboxes()[0].deleted, "{:?}", mock.sandboxes());
    // The record went with it: nothing is left for the next gc.
    let out = daytona_gc(&repo, CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stdout(&out).contains("daytona sandbox"),
        "{}",
        stdout(&out)
    );
}

/// `sanddune gc` with only `env`'s Daytona variables.
fn daytona_gc(repo: &TestRepo, env: &[(&str, &str)]) -> Output {
    let mut gc = repo.command(&["gc"]);
    for key in ENV_KEYS {
        gc.env_remove(key);
    }
    gc.envs(env.iter().copied()).output().unwrap()
}

/// Snapshots Daytona keeps (contract 0.8, ADR 0038): kept in place through
/// the API (the sandbox snapshotting, then started again), started from,
/// removed behind sanddune's back and made again, and removed
/// (`common::snapshots`).
#[test]
fn a_daytona_snapshot_skips_the_set_up_until_it_is_gone_or_an_input_changes() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let provider = common::snapshots::Kept {
        name: "daytona",
        run: &|extra| run_on_daytona(&repo, &mock, extra, CREDENTIALS),
        credentials: CREDENTIALS,
        live: &|| {
            mock.snapshots()
                .into_iter()
                .filter(|s| !s.deleted)
                .map(|s| s.name)
                .collect()
        },
        expire: &|name| mock.delete_snapshot_behind(name),
    };
    common::snapshots::skip_the_set_up_until_gone_or_changed(&repo, &provider);
    assert!(
        mock.sandboxes().iter().any(|s| s.from_snapshot.is_some()),
        "{:?}",
        mock.sandboxes()
    );
}
