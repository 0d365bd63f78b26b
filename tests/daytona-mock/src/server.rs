//! The HTTP side: one hyper server for both APIs, authentication, the
//! injected status faults, the error shapes, and the API's sandbox calls
//! (its snapshot calls are in `snapshots`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::{
    API_KEY, Fault, JWT, ORGANIZATION, Op, Sandbox, Seen, Shared, files, snapshots, toolbox,
};

/// The snapshot a sandbox created without one (or naming this one) has:
/// Daytona's default, which every organization can use. The mock holds no
/// tree for it: such a sandbox starts empty.
pub(crate) const DEFAULT_SNAPSHOT: &str = "daytonaio/sandbox:0.5.0";

pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

pub(crate) fn serve(
    runtime: &tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    state: Shared,
    counter: Arc<AtomicU64>,
) {
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            // Small writes go out at once, as from a real front end (see
            // the vercel mock: Nagle cost ~40 ms an answer).
            let _ = stream.set_nodelay(true);
            let (s, c) = (state.clone(), counter.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let (s, c) = (s.clone(), c.clone());
                    async move { Ok::<_, Infallible>(handle(s, c, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

pub(crate) fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(
            Full::new(body.into())
                .map_err(|never| match never {})
                .boxed(),
        )
        .unwrap()
}

pub(crate) fn empty(status: u16) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed(),
        )
        .unwrap()
}

pub(crate) fn ok(status: u16, v: Value) -> Response<Body> {
    full(status, "application/json; charset=utf-8", v.to_string())
}

pub(crate) fn now_iso() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// The API's error shape (NestJS: `{path, timestamp, statusCode, error,
/// message}`).
pub(crate) fn api_error(status: u16, path: &str, message: &str) -> Response<Body> {
    ok(
        status,
        json!({
            "path": path,
            "timestamp": now_iso(),
            "statusCode": status,
            "error": status_name(status),
            "message": message,
        }),
    )
}

/// The toolbox daemon's error shape (`ErrorResponse`).
pub(crate) fn toolbox_error(
    status: u16,
    method: &str,
    path: &str,
    code: &str,
    message: &str,
) -> Response<Body> {
    ok(
        status,
        json!({
            "statusCode": status,
            "message": message,
            "code": code,
            "timestamp": now_iso(),
            "path": path,
            "method": method,
        }),
    )
}

pub(crate) fn query_map(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

pub(crate) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One request, with what the handlers need of it.
pub(crate) struct Req {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    pub sdk_version: Option<String>,
    /// `X-Daytona-Split-Output: true`.
    pub split_output: bool,
    pub body: Bytes,
}

impl Req {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

async fn handle(state: Shared, counter: Arc<AtomicU64>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (authorization, organization, sdk_version, content_type, split_output) = (
        header("authorization"),
        header("x-daytona-organization-id"),
        header("x-daytona-sdk-version"),
        header("content-type"),
        header("x-daytona-split-output"),
    );
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let r = Req {
        method: method.clone(),
        path: path.clone(),
        query: query_map(&query),
        content_type,
        sdk_version: sdk_version.clone(),
        split_output: split_output.as_deref() == Some("true"),
        body,
    };
    let op = op_of(
        &r.method,
        &r.path.trim_matches('/').split('/').collect::<Vec<_>>(),
    );
    let response = route(
        &state,
        &counter,
        &r,
        authorization.as_deref(),
        organization.as_deref(),
    )
    .await;
    let slow = {
        let mut st = state.lock().unwrap();
        let pos = st.faults.iter().position(
            |f| matches!(f, Fault::SlowAnswer { op: o, .. } if Some(*o) == op || *o == Op::Any),
        );
        match pos.and_then(|i| st.faults.remove(i)) {
            Some(Fault::SlowAnswer { ms, .. }) => ms,
            _ => 0,
        }
    };
    tokio::time::sleep(Duration::from_millis(slow)).await;
    state.lock().unwrap().seen.push(Seen {
        method,
        path,
        query,
        authorization,
        organization,
        sdk_version,
        status: response.status().as_u16(),
    });
    response
}

fn op_of(method: &str, parts: &[&str]) -> Option<Op> {
    Some(match (method, parts) {
        ("POST", ["api", "sandbox"]) => Op::Create,
        ("GET", ["api", "sandbox"]) => Op::List,
        ("GET", ["api", "sandbox", _]) => Op::GetSandbox,
        ("POST", ["api", "sandbox", _, "stop"]) => Op::Stop,
        ("DELETE", ["api", "sandbox", _]) => Op::Delete,
        ("POST", ["api", "sandbox", _, "snapshot"]) => Op::SnapshotSandbox,
        ("GET", ["api", "snapshots"]) => Op::ListSnapshots,
        ("GET", ["api", "snapshots", _]) => Op::GetSnapshot,
        ("DELETE", ["api", "snapshots", _]) => Op::DeleteSnapshot,
        ("POST", ["api", "snapshots", _, "activate"]) => Op::ActivateSnapshot,
        ("GET", ["toolbox", _, "work-dir"]) => Op::WorkDir,
        ("GET", ["toolbox", _, "user-home-dir"]) => Op::HomeDir,
        ("POST", ["toolbox", _, "process", "session"]) => Op::CreateSession,
        ("GET", ["toolbox", _, "process", "session"]) => Op::ListSessions,
        ("GET", ["toolbox", _, "process", "session", _]) => Op::GetSession,
        ("DELETE", ["toolbox", _, "process", "session", _]) => Op::DeleteSession,
        ("POST", ["toolbox", _, "process", "session", _, "exec"]) => Op::Exec,
        ("GET", ["toolbox", _, "process", "session", _, "command", _]) => Op::GetCommand,
        ("GET", ["toolbox", _, "process", "session", _, "command", _, "logs"]) => Op::Logs,
        ("POST", ["toolbox", _, "process", "session", _, "command", _, "input"]) => Op::Input,
        ("POST", ["toolbox", _, "process", "execute"]) => Op::Execute,
        ("POST", ["toolbox", _, "files", "bulk-upload"]) => Op::Upload,
        ("GET", ["toolbox", _, "files", "download"]) => Op::Download,
        ("POST", ["toolbox", _, "files", "bulk-download"]) => Op::BulkDownload,
        ("POST", ["toolbox", _, "files", "folder"]) => Op::Folder,
        ("DELETE", ["toolbox", _, "files"]) => Op::DeleteFile,
        _ => return None,
    })
}

async fn route(
    state: &Shared,
    counter: &AtomicU64,
    r: &Req,
    authorization: Option<&str>,
    organization: Option<&str>,
) -> Response<Body> {
    let parts: Vec<&str> = r.path.trim_matches('/').split('/').collect();
    let is_api = parts.first() == Some(&"api");
    let error = |status: u16, code: &str, message: &str| {
        if is_api {
            api_error(status, &r.path, message)
        } else {
            toolbox_error(status, &r.method, &r.path, code, message)
        }
    };
    let Some(op) = op_of(&r.method, &parts) else {
        return error(404, "NOT_FOUND", &format!("Cannot {} {}", r.method, r.path));
    };
    match authorization.and_then(|a| a.strip_prefix("Bearer ")) {
        Some(API_KEY) => {}
        Some(JWT) if organization == Some(ORGANIZATION) => {}
        Some(JWT) => {
            return error(
                403,
                "FORBIDDEN",
                "Organization ID is missing or you are not a member of this organization",
            );
        }
        _ => return error(401, "UNAUTHORIZED", "Unauthorized"),
    }
    // An injected status fault, if one applies.
    {
        let mut st = state.lock().unwrap();
        let pos = st
            .faults
            .iter()
            .position(|f| matches!(f, Fault::Status { op: o, .. } if *o == op || *o == Op::Any));
        if let Some(i) = pos {
            let Fault::Status {
                status,
                retry_after,
                times,
                ..
            } = st.faults[i].clone()
            else {
                unreachable!()
            };
            if times <= 1 {
                st.faults.remove(i);
            } else if let Fault::Status { times: t, .. } = &mut st.faults[i] {
                *t -= 1;
            }
            drop(st);
            let mut resp = error(
                status,
                &status_name(status).to_ascii_uppercase().replace(' ', "_"),
                &format!("injected fault {status}"),
            );
            if let Some(s) = retry_after {
                resp.headers_mut()
                    .insert("retry-after", s.to_string().parse().unwrap());
            }
            return resp;
        }
    }
    match op {
        Op::Create => create(state, counter, r).await,
        Op::List => list(state, r),
        Op::GetSandbox => with_sandbox(state, parts[2], r, |sb| ok(200, sandbox_json(sb))),
        Op::Stop => stop(state, parts[2], r),
        Op::Delete => delete(state, parts[2], r),
        Op::SnapshotSandbox => snapshots::take(state, counter, parts[2], r).await,
        Op::ListSnapshots => snapshots::list(state, r),
        Op::GetSnapshot => snapshots::get(state, parts[2], r),
        Op::DeleteSnapshot => snapshots::delete(state, parts[2], r),
        Op::ActivateSnapshot => snapshots::activate(state, parts[2], r),
        _ => {
            let id = parts[1];
            {
                let mut st = state.lock().unwrap();
                match st.sandboxes.iter_mut().find(|s| s.id == id && !s.deleted) {
                    None => {
                        return error(404, "NOT_FOUND", &format!("sandbox {id} not found"));
                    }
                    Some(sb) => {
                        refresh(sb);
                        if sb.state != "started" {
                            return error(
                                400,
                                "BAD_REQUEST",
                                &format!("sandbox {id} is not started (it is {})", sb.state),
                            );
                        }
                    }
                }
            }
            match op {
                Op::WorkDir | Op::HomeDir => files::home(state, id),
                Op::Upload => files::upload(state, id, r),
                Op::Download => files::download(state, id, r),
                Op::BulkDownload => files::bulk_download(state, id, r),
                Op::Folder => files::folder(state, id, r),
                Op::DeleteFile => files::delete(state, id, r),
                _ => toolbox::route(state, counter, id, op, &parts, r).await,
            }
        }
    }
}

/// A JSON object's string values (others read as empty).
fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `GET /sandbox?labels={json}&limit=&cursor=`: the live sandboxes carrying
/// every label given, a page at a time (`items`, `nextCursor`).
fn list(state: &Shared, r: &Req) -> Response<Body> {
    let labels: BTreeMap<String, String> = match r.query.get("labels") {
        None => BTreeMap::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(v) => strings(&v),
            Err(_) => return api_error(400, &r.path, "labels must be a JSON object"),
        },
    };
    let parse = |k: &str, default: usize| r.query.get(k).map_or(Some(default), |v| v.parse().ok());
    let mut st = state.lock().unwrap();
    let page_size = st.page_size.unwrap_or(100);
    let (Some(limit), Some(start)) = (parse("limit", page_size), parse("cursor", 0)) else {
        return api_error(400, &r.path, "limit and cursor must be numbers");
    };
    let mut found: Vec<Value> = Vec::new();
    for sb in st.sandboxes.iter_mut().filter(|s| !s.deleted) {
        refresh(sb);
        if labels.iter().all(|(k, v)| sb.labels.get(k) == Some(v)) {
            found.push(sandbox_json(sb));
        }
    }
    let end = (start + limit.max(1)).min(found.len());
    let next = (end < found.len()).then(|| end.to_string());
    let items: Vec<Value> = found.drain(start.min(end)..end).collect();
    ok(200, json!({"items": items, "nextCursor": next}))
}

/// A sandbox starts a moment after it is created, as a real one does, and
/// is back from snapshotting a moment after its tree is copied.
pub(crate) fn refresh(sb: &mut Sandbox) {
    let now = Instant::now();
    if sb.state == "starting" && now >= sb.start_at {
        sb.state = "started".into();
    }
    if sb.state == "snapshotting"
        && let Some(s) = &sb.snapshotting
        && s.until.is_some_and(|t| now >= t)
    {
        sb.state = s.previous.clone();
        sb.snapshotting = None;
    }
}

/// A state change under way: Daytona answers a stop or delete with 409.
fn in_progress(sb: &Sandbox, r: &Req) -> Option<Response<Body>> {
    (sb.state == "snapshotting")
        .then(|| api_error(409, &r.path, "Sandbox state change in progress"))
}

fn with_sandbox(
    state: &Shared,
    id: &str,
    r: &Req,
    f: impl FnOnce(&mut Sandbox) -> Response<Body>,
) -> Response<Body> {
    let id = decode(id);
    let mut st = state.lock().unwrap();
    match st
        .sandboxes
        .iter_mut()
        .find(|s| (s.id == id || s.name == id) && !s.deleted)
    {
        Some(sb) => {
            refresh(sb);
            f(sb)
        }
        None => api_error(
            404,
            &r.path,
            &format!("Sandbox with ID or name {id} not found"),
        ),
    }
}

pub(crate) fn sandbox_json(sb: &Sandbox) -> Value {
    let b = &sb.body;
    let snapshot = match (&sb.from_snapshot, b["snapshot"].as_str()) {
        (Some((_, name)), _) => name.as_str(),
        (None, Some(name)) if !name.trim().is_empty() => name,
        _ => DEFAULT_SNAPSHOT,
    };
    // What it is meant to be: while snapshotting, what it was.
    let settled = sb
        .snapshotting
        .as_ref()
        .map_or(sb.state.as_str(), |s| s.previous.as_str());
    json!({
        "id": sb.id,
        "organizationId": ORGANIZATION,
        "name": sb.name,
        "snapshot": snapshot,
        "user": b["user"].as_str().unwrap_or("daytona"),
        "env": sb.env,
        "labels": sb.labels,
        "public": b["public"].as_bool().unwrap_or(false),
        "networkBlockAll": b["networkBlockAll"].as_bool().unwrap_or(false),
        "networkAllowList": b["networkAllowList"],
        "target": b["target"].as_str().unwrap_or("us"),
        "cpu": b["cpu"].as_u64().unwrap_or(1),
        "gpu": 0,
        "memory": b["memory"].as_u64().unwrap_or(1),
        "disk": b["disk"].as_u64().unwrap_or(3),
        "state": sb.state,
        "desiredState": if sb.deleted { "destroyed" } else if settled == "stopped" { "stopped" } else { "started" },
        "backupState": "None",
        "autoStopInterval": b["autoStopInterval"].as_u64().unwrap_or(15),
        "autoArchiveInterval": b["autoArchiveInterval"].as_u64().unwrap_or(10080),
        "autoDeleteInterval": b["autoDeleteInterval"].as_i64().unwrap_or(-1),
        "volumes": [],
        "createdAt": sb.created,
        "updatedAt": now_iso(),
        "lastActivityAt": now_iso(),
        "daemonVersion": "0.190.0",
        "toolboxProxyUrl": sb.toolbox,
    })
}

/// `POST /sandbox`. A `snapshot` the mock holds (by name, or id) gives
/// the sandbox a copy of its tree; Daytona's default gives an empty one;
/// any other is refused with Daytona's 400, and nothing is created.
async fn create(state: &Shared, counter: &AtomicU64, r: &Req) -> Response<Body> {
    let body = r.json();
    if !body.is_object() {
        return api_error(400, &r.path, "the body must be a JSON object");
    }
    if body.get("snapshot").is_some_and(|s| !s.is_null())
        && body.get("buildInfo").is_some_and(|b| !b.is_null())
    {
        return api_error(
            400,
            &r.path,
            "Cannot specify a snapshot when using a build info entry",
        );
    }
    let wanted = body["snapshot"]
        .as_str()
        .filter(|s| !s.trim().is_empty() && *s != DEFAULT_SNAPSHOT);
    let source = match wanted {
        None => None,
        Some(key) => match snapshots::for_create(&state.lock().unwrap(), key) {
            Ok(found) => Some(found),
            Err(message) => return api_error(400, &r.path, &message),
        },
    };
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let root = match tempfile::Builder::new().prefix("daytona-mock-").tempdir() {
        Ok(r) => r,
        Err(e) => return api_error(500, &r.path, &e.to_string()),
    };
    let control = match tempfile::Builder::new()
        .prefix("daytona-mock-daemon-")
        .tempdir()
    {
        Ok(r) => r,
        Err(e) => return api_error(500, &r.path, &e.to_string()),
    };
    let root_path = root.path().canonicalize().unwrap();
    let mut from_snapshot = None;
    if let Some(snapshots::Source {
        id,
        name,
        tree,
        origin,
    }) = source
    {
        let to = root_path.clone();
        // `tree` is held until the copy ends, even if the snapshot is
        // deleted meanwhile.
        let copied =
            tokio::task::spawn_blocking(move || snapshots::fill(tree.path(), &origin, &to))
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(e) = copied {
            return api_error(500, &r.path, &format!("copying snapshot {name}: {e}"));
        }
        from_snapshot = Some((id, name));
    }
    let home = root_path.join("home/daytona");
    std::fs::create_dir_all(&home).unwrap();
    let labels = strings(&body["labels"]);
    let env = strings(&body["env"]);
    let url = state.lock().unwrap().url.clone();
    let id = format!("{:08x}-0000-4000-8000-{:012x}", n, n);
    let sb = Sandbox {
        id: id.clone(),
        toolbox: format!("{url}/toolbox"),
        name: body["name"]
            .as_str()
            .map(str::to_string)
            .unwrap_or(id.clone()),
        root: Some(root),
        root_path,
        home,
        control: Some(control),
        state: "starting".into(),
        start_at: Instant::now() + Duration::from_millis(150),
        deleted: false,
        labels,
        env,
        body,
        created: now_iso(),
        sessions: BTreeMap::new(),
        snapshotting: None,
        from_snapshot,
    };
    let answer = sandbox_json(&sb);
    state.lock().unwrap().sandboxes.push(sb);
    ok(200, answer)
}

fn stop(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    with_sandbox(state, id, r, |sb| {
        if let Some(refused) = in_progress(sb, r) {
            return refused;
        }
        toolbox::end_sessions(sb);
        sb.state = "stopped".into();
        ok(200, sandbox_json(sb))
    })
}

fn delete(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    with_sandbox(state, id, r, |sb| {
        if let Some(refused) = in_progress(sb, r) {
            return refused;
        }
        toolbox::end_sessions(sb);
        sb.state = "destroyed".into();
        sb.deleted = true;
        sb.root.take();
        sb.control.take();
        let mut answer = sandbox_json(sb);
        answer["state"] = json!("destroying");
        ok(200, answer)
    })
}

/// The reason phrase of a status.
pub fn status_name(code: u16) -> &'static str {
    StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}
