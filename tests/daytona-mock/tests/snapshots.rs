//! The mock's snapshots where the SDK does not reach: what a snapshot
//! keeps of a sandbox's tree (modes, symlinks), the states around it, a
//! snapshot deleted behind the client's back, a name taken twice, list
//! pages, and faults on the snapshot calls. Plain HTTP over a socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use sanddune_daytona_mock::{API_KEY, DaytonaMock, Fault, Op};
use serde_json::{Value, json};

struct Answer {
    status: u16,
    headers: String,
    body: Value,
}

fn call(mock: &DaytonaMock, method: &str, path: &str, body: Option<Value>) -> Answer {
    let host = mock.url().strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(host).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} /api{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (headers, body) = raw.split_once("\r\n\r\n").unwrap();
    Answer {
        status: headers[9..12].parse().unwrap(),
        headers: headers.to_ascii_lowercase(),
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    }
}

/// Poll the sandbox until it is in `state`.
fn wait_for(mock: &DaytonaMock, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = call(mock, "GET", &format!("/sandbox/{id}"), None);
        assert_eq!(a.status, 200, "{}", a.body);
        if a.body["state"] == state {
            return a.body;
        }
        assert!(Instant::now() < deadline, "never {state}: {}", a.body);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A started sandbox, created with `body`.
fn started(mock: &DaytonaMock, body: Value) -> (String, std::path::PathBuf) {
    let a = call(mock, "POST", "/sandbox", Some(body));
    assert_eq!(a.status, 200, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_string();
    wait_for(mock, &id, "started");
    let home = mock
        .sandboxes()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap()
        .home;
    (id, home)
}

/// Snapshot sandbox `id` as `name` and wait until it is back.
fn snapshot(mock: &DaytonaMock, id: &str, name: &str) -> Value {
    let a = call(
        mock,
        "POST",
        &format!("/sandbox/{id}/snapshot"),
        Some(json!({ "name": name })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["state"], "snapshotting");
    let previous = a.body["desiredState"].as_str().unwrap().to_string();
    wait_for(mock, id, &previous);
    a.body
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_snapshot_keeps_the_tree_and_a_create_from_it_gets_a_copy() {
    let mock = DaytonaMock::start();
    let (a, home) = started(&mock, json!({}));
    std::fs::create_dir_all(home.join("work/empty")).unwrap();
    std::fs::write(home.join("work/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(
        home.join("work/run.sh"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    std::fs::write(home.join("work/secret"), "s").unwrap();
    std::fs::set_permissions(
        home.join("work/secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink("run.sh", home.join("work/relative")).unwrap();
    std::os::unix::fs::symlink(home.join("work/secret"), home.join("work/absolute")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", home.join("work/outside")).unwrap();

    assert_eq!(mock.sandboxes()[0].from_snapshot, None);
    // Long enough to look at it while it is snapshotting.
    mock.set_snapshotting_time(Duration::from_millis(600));
    let answer = call(
        &mock,
        "POST",
        &format!("/sandbox/{a}/snapshot"),
        Some(json!({"name": "base"})),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["id"], a);
    assert_eq!(answer.body["state"], "snapshotting");
    assert_eq!(answer.body["desiredState"], "started");
    // Not there until the sandbox is back; meanwhile a stop or delete is a
    // state change in progress, and a second snapshot is refused.
    assert!(mock.snapshots().is_empty());
    assert_eq!(call(&mock, "GET", "/snapshots/base", None).status, 404);
    assert_eq!(mock.sandboxes()[0].state, "snapshotting");
    for (method, path, status) in [
        ("POST", format!("/sandbox/{a}/stop"), 409),
        ("DELETE", format!("/sandbox/{a}"), 409),
        ("POST", format!("/sandbox/{a}/snapshot"), 400),
    ] {
        let r = call(&mock, method, &path, Some(json!({"name": "again"})));
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
    }
    wait_for(&mock, &a, "started");
    mock.set_snapshotting_time(Duration::from_millis(150));

    let snaps = mock.snapshots();
    assert_eq!(snaps.len(), 1);
    let snap = &snaps[0];
    assert_eq!(
        (snap.name.as_str(), snap.state.as_str(), snap.deleted),
        ("base", "active", false)
    );
    assert_eq!(snap.sandbox, a);
    for key in ["base", snap.id.as_str()] {
        let got = call(&mock, "GET", &format!("/snapshots/{key}"), None);
        assert_eq!(got.status, 200);
        assert_eq!(got.body["id"], snap.id);
        assert_eq!(got.body["name"], "base");
        assert_eq!(got.body["state"], "active");
        assert_eq!(got.body["general"], false);
    }
    // A point in time: what changes after is not in it.
    std::fs::write(home.join("work/secret"), "changed").unwrap();

    let (b, home_b) = started(&mock, json!({"snapshot": "base"}));
    let view = mock.sandboxes().into_iter().find(|s| s.id == b).unwrap();
    assert_eq!(view.from_snapshot.as_deref(), Some(snap.id.as_str()));
    assert_eq!(
        call(&mock, "GET", &format!("/sandbox/{b}"), None).body["snapshot"],
        "base"
    );
    assert_ne!(home, home_b);
    let w = home_b.join("work");
    assert_eq!(std::fs::read_to_string(w.join("secret")).unwrap(), "s");
    assert_eq!(mode(&w.join("run.sh")), 0o750);
    assert_eq!(mode(&w.join("secret")), 0o600);
    assert!(w.join("empty").is_dir());
    assert_eq!(
        std::fs::read_link(w.join("relative")).unwrap(),
        Path::new("run.sh")
    );
    // The same place in the new sandbox, as on Daytona, where every
    // sandbox has the same paths.
    assert_eq!(
        std::fs::read_link(w.join("absolute")).unwrap(),
        w.join("secret")
    );
    assert_eq!(
        std::fs::read_link(w.join("outside")).unwrap(),
        Path::new("/etc/hostname")
    );
    // Commands run there see it.
    let out = std::process::Command::new("sh")
        .arg(w.join("relative"))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"hi\n");

    // By id too; the sandbox reports the snapshot's name.
    let (c, _) = started(&mock, json!({"snapshot": snap.id}));
    assert_eq!(
        call(&mock, "GET", &format!("/sandbox/{c}"), None).body["snapshot"],
        "base"
    );
}

#[test]
fn only_a_started_or_stopped_sandbox_is_snapshotted_and_it_returns_to_its_state() {
    let mock = DaytonaMock::start();
    let created = call(&mock, "POST", "/sandbox", Some(json!({})));
    let id = created.body["id"].as_str().unwrap().to_string();
    let early = call(
        &mock,
        "POST",
        &format!("/sandbox/{id}/snapshot"),
        Some(json!({"name": "early"})),
    );
    assert_eq!(early.status, 400, "{}", early.body);
    assert_eq!(
        early.body["message"],
        "Sandbox must be in started or stopped state to create a snapshot"
    );
    wait_for(&mock, &id, "started");

    for (body, status) in [
        (json!({}), 400),
        (json!({"name": 3}), 400),
        (json!({"name": "<b>x</b>"}), 400),
        (json!({"name": "see https://x"}), 400),
    ] {
        let r = call(
            &mock,
            "POST",
            &format!("/sandbox/{id}/snapshot"),
            Some(body),
        );
        assert_eq!(r.status, status, "{}", r.body);
    }
    let missing = call(
        &mock,
        "POST",
        "/sandbox/nope/snapshot",
        Some(json!({"name": "x"})),
    );
    assert_eq!(missing.status, 404);

    assert_eq!(
        call(&mock, "POST", &format!("/sandbox/{id}/stop"), None).status,
        200
    );
    let answer = snapshot(&mock, &id, "from-stopped");
    assert_eq!(answer["desiredState"], "stopped");
    assert_eq!(mock.sandboxes()[0].state, "stopped");
    assert_eq!(mock.snapshots()[0].state, "active");
    assert!(mock.seen().iter().all(|s| s.status != 500));
}

#[test]
fn a_taken_name_keeps_the_first_snapshot_as_daytona_does() {
    let mock = DaytonaMock::start();
    let (a, home) = started(&mock, json!({}));
    std::fs::write(home.join("f"), "first").unwrap();
    snapshot(&mock, &a, "same");
    std::fs::write(home.join("f"), "second").unwrap();
    // Accepted, and the sandbox comes back; the clash is found only when
    // Daytona stores the snapshot, which it then does not.
    snapshot(&mock, &a, "same");
    let snaps = mock.snapshots();
    assert_eq!(snaps.len(), 1, "{snaps:?}");
    let (_, home_b) = started(&mock, json!({"snapshot": "same"}));
    assert_eq!(std::fs::read_to_string(home_b.join("f")).unwrap(), "first");
}

#[test]
fn a_snapshot_deleted_behind_the_clients_back_cannot_be_created_from() {
    let mock = DaytonaMock::start();
    let (a, _) = started(&mock, json!({}));
    snapshot(&mock, &a, "doomed");
    let id = mock.snapshots()[0].id.clone();
    assert!(mock.delete_snapshot_behind("doomed"));
    assert!(!mock.delete_snapshot_behind("doomed"));
    assert!(!mock.delete_snapshot_behind(&id));
    let view = &mock.snapshots()[0];
    assert_eq!((view.state.as_str(), view.deleted), ("gone", true));

    for key in ["doomed", id.as_str(), "never-made"] {
        let before = mock.sandboxes().len();
        let r = call(&mock, "POST", "/sandbox", Some(json!({"snapshot": key})));
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(
            r.body["message"],
            format!("Snapshot {key} not found. Did you add it through the Daytona Dashboard?")
        );
        assert_eq!(mock.sandboxes().len(), before, "nothing is created");
        let got = call(&mock, "GET", &format!("/snapshots/{key}"), None);
        assert_eq!(got.status, 404);
        assert_eq!(
            got.body["message"],
            format!("Snapshot with name {key} not found")
        );
    }
    assert_eq!(
        call(&mock, "GET", "/snapshots", None).body["items"],
        json!([])
    );
    // Daytona's default snapshot, named or not, still makes an empty one.
    started(&mock, json!({"snapshot": "daytonaio/sandbox:0.5.0"}));
    started(&mock, json!({"snapshot": ""}));
    // The name is free again.
    snapshot(&mock, &a, "doomed");
    assert_eq!(mock.snapshots()[1].state, "active");
}

#[test]
fn a_deleted_snapshot_is_removing_then_gone() {
    let mock = DaytonaMock::start();
    let (a, _) = started(&mock, json!({}));
    snapshot(&mock, &a, "old");
    let id = mock.snapshots()[0].id.clone();

    let activate = call(&mock, "POST", &format!("/snapshots/{id}/activate"), None);
    assert_eq!(activate.status, 400);
    assert_eq!(
        activate.body["message"],
        format!("Snapshot {id} is already active")
    );
    // DELETE takes an id: a name passes the access guard, not the pipe.
    let by_name = call(&mock, "DELETE", "/snapshots/old", None);
    assert_eq!(by_name.status, 400);
    assert_eq!(
        by_name.body["message"],
        "Validation failed (uuid is expected)"
    );
    assert_eq!(
        call(&mock, "DELETE", "/snapshots/nothing", None).status,
        404
    );
    let deleted = call(&mock, "DELETE", &format!("/snapshots/{id}"), None);
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.body, Value::Null, "an empty body");

    assert_eq!(
        call(&mock, "GET", "/snapshots/old", None).body["state"],
        "removing"
    );
    let listed = call(&mock, "GET", "/snapshots", None).body;
    assert_eq!(listed["items"][0]["state"], "removing");
    let r = call(&mock, "POST", "/sandbox", Some(json!({"snapshot": "old"})));
    assert_eq!(r.status, 400);
    assert_eq!(r.body["message"], "Snapshot old is removing");
    let view = &mock.snapshots()[0];
    assert_eq!((view.state.as_str(), view.deleted), ("removing", true));

    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(call(&mock, "GET", "/snapshots/old", None).status, 404);
    assert_eq!(mock.snapshots()[0].state, "gone");
    let r = call(&mock, "POST", "/sandbox", Some(json!({"snapshot": "old"})));
    assert_eq!(r.status, 400);
    assert!(
        r.body["message"].as_str().unwrap().contains("not found"),
        "{}",
        r.body
    );
}

#[test]
fn snapshots_are_listed_a_page_at_a_time_newest_first() {
    let mock = DaytonaMock::start();
    let (a, _) = started(&mock, json!({}));
    for name in ["one", "two", "three"] {
        snapshot(&mock, &a, name);
    }
    let page = |q: &str| call(&mock, "GET", &format!("/snapshots{q}"), None);
    let first = page("?page=1&limit=2");
    assert_eq!(first.status, 200);
    let names = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&first.body), ["three", "two"]);
    assert_eq!(
        (
            &first.body["total"],
            &first.body["page"],
            &first.body["totalPages"]
        ),
        (&json!(3), &json!(1), &json!(2))
    );
    let second = page("?page=2&limit=2");
    assert_eq!(names(&second.body), ["one"]);
    assert_eq!(names(&page("").body), ["three", "two", "one"]);
    assert_eq!(names(&page("?name=T").body), ["three", "two"]);
    assert_eq!(names(&page("?page=3&limit=2").body), Vec::<String>::new());
    for bad in ["?limit=0", "?limit=201", "?page=0", "?page=x"] {
        assert_eq!(page(bad).status, 400, "{bad}");
    }
}

#[test]
fn faults_on_the_snapshot_calls() {
    let mock = DaytonaMock::start();
    let (a, _) = started(&mock, json!({}));

    // Refused before anything: the sandbox stays started, no snapshot.
    mock.inject(Fault::status(Op::SnapshotSandbox, 503));
    let r = call(
        &mock,
        "POST",
        &format!("/sandbox/{a}/snapshot"),
        Some(json!({"name": "s"})),
    );
    assert_eq!(r.status, 503);
    assert_eq!(mock.sandboxes()[0].state, "started");
    assert!(mock.snapshots().is_empty());
    // A 409 where a client expects one for a taken name.
    mock.inject(Fault::status(Op::SnapshotSandbox, 409));
    let r = call(
        &mock,
        "POST",
        &format!("/sandbox/{a}/snapshot"),
        Some(json!({"name": "s"})),
    );
    assert_eq!(r.status, 409);
    assert!(mock.snapshots().is_empty());
    snapshot(&mock, &a, "s");
    let id = mock.snapshots()[0].id.clone();

    mock.inject(Fault::Status {
        op: Op::ListSnapshots,
        status: 429,
        retry_after: Some(2),
        times: 2,
    });
    for _ in 0..2 {
        let r = call(&mock, "GET", "/snapshots", None);
        assert_eq!(r.status, 429);
        assert!(r.headers.contains("retry-after: 2"), "{}", r.headers);
    }
    assert_eq!(call(&mock, "GET", "/snapshots", None).status, 200);

    mock.inject(Fault::status(Op::GetSnapshot, 500));
    assert_eq!(call(&mock, "GET", "/snapshots/s", None).status, 500);
    assert_eq!(call(&mock, "GET", "/snapshots/s", None).status, 200);

    mock.inject(Fault::status(Op::ActivateSnapshot, 403));
    let activate = format!("/snapshots/{id}/activate");
    assert_eq!(call(&mock, "POST", &activate, None).status, 403);

    // A delete refused leaves it active.
    mock.inject(Fault::status(Op::DeleteSnapshot, 409));
    let r = call(&mock, "DELETE", &format!("/snapshots/{id}"), None);
    assert_eq!(r.status, 409);
    assert_eq!(mock.snapshots()[0].state, "active");

    // A create from it refused creates nothing.
    mock.inject(Fault::status(Op::Create, 500));
    let before = mock.sandboxes().len();
    let r = call(&mock, "POST", "/sandbox", Some(json!({"snapshot": "s"})));
    assert_eq!(r.status, 500);
    assert_eq!(mock.sandboxes().len(), before);

    // A slow answer: the snapshot is taken though the answer lags.
    mock.inject(Fault::SlowAnswer {
        op: Op::SnapshotSandbox,
        ms: 300,
    });
    let sent = Instant::now();
    snapshot(&mock, &a, "slow");
    assert!(sent.elapsed() >= Duration::from_millis(300));
    assert_eq!(mock.snapshots().len(), 2);
}
