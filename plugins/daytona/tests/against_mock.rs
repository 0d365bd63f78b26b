//! The provider logic, natively, against the loopback mock of the Daytona
//! API and toolbox (which runs commands for real): create with labels,
//! exec with live output and stdin, the file operations, the faults, stop
//! and delete.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use sanddune_daytona_mock::{API_KEY, DaytonaMock, Fault, JWT, ORGANIZATION, Op};
use sanddune_plugin_daytona::logs::Stream;
use sanddune_plugin_daytona::native::NativeHttp;
use sanddune_plugin_daytona::provider::{Command, DaytonaSandbox, ExecSpec, LABEL_NAME, LABEL_RUN};
use sanddune_plugin_daytona::shell_fs::ShellFs;
use sanddune_plugin_daytona::transport::{
    BaseUrl, Body, Request, Response, Transport, TransportError,
};

fn creds(key: &str) -> Option<String> {
    (key == "DAYTONA_API_KEY").then(|| API_KEY.to_string())
}

fn config(mock: &DaytonaMock) -> Vec<(String, String)> {
    vec![
        ("api-url".into(), mock.api_url()),
        ("toolbox-url".into(), mock.toolbox_url()),
    ]
}

fn create(mock: &DaytonaMock) -> DaytonaSandbox<NativeHttp> {
    DaytonaSandbox::create(
        NativeHttp,
        &creds,
        &config(mock),
        ("run-123", "my-branch"),
        vec![
            ("GREETING".into(), "hello".into()),
            ("DAYTONA_API_KEY".into(), API_KEY.into()),
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
fn run<T: Transport>(
    sb: &DaytonaSandbox<T>,
    spec: ExecSpec,
) -> Result<(i32, Vec<String>, Vec<String>), String> {
    let (mut out, mut err) = (vec![], vec![]);
    let outcome = sb.exec(spec, &mut |s, line| match s {
        Stream::Stdout => out.push(line),
        Stream::Stderr => err.push(line),
    })?;
    Ok((outcome.exit_code, out, err))
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn create_labels_the_run_and_close_stops_and_deletes() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    let view = &mock.sandboxes()[0];
    assert_eq!(
        view.labels.get(LABEL_RUN).map(String::as_str),
        Some("run-123")
    );
    assert_eq!(
        view.labels.get(LABEL_NAME).map(String::as_str),
        Some("my-branch")
    );
    assert_eq!(view.body["autoStopInterval"], 30);
    assert_eq!(view.body["autoDeleteInterval"], 0);
    assert_eq!(view.body["env"], serde_json::json!({}));
    assert_eq!(view.state, "started", "create waits until started");
    assert_eq!(
        sb.worktree_path(),
        view.home.join("workspace").display().to_string()
    );
    assert!(view.home.join("workspace").is_dir());
    // Every request carried the key and named the SDK version whose
    // answers the provider reads.
    for seen in mock.seen() {
        assert_eq!(
            seen.authorization.as_deref(),
            Some(format!("Bearer {API_KEY}").as_str())
        );
        assert_eq!(seen.sdk_version.as_deref(), Some("0.190.0"));
        assert!(seen.status < 400, "{seen:?}");
    }
    let polls = mock
        .seen()
        .iter()
        .filter(|s| s.method == "GET" && s.path.starts_with("/api/sandbox/"))
        .count();
    assert!(polls >= 1, "the provider waited for the sandbox to start");
    sb.close().unwrap();
    sb.close().unwrap();
    let view = &mock.sandboxes()[0];
    assert!(view.deleted, "{view:?}");
    let seen: Vec<String> = mock
        .seen()
        .iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    let stop = seen.iter().position(|s| s.ends_with("/stop")).unwrap();
    let delete = seen
        .iter()
        .position(|s| s.starts_with("DELETE /api/sandbox/"))
        .unwrap();
    assert!(stop < delete, "{seen:?}");
}

#[test]
fn exec_streams_output_delivers_stdin_and_keeps_credentials_out() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    // Output arrives while the command still runs.
    let mut running_at_first = None;
    let outcome = sb
        .exec(
            shell("echo one; echo oops >&2; sleep 1; echo two; exit 3"),
            &mut |s, line| {
                if running_at_first.is_none() {
                    running_at_first = Some(!mock.running_commands().is_empty());
                }
                if line == "one" {
                    assert_eq!(s, Stream::Stdout);
                }
                if line == "oops" {
                    assert_eq!(s, Stream::Stderr);
                }
            },
        )
        .unwrap();
    assert_eq!(outcome.exit_code, 3);
    assert!(!outcome.timed_out);
    assert_eq!(
        running_at_first,
        Some(true),
        "the first line came only once the command had ended"
    );
    let (code, out, err) = run(&sb, shell("echo one; echo oops >&2; printf 'no newline'")).unwrap();
    assert_eq!(code, 0);
    assert_eq!(out, vec!["one", "no newline"]);
    assert_eq!(err, vec!["oops"]);

    // stdin: the bytes, then end of file; without bytes, end of file at
    // once (an async command's own stdin stays open: `cat` would hang).
    let mut spec = shell("cat; echo; echo end");
    spec.stdin = Some(b"line 1\nline 2 'quoted' $HOME".to_vec());
    let (_, out, _) = run(&sb, spec).unwrap();
    assert_eq!(out, vec!["line 1", "line 2 'quoted' $HOME", "end"]);
    let (code, out, _) = run(&sb, shell("cat; echo done")).unwrap();
    assert_eq!((code, out), (0, vec!["done".to_string()]));

    // cwd, env, argv with awkward words; credentials never reach commands.
    let mut spec = ExecSpec {
        command: Command::Argv(vec![
            "sh".into(),
            "-c".into(),
            r#"pwd; printf '%s|' "$1" "$GREETING" "$LOCAL" "${DAYTONA_API_KEY-unset}"; echo"#
                .into(),
            "sh".into(),
            "it's a \"word\"".into(),
        ]),
        ..shell("")
    };
    spec.cwd = Some("sub".into());
    spec.env = vec![
        ("LOCAL".into(), "x y".into()),
        ("DAYTONA_API_KEY".into(), "leak".into()),
    ];
    sb.mkdir("sub", true).unwrap();
    let (code, out, err) = run(&sb, spec).unwrap();
    assert_eq!(code, 0, "{err:?}");
    assert_eq!(out[0], format!("{}/sub", sb.worktree_path()));
    assert_eq!(out[1], "it's a \"word\"|hello|x y|unset|");

    // A command cannot break its session: `exit` and `cd` stay in it.
    run(&sb, shell("cd /; exit 7")).unwrap();
    let (code, out, _) = run(&sb, shell("pwd")).unwrap();
    assert_eq!((code, out), (0, vec![sb.worktree_path().to_string()]));
    let (code, _, err) = run(&sb, shell("no-such-program-here")).unwrap();
    assert_eq!(code, 127, "{err:?}");
    sb.close().unwrap();
}

#[test]
fn exec_timeout_kills_and_reports_timed_out() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    let mut spec = shell("echo going; sleep 30");
    spec.timeout_ms = Some(700);
    let started = Instant::now();
    let outcome = sb.exec(spec, &mut |_, _| {}).unwrap();
    assert!(outcome.timed_out);
    assert_eq!(outcome.exit_code, -1);
    assert!(started.elapsed() < Duration::from_secs(5));
    wait_until("the command is killed", || {
        mock.running_commands().is_empty()
    });
    // The sandbox goes on in a new session.
    let (code, out, _) = run(&sb, shell("echo after")).unwrap();
    assert_eq!((code, out), (0, vec!["after".to_string()]));
    sb.close().unwrap();
}

#[test]
fn file_operations_round_trip() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    sb.write_file("dir/a.txt", b"hello\n").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    sb.put(vec![
        ("b/c/big.bin".into(), big.clone()),
        ("b/empty".into(), vec![]),
    ])
    .unwrap();
    assert_eq!(sb.read_file("dir/a.txt").unwrap(), b"hello\n");
    assert_eq!(sb.read_file("b/c/big.bin").unwrap(), big);
    assert_eq!(sb.read_file("b/empty").unwrap(), b"");
    let e = sb.read_file("nope.txt").unwrap_err();
    assert!(e.contains("no such file"), "{e}");
    let s = sb.stat("dir/a.txt").unwrap();
    assert!(s.is_file && !s.is_directory && s.size == Some(6));
    assert!(sb.stat("dir").unwrap().is_directory);
    assert!(sb.stat("missing").is_err());
    assert_eq!(sb.read_dir("b").unwrap(), vec!["c", "empty"]);
    assert!(sb.exists("dir/a.txt").unwrap());
    assert!(!sb.exists("dir/zzz").unwrap());
    assert!(
        sb.mkdir("x/y/z", false).is_err(),
        "one level needs the parent"
    );
    sb.mkdir("x/y/z", true).unwrap();
    sb.mkdir("x/y/z/w", false).unwrap();
    assert!(sb.stat("x/y/z/w").unwrap().is_directory);
    assert!(sb.remove("x", false, false).is_err());
    sb.remove("x", true, false).unwrap();
    sb.remove("x", true, true).unwrap();
    assert!(sb.remove("x", true, false).is_err());
    sb.close().unwrap();
}

