//! The provider logic, natively, against the loopback mock of the Vercel
//! Sandbox API (which runs commands for real): create with tags, exec with
//! live output and stdin, the file operations, the faults, stop and delete.

use std::time::{Duration, Instant};

use sanddune_plugin_vercel::native::NativeHttp;
use sanddune_plugin_vercel::ndjson::Stream;
use sanddune_plugin_vercel::provider::{Command, ExecSpec, TAG_NAME, TAG_RUN, VercelSandbox};
use sanddune_plugin_vercel::shell_fs::ShellFs;
use sanddune_vercel_mock::{Fault, Op, PROJECT, TEAM, TOKEN, VercelMock};

fn creds(key: &str) -> Option<String> {
    match key {
        "VERCEL_TOKEN" => Some(TOKEN.into()),
        "VERCEL_TEAM_ID" => Some(TEAM.into()),
        "VERCEL_PROJECT_ID" => Some(PROJECT.into()),
        _ => None,
    }
}

fn config(mock: &VercelMock) -> Vec<(String, String)> {
    vec![("api-url".into(), mock.url().into())]
}

fn create(mock: &VercelMock) -> VercelSandbox<NativeHttp> {
    VercelSandbox::create(
        NativeHttp,
        &creds,
        &config(mock),
        ("run-123", "my-branch"),
        vec![
            ("GREETING".into(), "hello".into()),
            ("VERCEL_TOKEN".into(), TOKEN.into()),
        ],
        None,
    )
    .unwrap()
}

fn shell(line: &str) -> ExecSpec {
    ExecSpec {
        command: Command::Shell(line.into()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: None,
    }
}

/// Run and collect: (exit code, stdout lines, stderr lines).
fn run(
    sb: &VercelSandbox<NativeHttp>,
    spec: ExecSpec,
) -> Result<(i32, Vec<String>, Vec<String>), String> {
    let (mut out, mut err) = (vec![], vec![]);
    let outcome = sb.exec(spec, &mut |s, line| match s {
        Stream::Stdout => out.push(line),
        Stream::Stderr => err.push(line),
    })?;
    Ok((outcome.exit_code, out, err))
}

#[test]
fn create_tags_the_run_and_close_stops_and_deletes() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    let view = &mock.sandboxes()[0];
    assert_eq!(view.tags.get(TAG_RUN).map(String::as_str), Some("run-123"));
    assert_eq!(
        view.tags.get(TAG_NAME).map(String::as_str),
        Some("my-branch")
    );
    assert_eq!(view.body["projectId"], PROJECT);
    assert_eq!(view.body["resources"]["vcpus"], 2);
    assert_eq!(view.body["timeout"], 45 * 60_000);
    assert_eq!(sb.worktree_path(), view.cwd.display().to_string());
    // Every request carried the token and the team.
    for seen in mock.seen() {
        assert_eq!(
            seen.authorization.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert!(seen.query.contains(&format!("teamId={TEAM}")), "{seen:?}");
    }
    sb.close().unwrap();
    sb.close().unwrap();
    let view = &mock.sandboxes()[0];
    assert!(view.deleted && view.status == "stopped", "{view:?}");
    let ops: Vec<String> = mock
        .seen()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert!(ops.iter().any(|o| o.ends_with("/stop")), "{ops:?}");
    assert_eq!(
        ops.iter()
            .filter(|o| o.starts_with("DELETE /v2/sandboxes/"))
            .count(),
        1,
        "{ops:?}"
    );
}

#[test]
fn exec_streams_output_delivers_stdin_and_keeps_credentials_out() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    let (code, out, err) =
        run(&sb, shell("echo one; echo two >&2; printf 'three'; exit 7")).unwrap();
    assert_eq!(
        (code, out, err),
        (
            7,
            vec!["one".to_string(), "three".into()],
            vec!["two".to_string()]
        )
    );

    // Live: the first line arrives while the command still runs.
    let started = Instant::now();
    let mut first_at = None;
    sb.exec(shell("echo early; sleep 1; echo late"), &mut |_, line| {
        if line == "early" {
            first_at = Some(started.elapsed());
        }
    })
    .unwrap();
    assert!(
        first_at.unwrap() < Duration::from_millis(800),
        "{first_at:?}"
    );

    // Stdin bytes arrive intact, and the file holding them is gone.
    let prompt = "line 1\nünïcode ✓\n$HOME `x` 'q'\n".repeat(2000);
    let spec = ExecSpec {
        stdin: Some(prompt.clone().into_bytes()),
        ..shell("sha256sum; ls -A \"$HOME/.sanddune\" | wc -l")
    };
    let (code, out, _) = run(&sb, spec).unwrap();
    let want = {
        use std::io::Write;
        let mut c = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(prompt.as_bytes())
            .unwrap();
        String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()
    };
    assert_eq!(code, 0);
    assert_eq!(out[0], want.trim());
    assert_eq!(out[1], "0", "the stdin file must be removed");
    // Without stdin bytes the command reads end-of-file at once.
    let (_, out, _) = run(&sb, shell("cat; echo eof")).unwrap();
    assert_eq!(out, vec!["eof"]);

    // Argv is passed without a shell; env is the sandbox's plus the exec's,
    // never the provider's credentials.
    let spec = ExecSpec {
        command: Command::Argv(vec![
            "printf".into(),
            "%s|".into(),
            "a b".into(),
            "$GREETING".into(),
        ]),
        ..shell("")
    };
    assert_eq!(run(&sb, spec).unwrap().1, vec!["a b|$GREETING|"]);
    let spec = ExecSpec {
        env: vec![
            ("EXTRA".into(), "x".into()),
            ("VERCEL_TOKEN".into(), TOKEN.into()),
        ],
        ..shell("echo \"$GREETING $EXTRA ${VERCEL_TOKEN:-none}\"")
    };
    assert_eq!(run(&sb, spec).unwrap().1, vec!["hello x none"]);
    // cwd relative to the worktree.
    sb.mkdir("sub", false).unwrap();
    let spec = ExecSpec {
        cwd: Some("sub".into()),
        ..shell("pwd")
    };
    assert_eq!(
        run(&sb, spec).unwrap().1,
        vec![format!("{}/sub", sb.worktree_path())]
    );
    sb.close().unwrap();
}

