//! The mock's snapshots at the REST level, without node: what the SDK check
//! (tests/sdk.rs) cannot reach, a snapshot deleted or expired behind the
//! client's back, the copy's fidelity, and faults on the snapshot calls.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use sanddune_vercel_mock::{Fault, Op, PROJECT, TEAM, TOKEN, VercelMock};
use serde_json::{Value, json};

/// One request on its own connection; the status and the JSON answer.
fn call(mock: &VercelMock, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let addr = mock.url().trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let sep = if path.contains('?') { '&' } else { '?' };
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        conn,
        "{method} {path}{sep}teamId={TEAM} HTTP/1.1\r\nhost: {addr}\r\n\
         authorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A running sandbox: its session id and host working directory.
fn create(mock: &VercelMock, source: Option<&str>) -> (u16, Value) {
    let mut body = json!({"projectId": PROJECT, "ports": []});
    if let Some(id) = source {
        body["source"] = json!({"type": "snapshot", "snapshotId": id});
    }
    call(mock, "POST", "/v3/sandboxes", Some(body))
}

fn session_of(created: &Value) -> String {
    created["session"]["id"].as_str().unwrap().to_string()
}

fn snapshot(mock: &VercelMock, sid: &str, body: Option<Value>) -> (u16, Value) {
    call(
        mock,
        "POST",
        &format!("/v2/sandboxes/sessions/{sid}/snapshot"),
        body,
    )
}

fn cwd(mock: &VercelMock, sid: &str) -> std::path::PathBuf {
    mock.sandboxes()
        .into_iter()
        .find(|s| s.session == sid)
        .unwrap()
        .cwd
}

#[test]
fn a_snapshot_copies_the_whole_tree_and_stops_the_session() {
    let mock = VercelMock::start();
    let (status, created) = create(&mock, None);
    assert_eq!(status, 200, "{created}");
    let sid = session_of(&created);
    let dir = cwd(&mock, &sid);
    std::fs::write(dir.join("data.txt"), "twelve bytes").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("data.txt", dir.join("link")).unwrap();
    let home = dir.join("../../home/vercel-sandbox");
    std::fs::write(home.join(".profile"), "x").unwrap();
    // A command still running when the snapshot is taken is killed.
    let (status, cmd) = call(
        &mock,
        "POST",
        &format!("/v2/sandboxes/sessions/{sid}/cmd"),
        Some(json!({"command": "sleep", "args": ["30"]})),
    );
    assert_eq!(status, 200, "{cmd}");

    let (status, snap) = snapshot(&mock, &sid, Some(json!({"expiration": 0})));
    assert_eq!(status, 200, "{snap}");
    let id = snap["snapshot"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("snap_mock"), "{snap}");
    assert_eq!(snap["snapshot"]["status"], "created");
    assert_eq!(snap["snapshot"]["sourceSessionId"], sid.as_str());
    // 12 + 10 + 1: regular files only, the symlink not followed.
    assert_eq!(snap["snapshot"]["sizeBytes"], 23);
    // Expiration 0: it never expires.
    assert!(snap["snapshot"].get("expiresAt").is_none(), "{snap}");
    assert_eq!(snap["session"]["status"], "stopped");
    assert!(snap["session"]["snapshottedAt"].is_u64(), "{snap}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mock.running_commands().is_empty() {
        assert!(Instant::now() < deadline, "the sleep outlived the snapshot");
        std::thread::sleep(Duration::from_millis(50));
    }
    let views = mock.snapshots();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].id.as_str(), views[0].source_session.as_str()),
        (id.as_str(), sid.as_str())
    );
    assert!(!views[0].deleted && views[0].status == "created");
    // Stopped now: the session's calls answer 410, a second snapshot too.
    let (status, again) = snapshot(&mock, &sid, None);
    assert_eq!(status, 410, "{again}");
    assert_eq!(again["error"]["code"], "sandbox_stopped");

    // Changing the source afterwards does not change the snapshot.
    std::fs::write(dir.join("data.txt"), "changed").unwrap();
    let (status, restored) = create(&mock, Some(&id));
    assert_eq!(status, 200, "{restored}");
    assert_eq!(restored["session"]["sourceSnapshotId"], id.as_str());
    assert_eq!(restored["session"]["status"], "running");
    let new = cwd(&mock, &session_of(&restored));
    assert_ne!(new, dir);
    assert_eq!(
        std::fs::read_to_string(new.join("data.txt")).unwrap(),
        "twelve bytes"
    );
    let mode = std::fs::metadata(new.join("run.sh")).unwrap().permissions();
    assert_eq!(mode.mode() & 0o777, 0o750);
    assert_eq!(
        std::fs::read_link(new.join("link")).unwrap(),
        Path::new("data.txt")
    );
    assert_eq!(
        std::fs::read_to_string(new.join("../../home/vercel-sandbox/.profile")).unwrap(),
        "x"
    );
    // The restored sandbox runs commands where the files are.
    let (status, ran) = call(
        &mock,
        "POST",
        &format!("/v2/sandboxes/sessions/{}/cmd", session_of(&restored)),
        Some(json!({"command": "test", "args": ["-x", "run.sh"]})),
    );
    assert_eq!(status, 200, "{ran}");
    let (_, got) = call(
        &mock,
        "GET",
        &format!(
            "/v2/sandboxes/sessions/{}/cmd/{}?wait=true",
            session_of(&restored),
            ran["command"]["id"].as_str().unwrap()
        ),
        None,
    );
    assert_eq!(got["command"]["exitCode"], 0, "{got}");
    let (_, got) = call(&mock, "GET", &format!("/v2/sandboxes/snapshots/{id}"), None);
    assert!(got["snapshot"]["lastUsedAt"].is_u64(), "{got}");
}