#[test]
fn missing_credentials_are_named_before_anything_is_created() {
    let mock = DaytonaMock::start();
    let none = |_: &str| None;
    let e = DaytonaSandbox::create(NativeHttp, &none, &config(&mock), ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("DAYTONA_API_KEY"), "{e}");
    let jwt_only = |k: &str| (k == "DAYTONA_JWT_TOKEN").then(|| JWT.to_string());
    let e = DaytonaSandbox::create(
        NativeHttp,
        &jwt_only,
        &config(&mock),
        ("r", "n"),
        vec![],
        None,
    )
    .err()
    .unwrap();
    assert!(e.contains("DAYTONA_ORGANIZATION_ID"), "{e}");
    assert!(mock.seen().is_empty());
}

#[test]
fn a_jwt_acts_for_its_organization() {
    let mock = DaytonaMock::start();
    let jwt = |k: &str| match k {
        "DAYTONA_JWT_TOKEN" => Some(JWT.to_string()),
        "DAYTONA_ORGANIZATION_ID" => Some(ORGANIZATION.to_string()),
        _ => None,
    };
    let sb =
        DaytonaSandbox::create(NativeHttp, &jwt, &config(&mock), ("r", "n"), vec![], None).unwrap();
    assert_eq!(run(&sb, shell("echo hi")).unwrap().1, vec!["hi"]);
    sb.close().unwrap();
    assert!(
        mock.seen()
            .iter()
            .all(|s| s.organization.as_deref() == Some(ORGANIZATION))
    );
    let other_org = |k: &str| match k {
        "DAYTONA_JWT_TOKEN" => Some(JWT.to_string()),
        "DAYTONA_ORGANIZATION_ID" => Some("org_other".to_string()),
        _ => None,
    };
    let e = DaytonaSandbox::create(
        NativeHttp,
        &other_org,
        &config(&mock),
        ("r", "n"),
        vec![],
        None,
    )
    .err()
    .unwrap();
    assert!(
        e.contains("403") && e.contains("DAYTONA_ORGANIZATION_ID"),
        "{e}"
    );
}

