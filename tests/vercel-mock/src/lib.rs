//! A loopback mock of the Vercel Sandbox v2 REST API (the facts are in
//! docs/reference/protocols.md, "Vercel Sandbox REST API", read from the
//! `@vercel/sandbox` SDK), for sanddune's tests.
//!
//! It runs commands for real: every sandbox is a temporary directory with a
//! `vercel/sandbox` working directory and a `home/vercel-sandbox` HOME, and
//! commands run in real `sh` (no chroot). So paths inside a mock sandbox
//! are real host paths under its directory, and the mock reports its
//! session `cwd` as such; file calls outside the sandbox's directory are
//! refused. Output streams as `application/x-ndjson` exactly as the API
//! does, and faults can be injected: any status on any operation (401,
//! 403, 404, 410, 422, 429 with `Retry-After`, 5xx), a command stream that
//! ends before the exit code, a connection dropped mid-exec.
//!
//! Snapshots are real too: `POST .../sessions/{sid}/snapshot` stops the
//! session (killing its commands, as `stop` does) and keeps a copy (`cp -a`:
//! modes and symlinks kept) of the sandbox's whole directory in a temporary
//! directory of the mock's; a create with `source: {type: "snapshot"}`
//! starts from a copy of that, and one from a deleted or expired snapshot
//! answers 410 `snapshot_not_found`. Snapshots can be got, listed and
//! deleted, and a test can make one vanish behind the client's back
//! (`delete_snapshot_behind`). A symlink with an absolute target still
//! points into the source sandbox's directory (there is no chroot).

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};

pub const TOKEN: &str = "mock-token";
pub const TEAM: &str = "team_mock";
pub const PROJECT: &str = "prj_mock";

/// Which API call a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Create,
    GetSession,
    RunCommand,
    GetCommand,
    Logs,
    Kill,
    WriteFiles,
    ReadFile,
    Mkdir,
    Stop,
    ExtendTimeout,
    Delete,
    List,
    /// `POST /v2/sandboxes/sessions/{sid}/snapshot`.
    Snapshot,
    GetSnapshot,
    DeleteSnapshot,
    ListSnapshots,
    Any,
}

#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer `status` with `{"error":{code,message}}` (and `Retry-After`
    /// when given) `times` times, before doing anything.
    Status {
        op: Op,
        status: u16,
        code: String,
        retry_after: Option<u64>,
        times: usize,
    },
    /// The next answer to `op` is held back `ms` after the request is
    /// done, as from a slow API or network: the client sees a request that
    /// hangs, though its effect (a created sandbox) has happened.
    SlowAnswer { op: Op, ms: u64 },
    /// The next command stream (of a command whose program and arguments,
    /// joined by spaces, contain `command_contains`) ends cleanly after its
    /// output, without the final line carrying the exit code. The command
    /// runs on.
    EndStreamEarly { command_contains: String },
    /// The next such command stream's connection is cut after `after_logs`
    /// log lines. The command runs on.
    DropMidExec {
        after_logs: usize,
        command_contains: String,
    },
}

impl Fault {
    pub fn status(op: Op, status: u16, code: &str) -> Fault {
        Fault::Status {
            op,
            status,
            code: code.into(),
            retry_after: None,
            times: 1,
        }
    }
}

/// One request as the mock saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub status: u16,
}

/// What a test can see of a sandbox.
#[derive(Clone, Debug)]
pub struct SandboxView {
    pub name: String,
    pub session: String,
    pub status: String,
    pub deleted: bool,
    pub tags: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub body: Value,
    /// The snapshot it was created from.
    pub source_snapshot: Option<String>,
}

/// What a test can see of a snapshot.
#[derive(Clone, Debug)]
pub struct SnapshotView {
    pub id: String,
    pub source_session: String,
    /// `created`, or `deleted` once deleted or expired.
    pub status: String,
    pub deleted: bool,
    pub size_bytes: u64,
}

struct Sandbox {
    name: String,
    session: String,
    root: Option<tempfile::TempDir>,
    root_path: PathBuf,
    cwd: PathBuf,
    home: PathBuf,
    status: String,
    deleted: bool,
    tags: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
    body: Value,
    created: u64,
    timeout: u64,
    vcpus: u64,
    runtime: Option<String>,
    source_snapshot: Option<String>,
    snapshotted: Option<u64>,
}

struct Snap {
    id: String,
    source_session: String,
    source_name: String,
    /// The copy of the source sandbox's directory; dropped (removed) on
    /// delete and expiry.
    dir: Option<tempfile::TempDir>,
    size: u64,
    created: u64,
    updated: u64,
    expires: Option<u64>,
    last_used: Option<u64>,
    deleted: bool,
}

impl Snap {
    fn gone(&self) -> bool {
        self.deleted || self.expires.is_some_and(|e| now_ms() >= e)
    }

    fn json(&self) -> Value {
        let mut s = json!({
            "id": self.id,
            "sourceSessionId": self.source_session,
            "region": "iad1",
            "status": if self.gone() { "deleted" } else { "created" },
            "sizeBytes": self.size,
            "createdAt": self.created,
            "updatedAt": self.updated,
        });
        if let Some(e) = self.expires {
            s["expiresAt"] = json!(e);
        }
        if let Some(u) = self.last_used {
            s["lastUsedAt"] = json!(u);
        }
        s
    }

