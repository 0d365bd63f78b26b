//! The API's snapshot calls: a sandbox's tree copied into a snapshot
//! (`POST /sandbox/{id}/snapshot`), and the snapshots themselves
//! (`/snapshots`: get by id or name, list a page at a time, delete,
//! activate), with the answers and errors of Daytona v0.190.0's
//! `SandboxController`, `SnapshotController` and their services.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::Response;
use serde_json::{Value, json};

use crate::server::{Body, Req, api_error, decode, empty, now_iso, ok, refresh, sandbox_json};
use crate::{ORGANIZATION, Shared, Snapshot, Snapshotting, State};

/// How long a sandbox stays `snapshotting` once its tree is copied, unless
/// a test sets another time.
const SNAPSHOTTING: Duration = Duration::from_millis(150);
/// How long a deleted snapshot stays `removing` (Daytona's cleanup runs
/// every 10 s).
const REMOVING: Duration = Duration::from_secs(1);

/// The API's UUID check (class-validator's `isUUID`, any version), which
/// decides whether an id can name a snapshot by id.
pub(crate) fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `IsSafeDisplayString`, which the snapshot's name must pass: no HTML
/// tags, URLs or control characters.
fn safe_display(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let tag = name
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == b'<' && (w[1].is_ascii_alphabetic() || w[1] == b'/'));
    let url = [
        "http://",
        "https://",
        "ftp://",
        "ftps://",
        "sftp://",
        "ssh://",
        "ws://",
        "wss://",
        "file://",
        "ldap://",
        "ldaps://",
        "javascript:",
        "data:",
        "mailto:",
        "tel:",
        "www.",
    ]
    .iter()
    .any(|p| lower.contains(p));
    let control = name
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r') && (c as u32) < 0x80);
    !(tag || url || control)
}

/// `cp -a`: the tree's files, modes, symlinks and times, into `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let out = Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(from.join("."))
        .arg(to)
        .output()
        .map_err(|e| format!("cp: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Point the absolute symlinks under `dir` that named a place under `from`
/// at the same place under `to`: a path is the same in every Daytona
/// sandbox, but each mock sandbox has its own root.
fn relink(dir: &Path, from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?;
            if let Ok(rest) = target.strip_prefix(from) {
                std::fs::remove_file(&path)?;
                std::os::unix::fs::symlink(to.join(rest), &path)?;
            }
        } else if meta.is_dir() {
            relink(&path, from, to)?;
        }
    }
    Ok(())
}