#[test]
fn a_rejected_key_is_named() {
    let mock = DaytonaMock::start();
    let bad = |k: &str| (k == "DAYTONA_API_KEY").then(|| "expired".to_string());
    let e = DaytonaSandbox::create(NativeHttp, &bad, &config(&mock), ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("401") && e.contains("DAYTONA_API_KEY"), "{e}");
    assert!(mock.sandboxes().is_empty());
}

#[test]
fn rate_limits_and_server_errors_are_retried_within_bounds() {
    let mock = DaytonaMock::start();
    mock.inject(Fault::status(Op::Create, 503));
    mock.inject(Fault::Status {
        op: Op::Logs,
        status: 429,
        retry_after: Some(1),
        times: 1,
    });
    mock.inject(Fault::status(Op::Upload, 502));
    let sb = create(&mock);
    assert_eq!(mock.sandboxes().len(), 1, "a refused create made nothing");
    let started = Instant::now();
    let (code, out, _) = run(&sb, shell("echo fine")).unwrap();
    assert_eq!((code, out), (0, vec!["fine".to_string()]));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    sb.write_file("f", b"x").unwrap();
    // Bounded: a server that keeps failing is an error after 3 attempts.
    mock.inject(Fault::Status {
        op: Op::Download,
        status: 500,
        retry_after: None,
        times: 10,
    });
    let e = sb.read_file("f").unwrap_err();
    assert!(e.contains("500") && e.contains("after 3 attempts"), "{e}");
    mock.clear_faults();
    // A Retry-After too long to wait for is reported, not slept through.
    mock.inject(Fault::Status {
        op: Op::Download,
        status: 429,
        retry_after: Some(3600),
        times: 1,
    });
    let e = sb.read_file("f").unwrap_err();
    assert!(e.contains("429") && e.contains("3600"), "{e}");
    // Other 4xx are never retried.
    mock.inject(Fault::status(Op::Folder, 422));
    let e = sb.mkdir("d", true).unwrap_err();
    assert!(e.contains("422"), "{e}");
    assert_eq!(mock.seen().iter().filter(|s| s.status == 422).count(), 1);
    sb.close().unwrap();
}