#[test]
fn exec_timeout_kills_and_reports_timed_out() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    let spec = ExecSpec {
        timeout_ms: Some(500),
        ..shell("echo start; sleep 30")
    };
    let started = Instant::now();
    let outcome = sb.exec(spec, &mut |_, _| {}).unwrap();
    assert!(outcome.timed_out && outcome.exit_code == -1);
    assert!(started.elapsed() < Duration::from_secs(10));
    sb.close().unwrap();
}

#[test]
fn file_operations_round_trip() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 256) as u8).collect();
    sb.write_file("deep/dir/data.bin", &bytes).unwrap();
    assert_eq!(sb.read_file("deep/dir/data.bin").unwrap(), bytes);
    let abs = format!("{}/deep/dir/data.bin", sb.worktree_path());
    assert_eq!(sb.read_file(&abs).unwrap().len(), bytes.len());
    let e = sb.read_file("missing.txt").unwrap_err();
    assert!(e.contains("no such file"), "{e}");

    let st = sb.stat("deep/dir/data.bin").unwrap();
    assert!(st.is_file && !st.is_directory && !st.is_symlink);
    assert_eq!(st.size, Some(300_000));
    assert!(st.mtime_ms.unwrap() > 1_600_000_000_000);
    assert!(sb.stat("deep").unwrap().is_directory);
    assert!(sb.stat("nope").is_err());

    sb.write_file("deep/.hidden", b"h").unwrap();
    assert_eq!(sb.read_dir("deep").unwrap(), vec![".hidden", "dir"]);
    assert!(sb.read_dir("deep/.hidden").is_err());
    assert!(sb.exists("deep/.hidden").unwrap());
    assert!(!sb.exists("deep/none").unwrap());

    sb.mkdir("a", false).unwrap();
    assert!(
        sb.mkdir("a", false).is_err(),
        "mkdir of an existing dir fails"
    );
    assert!(sb.mkdir("b/c", false).is_err(), "mkdir is not recursive");
    sb.mkdir("b/c", true).unwrap();
    assert!(sb.stat("b/c").unwrap().is_directory);

    assert!(
        sb.remove("deep", false, false).is_err(),
        "a non-empty dir needs recursive"
    );
    assert!(sb.exists("deep/dir/data.bin").unwrap());
    sb.remove("deep", true, false).unwrap();
    assert!(!sb.exists("deep").unwrap());
    assert!(sb.remove("deep", false, false).is_err());
    sb.remove("deep", false, true).unwrap();
    sb.remove("b/c", false, false).unwrap();

    sb.put(vec![(
        "x/run.sh".into(),
        b"#!/bin/sh\necho ran\n".to_vec(),
        0o755,
    )])
    .unwrap();
    assert_eq!(run(&sb, shell("./x/run.sh")).unwrap().1, vec!["ran"]);
    sb.close().unwrap();
}

