//! A loopback mock of the Daytona API (`/api/sandbox...`) and of a
//! sandbox's toolbox API (`/toolbox/{id}/...`, what the toolbox proxy
//! forwards to the sandbox's daemon), for sanddune's tests. The facts are
//! in docs/reference/protocols.md, "Daytona REST API", read from the
//! daytonaio/daytona sources at v0.190.0 (the API's controllers, the
//! daemon's toolbox, the TS SDK).
//!
//! It runs commands for real. Every sandbox is a temporary directory whose
//! `home/daytona` is the user's home and work dir; paths inside a mock
//! sandbox are real host paths under it, and file calls outside it are
//! refused. A session is a long-lived `sh` reading commands on its stdin,
//! as the daemon's is: each command is a file the shell sources with its
//! output in files the mock tails into the command's log, each line
//! prefixed by its stream's marker, and its exit code written after it.
//! An async command's stdin stays open (a FIFO the mock holds) until it
//! ends. Deleting a session kills its process group.
//!
//! Snapshots (`POST /sandbox/{id}/snapshot {name}`, `/snapshots`) are
//! copies of a sandbox's whole tree (`cp -a`: modes and symlinks kept) that
//! the mock holds by name. The sandbox is `snapshotting` for a moment after
//! the copy and then back in its previous state; only then does the
//! snapshot exist, `active` at once, as Daytona inserts a snapshot taken
//! from a sandbox. A create naming it (by name or id) gets a copy of the
//! tree; one naming Daytona's default snapshot, or none, an empty tree, and
//! one naming any other is refused (400), as Daytona refuses a snapshot it
//! does not have. A deleted snapshot is `removing` for a moment, then
//! gone. A name already taken is not refused: Daytona v0.190.0 finds the
//! clash only when it stores the snapshot, logs it and keeps the first
//! (inject a 409 on `Op::SnapshotSandbox` for a client that should expect
//! one). Absolute symlinks into the sandbox's own directory are pointed at
//! the new sandbox's, as every Daytona sandbox has the same paths.
//!
//! Faults can be injected: any status on any call (401, 403, 404, 409,
//! 410, 422, 429 with `Retry-After`, 5xx), a session lost while its command
//! runs (the daemon restarted: the log ends, no exit code ever comes), and
//! a connection cut in the middle of a log answer.

mod files;
mod server;
mod snapshots;
mod toolbox;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use server::status_name;

/// The API key the mock accepts (`DAYTONA_API_KEY`).
pub const API_KEY: &str = "mock-api-key";
/// The JWT the mock accepts, with `X-Daytona-Organization-ID: ORGANIZATION`.
pub const JWT: &str = "mock-jwt";
pub const ORGANIZATION: &str = "org_mock";

/// Which call a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Create,
    List,
    GetSandbox,
    Stop,
    Delete,
    WorkDir,
    HomeDir,
    CreateSession,
    GetSession,
    ListSessions,
    DeleteSession,
    Exec,
    GetCommand,
    Logs,
    Input,
    Execute,
    Upload,
    Download,
    BulkDownload,
    Folder,
    DeleteFile,
    /// `POST /sandbox/{id}/snapshot`.
    SnapshotSandbox,
    ListSnapshots,
    GetSnapshot,
    DeleteSnapshot,
    ActivateSnapshot,
    Any,
}

#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer `status` (in the error shape of the API or the toolbox, with
    /// `Retry-After` when given) `times` times, before doing anything.
    Status {
        op: Op,
        status: u16,
        retry_after: Option<u64>,
        times: usize,
    },
    /// The next answer to `op` is held back `ms` after the request is
    /// done, as from a slow API or network: the client sees a request that
    /// hangs, though its effect (a created sandbox) has happened.
    SlowAnswer { op: Op, ms: u64 },
    /// When the next command whose text contains `command_contains` has
    /// written `after_lines` lines, its session is lost as when the
    /// sandbox's daemon restarts: its processes are killed and the session
    /// and its commands are gone (404), so no exit code ever comes.
    SessionLost {
        command_contains: String,
        after_lines: usize,
    },
    /// The next log answer for such a command, once it has `after_lines`
    /// lines, is cut: the connection drops partway through the body.
    DropMidExec {
        command_contains: String,
        after_lines: usize,
    },
}