#[test]
fn a_sandbox_that_is_gone_gives_clear_errors_and_close_still_succeeds() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    mock.inject(Fault::Status {
        op: Op::Exec,
        status: 410,
        retry_after: None,
        times: 1,
    });
    let e = run(&sb, shell("true")).unwrap_err();
    assert!(e.contains("410"), "{e}");
    mock.inject(Fault::status(Op::Download, 404));
    let e = sb.read_file("anything").unwrap_err();
    assert!(e.contains("no such file"), "{e}");
    // Deleted behind the provider's back: calls say so, close is fine.
    mock.inject(Fault::status(Op::Delete, 404));
    mock.inject(Fault::status(Op::Stop, 404));
    sb.close().unwrap();
}

#[test]
fn a_lost_session_fails_the_exec_clearly_and_the_sandbox_goes_on() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    mock.inject(Fault::SessionLost {
        command_contains: "lost-here".into(),
        after_lines: 2,
    });
    let mut lines = vec![];
    let e = sb
        .exec(
            shell("echo lost-here; echo 2; sleep 1; echo 3; sleep 30"),
            &mut |_, l| lines.push(l),
        )
        .err()
        .unwrap();
    assert!(e.contains("ended before the command exited"), "{e}");
    // What was read before the session went was delivered once, in order;
    // what the session took with it is gone, as with the real daemon.
    assert!(
        ["lost-here", "2"].starts_with(&lines.iter().map(String::as_str).collect::<Vec<_>>()),
        "{lines:?}"
    );
    wait_until("the lost command is gone", || {
        mock.running_commands().is_empty()
    });
    let (code, out, _) = run(&sb, shell("echo again")).unwrap();
    assert_eq!((code, out), (0, vec!["again".to_string()]));
    sb.close().unwrap();
}