#[test]
fn missing_credentials_are_named_before_anything_is_created() {
    let mock = VercelMock::start();
    let only_token = |k: &str| (k == "VERCEL_TOKEN").then(|| TOKEN.to_string());
    let e = VercelSandbox::create(
        NativeHttp,
        &only_token,
        &config(&mock),
        ("r", "n"),
        vec![],
        None,
    )
    .err()
    .unwrap();
    assert!(e.contains("VERCEL_TEAM_ID and VERCEL_PROJECT_ID"), "{e}");
    let none = |_: &str| None;
    let e = VercelSandbox::create(NativeHttp, &none, &config(&mock), ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("VERCEL_OIDC_TOKEN"), "{e}");
    assert!(
        mock.seen().is_empty(),
        "no request before the credentials are known"
    );
}

#[test]
fn auth_failures_name_the_credential() {
    let mock = VercelMock::start();
    let bad_token = |k: &str| {
        if k == "VERCEL_TOKEN" {
            Some("wrong".into())
        } else {
            creds(k)
        }
    };
    let e = VercelSandbox::create(
        NativeHttp,
        &bad_token,
        &config(&mock),
        ("r", "n"),
        vec![],
        None,
    )
    .err()
    .unwrap();
    assert!(e.contains("401") && e.contains("VERCEL_TOKEN"), "{e}");
    let bad_team = |k: &str| {
        if k == "VERCEL_TEAM_ID" {
            Some("team_other".into())
        } else {
            creds(k)
        }
    };
    let e = VercelSandbox::create(
        NativeHttp,
        &bad_team,
        &config(&mock),
        ("r", "n"),
        vec![],
        None,
    )
    .err()
    .unwrap();
    assert!(e.contains("403") && e.contains("VERCEL_TEAM_ID"), "{e}");
    assert_eq!(mock.seen().len(), 2, "4xx are never retried");
    assert!(mock.sandboxes().is_empty());
}