#[test]
fn a_snapshot_gone_behind_the_clients_back_cannot_be_started_from() {
    let mock = VercelMock::start();
    let (_, created) = create(&mock, None);
    let (_, snap) = snapshot(&mock, &session_of(&created), None);
    let id = snap["snapshot"]["id"].as_str().unwrap().to_string();
    // Thirty days by default.
    let lives = snap["snapshot"]["expiresAt"].as_u64().unwrap()
        - snap["snapshot"]["createdAt"].as_u64().unwrap();
    assert_eq!(lives, 30 * 24 * 3600 * 1000);

    assert!(mock.delete_snapshot_behind(&id));
    assert!(!mock.delete_snapshot_behind("snap_unknown"));
    let before = mock.sandboxes().len();
    let (status, refused) = create(&mock, Some(&id));
    assert_eq!(status, 410, "{refused}");
    assert_eq!(refused["error"]["code"], "snapshot_not_found");
    assert_eq!(mock.sandboxes().len(), before, "a sandbox was created");
    let (status, got) = call(&mock, "GET", &format!("/v2/sandboxes/snapshots/{id}"), None);
    assert_eq!(
        (status, &got["snapshot"]["status"]),
        (200, &json!("deleted"))
    );
    assert!(mock.snapshots()[0].deleted);
    let (status, unknown) = create(&mock, Some("snap_unknown"));
    assert_eq!(
        (status, &unknown["error"]["code"]),
        (410, &json!("snapshot_not_found"))
    );
}

#[test]
fn an_expired_snapshot_cannot_be_started_from() {
    let mock = VercelMock::start();
    let (_, created) = create(&mock, None);
    let (status, snap) = snapshot(&mock, &session_of(&created), Some(json!({"expiration": 1})));
    assert_eq!(status, 200, "{snap}");
    let id = snap["snapshot"]["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(20));
    let (status, refused) = create(&mock, Some(&id));
    assert_eq!(
        (status, &refused["error"]["code"]),
        (410, &json!("snapshot_not_found"))
    );
    let (_, got) = call(&mock, "GET", &format!("/v2/sandboxes/snapshots/{id}"), None);
    assert_eq!(got["snapshot"]["status"], "deleted");
}

#[test]
fn snapshots_are_listed_paged_and_deleted() {
    let mock = VercelMock::start();
    let mut ids = vec![];
    for _ in 0..3 {
        let (_, created) = create(&mock, None);
        let (_, snap) = snapshot(&mock, &session_of(&created), None);
        ids.push(snap["snapshot"]["id"].as_str().unwrap().to_string());
    }
    let list = |query: &str| {
        let (status, page) = call(
            &mock,
            "GET",
            &format!("/v2/sandboxes/snapshots?project={PROJECT}{query}"),
            None,
        );
        assert_eq!(status, 200, "{page}");
        page
    };
    let ids_of = |page: &Value| -> Vec<String> {
        page["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Newest first; `sortOrder=asc` oldest first; pages follow `next`.
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(ids_of(&list("")), newest_first);
    assert_eq!(ids_of(&list("&sortOrder=asc")), ids);
    let first = list("&sortOrder=asc&limit=2");
    assert_eq!(ids_of(&first), ids[..2]);
    assert_eq!(first["pagination"], json!({"count": 2, "next": "2"}));
    let second = list("&sortOrder=asc&limit=2&cursor=2");
    assert_eq!(ids_of(&second), ids[2..]);
    assert_eq!(second["pagination"]["next"], Value::Null);
    // By the source sandbox's name.
    let name = mock.sandboxes()[1].name.clone();
    assert_eq!(ids_of(&list(&format!("&name={name}"))), ids[1..2]);

    let (status, deleted) = call(
        &mock,
        "DELETE",
        &format!("/v2/sandboxes/snapshots/{}", ids[0]),
        None,
    );
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(deleted["snapshot"]["status"], "deleted");
    assert_eq!(ids_of(&list("&sortOrder=asc")), ids[1..]);
    let (status, _) = call(
        &mock,
        "DELETE",
        "/v2/sandboxes/snapshots/snap_unknown",
        None,
    );
    assert_eq!(status, 404);
    let (status, missing) = call(&mock, "GET", "/v2/sandboxes/snapshots/snap_unknown", None);
    assert_eq!(
        (status, &missing["error"]["code"]),
        (404, &json!("not_found"))
    );
    let (status, _) = call(&mock, "GET", "/v2/sandboxes/snapshots", None);
    assert_eq!(status, 400, "a list without its project");
}

#[test]
fn faults_apply_to_the_snapshot_calls() {
    let mock = VercelMock::start();
    let (_, created) = create(&mock, None);
    let sid = session_of(&created);
    mock.inject(Fault::status(Op::Snapshot, 500, "internal"));
    let (status, _) = snapshot(&mock, &sid, None);
    assert_eq!(status, 500);
    // The fault answered before anything happened.
    assert!(mock.snapshots().is_empty());
    assert_eq!(mock.sandboxes()[0].status, "running");
    let (_, snap) = snapshot(&mock, &sid, None);
    let id = snap["snapshot"]["id"].as_str().unwrap().to_string();
    let one = format!("/v2/sandboxes/snapshots/{id}");
    let all = format!("/v2/sandboxes/snapshots?project={PROJECT}");
    for (op, method, path) in [
        (Op::GetSnapshot, "GET", &one),
        (Op::DeleteSnapshot, "DELETE", &one),
        (Op::ListSnapshots, "GET", &all),
    ] {
        mock.inject(Fault::status(op, 503, "unavailable"));
        let (status, answer) = call(&mock, method, path, None);
        assert_eq!(status, 503, "{op:?}: {answer}");
    }
    assert!(!mock.snapshots()[0].deleted);
}