#[test]
fn a_connection_dropped_mid_exec_loses_and_repeats_nothing() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    mock.inject(Fault::DropMidExec {
        command_contains: "counting".into(),
        after_lines: 3,
    });
    let (code, out, _) = run(
        &sb,
        shell("echo counting; for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"),
    )
    .unwrap();
    assert_eq!(code, 0);
    assert_eq!(out, vec!["counting", "1", "2", "3", "4", "5", "6"]);
    sb.close().unwrap();
}

#[test]
fn a_failure_after_create_stops_and_deletes_the_sandbox() {
    let mock = DaytonaMock::start();
    mock.inject(Fault::Status {
        op: Op::WorkDir,
        status: 500,
        retry_after: None,
        times: 5,
    });
    let e = DaytonaSandbox::create(NativeHttp, &creds, &config(&mock), ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("500"), "{e}");
    assert!(mock.sandboxes()[0].deleted);
    // A toolbox on an origin the host does not grant is refused, naming
    // the option, and the sandbox is deleted too.
    let cfg = vec![
        ("api-url".into(), mock.api_url()),
        (
            "toolbox-url".into(),
            "https://proxy.app.daytona.io/toolbox".into(),
        ),
    ];
    let e = DaytonaSandbox::create(NativeHttp, &creds, &cfg, ("r", "n"), vec![], None)
        .err()
        .unwrap();
    assert!(e.contains("--sandbox-opt toolbox-url="), "{e}");
    assert!(mock.sandboxes().iter().all(|s| s.deleted));
}

#[test]
fn attach_reopens_the_sandbox_from_its_state() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    sb.write_file("shared.txt", b"from the first instance")
        .unwrap();
    let other = DaytonaSandbox::attach(
        NativeHttp,
        &creds,
        &config(&mock),
        &sb.state.encode(),
        vec![],
    )
    .unwrap();
    assert_eq!(
        other.read_file("shared.txt").unwrap(),
        b"from the first instance"
    );
    // Two instances run at once, each in its own session.
    let started = Instant::now();
    let lane = std::thread::spawn(move || {
        let out = run(&other, shell("sleep 1; echo b")).unwrap().1;
        (out, other)
    });
    let a = run(&sb, shell("sleep 1; echo a")).unwrap().1;
    let (b, other) = lane.join().unwrap();
    assert_eq!((a, b), (vec!["a".to_string()], vec!["b".to_string()]));
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "they ran at once"
    );
    drop(other);
    assert!(!mock.sandboxes()[0].deleted);
    sb.close().unwrap();
}

/// The host cancels a provider's requests on abort and on the idle
/// timeout; in that call no request may be sent. This transport plays the
/// host: once `cancel` is set, everything in flight and new fails as
/// cancelled.
#[derive(Clone)]
struct Cancellable {
    cancel: Arc<AtomicBool>,
}

struct CancellableBody {
    inner: Box<dyn Body>,
    cancel: Arc<AtomicBool>,
}

const CANCELLED: &str = "request cancelled by the host: the run was aborted or timed out";

impl Body for CancellableBody {
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
    let mock = DaytonaMock::start();
    let t = Cancellable {
        cancel: Default::default(),
    };
    let sb = DaytonaSandbox::create(t.clone(), &creds, &config(&mock), ("r", "n"), vec![], None)
        .unwrap();
    let e = sb
        .exec(shell("echo started; sleep 30"), &mut |_, line| {
            if line == "started" {
                t.cancel.store(true, SeqCst);
            }
        })
        .err()
        .unwrap();
    assert!(e.contains("cancelled"), "{e}");
    assert_eq!(mock.running_commands().len(), 1, "it outlives the call");
    // The next call (the host's next use of the sandbox) kills it first,
    // by deleting its session.
    t.cancel.store(false, SeqCst);
    assert!(sb.exists("nothing-here").is_ok());
    wait_until("the cancelled command is killed", || {
        mock.running_commands().is_empty()
    });
    let deletes = mock
        .seen()
        .iter()
        .filter(|s| s.method == "DELETE" && s.path.contains("/process/session/"))
        .count();
    assert_eq!(deletes, 1);
    sb.close().unwrap();
}

