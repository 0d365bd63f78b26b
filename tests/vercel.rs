//! The `vercel` sandbox provider end to end: the real binary, the built-in
//! component, its requests through the host's wasi:http capability, and the
//! loopback mock of the Vercel Sandbox API (tests/vercel-mock), which runs
//! the commands for real. A fake `claude` edits and commits in the mock
//! sandbox; the commit must come back to the host repository.

mod common;

use std::process::Output;

use common::{TestRepo, kill_once, stderr, stdout};
use sanddune_vercel_mock::{Fault, Op, PROJECT, TEAM, TOKEN, VercelMock};
use serde_json::Value;

/// The mock, with this test's fake agents first on its commands' PATH.
fn mock_for(repo: &TestRepo) -> VercelMock {
    let path = format!(
        "{}:{}",
        repo.bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    VercelMock::start_with_path(&path)
}

const CREDENTIALS: &[(&str, &str)] = &[
    ("VERCEL_TOKEN", TOKEN),
    ("VERCEL_TEAM_ID", TEAM),
    ("VERCEL_PROJECT_ID", PROJECT),
];

fn run_on_vercel(
    repo: &TestRepo,
    mock: &VercelMock,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    vercel_command(repo, mock, extra, env).output().unwrap()
}

/// `sanddune run` on the mock with only `env`'s Vercel variables.
fn vercel_command(
    repo: &TestRepo,
    mock: &VercelMock,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Command {
    let api = format!("api-url={}", mock.url());
    let mut args = vec![
        "run",
        "--sandbox",
        "vercel",
        "--sandbox-opt",
        &api,
        "--agent",
        "claude-code",
        "--max-iterations",
        "2",
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut cmd = repo.command(&args);
    for key in [
        "VERCEL_TOKEN",
        "VERCEL_TEAM_ID",
        "VERCEL_PROJECT_ID",
        "VERCEL_OIDC_TOKEN",
    ] {
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
fn a_run_on_vercel_brings_the_agents_commit_to_head() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let before = repo.git(&["rev-parse", "HEAD"]);
    let out = run_on_vercel(
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

    // The agent ran inside the mock sandbox, with its prompt on stdin.
    let calls = repo.calls("claude");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["prompt"], "fix the typo in README");
    let sandboxes = mock.sandboxes();
    assert_eq!(sandboxes.len(), 1);
    let sandbox = &sandboxes[0];
    assert_eq!(
        calls[0]["cwd"].as_str().unwrap(),
        sandbox.cwd.display().to_string()
    );

    // Tagged with the run, then stopped and deleted.
    assert!(
        sandbox
            .tags
            .get("sanddune-run")
            .is_some_and(|r| !r.is_empty()),
        "{:?}",
        sandbox.tags
    );
    assert!(
        sandbox.deleted && sandbox.status == "stopped",
        "{sandbox:?}"
    );
    // Only the documented API, always with the token and the team.
    for seen in mock.seen() {
        assert_eq!(
            seen.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert!(seen.query.contains(&format!("teamId={TEAM}")), "{seen:?}");
        // (a 404 reading a file is the API's "no such file")
        assert!(
            seen.status < 400 || seen.status == 404 && seen.path.ends_with("/fs/read"),
            "{seen:?}"
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
        !stdout(&out).contains(TOKEN) && !stderr(&out).contains(TOKEN),
        "the token leaked into the output"
    );
}

/// `history=` is the host's option: the provider never sees it, and the
/// sandbox gets that much of the branch.
#[test]
fn the_history_option_is_the_hosts_and_gives_the_sandbox_that_much_history() {
    let repo = TestRepo::new();
    for i in 0..3 {
        std::fs::write(repo.path().join("n.txt"), format!("{i}\n")).unwrap();
        repo.git(&["add", "n.txt"]);
        repo.git(&["commit", "-q", "-m", &format!("n {i}")]);
    }
    let mock = mock_for(&repo);
    let seen = repo.home.path().join("seen");
    let hook = format!("git rev-list --count HEAD > '{}'", seen.display());
    let out = run_on_vercel(
        &repo,
        &mock,
        &[
            "--prompt",
            "add a note",
            "--sandbox-opt",
            "history=2",
            "--hook-sandbox-ready",
            &hook,
        ],
        CREDENTIALS,
    );
    let result = json(&out);
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    // The mock runs commands on this machine, so the hook's file is here.
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "2");
}

#[test]
fn a_missing_credential_is_named_before_anything_is_created() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let out = run_on_vercel(
        &repo,
        &mock,
        &["--prompt", "fix the typo"],
        &[("VERCEL_TOKEN", TOKEN), ("VERCEL_TEAM_ID", TEAM)],
    );
    // A usage error, found before the run log, the worktree or a sandbox.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!repo.path().join(".sanddune").exists());
    let err = stderr(&out);
    assert!(err.contains("VERCEL_PROJECT_ID"), "{err}");
    assert!(
        mock.seen().is_empty(),
        "nothing may be sent without the credentials: {:?}",
        mock.seen()
    );
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn a_rejected_token_fails_the_run_and_names_it() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let env = [
        ("VERCEL_TOKEN", "expired"),
        ("VERCEL_TEAM_ID", TEAM),
        ("VERCEL_PROJECT_ID", PROJECT),
    ];
    let out = run_on_vercel(&repo, &mock, &["--prompt", "fix the typo"], &env);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("401") && err.contains("VERCEL_TOKEN"), "{err}");
    assert!(mock.sandboxes().is_empty());
}

#[test]
fn faults_mid_run_lose_nothing() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    // The agent's output stream drops after two lines, and the API answers
    // a rate limit and a server error along the way: the run still ends with
    // the commit on HEAD, every line of the agent's output delivered once.
    mock.inject(Fault::DropMidExec {
        after_logs: 2,
        command_contains: "claude".into(),
    });
    mock.inject(Fault::Status {
        op: Op::ReadFile,
        status: 429,
        code: "rate_limited".into(),
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::status(Op::WriteFiles, 502, "bad_gateway"));
    let out = run_on_vercel(
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
    assert!(
        statuses.contains(&429) && statuses.contains(&502),
        "{statuses:?}"
    );
    assert!(
        mock.seen().iter().any(|s| s.path.ends_with("/logs")),
        "the dropped stream was reattached"
    );
    assert!(mock.sandboxes()[0].deleted);
}

#[test]
fn a_sandbox_that_stops_mid_run_fails_the_run_and_is_still_deleted() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    // The agent's command is refused: the sandbox has stopped (410).
    mock.inject(Fault::Status {
        op: Op::RunCommand,
        status: 410,
        code: "sandbox_stopped".into(),
        retry_after: None,
        times: 50,
    });
    let out = run_on_vercel(
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
fn the_api_origin_comes_from_the_api_url_option() {
    let repo = TestRepo::new();
    // plugin inspect names the option and its default.
    let out = repo.sanddune(&["plugin", "inspect", "vercel"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains(
            "http:       the origin of option `api-url` (default https://vercel.com/api)"
        ),
        "{text}"
    );
    // An origin the HTTP policy refuses (plain http off loopback) fails the
    // run before a request is made, naming the option.
    let out = repo
        .command(&[
            "run",
            "--sandbox",
            "vercel",
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
    let err = stderr(&out);
    assert!(err.contains("option `api-url`"), "{err}");
    assert!(repo.calls("claude").is_empty());
}

/// A run killed with the agent's commit still in its Vercel sandbox: `gc`
/// without credentials names the missing one and keeps the sandbox; with
/// them it brings the commit onto the run's branch and deletes the sandbox.
#[test]
fn gc_brings_a_killed_runs_commit_out_of_its_sandbox_and_deletes_it() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let child = vercel_command(
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
    let committed = || {
        mock.sandboxes().iter().any(|s| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(&s.cwd)
                .args(["log", "--format=%s"])
                .output()
                .is_ok_and(|o| stdout(&o).contains("Add a note"))
        })
    };
    kill_once(child, "the agent's commit in its sandbox", committed);
    let on_branches = || repo.git(&["log", "--all", "--format=%s"]);
    assert!(!on_branches().contains("Add a note"));

    let mut gc = repo.command(&["gc"]);
    for (key, _) in CREDENTIALS {
        gc.env_remove(key);
    }
    let out = gc.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("VERCEL_TOKEN"), "{}", stderr(&out));
    assert!(
        !mock.sandboxes()[0].deleted,
        "gc deleted what it could not read"
    );

    let out = repo.sanddune_with_env(&["gc"], CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("sandbox onto `sanddune/run-"),
        "{}",
        stdout(&out)
    );
    assert!(on_branches().contains("Add a note"), "{}", stdout(&out));
    assert!(mock.sandboxes()[0].deleted, "{:?}", mock.sandboxes());
}

/// A run killed inside `create` (Vercel made the sandbox; its answer never
/// reached sanddune) leaves a record without a state: gc finds the sandbox
/// by the run's tag and deletes it.
#[test]
fn gc_finds_and_deletes_the_sandbox_of_a_run_killed_inside_create() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    mock.inject(Fault::SlowAnswer {
        op: Op::Create,
        ms: 60_000,
    });
    let child = vercel_command(&repo, &mock, &["--prompt", "x"], CREDENTIALS)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    kill_once(child, "the sandbox at Vercel", || {
        !mock.sandboxes().is_empty()
    });

    let mut gc = repo.command(&["gc"]);
    for (key, _) in CREDENTIALS {
        gc.env_remove(key);
    }
    let out = gc.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("VERCEL_TOKEN"), "{}", stderr(&out));
    assert!(!mock.sandboxes()[0].deleted);

    let out = repo.sanddune_with_env(&["gc"], CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("closed 1 vercel sandbox(es) that run"),
        "{}",
        stdout(&out)
    );
    assert!(mock.sandboxes()[0].deleted, "{:?}", mock.sandboxes());
    let out = repo.sanddune_with_env(&["gc"], CREDENTIALS);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("vercel sandbox"), "{}", stdout(&out));
}

/// Snapshots Vercel keeps (contract 0.8, ADR 0038): kept through the API
/// (a sandbox started from the snapshot takes the stopped one's place, and
/// the agent runs there), started from, expired and made again, and
/// removed (`common::snapshots`).
#[test]
fn a_vercel_snapshot_skips_the_set_up_until_it_is_gone_or_an_input_changes() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let provider = common::snapshots::Kept {
        name: "vercel",
        run: &|extra| run_on_vercel(&repo, &mock, extra, CREDENTIALS),
        credentials: CREDENTIALS,
        live: &|| {
            mock.snapshots()
                .into_iter()
                .filter(|s| !s.deleted)
                .map(|s| s.id)
                .collect()
        },
        expire: &|id| mock.delete_snapshot_behind(id),
    };
    common::snapshots::skip_the_set_up_until_gone_or_changed(&repo, &provider);
    // Keeping one put a sandbox started from the snapshot in the stopped
    // one's place; every sandbox was deleted.
    let sandboxes = mock.sandboxes();
    assert!(
        sandboxes.iter().any(|s| s.source_snapshot.is_some()),
        "{sandboxes:?}"
    );
    assert!(sandboxes.iter().all(|s| s.deleted), "{sandboxes:?}");
}

/// Runs that miss together (a fan-out's first items) each run the set-up,
/// but once one has kept a snapshot the others do not keep another.
#[test]
fn of_runs_that_miss_together_one_keeps_the_snapshot() {
    let repo = TestRepo::new();
    let mock = mock_for(&repo);
    let gate = tempfile::tempdir().unwrap();
    let (gate, records) = (
        gate.path().display().to_string(),
        repo.path()
            .join(".git/sanddune-snapshots")
            .display()
            .to_string(),
    );
    // The first set-up waits for the second to start; the second waits
    // until the first run has kept its snapshot. (The mock runs commands on
    // this machine, so they see these paths.)
    let setup = format!(
        "if mkdir {gate}/first 2>/dev/null; then until [ -e {gate}/second ]; do sleep 0.1; done; \
         else touch {gate}/second; until ls {records}/*.json >/dev/null 2>&1; do sleep 0.1; done; fi"
    );
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        format!(
            "[sandboxOptions]\nsnapshot = \"auto\"\n\n[[hooks.sandbox.onSandboxReady]]\ncommand = {setup:?}\n"
        ),
    )
    .unwrap();
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "a set-up"]);
    let spawn = |branch: &str| {
        vercel_command(
            &repo,
            &mock,
            &[
                "--prompt",
                "add a note",
                "--trust",
                "--log",
                "terminal",
                "--branch",
                branch,
            ],
            CREDENTIALS,
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (a, b) = (spawn("one"), spawn("two"));
    let logs: Vec<String> = [a, b]
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            stderr(&out)
        })
        .collect();
    let kept = logs
        .iter()
        .filter(|l| l.contains("snapshot: kept the prepared sandbox"))
        .count();
    let skipped = logs
        .iter()
        .filter(|l| l.contains("another run kept this set-up as snapshot snap_"))
        .count();
    assert_eq!((kept, skipped), (1, 1), "{logs:#?}");
    let live: Vec<_> = mock
        .snapshots()
        .into_iter()
        .filter(|s| !s.deleted)
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
}