    fn delete(&mut self) {
        self.deleted = true;
        self.updated = now_ms();
        self.dir.take();
    }
}

#[derive(Clone)]
enum Log {
    Out(&'static str, String),
}

struct Cmd {
    id: String,
    session: String,
    name: String,
    args: Vec<String>,
    cwd: String,
    started: u64,
    logs: Vec<Log>,
    exit: Option<i32>,
    pgid: Option<i32>,
    changed: Arc<Notify>,
}

impl Cmd {
    fn json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "args": self.args,
            "cwd": self.cwd,
            "sessionId": self.session,
            "exitCode": self.exit,
            "startedAt": self.started,
        })
    }
}

#[derive(Default)]
struct State {
    /// PATH of the commands the mock runs.
    path: String,
    sandboxes: Vec<Sandbox>,
    snapshots: Vec<Snap>,
    cmds: BTreeMap<String, Cmd>,
    faults: VecDeque<Fault>,
    seen: Vec<Seen>,
    /// Sandboxes per list page when the client gives no `limit`.
    page_size: Option<usize>,
}

type Shared = Arc<Mutex<State>>;

pub struct VercelMock {
    url: String,
    state: Shared,
    counter: Arc<AtomicU64>,
    runtime: Option<tokio::runtime::Runtime>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl VercelMock {
    /// Start on `127.0.0.1` at a free port, serving from its own threads.
    /// Commands get this process's PATH.
    pub fn start() -> VercelMock {
        Self::start_with_path(
            &std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        )
    }

    /// `start`, with `path` as the PATH of every command (a test's fake
    /// agents first, as the image of a real sandbox would have the agent).
    pub fn start_with_path(path: &str) -> VercelMock {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime for the mock");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("binding the mock's port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state: Shared = Arc::default();
        state.lock().unwrap().path = path.to_string();
        let counter = Arc::new(AtomicU64::new(1));
        // Like the real service, a sandbox stops when its timeout is up.
        let reaped = state.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let expired: Vec<String> = {
                    let st = reaped.lock().unwrap();
                    st.sandboxes
                        .iter()
                        .filter(|s| s.status == "running" && now_ms() >= s.created + s.timeout)
                        .map(|s| s.session.clone())
                        .collect()
                };
                for sid in expired {
                    stop(&reaped, &sid);
                }
                // An expired snapshot's copy goes, as Vercel deletes it.
                for s in reaped.lock().unwrap().snapshots.iter_mut() {
                    if s.gone() && !s.deleted {
                        s.delete();
                    }
                }
            }
        });
        let (s, c) = (state.clone(), counter.clone());
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                // Small writes go out at once, as from a real front end:
                // with Nagle on, a client that delays its ACKs waited ~40 ms
                // for each answer on a kept-alive connection.
                let _ = stream.set_nodelay(true);
                let (s, c) = (s.clone(), c.clone());
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
        VercelMock {
            url,
            state,
            counter,
            runtime: Some(runtime),
        }
    }

    /// `http://127.0.0.1:PORT`: the API base URL (no path prefix).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn inject(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push_back(fault);
    }

    /// List pages of `n` sandboxes when the client asks for no `limit`
    /// (the API's default is 50), so a test can make a client page.
    pub fn set_page_size(&self, n: usize) {
        self.state.lock().unwrap().page_size = Some(n);
    }

    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn sandboxes(&self) -> Vec<SandboxView> {
        let st = self.state.lock().unwrap();
        st.sandboxes
            .iter()
            .map(|s| SandboxView {
                name: s.name.clone(),
                session: s.session.clone(),
                status: s.status.clone(),
                deleted: s.deleted,
                tags: s.tags.clone(),
                cwd: s.cwd.clone(),
                body: s.body.clone(),
                source_snapshot: s.source_snapshot.clone(),
            })
            .collect()
    }

    pub fn snapshots(&self) -> Vec<SnapshotView> {
        let st = self.state.lock().unwrap();
        st.snapshots
            .iter()
            .map(|s| SnapshotView {
                id: s.id.clone(),
                source_session: s.source_session.clone(),
                status: if s.gone() { "deleted" } else { "created" }.into(),
                deleted: s.gone(),
                size_bytes: s.size,
            })
            .collect()
    }

    /// Delete snapshot `id` on the service's side, as when it expires:
    /// the client is not told, and a create from it then answers 410
    /// `snapshot_not_found`. False when there is no such snapshot.
    pub fn delete_snapshot_behind(&self, id: &str) -> bool {
        let mut st = self.state.lock().unwrap();
        let Some(s) = st.snapshots.iter_mut().find(|s| s.id == id) else {
            return false;
        };
        s.delete();
        true
    }

    /// Commands still running in any sandbox.
    pub fn running_commands(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.cmds
            .values()
            .filter(|c| c.exit.is_none())
            .map(|c| c.id.clone())
            .collect()
    }

    pub fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", self.counter.fetch_add(1, Ordering::SeqCst))
    }
}