#[test]
fn rate_limits_and_server_errors_are_retried_within_bounds() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    // 429 with a short Retry-After, then 503: both retried, the read succeeds.
    sb.write_file("f", b"x").unwrap();
    mock.inject(Fault::Status {
        op: Op::ReadFile,
        status: 429,
        code: "rate_limited".into(),
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::status(Op::ReadFile, 503, "unavailable"));
    let started = Instant::now();
    assert_eq!(sb.read_file("f").unwrap(), b"x");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    // A Retry-After beyond the bound is not waited for.
    mock.inject(Fault::Status {
        op: Op::ReadFile,
        status: 429,
        code: "rate_limited".into(),
        retry_after: Some(3600),
        times: 1,
    });
    let started = Instant::now();
    let e = sb.read_file("f").unwrap_err();
    assert!(e.contains("429") && e.contains("3600 s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Persistent 5xx: three attempts, then a clear error.
    mock.inject(Fault::Status {
        op: Op::ReadFile,
        status: 500,
        code: "internal".into(),
        retry_after: None,
        times: 3,
    });
    let before = mock.seen().len();
    let e = sb.read_file("f").unwrap_err();
    assert!(e.contains("500") && e.contains("after 3 attempts"), "{e}");
    assert_eq!(mock.seen().len() - before, 3);
    sb.close().unwrap();
}

#[test]
fn gone_stopped_and_busy_sandboxes_give_clear_errors() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    mock.inject(Fault::status(Op::RunCommand, 410, "sandbox_stopped"));
    let e = run(&sb, shell("true")).unwrap_err();
    assert!(e.contains("410") && e.contains("stopped"), "{e}");
    mock.inject(Fault::status(Op::RunCommand, 404, "not_found"));
    let e = run(&sb, shell("true")).unwrap_err();
    assert!(e.contains("404") && e.contains("gone"), "{e}");
    mock.inject(Fault::status(Op::WriteFiles, 422, "sandbox_stopping"));
    let e = sb.write_file("x", b"y").unwrap_err();
    assert!(e.contains("422") && e.contains("sandbox_stopping"), "{e}");
    // Stop and delete still happen when the sandbox is already gone.
    mock.inject(Fault::status(Op::Stop, 410, "sandbox_stopped"));
    sb.close().unwrap();
    assert!(mock.sandboxes()[0].deleted);
}

#[test]
fn a_stream_that_ends_early_or_drops_loses_no_output() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    let script = "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.1; done; exit 3";
    let want: Vec<String> = (1..=6).map(|i| format!("line{i}")).collect();

    mock.inject(Fault::EndStreamEarly {
        command_contains: "line$i".into(),
    });
    let (code, out, _) = run(&sb, shell(script)).unwrap();
    assert_eq!((code, &out), (3, &want));

    mock.inject(Fault::DropMidExec {
        after_logs: 2,
        command_contains: "line$i".into(),
    });
    let (code, out, _) = run(&sb, shell(script)).unwrap();
    assert_eq!((code, &out), (3, &want), "each line exactly once");

    // When reattaching fails too, the error says what was lost.
    mock.inject(Fault::DropMidExec {
        after_logs: 1,
        command_contains: String::new(),
    });
    mock.inject(Fault::Status {
        op: Op::Logs,
        status: 404,
        code: "not_found".into(),
        retry_after: None,
        times: 1,
    });
    let e = run(&sb, shell(script)).unwrap_err();
    assert!(e.contains("reattaching") && e.contains("404"), "{e}");
    sb.close().unwrap();
}

#[test]
fn a_failure_after_create_stops_and_deletes_the_sandbox() {
    let mock = VercelMock::start();
    // The preparing exec fails: the sandbox must not be left running.
    mock.inject(Fault::Status {
        op: Op::RunCommand,
        status: 500,
        code: "internal".into(),
        retry_after: None,
        times: 3,
    });
    let e = VercelSandbox::create(NativeHttp, &creds, &config(&mock), ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("500"), "{e}");
    let view = &mock.sandboxes()[0];
    assert!(view.deleted, "{view:?}");
}

#[test]
fn attach_reopens_the_sandbox_from_its_state() {
    let mock = VercelMock::start();
    let sb = create(&mock);
    sb.write_file("shared.txt", b"from the first instance")
        .unwrap();
    let other = VercelSandbox::attach(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-123", "my-branch"),
        &sb.state.encode(),
        vec![],
    )
    .unwrap();
    assert_eq!(
        other.read_file("shared.txt").unwrap(),
        b"from the first instance"
    );
    assert_eq!(
        run(&other, shell("cat shared.txt")).unwrap().1,
        vec!["from the first instance"]
    );
    drop(other);
    assert!(
        !mock.sandboxes()[0].deleted,
        "dropping an attached handle keeps the sandbox"
    );
    sb.close().unwrap();
}