/// `find` pages through every sandbox labelled with the run, and only
/// those; each state it returns attaches, and closing that deletes it.
#[test]
fn find_pages_through_the_runs_sandboxes_and_closing_one_deletes_it() {
    let mock = DaytonaMock::start();
    mock.set_page_size(1);
    let (first, second) = (create(&mock), create(&mock));
    let other = DaytonaSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-9", "b"),
        vec![],
        None,
    )
    .unwrap();
    let found = DaytonaSandbox::find(NativeHttp, &creds, &config(&mock), "run-123").unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    let lists = mock
        .seen()
        .iter()
        .filter(|s| s.path == "/api/sandbox" && s.method == "GET")
        .count();
    assert_eq!(lists, 2, "one page per sandbox");
    for state in found {
        DaytonaSandbox::attach(NativeHttp, &creds, &config(&mock), &state, vec![])
            .unwrap()
            .close()
            .unwrap();
    }
    let deleted: Vec<bool> = mock.sandboxes().iter().map(|s| s.deleted).collect();
    assert_eq!(deleted, [true, true, false]);
    assert!(
        DaytonaSandbox::find(NativeHttp, &creds, &config(&mock), "run-123")
            .unwrap()
            .is_empty()
    );
    assert!(
        DaytonaSandbox::find(NativeHttp, &|_| None, &config(&mock), "run-123")
            .unwrap_err()
            .contains("DAYTONA_API_KEY")
    );
    drop((first, second));
    other.close().unwrap();
}

/// `keep` snapshots the sandbox in place (Daytona brings it back to
/// `started`) under a name of its own; a create from that name starts with
/// its files; `remove_snapshot` deletes it, and again without an error.
#[test]
fn keep_snapshots_the_sandbox_in_place_and_a_create_starts_from_it() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    sb.write_file("prepared.txt", b"by the set-up").unwrap();
    let before = sb.state.encode();
    let name = sb.keep("sanddune-0123").unwrap();
    assert!(name.starts_with("sanddune-0123-"), "{name}");
    assert_eq!(sb.state.encode(), before, "the same sandbox");
    assert_eq!(sb.read_file("prepared.txt").unwrap(), b"by the set-up");
    // Another keep of the same key gets another name: Daytona would drop a
    // snapshot whose name is taken.
    let again = sb.keep("sanddune-0123").unwrap();
    assert_ne!(again, name);

    let later = DaytonaSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-456", "later"),
        vec![],
        Some(&name),
    )
    .unwrap();
    assert_eq!(later.read_file("prepared.txt").unwrap(), b"by the set-up");
    later.close().unwrap();
    sb.close().unwrap();

    for _ in 0..2 {
        DaytonaSandbox::remove_snapshot(NativeHttp, &creds, &config(&mock), &name).unwrap();
    }
    let snapshots = mock.snapshots();
    let removed = snapshots.iter().find(|s| s.name == name).unwrap();
    assert!(
        removed.deleted || removed.state != "active",
        "{snapshots:?}"
    );
}

/// A create from a snapshot Daytona no longer has fails, and leaves no
/// sandbox behind.
#[test]
fn a_create_from_a_snapshot_that_is_gone_fails_and_leaves_nothing() {
    let mock = DaytonaMock::start();
    let sb = create(&mock);
    let name = sb.keep("sanddune-4567").unwrap();
    sb.close().unwrap();
    assert!(mock.delete_snapshot_behind(&name));
    let e = DaytonaSandbox::create(
        NativeHttp,
        &creds,
        &config(&mock),
        ("run-456", "later"),
        vec![],
        Some(&name),
    )
    .err()
    .unwrap();
    assert!(e.contains(&name), "{e}");
    assert_eq!(mock.sandboxes().len(), 1, "{:?}", mock.sandboxes());
}