impl Drop for VercelMock {
    fn drop(&mut self) {
        let pgids: Vec<i32> = self
            .state
            .lock()
            .unwrap()
            .cmds
            .values()
            .filter_map(|c| c.pgid)
            .collect();
        for pgid in pgids {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        // The copies go with the mock, even if a task still holds the state.
        self.state.lock().unwrap().snapshots.clear();
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
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

fn ok(v: Value) -> Response<Body> {
    full(200, "application/json", v.to_string())
}

fn error(status: u16, code: &str, message: &str) -> Response<Body> {
    full(
        status,
        "application/json",
        json!({"error": {"code": code, "message": message}}).to_string(),
    )
}

fn query_map(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
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
    let (authorization, content_type, x_cwd) = (
        header("authorization"),
        header("content-type"),
        header("x-cwd"),
    );
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let op = op_of(
        &method,
        &path.trim_matches('/').split('/').collect::<Vec<_>>(),
    );
    let response = route(
        &state,
        &counter,
        &method,
        &path,
        &query,
        authorization.as_deref(),
        content_type.as_deref(),
        x_cwd,
        body,
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
    tokio::time::sleep(std::time::Duration::from_millis(slow)).await;
    state.lock().unwrap().seen.push(Seen {
        method,
        path,
        query,
        authorization,
        content_type,
        status: response.status().as_u16(),
    });
    response
}

fn op_of(method: &str, parts: &[&str]) -> Option<Op> {
    Some(match (method, parts) {
        ("POST", ["v3" | "v2", "sandboxes"]) => Op::Create,
        ("GET", ["v2", "sandboxes"]) => Op::List,
        ("GET", ["v2", "sandboxes", "sessions", _]) => Op::GetSession,
        ("POST", ["v2", "sandboxes", "sessions", _, "cmd"]) => Op::RunCommand,
        ("GET", ["v2", "sandboxes", "sessions", _, "cmd", _]) => Op::GetCommand,
        ("GET", ["v2", "sandboxes", "sessions", _, "cmd", _, "logs"]) => Op::Logs,
        ("POST", ["v2", "sandboxes", "sessions", _, "cmd", _, "kill"]) => Op::Kill,
        ("POST", ["v2", "sandboxes", "sessions", _, "fs", "write"]) => Op::WriteFiles,
        ("POST", ["v2", "sandboxes", "sessions", _, "fs", "read"]) => Op::ReadFile,
        ("POST", ["v2", "sandboxes", "sessions", _, "fs", "mkdir"]) => Op::Mkdir,
        ("POST", ["v2", "sandboxes", "sessions", _, "stop"]) => Op::Stop,
        ("POST", ["v2", "sandboxes", "sessions", _, "extend-timeout"]) => Op::ExtendTimeout,
        ("POST", ["v2", "sandboxes", "sessions", _, "snapshot"]) => Op::Snapshot,
        ("GET", ["v2", "sandboxes", "snapshots"]) => Op::ListSnapshots,
        ("GET", ["v2", "sandboxes", "snapshots", _]) => Op::GetSnapshot,
        ("DELETE", ["v2", "sandboxes", "snapshots", _]) => Op::DeleteSnapshot,
        ("DELETE", ["v2", "sandboxes", _]) => Op::Delete,
        _ => return None,
    })
}

#[allow(clippy::too_many_arguments)]
async fn route(
    state: &Shared,
    counter: &AtomicU64,
    method: &str,
    path: &str,
    query: &str,
    authorization: Option<&str>,
    content_type: Option<&str>,
    x_cwd: Option<String>,
    body: Bytes,
) -> Response<Body> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let Some(op) = op_of(method, &parts) else {
        return error(404, "not_found", &format!("no route {method} {path}"));
    };
    if authorization != Some(&format!("Bearer {TOKEN}")) {
        return error(
            401,
            "unauthorized",
            "Missing or invalid authentication token",
        );
    }
    let q = query_map(query);
    if q.get("teamId").map(String::as_str) != Some(TEAM) {
        return error(403, "forbidden", "You don't have access to this team");
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
                code,
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
            let mut r = error(status, &code, &format!("injected fault {status} {code}"));
            if let Some(s) = retry_after {
                r.headers_mut()
                    .insert("retry-after", s.to_string().parse().unwrap());
            }
            return r;
        }
    }
    let json_body = || serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    if matches!(
        op,
        Op::Create | Op::RunCommand | Op::Kill | Op::ReadFile | Op::Mkdir | Op::ExtendTimeout
    ) && !content_type.is_some_and(|c| c.starts_with("application/json"))
    {
        return error(400, "bad_request", "content-type must be application/json");
    }
    match op {
        Op::Create => create(state, counter, &parts, json_body()).await,
        Op::List => list(state, &q),
        Op::Delete => delete(state, parts[2], &q),
        Op::GetSnapshot => get_snapshot(state, parts[3]),
        Op::DeleteSnapshot => delete_snapshot(state, parts[3]),
        Op::ListSnapshots => list_snapshots(state, &q),
        _ => {
            let sid = parts[3];
            let (cwd, root, home, env, path_var) = {
                let st = state.lock().unwrap();
                let Some(sb) = st.sandboxes.iter().find(|s| s.session == sid) else {
                    return error(404, "not_found", "Session not found");
                };
                if op == Op::GetSession {
                    return ok(json!({"session": session_json(sb), "routes": []}));
                }
                // While its copy is taken the session answers as Vercel's
                // does mid-snapshot.
                if sb.status == "snapshotting" && !matches!(op, Op::GetCommand | Op::Logs) {
                    return error(
                        422,
                        "sandbox_snapshotting",
                        "The sandbox is being snapshotted",
                    );
                }
                if sb.status == "stopped" || sb.deleted {
                    if op == Op::Stop {
                        return ok(
                            json!({"session": session_json(sb), "sandbox": sandbox_json(sb)}),
                        );
                    }
                    if !matches!(op, Op::GetCommand | Op::Logs) {
                        return error(410, "sandbox_stopped", "The sandbox has been stopped");
                    }
                }
                (
                    sb.cwd.clone(),
                    sb.root_path.clone(),
                    sb.home.clone(),
                    sb.env.clone(),
                    st.path.clone(),
                )
            };
            let sb = Sbx {
                session: sid.to_string(),
                cwd,
                root,
                home,
                env,
                path: path_var,
            };
            match op {
                Op::RunCommand => run_command(state, counter, &sb, json_body()).await,
                Op::GetCommand => {
                    get_command(state, parts[5], q.get("wait").is_some_and(|w| w == "true")).await
                }
                Op::Logs => logs(state, parts[5]),
                Op::Kill => kill(state, parts[5], json_body()),
                Op::WriteFiles => write_files(&sb, content_type, x_cwd, body).await,
                Op::ReadFile => read_file(&sb, json_body()),
                Op::Mkdir => mkdir(&sb, json_body()),
                Op::Stop => stop(state, sid),
                Op::ExtendTimeout => extend(state, sid, json_body()),
                Op::Snapshot => snapshot(state, counter, sid, &body).await,
                _ => error(404, "not_found", path),
            }
        }
    }
}

struct Sbx {
    path: String,
    session: String,
    cwd: PathBuf,
    root: PathBuf,
    home: PathBuf,
    env: BTreeMap<String, String>,
}

impl Sbx {
    /// A sandbox path (absolute, or relative to `cwd`) as a host path,
    /// refused when it leaves the sandbox's directory.
    fn resolve(&self, path: &str, cwd: Option<&str>) -> Result<PathBuf, Box<Response<Body>>> {
        let base = cwd.map(PathBuf::from).unwrap_or_else(|| self.cwd.clone());
        let joined = base.join(path);
        let mut clean = PathBuf::new();
        for c in joined.components() {
            match c {
                std::path::Component::ParentDir => {
                    clean.pop();
                }
                std::path::Component::CurDir => {}
                other => clean.push(other),
            }
        }
        if !clean.starts_with(&self.root) {
            return Err(Box::new(error(
                400,
                "bad_request",
                &format!("path {path} is outside this mock sandbox"),
            )));
        }
        Ok(clean)
    }
}

fn session_json(sb: &Sandbox) -> Value {
    let mut s = json!({
        "id": sb.session,
        "memory": sb.vcpus * 2048,
        "vcpus": sb.vcpus,
        "region": "iad1",
        "timeout": sb.timeout,
        "status": sb.status,
        "requestedAt": sb.created,
        "startedAt": sb.created,
        "createdAt": sb.created,
        "cwd": sb.cwd.display().to_string(),
        "updatedAt": now_ms(),
    });
    if let Some(r) = &sb.runtime {
        s["runtime"] = json!(r);
    }
    if sb.status == "stopped" {
        s["stoppedAt"] = json!(now_ms());
    }
    if let Some(id) = &sb.source_snapshot {
        s["sourceSnapshotId"] = json!(id);
    }
    if let Some(t) = sb.snapshotted {
        s["snapshottedAt"] = json!(t);
    }
    s
}

fn sandbox_json(sb: &Sandbox) -> Value {
    json!({
        "name": sb.name,
        "persistent": false,
        "region": "iad1",
        "vcpus": sb.vcpus,
        "memory": sb.vcpus * 2048,
        "timeout": sb.timeout,
        "createdAt": sb.created,
        "updatedAt": now_ms(),
        "currentSessionId": sb.session,
        "status": sb.status,
        "cwd": sb.cwd.display().to_string(),
        "tags": sb.tags,
    })
}

async fn create(
    state: &Shared,
    counter: &AtomicU64,
    parts: &[&str],
    body: Value,
) -> Response<Body> {
    if body["projectId"].as_str() != Some(PROJECT) {
        return error(404, "not_found", "Project not found");
    }
    if parts[0] == "v2" && body.get("runtime").is_none_or(Value::is_null) {
        return error(400, "bad_request", "/v2/sandboxes requires a runtime");
    }
    if body.get("runtime").is_some_and(|r| !r.is_null())
        && body.get("image").is_some_and(|i| !i.is_null())
    {
        return error(
            400,
            "bad_request",
            "runtime and image cannot be used together",
        );
    }
    // From a snapshot: its copy must still be there, or nothing is created.
    let source = match body["source"]["type"].as_str() {
        Some("snapshot") => {
            let Some(id) = body["source"]["snapshotId"].as_str() else {
                return error(400, "bad_request", "source.snapshotId is required");
            };
            let st = state.lock().unwrap();
            match st.snapshots.iter().find(|s| s.id == id && !s.gone()) {
                Some(Snap { dir: Some(d), .. }) => Some((id.to_string(), d.path().to_path_buf())),
                _ => return snapshot_not_found(id),
            }
        }
        _ => None,
    };
    let root = match tempfile::Builder::new().prefix("vercel-mock-").tempdir() {
        Ok(r) => r,
        Err(e) => return error(500, "internal", &e.to_string()),
    };
    let root_path = root.path().canonicalize().unwrap();
    if let Some((id, from)) = &source {
        // Deleted while being copied: as if it had been gone before.
        if copy_tree(from, &root_path).await.is_err() {
            return snapshot_not_found(id);
        }
        let mut st = state.lock().unwrap();
        match st.snapshots.iter_mut().find(|s| &s.id == id && !s.gone()) {
            Some(s) => s.last_used = Some(now_ms()),
            None => return snapshot_not_found(id),
        }
    }
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let cwd = root_path.join("vercel/sandbox");
    let home = root_path.join("home/vercel-sandbox");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let tags: BTreeMap<String, String> = body["tags"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let env: BTreeMap<String, String> = body["env"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let sb = Sandbox {
        name: body["name"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("sbx-mock-{n}")),
        session: format!("sess_mock{n}"),
        root: Some(root),
        root_path,
        cwd,
        home,
        status: "running".into(),
        deleted: false,
        tags,
        env,
        created: now_ms(),
        timeout: body["timeout"].as_u64().unwrap_or(300_000),
        vcpus: body["resources"]["vcpus"].as_u64().unwrap_or(2),
        runtime: body["runtime"].as_str().map(str::to_string),
        source_snapshot: source.map(|(id, _)| id),
        snapshotted: None,
        body: body.clone(),
    };
    let routes: Vec<Value> = body["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|p| json!({"url": format!("https://sb-{n}-{p}.vercel.run"), "subdomain": format!("sb-{n}-{p}"), "port": p}))
        .collect();
    let response =
        json!({"sandbox": sandbox_json(&sb), "session": session_json(&sb), "routes": routes});
    state.lock().unwrap().sandboxes.push(sb);
    ok(response)
}

fn list(state: &Shared, q: &BTreeMap<String, String>) -> Response<Body> {
    let st = state.lock().unwrap();
    let tag = q.get("tags").and_then(|t| t.split_once(':'));
    let found: Vec<Value> = st
        .sandboxes
        .iter()
        .filter(|s| !s.deleted)
        .filter(|s| tag.is_none_or(|(k, v)| s.tags.get(k).map(String::as_str) == Some(v)))
        .filter(|s| {
            q.get("namePrefix")
                .is_none_or(|p| s.name.starts_with(p.as_str()))
        })
        .map(sandbox_json)
        .collect();
    // Pages of `limit`; `next` is the cursor of the following one.
    let parse = |k: &str, default: usize| q.get(k).map_or(Some(default), |v| v.parse().ok());
    let page_size = st.page_size.unwrap_or(50);
    let (Some(limit), Some(start)) = (parse("limit", page_size), parse("cursor", 0)) else {
        return error(400, "bad_request", "limit and cursor must be numbers");
    };
    let end = (start + limit.max(1)).min(found.len());
    let next = (end < found.len()).then(|| end.to_string());
    let page = &found[start.min(end)..end];
    ok(json!({"sandboxes": page, "pagination": {"count": page.len(), "next": next}}))
}

fn snapshot_not_found(id: &str) -> Response<Body> {
    // The code `Sandbox.getOrCreate` looks for (isSnapshotNotFoundError).
    error(
        410,
        "snapshot_not_found",
        &format!("Snapshot {id} not found"),
    )
}

/// Copy `from`'s contents into `to` as `cp -a` does: modes, symlinks and
/// times kept.
async fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    let out = tokio::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(())
}

/// The bytes of the regular files under `dir` (symlinks not followed).
fn tree_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Snapshots live 30 days unless the client says otherwise (0: forever).
const SNAPSHOT_EXPIRATION_MS: u64 = 30 * 24 * 3600 * 1000;

async fn snapshot(state: &Shared, counter: &AtomicU64, sid: &str, body: &[u8]) -> Response<Body> {
    // The SDK sends no body unless an expiration is given.
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(400, "bad_request", &format!("invalid JSON: {e}")),
        }
    };
    let expiration = match &body["expiration"] {
        Value::Null => SNAPSHOT_EXPIRATION_MS,
        v => match v.as_u64() {
            Some(ms) => ms,
            None => return error(400, "bad_request", "expiration must be milliseconds"),
        },
    };
    // The session stops first, as a VM is stopped to be snapshotted.
    let (root, name) = {
        let mut st = state.lock().unwrap();
        let sb = st.sandboxes.iter_mut().find(|s| s.session == sid).unwrap();
        // Another snapshot got in since the route looked.
        if sb.status != "running" {
            return error(
                422,
                "sandbox_snapshotting",
                "The sandbox is being snapshotted",
            );
        }
        sb.status = "snapshotting".into();
        sb.snapshotted = Some(now_ms());
        let taken = (sb.root_path.clone(), sb.name.clone());
        for c in st
            .cmds
            .values()
            .filter(|c| c.session == sid && c.exit.is_none())
        {
            if let Some(p) = c.pgid {
                kill_group(p, libc::SIGKILL);
            }
        }
        taken
    };
    let id = format!("snap_mock{}", counter.fetch_add(1, Ordering::SeqCst));
    // A task of its own, so a client that hangs up mid-copy does not leave
    // the session snapshotting for ever.
    let (state, sid) = (state.clone(), sid.to_string());
    let task = tokio::spawn(async move {
        let copied = match tempfile::Builder::new()
            .prefix("vercel-mock-snapshot-")
            .tempdir()
        {
            Ok(dir) => copy_tree(&root, dir.path()).await.map(|()| dir),
            Err(e) => Err(e.to_string()),
        };
        let mut st = state.lock().unwrap();
        let sb = st.sandboxes.iter_mut().find(|s| s.session == sid).unwrap();
        sb.status = "stopped".into();
        let session = session_json(sb);
        let dir = match copied {
            Ok(d) => d,
            Err(e) => return error(500, "internal", &format!("copying the sandbox: {e}")),
        };
        let now = now_ms();
        let snap = Snap {
            id,
            source_session: sid,
            source_name: name,
            size: tree_size(dir.path()),
            dir: Some(dir),
            created: now,
            updated: now,
            expires: (expiration > 0).then(|| now + expiration),
            last_used: None,
            deleted: false,
        };
        let response = json!({"snapshot": snap.json(), "session": session});
        st.snapshots.push(snap);
        ok(response)
    });
    task.await
        .unwrap_or_else(|e| error(500, "internal", &format!("snapshot task: {e}")))
}

fn get_snapshot(state: &Shared, id: &str) -> Response<Body> {
    let st = state.lock().unwrap();
    // A deleted one is still there, with status "deleted".
    match st.snapshots.iter().find(|s| s.id == id) {
        Some(s) => ok(json!({"snapshot": s.json()})),
        None => error(404, "not_found", "Snapshot not found"),
    }
}

fn delete_snapshot(state: &Shared, id: &str) -> Response<Body> {
    let mut st = state.lock().unwrap();
    match st.snapshots.iter_mut().find(|s| s.id == id) {
        Some(s) => {
            if !s.deleted {
                s.delete();
            }
            ok(json!({"snapshot": s.json()}))
        }
        None => error(404, "not_found", "Snapshot not found"),
    }
}

fn list_snapshots(state: &Shared, q: &BTreeMap<String, String>) -> Response<Body> {
    if q.get("project").map(String::as_str) != Some(PROJECT) {
        return error(400, "bad_request", "project is required");
    }
    let st = state.lock().unwrap();
    let mut found: Vec<&Snap> = st
        .snapshots
        .iter()
        .filter(|s| !s.gone())
        .filter(|s| q.get("name").is_none_or(|n| &s.source_name == n))
        .collect();
    // Newest first unless asked otherwise.
    if q.get("sortOrder").map(String::as_str) != Some("asc") {
        found.reverse();
    }
    let parse = |k: &str, default: usize| q.get(k).map_or(Some(default), |v| v.parse().ok());
    let page_size = st.page_size.unwrap_or(50);
    let (Some(limit), Some(start)) = (parse("limit", page_size), parse("cursor", 0)) else {
        return error(400, "bad_request", "limit and cursor must be numbers");
    };
    let end = (start + limit.max(1)).min(found.len());
    let next = (end < found.len()).then(|| end.to_string());
    let page: Vec<Value> = found[start.min(end)..end]
        .iter()
        .map(|s| s.json())
        .collect();
    ok(json!({"snapshots": page, "pagination": {"count": page.len(), "next": next}}))
}

fn kill_group(pgid: i32, signal: i32) {
    unsafe { libc::kill(-pgid, signal) };
}

fn stop(state: &Shared, sid: &str) -> Response<Body> {
    let mut st = state.lock().unwrap();
    for c in st
        .cmds
        .values()
        .filter(|c| c.session == sid && c.exit.is_none())
    {
        if let Some(p) = c.pgid {
            kill_group(p, libc::SIGKILL);
        }
    }
    let sb = st.sandboxes.iter_mut().find(|s| s.session == sid).unwrap();
    sb.status = "stopped".into();
    ok(json!({"session": session_json(sb), "sandbox": sandbox_json(sb)}))
}

fn extend(state: &Shared, sid: &str, body: Value) -> Response<Body> {
    let Some(duration) = body["duration"].as_u64() else {
        return error(400, "bad_request", "duration is required");
    };
    let mut st = state.lock().unwrap();
    let sb = st.sandboxes.iter_mut().find(|s| s.session == sid).unwrap();
    sb.timeout += duration;
    ok(json!({"session": session_json(sb)}))
}

fn delete(state: &Shared, name: &str, q: &BTreeMap<String, String>) -> Response<Body> {
    if q.get("projectId").map(String::as_str) != Some(PROJECT) {
        return error(400, "bad_request", "projectId is required");
    }
    let name = decode(name);
    let mut st = state.lock().unwrap();
    let Some(i) = st
        .sandboxes
        .iter()
        .position(|s| s.name == name && !s.deleted)
    else {
        return error(404, "not_found", "Sandbox not found");
    };
    let session = st.sandboxes[i].session.clone();
    for c in st
        .cmds
        .values()
        .filter(|c| c.session == session && c.exit.is_none())
    {
        if let Some(p) = c.pgid {
            kill_group(p, libc::SIGKILL);
        }
    }
    let sb = &mut st.sandboxes[i];
    sb.deleted = true;
    sb.status = "stopped".into();
    sb.root.take();
    ok(json!({"sandbox": sandbox_json(sb)}))
}

async fn run_command(state: &Shared, counter: &AtomicU64, sb: &Sbx, body: Value) -> Response<Body> {
    let Some(name) = body["command"].as_str().map(str::to_string) else {
        return error(400, "bad_request", "command is required");
    };
    let args: Vec<String> = body["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let cwd = match sb.resolve(body["cwd"].as_str().unwrap_or("."), None) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let mut command = tokio::process::Command::new(&name);
    command
        .args(&args)
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", &sb.path)
        .env("HOME", &sb.home)
        .env("USER", "vercel-sandbox")
        .env("LANG", "C.UTF-8")
        .envs(&sb.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    for (k, v) in body["env"].as_object().into_iter().flatten() {
        command.env(k, v.as_str().unwrap_or(""));
    }
    let id = format!("cmd_{}", counter.fetch_add(1, Ordering::SeqCst));
    let changed = Arc::new(Notify::new());
    let mut cmd = Cmd {
        id: id.clone(),
        session: sb.session.clone(),
        name: name.clone(),
        args,
        cwd: cwd.display().to_string(),
        started: now_ms(),
        logs: vec![],
        exit: None,
        pgid: None,
        changed: changed.clone(),
    };
    match command.spawn() {
        Ok(mut child) => {
            cmd.pgid = child.id().map(|p| p as i32);
            let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let first = cmd.json();
            state.lock().unwrap().cmds.insert(id.clone(), cmd);
            let timeout = body["timeout"].as_u64();
            spawn_runner(state.clone(), id.clone(), child, out, err, timeout);
            if body["wait"].as_bool() == Some(true) {
                stream_command(state, &id, first)
            } else {
                ok(json!({"command": first}))
            }
        }
        Err(e) => {
            // Like a shell: the command ran and failed with 127.
            cmd.logs.push(Log::Out("stderr", format!("{name}: {e}\n")));
            cmd.exit = Some(127);
            let mut started = cmd.json();
            started["exitCode"] = Value::Null;
            state.lock().unwrap().cmds.insert(id.clone(), cmd);
            if body["wait"].as_bool() == Some(true) {
                stream_command(state, &id, started)
            } else {
                ok(json!({"command": started}))
            }
        }
    }
}

fn spawn_runner(
    state: Shared,
    id: String,
    mut child: tokio::process::Child,
    out: tokio::process::ChildStdout,
    err: tokio::process::ChildStderr,
    timeout: Option<u64>,
) {
    let pgid = child.id().map(|p| p as i32);
    let reader = |stream: &'static str, r: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
        let (state, id) = (state.clone(), id.clone());
        tokio::spawn(async move {
            let mut r = BufReader::new(r);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let mut st = state.lock().unwrap();
                        let c = st.cmds.get_mut(&id).unwrap();
                        c.logs
                            .push(Log::Out(stream, String::from_utf8_lossy(&buf).into_owned()));
                        c.changed.notify_waiters();
                    }
                }
            }
        })
    };
    let a = reader("stdout", Box::new(out));
    let b = reader("stderr", Box::new(err));
    tokio::spawn(async move {
        let status = match timeout {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), child.wait()).await {
                Ok(s) => s,
                Err(_) => {
                    if let Some(p) = pgid {
                        kill_group(p, libc::SIGKILL);
                    }
                    child.wait().await
                }
            },
            None => child.wait().await,
        };
        let _ = a.await;
        let _ = b.await;
        use std::os::unix::process::ExitStatusExt;
        let code = match status {
            Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
            Err(_) => 255,
        };
        let mut st = state.lock().unwrap();
        let c = st.cmds.get_mut(&id).unwrap();
        c.exit = Some(code);
        c.changed.notify_waiters();
    });
}