/// The host cancels a provider's requests on abort and on the idle
/// timeout; in that call no request may be sent. This transport plays the
/// host: once `cancel` is set, everything in flight and new fails as
/// cancelled.
#[derive(Clone)]
struct Cancellable {
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

struct CancellableBody {
    inner: Box<dyn sanddune_plugin_vercel::transport::Body>,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

use sanddune_plugin_vercel::transport::{BaseUrl, Request, Response, Transport, TransportError};
use std::sync::atomic::Ordering::SeqCst;

const CANCELLED: &str = "request cancelled by the host: the run was aborted or timed out";

impl sanddune_plugin_vercel::transport::Body for CancellableBody {
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        if self.cancel.load(SeqCst) {
            return Err(TransportError::Cancelled(CANCELLED.into()));
        }
        self.inner.next_chunk()
    }
}

impl Transport for Cancellable {
    fn send(&self, base: &BaseUrl, request: Request) -> Result<Response, TransportError> {
        if self.cancel.load(SeqCst) {
            return Err(TransportError::Cancelled(CANCELLED.into()));
        }
        let r = NativeHttp.send(base, request)?;
        Ok(Response {
            status: r.status,
            headers: r.headers,
            body: Box::new(CancellableBody {
                inner: r.body,
                cancel: self.cancel.clone(),
            }),
        })
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

#[test]
fn a_cancelled_exec_is_killed_at_the_next_call() {
    let mock = VercelMock::start();
    let t = Cancellable {
        cancel: Default::default(),
    };
    let sb =
        VercelSandbox::create(t.clone(), &creds, &config(&mock), ("r", "n"), vec![], None).unwrap();
    let e = sb
        .exec(shell("echo started; sleep 30"), &mut |_, line| {
            if line == "started" {
                t.cancel.store(true, SeqCst);
            }
        })
        .err()
        .unwrap();
    assert!(e.contains("cancelled"), "{e}");
    assert_eq!(
        mock.running_commands().len(),
        1,
        "the command outlives the cancelled call"
    );
    // The next call (the host's next use of the sandbox) kills it first.
    t.cancel.store(false, SeqCst);
    assert!(sb.exists("nothing-here").is_ok());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mock.running_commands().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        mock.running_commands().is_empty(),
        "the cancelled command was not killed"
    );
    let kills = mock
        .seen()
        .iter()
        .filter(|s| s.path.ends_with("/kill"))
        .count();
    assert_eq!(kills, 1);
    sb.close().unwrap();
}

#[test]
fn a_sandbox_in_use_is_extended_before_its_timeout() {
    let mock = VercelMock::start();
    let mut cfg = config(&mock);
    cfg.push(("timeout".into(), "3s".into()));
    let sb = VercelSandbox::create(NativeHttp, &creds, &cfg, ("r", "n"), vec![], None).unwrap();
    // Six seconds of use of a sandbox that times out after three: each exec
    // near the end of the timeout extends it.
    for _ in 0..6 {
        let (code, out, _) = run(&sb, shell("echo alive")).unwrap();
        assert_eq!((code, out), (0, vec!["alive".to_string()]));
        std::thread::sleep(Duration::from_millis(1000));
    }
    assert_eq!(mock.sandboxes()[0].status, "running");
    let extended = mock
        .seen()
        .iter()
        .filter(|s| s.path.ends_with("/extend-timeout"))
        .count();
    assert!((2..=6).contains(&extended), "{extended}");
    sb.close().unwrap();

    // Unused, the mock stops it like Vercel does.
    let idle = VercelSandbox::create(NativeHttp, &creds, &cfg, ("r", "n"), vec![], None).unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        mock.sandboxes()
            .iter()
            .any(|s| s.status == "stopped" && !s.deleted)
    );
    let e = run(&idle, shell("true")).unwrap_err();
    assert!(e.contains("410") && e.contains("stopped"), "{e}");
    idle.close().unwrap();
}

/// `find` pages through every sandbox tagged with the run, and only those;
/// each state it returns attaches, and closing that deletes the sandbox.
#[test]
fn find_pages_through_the_runs_sandboxes_and_closing_one_deletes_it() {
    let mock = VercelMock::start();
    mock.set_page_size(1);
    let (first, second) = (create(&mock), create(&mock));
    let other = VercelSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-9", "b"),
        vec![],
        None,
    )
    .unwrap();
    let found = VercelSandbox::find(NativeHttp, &creds, &config(&mock), "run-123").unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    let lists = mock
        .seen()
        .iter()
        .filter(|s| s.path == "/v2/sandboxes" && s.method == "GET")
        .count();
    assert_eq!(lists, 2, "one page per sandbox");
    for state in found {
        VercelSandbox::attach(
            NativeHttp,
            &creds,
            &config(&mock),
            ("run-9", "b"),
            &state,
            vec![],
        )
        .unwrap()
        .close()
        .unwrap();
    }
    let deleted: Vec<bool> = mock.sandboxes().iter().map(|s| s.deleted).collect();
    assert_eq!(deleted, [true, true, false]);
    assert!(
        VercelSandbox::find(NativeHttp, &creds, &config(&mock), "run-123")
            .unwrap()
            .is_empty()
    );
    assert!(
        VercelSandbox::find(NativeHttp, &|_| None, &config(&mock), "run-123")
            .unwrap_err()
            .contains("VERCEL_TOKEN")
    );
    drop((first, second));
    other.close().unwrap();
}