impl Fault {
    pub fn status(op: Op, status: u16) -> Fault {
        Fault::Status {
            op,
            status,
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
    pub organization: Option<String>,
    pub sdk_version: Option<String>,
    pub status: u16,
}

/// What a test can see of a sandbox.
#[derive(Clone, Debug)]
pub struct SandboxView {
    pub id: String,
    pub state: String,
    pub deleted: bool,
    pub labels: BTreeMap<String, String>,
    pub home: PathBuf,
    /// The create request's body.
    pub body: Value,
    /// Sessions alive now.
    pub sessions: Vec<String>,
    /// The id of the snapshot it was created from, when the mock held it
    /// (not for the default snapshot).
    pub from_snapshot: Option<String>,
}

/// What a test can see of a snapshot.
#[derive(Clone, Debug)]
pub struct SnapshotView {
    pub id: String,
    pub name: String,
    /// As `GET /snapshots/{id}` answers it (`active`, `removing`), or
    /// `gone` once Daytona no longer has it.
    pub state: String,
    /// Deleted, through the API or behind the client's back.
    pub deleted: bool,
    /// The sandbox it was taken from.
    pub sandbox: String,
}

pub(crate) struct Cmd {
    pub id: String,
    pub command: String,
    /// The log: lines prefixed by their stream's marker.
    pub log: Vec<u8>,
    pub exit: Option<i32>,
    pub lines: usize,
    /// The FIFO an async command reads stdin from, held open by the mock.
    pub input: Option<std::fs::File>,
}

pub(crate) struct Session {
    pub pgid: i32,
    pub stdin: std::process::ChildStdin,
    pub dir: PathBuf,
    pub commands: BTreeMap<String, Cmd>,
}

pub(crate) struct Sandbox {
    pub id: String,
    pub name: String,
    /// Its `toolboxProxyUrl`: the mock's own `/toolbox`.
    pub toolbox: String,
    pub root: Option<tempfile::TempDir>,
    pub root_path: PathBuf,
    pub home: PathBuf,
    /// Where sessions keep their files: outside what the sandbox's user
    /// sees through the file calls, as the daemon's config dir is.
    pub control: Option<tempfile::TempDir>,
    pub state: String,
    pub start_at: Instant,
    pub deleted: bool,
    pub labels: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub body: Value,
    pub created: String,
    pub sessions: BTreeMap<String, Session>,
    pub snapshotting: Option<Snapshotting>,
    /// The snapshot (id, name) it was created from.
    pub from_snapshot: Option<(String, String)>,
}

/// A sandbox being snapshotted.
pub(crate) struct Snapshotting {
    /// The snapshot's name.
    pub name: String,
    /// The state it returns to.
    pub previous: String,
    /// When it is back; none while its tree is being copied.
    pub until: Option<Instant>,
}

pub(crate) struct Snapshot {
    pub id: String,
    pub name: String,
    /// The sandbox it was taken from.
    pub sandbox: String,
    /// The copy of that sandbox's tree, shared with the creates copying
    /// it so that a delete meanwhile cannot pull it from under them.
    pub tree: Option<Arc<tempfile::TempDir>>,
    /// That sandbox's root: absolute symlinks in the tree point under it.
    pub origin: PathBuf,
    /// When the sandbox is back from snapshotting: Daytona stores the
    /// snapshot only then.
    pub ready_at: Instant,
    /// Deleted: `removing` until then, then gone (Daytona's cleanup drops
    /// the row, and the name is free again).
    pub gone_at: Option<Instant>,
    pub size_gb: f64,
    /// The source sandbox's create body (resources, region).
    pub body: Value,
    pub created: String,
    pub updated: String,
}

impl Snapshot {
    /// Its state as the API answers it, or none while it does not exist:
    /// not yet, or no more.
    pub fn state(&self, now: Instant) -> Option<&'static str> {
        if now < self.ready_at {
            return None;
        }
        match self.gone_at {
            None => Some("active"),
            Some(t) if now < t => Some("removing"),
            Some(_) => None,
        }
    }

    /// Its row exists (or will once the sandbox is back), so its name is
    /// taken.
    pub fn holds_name(&self, now: Instant) -> bool {
        self.gone_at.is_none_or(|t| now < t)
    }
}

#[derive(Default)]
pub(crate) struct State {
    /// PATH of the commands the mock runs.
    pub path: String,
    pub url: String,
    pub sandboxes: Vec<Sandbox>,
    pub faults: VecDeque<Fault>,
    pub seen: Vec<Seen>,
    /// Sandboxes per list page when the client gives no `limit`.
    pub page_size: Option<usize>,
    pub snapshots: Vec<Snapshot>,
    /// How long a sandbox stays `snapshotting` once its tree is copied.
    pub snapshotting_time: Option<Duration>,
}

pub(crate) type Shared = Arc<Mutex<State>>;

pub struct DaytonaMock {
    url: String,
    state: Shared,
    counter: Arc<AtomicU64>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl DaytonaMock {
    /// Start on `127.0.0.1` at a free port, serving from its own threads.
    /// Commands get this process's PATH.
    pub fn start() -> DaytonaMock {
        Self::start_with_path(
            &std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        )
    }

    /// `start`, with `path` as the PATH of every command (a test's fake
    /// agents first, as a real sandbox's image would have the agent).
    pub fn start_with_path(path: &str) -> DaytonaMock {
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
        {
            let mut st = state.lock().unwrap();
            st.path = path.to_string();
            st.url = url.clone();
        }
        let counter = Arc::new(AtomicU64::new(1));
        server::serve(&runtime, listener, state.clone(), counter.clone());
        DaytonaMock {
            url,
            state,
            counter,
            runtime: Some(runtime),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The API's base URL (`api-url`, `DAYTONA_API_URL`).
    pub fn api_url(&self) -> String {
        format!("{}/api", self.url)
    }

    /// The toolbox proxy's base URL (`toolbox-url`; each sandbox's
    /// `toolboxProxyUrl`).
    pub fn toolbox_url(&self) -> String {
        format!("{}/toolbox", self.url)
    }

    pub fn inject(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push_back(fault);
    }

    /// List pages of `n` sandboxes when the client asks for no `limit`
    /// (the API's default is 100), so a test can make a client page.
    pub fn set_page_size(&self, n: usize) {
        self.state.lock().unwrap().page_size = Some(n);
    }

    /// Keep a snapshotted sandbox `snapshotting` this long after its tree
    /// is copied (default 150 ms), so a test can act in the meantime.
    pub fn set_snapshotting_time(&self, d: Duration) {
        self.state.lock().unwrap().snapshotting_time = Some(d);
    }

    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn sandboxes(&self) -> Vec<SandboxView> {
        let mut st = self.state.lock().unwrap();
        st.sandboxes
            .iter_mut()
            .map(|s| {
                server::refresh(s);
                SandboxView {
                    id: s.id.clone(),
                    state: s.state.clone(),
                    deleted: s.deleted,
                    labels: s.labels.clone(),
                    home: s.home.clone(),
                    body: s.body.clone(),
                    sessions: s.sessions.keys().cloned().collect(),
                    from_snapshot: s.from_snapshot.as_ref().map(|(id, _)| id.clone()),
                }
            })
            .collect()
    }

    /// Every snapshot the mock took, deleted ones too, oldest first; not
    /// those whose sandbox is still snapshotting.
    pub fn snapshots(&self) -> Vec<SnapshotView> {
        let now = Instant::now();
        let st = self.state.lock().unwrap();
        st.snapshots
            .iter()
            .filter(|s| now >= s.ready_at)
            .map(|s| SnapshotView {
                id: s.id.clone(),
                name: s.name.clone(),
                state: s.state(now).unwrap_or("gone").to_string(),
                deleted: s.gone_at.is_some(),
                sandbox: s.sandbox.clone(),
            })
            .collect()
    }

    /// Remove the snapshot named or numbered `name_or_id` at once, as if
    /// deleted on Daytona's side (another client, the dashboard). False
    /// when there is no such snapshot.
    pub fn delete_snapshot_behind(&self, name_or_id: &str) -> bool {
        let now = Instant::now();
        let mut st = self.state.lock().unwrap();
        match st
            .snapshots
            .iter_mut()
            .find(|s| s.state(now).is_some() && (s.id == name_or_id || s.name == name_or_id))
        {
            Some(s) => {
                s.gone_at = Some(now);
                s.tree.take();
                true
            }
            None => false,
        }
    }

    /// Commands still running in any sandbox.
    pub fn running_commands(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.sandboxes
            .iter()
            .flat_map(|s| s.sessions.values())
            .flat_map(|s| s.commands.values())
            .filter(|c| c.exit.is_none())
            .map(|c| c.command.clone())
            .collect()
    }

    pub fn next_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.counter.fetch_add(1, Ordering::SeqCst))
    }
}

impl Drop for DaytonaMock {
    fn drop(&mut self) {
        let pgids: Vec<i32> = self
            .state
            .lock()
            .unwrap()
            .sandboxes
            .iter()
            .flat_map(|s| s.sessions.values())
            .map(|s| s.pgid)
            .collect();
        for pgid in pgids {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