fn ndjson_response(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Response<Body> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item.map(Frame::data), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/x-ndjson")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap()
}

fn log_line(log: &Log) -> String {
    let Log::Out(stream, data) = log;
    json!({"stream": stream, "data": data}).to_string() + "\n"
}

/// Follow command `id`'s logs from `from`, sending each as a line, until it
/// exits. Returns how many were sent, or None when the receiver went away.
async fn follow_logs(
    state: &Shared,
    id: &str,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    mut sent: usize,
    stop_after: Option<usize>,
) -> Option<usize> {
    loop {
        let (batch, exited, changed) = {
            let st = state.lock().unwrap();
            let c = st.cmds.get(id)?;
            (c.logs[sent..].to_vec(), c.exit.is_some(), c.changed.clone())
        };
        let notified = changed.notified();
        for log in batch {
            if stop_after == Some(sent) {
                return Some(sent);
            }
            tx.send(Ok(Bytes::from(log_line(&log)))).await.ok()?;
            sent += 1;
        }
        if exited {
            let st = state.lock().unwrap();
            if st.cmds.get(id)?.logs.len() == sent {
                return Some(sent);
            }
            continue;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
    }
}

fn stream_command(state: &Shared, id: &str, first: Value) -> Response<Body> {
    let (tx, rx) = mpsc::channel(64);
    let line = std::iter::once(first["name"].as_str().unwrap_or(""))
        .chain(
            first["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let fault = {
        let mut st = state.lock().unwrap();
        let pos = st.faults.iter().position(|f| match f {
            Fault::EndStreamEarly { command_contains }
            | Fault::DropMidExec {
                command_contains, ..
            } => line.contains(command_contains.as_str()),
            Fault::Status { .. } | Fault::SlowAnswer { .. } => false,
        });
        pos.and_then(|i| st.faults.remove(i))
    };
    let (state, id) = (state.clone(), id.to_string());
    tokio::spawn(async move {
        if tx
            .send(Ok(Bytes::from(
                json!({"command": first}).to_string() + "\n",
            )))
            .await
            .is_err()
        {
            return;
        }
        let stop_after = match fault {
            Some(Fault::DropMidExec { after_logs, .. }) => Some(after_logs),
            _ => None,
        };
        let Some(_) = follow_logs(&state, &id, &tx, 0, stop_after).await else {
            return;
        };
        match fault {
            Some(Fault::DropMidExec { .. }) => {
                let _ = tx
                    .send(Err(std::io::Error::other(
                        "injected: connection dropped mid-exec",
                    )))
                    .await;
            }
            Some(Fault::EndStreamEarly { .. }) => {}
            _ => {
                let done = state.lock().unwrap().cmds.get(&id).map(Cmd::json);
                if let Some(done) = done {
                    let _ = tx
                        .send(Ok(Bytes::from(json!({"command": done}).to_string() + "\n")))
                        .await;
                }
            }
        }
    });
    ndjson_response(rx)
}

fn logs(state: &Shared, id: &str) -> Response<Body> {
    if !state.lock().unwrap().cmds.contains_key(id) {
        return error(404, "not_found", "Command not found");
    }
    let (tx, rx) = mpsc::channel(64);
    let (state, id) = (state.clone(), id.to_string());
    tokio::spawn(async move {
        let _ = follow_logs(&state, &id, &tx, 0, None).await;
    });
    ndjson_response(rx)
}

async fn get_command(state: &Shared, id: &str, wait: bool) -> Response<Body> {
    loop {
        let (json, exited, changed) = {
            let st = state.lock().unwrap();
            let Some(c) = st.cmds.get(id) else {
                return error(404, "not_found", "Command not found");
            };
            (c.json(), c.exit.is_some(), c.changed.clone())
        };
        if exited || !wait {
            return ok(json!({"command": json}));
        }
        let notified = changed.notified();
        let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
    }
}

fn kill(state: &Shared, id: &str, body: Value) -> Response<Body> {
    let st = state.lock().unwrap();
    let Some(c) = st.cmds.get(id) else {
        return error(404, "not_found", "Command not found");
    };
    let signal = body["signal"].as_i64().unwrap_or(15) as i32;
    if let (None, Some(p)) = (c.exit, c.pgid) {
        kill_group(p, signal);
    }
    ok(json!({"command": c.json()}))
}

async fn write_files(
    sb: &Sbx,
    content_type: Option<&str>,
    x_cwd: Option<String>,
    body: Bytes,
) -> Response<Body> {
    if content_type != Some("application/gzip") {
        return error(400, "bad_request", "content-type must be application/gzip");
    }
    let Some(dir) = x_cwd else {
        return error(400, "bad_request", "x-cwd is required");
    };
    // List first: every entry must land inside the sandbox.
    let listed = match tar(&["-tzf", "-"], &body).await {
        Ok(out) => out,
        Err(e) => return error(400, "bad_request", &format!("not a gzipped tar: {e}")),
    };
    for name in String::from_utf8_lossy(&listed).lines() {
        if let Err(r) = sb.resolve(name, Some(&dir)) {
            return *r;
        }
    }
    // What a benchmark reads to measure uploads (host/benches/big_repo.sh).
    eprintln!("vercel-mock: fs/write {} bytes", body.len());
    let target = PathBuf::from(&dir);
    match tar(
        &[
            "-xzf",
            "-",
            "--no-same-owner",
            "-C",
            &target.display().to_string(),
        ],
        &body,
    )
    .await
    {
        Ok(_) => ok(json!({})),
        Err(e) => error(400, "bad_request", &format!("extracting: {e}")),
    }
}

async fn tar(args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let mut child = tokio::process::Command::new("tar")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
    });
    let out = child.wait_with_output().await.map_err(|e| e.to_string())?;
    let _ = writer.await;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(out.stdout)
}

fn read_file(sb: &Sbx, body: Value) -> Response<Body> {
    let Some(path) = body["path"].as_str() else {
        return error(400, "bad_request", "path is required");
    };
    let full = match sb.resolve(path, body["cwd"].as_str()) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match std::fs::read(&full) {
        Ok(data) => full_octets(data),
        Err(_) => error(404, "file_not_found", &format!("File not found: {path}")),
    }
}

fn full_octets(data: Vec<u8>) -> Response<Body> {
    full(200, "application/octet-stream", data)
}

fn mkdir(sb: &Sbx, body: Value) -> Response<Body> {
    let Some(path) = body["path"].as_str() else {
        return error(400, "bad_request", "path is required");
    };
    let full = match sb.resolve(path, body["cwd"].as_str()) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    match std::fs::create_dir(&full) {
        Ok(()) => ok(json!({})),
        Err(e) => error(400, "mkdir_failed", &format!("mkdir {path}: {e}")),
    }
}

/// The status a mock answer would have, for tests that only need codes.
pub fn status_name(code: u16) -> &'static str {
    StatusCode::from_u16(code)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}