/// The bytes of the files under `dir`.
fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.path().symlink_metadata() {
            Ok(m) if m.is_dir() => size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A new sandbox's root from snapshot `tree`, taken from a sandbox whose
/// root was `origin`.
pub(crate) fn fill(tree: &Path, origin: &Path, root: &Path) -> Result<(), String> {
    copy_tree(tree, root)?;
    relink(root, origin, root).map_err(|e| format!("relinking the copy: {e}"))
}

/// What a create copies from a snapshot.
pub(crate) struct Source {
    pub id: String,
    pub name: String,
    pub tree: Arc<tempfile::TempDir>,
    pub origin: PathBuf,
}

/// The snapshot a create names (by name, or by id when it is a UUID),
/// as `createFromSnapshot` finds it: an active one first; one in another
/// state, or none, is refused (the message of the API's 400).
pub(crate) fn for_create(st: &State, key: &str) -> Result<Source, String> {
    let now = Instant::now();
    let found: Vec<&Snapshot> = st
        .snapshots
        .iter()
        .filter(|s| s.state(now).is_some() && (s.name == key || (is_uuid(key) && s.id == key)))
        .collect();
    let Some(s) = found
        .iter()
        .find(|s| s.state(now) == Some("active"))
        .or(found.first())
    else {
        return Err(format!(
            "Snapshot {key} not found. Did you add it through the Daytona Dashboard?"
        ));
    };
    match (s.state(now), &s.tree) {
        (Some("active"), Some(tree)) => Ok(Source {
            id: s.id.clone(),
            name: s.name.clone(),
            tree: tree.clone(),
            origin: s.origin.clone(),
        }),
        (state, _) => Err(format!("Snapshot {key} is {}", state.unwrap_or("removing"))),
    }
}

/// `SnapshotDto`.
fn snapshot_json(s: &Snapshot, state: &str) -> Value {
    let b = &s.body;
    json!({
        "id": s.id,
        "organizationId": ORGANIZATION,
        "general": false,
        "name": s.name,
        "imageName": "",
        "state": state,
        "size": s.size_gb,
        "entrypoint": null,
        "cpu": b["cpu"].as_u64().unwrap_or(1),
        "gpu": 0,
        "mem": b["memory"].as_u64().unwrap_or(1),
        "disk": b["disk"].as_u64().unwrap_or(3),
        "errorReason": null,
        "createdAt": s.created,
        "updatedAt": s.updated,
        "lastUsedAt": s.created,
        "regionIds": [b["target"].as_str().unwrap_or("us")],
        "ref": format!("registry.mock/daytona/daytona-{}:daytona", s.id.replace('-', "")),
        "sandboxClass": "container",
    })
}

/// `POST /sandbox/{idOrName}/snapshot {name}`: 200 with the sandbox, now
/// `snapshotting`; its tree is copied before the answer, and it is back
/// in its previous state (and the snapshot active) a moment later.
pub(crate) async fn take(state: &Shared, counter: &AtomicU64, id: &str, r: &Req) -> Response<Body> {
    let key = decode(id);
    let body = r.json();
    let (sandbox_id, root, name, clash, answer) = {
        let now = Instant::now();
        let mut st = state.lock().unwrap();
        let Some(i) = st
            .sandboxes
            .iter()
            .position(|s| (s.id == key || s.name == key) && !s.deleted)
        else {
            return api_error(
                404,
                &r.path,
                &format!("Sandbox with ID or name {key} not found"),
            );
        };
        // The body's validation comes before the handler.
        let Some(name) = body["name"].as_str().map(str::to_string) else {
            return api_error(400, &r.path, "name must be a string");
        };
        if !safe_display(&name) {
            return api_error(
                400,
                &r.path,
                "name must not contain HTML tags, URLs, or control characters",
            );
        }
        // Daytona finds a taken name only when it stores the snapshot, after
        // the sandbox's image is pushed: it logs the clash, keeps the first
        // and puts the sandbox back as after any snapshot. The first request
        // wins here.
        let clash = st
            .snapshots
            .iter()
            .any(|s| s.name == name && s.holds_name(now))
            || st.sandboxes.iter().any(|s| {
                s.snapshotting
                    .as_ref()
                    .is_some_and(|t| t.name == name && t.until.is_none_or(|u| now < u))
            });
        let sb = &mut st.sandboxes[i];
        refresh(sb);
        if sb.state != "started" && sb.state != "stopped" {
            return api_error(
                400,
                &r.path,
                "Sandbox must be in started or stopped state to create a snapshot",
            );
        }
        sb.snapshotting = Some(Snapshotting {
            name: name.clone(),
            previous: sb.state.clone(),
            until: None,
        });
        sb.state = "snapshotting".into();
        (
            sb.id.clone(),
            sb.root_path.clone(),
            name,
            clash,
            sandbox_json(sb),
        )
    };
    // The copy runs with the state unlocked: the sandbox is `snapshotting`,
    // so its toolbox is refused meanwhile and a stop or delete gets 409.
    let copied = if clash {
        None
    } else {
        let (root, prefix) = (root.clone(), "daytona-mock-snapshot-");
        tokio::task::spawn_blocking(move || {
            let dir = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| e.to_string())?;
            copy_tree(&root, dir.path())?;
            let bytes = size(dir.path());
            Ok::<_, String>((dir, bytes))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
        .inspect_err(|e| eprintln!("daytona-mock: snapshot {name} of {sandbox_id} failed: {e}"))
        .ok()
    };
    let mut st = state.lock().unwrap();
    let until = Instant::now() + st.snapshotting_time.unwrap_or(SNAPSHOTTING);
    if let Some(t) = st
        .sandboxes
        .iter_mut()
        .find(|s| s.id == sandbox_id)
        .and_then(|s| s.snapshotting.as_mut())
    {
        t.until = Some(until);
    }
    if let Some((tree, bytes)) = copied {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let source = st.sandboxes.iter().find(|s| s.id == sandbox_id);
        let body = source.map(|s| s.body.clone()).unwrap_or_default();
        let created = now_iso();
        st.snapshots.push(Snapshot {
            id: format!("{n:08x}-0000-4000-a000-{n:012x}"),
            name,
            sandbox: sandbox_id,
            tree: Some(Arc::new(tree)),
            origin: root,
            ready_at: until,
            gone_at: None,
            size_gb: bytes as f64 / (1u64 << 30) as f64,
            body,
            updated: created.clone(),
            created,
        });
    }
    ok(200, answer)
}

/// The snapshot `key` names, and its state, as the API's access guard
/// finds it: by id, then by name.
fn find<'a>(st: &'a mut State, key: &str) -> Option<(&'a mut Snapshot, &'static str)> {
    let now = Instant::now();
    let i = st
        .snapshots
        .iter()
        .position(|s| s.state(now).is_some() && s.id == key)
        .or_else(|| {
            st.snapshots
                .iter()
                .position(|s| s.state(now).is_some() && s.name == key)
        });
    let s = &mut st.snapshots[i?];
    let state = s.state(now)?;
    Some((s, state))
}

/// The guard's 404 when neither id nor name matches.
fn not_found(key: &str, r: &Req) -> Response<Body> {
    api_error(404, &r.path, &format!("Snapshot with name {key} not found"))
}

/// `GET /snapshots/{idOrName}`: a `SnapshotDto`.
pub(crate) fn get(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let key = decode(id);
    let mut st = state.lock().unwrap();
    match find(&mut st, &key) {
        Some((s, state)) => ok(200, snapshot_json(s, state)),
        None => not_found(&key, r),
    }
}

/// `DELETE /snapshots/{id}` (an id: a name passes the access guard but
/// not the UUID pipe): 200, empty; the snapshot is `removing`, then gone.
pub(crate) fn delete(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let key = decode(id);
    let mut st = state.lock().unwrap();
    let Some((s, _)) = find(&mut st, &key) else {
        return not_found(&key, r);
    };
    if !is_uuid(&key) {
        return api_error(400, &r.path, "Validation failed (uuid is expected)");
    }
    if s.gone_at.is_none() {
        s.gone_at = Some(Instant::now() + REMOVING);
        s.updated = now_iso();
        s.tree.take();
    }
    empty(200)
}

/// `POST /snapshots/{id}/activate`: only an inactive snapshot can be, and
/// the mock's never go inactive.
pub(crate) fn activate(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let key = decode(id);
    let mut st = state.lock().unwrap();
    let Some((s, state)) = find(&mut st, &key) else {
        return not_found(&key, r);
    };
    if !is_uuid(&key) {
        return api_error(400, &r.path, "Validation failed (uuid is expected)");
    }
    let message = if state == "active" {
        format!("Snapshot {} is already active", s.id)
    } else {
        format!(
            "Snapshot {} cannot be activated - it is in {state} state",
            s.id
        )
    };
    api_error(400, &r.path, &message)
}

/// `GET /snapshots?page=&limit=&name=`: `{items, total, page, totalPages}`,
/// the newest first (the API sorts by `lastUsedAt`, then `createdAt`,
/// descending), `name` matching part of the name in any case.
pub(crate) fn list(state: &Shared, r: &Req) -> Response<Body> {
    let number = |k: &str, default: i64| match r.query.get(k) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| format!("{k} must be an integer number")),
    };
    let (page, limit) = match (number("page", 1), number("limit", 100)) {
        (Ok(p), Ok(l)) => (p, l),
        (Err(e), _) | (_, Err(e)) => return api_error(400, &r.path, &e),
    };
    let invalid = if page < 1 {
        Some("page must not be less than 1")
    } else if limit < 1 {
        Some("limit must not be less than 1")
    } else if limit > 200 {
        Some("limit must not be greater than 200")
    } else {
        None
    };
    if let Some(message) = invalid {
        return api_error(400, &r.path, message);
    }
    let filter = r.query.get("name").map(|n| n.to_lowercase());
    let now = Instant::now();
    let st = state.lock().unwrap();
    let found: Vec<Value> = st
        .snapshots
        .iter()
        .rev()
        .filter(|s| {
            filter
                .as_ref()
                .is_none_or(|f| s.name.to_lowercase().contains(f))
        })
        .filter_map(|s| s.state(now).map(|state| snapshot_json(s, state)))
        .collect();
    let (page, limit) = (page as usize, limit as usize);
    let total = found.len();
    let items: Vec<Value> = found
        .into_iter()
        .skip((page - 1) * limit)
        .take(limit)
        .collect();
    ok(
        200,
        json!({
            "items": items,
            "total": total,
            "page": page,
            "totalPages": total.div_ceil(limit),
        }),
    )
}