/// `keep` snapshots the sandbox (which stops its session) and puts a
/// sandbox created from the snapshot in its place, with the same tags:
/// the files are there, the state is the new sandbox's, the stopped one is
/// deleted.
#[test]
fn keep_puts_a_sandbox_started_from_the_snapshot_in_its_place() {
    let mock = VercelMock::start();
    let mut sb = create(&mock);
    sb.write_file("prepared.txt", b"by the set-up").unwrap();
    let before = sb.state.encode();
    let id = sb.keep().unwrap();
    assert!(id.starts_with("snap_"), "{id}");
    assert_ne!(sb.state.encode(), before);
    assert_eq!(sb.read_file("prepared.txt").unwrap(), b"by the set-up");
    let sandboxes = mock.sandboxes();
    assert_eq!(sandboxes.len(), 2, "{sandboxes:?}");
    assert!(sandboxes[0].deleted, "the stopped one is deleted");
    assert_eq!(sandboxes[1].source_snapshot.as_deref(), Some(id.as_str()));
    assert_eq!(
        sandboxes[1].tags.get(TAG_RUN).map(String::as_str),
        Some("run-123")
    );
    assert_eq!(
        sandboxes[1].tags.get(TAG_NAME).map(String::as_str),
        Some("my-branch")
    );
    // No runtime or image goes with a snapshot: the snapshot has its own.
    assert!(
        sandboxes[1].body.get("runtime").is_none(),
        "{:?}",
        sandboxes[1].body
    );

    // A later create starts from it.
    let later = VercelSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-456", "later"),
        vec![],
        Some(&id),
    )
    .unwrap();
    assert_eq!(later.read_file("prepared.txt").unwrap(), b"by the set-up");
    later.close().unwrap();
    sb.close().unwrap();

    // Removed; removing it again is fine.
    VercelSandbox::remove_snapshot(NativeHttp, &creds, &config(&mock), &id).unwrap();
    assert!(mock.snapshots()[0].deleted);
    VercelSandbox::remove_snapshot(NativeHttp, &creds, &config(&mock), "snap_unknown").unwrap();
}

/// A snapshot that is gone fails the create, with nothing left behind.
#[test]
fn a_create_from_a_snapshot_that_is_gone_fails_and_leaves_nothing() {
    let mock = VercelMock::start();
    let mut sb = create(&mock);
    let id = sb.keep().unwrap();
    sb.close().unwrap();
    assert!(mock.delete_snapshot_behind(&id));
    let e = VercelSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-456", "later"),
        vec![],
        Some(&id),
    )
    .err()
    .unwrap();
    assert!(e.contains("410") || e.contains("snapshot_not_found"), "{e}");
    assert!(
        mock.sandboxes().iter().all(|s| s.deleted),
        "{:?}",
        mock.sandboxes()
    );
}
