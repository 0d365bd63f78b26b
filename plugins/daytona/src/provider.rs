//! One Daytona sandbox as sanddune's `sandbox` resource: create (labels
//! naming the run, auto-stop, auto-delete), wait until started, exec as an
//! async command in a toolbox session whose log is followed until the exit
//! code, the file operations, and stop and delete. Generic over the
//! transport, so native tests drive it against the loopback mock.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

pub use sanddune_cloud_http::exec::{Command, ExecOutcome, ExecSpec};
use sanddune_cloud_http::shell_fs::{self, ShellFs};
use sanddune_cloud_http::transport::{BaseUrl, Transport};
use serde_json::{Value, json};

use crate::api::{Api, ApiError, ErrorKind};
use crate::command;
use crate::config::{self, ENV_KEYS, Network, Options};
use crate::logs::{LogCursor, Stream};

/// Label keys on every sandbox sanddune creates; leftovers are found by them.
pub const LABEL_RUN: &str = "sanddune-run";
pub const LABEL_NAME: &str = "sanddune-name";
/// How long `create` waits for the sandbox to start.
const START_WAIT: Duration = Duration::from_secs(180);
/// How long a snapshot of a sandbox may take: it copies the filesystem.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(900);
/// Polling a running command: a quarter of its age, so waiting adds at
/// most a quarter to how long it takes, within these bounds.
const POLL_MIN: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(500);

fn poll_wait(age: Duration) -> Duration {
    (age / 4).clamp(POLL_MIN, POLL_MAX)
}

/// What `state` carries to another instance (`attach`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub id: String,
    /// The sandbox's `toolboxProxyUrl`.
    pub toolbox: String,
    /// The worktree: `workspace` under the sandbox's work dir.
    pub cwd: String,
    /// The provider's own directory (stdin files of commands).
    pub scratch: String,
    /// The sandbox user's home: an exec's cwd must be inside it.
    pub home: String,
}

impl State {
    pub fn encode(&self) -> String {
        json!({
            "id": self.id, "toolbox": self.toolbox, "cwd": self.cwd,
            "scratch": self.scratch, "home": self.home,
        })
        .to_string()
    }

    pub fn decode(text: &str) -> Result<State, String> {
        let v: Value = serde_json::from_str(text)
            .map_err(|_| format!("not a daytona sandbox state: {text}"))?;
        let f = |k: &str| {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("daytona sandbox state without {k}"))
        };
        Ok(State {
            id: f("id")?,
            toolbox: f("toolbox")?,
            cwd: f("cwd")?,
            scratch: f("scratch")?,
            home: f("home")?,
        })
    }
}

/// A random number: session ids and stdin file names, so the instances
/// attached to one sandbox (lanes) never pick the same ones.
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The sandbox's toolbox, checked against the origin the host grants (the
/// `toolbox-url` option's): another origin is refused naming the option.
fn toolbox_base(proxy: &str, id: &str, granted: &BaseUrl) -> Result<BaseUrl, String> {
    let url = format!("{}/{id}", proxy.trim_end_matches('/'));
    let base = BaseUrl::parse_option("toolboxProxyUrl", &url)?;
    if base.origin() != granted.origin() {
        return Err(format!(
            "the Daytona sandbox answers on {proxy}, but the provider may reach only the origin of its toolbox-url option ({}): pass --sandbox-opt toolbox-url={proxy}",
            granted.origin()
        ));
    }
    Ok(base)
}

pub struct DaytonaSandbox<T: Transport> {
    pub api: Api<T>,
    pub state: State,
    env: Vec<(String, String)>,
    closed: Cell<bool>,
    counter: Cell<u64>,
    /// This instance's session, made at its first exec; deleting it kills
    /// its command, so a killed command takes its session along.
    session: RefCell<Option<String>>,
    /// Sessions whose command the host cancelled (abort, idle timeout): no
    /// request may be sent in that call, so they are deleted at the start
    /// of the next one.
    pending_kills: RefCell<Vec<String>>,
}

/// The sandbox env without the provider's own credentials: they never
/// enter the sandbox.
fn sandbox_env(env: Vec<(String, String)>) -> Vec<(String, String)> {
    env.into_iter()
        .filter(|(k, _)| !ENV_KEYS.contains(&k.as_str()))
        .collect()
}

fn err(e: ApiError) -> String {
    e.message
}

/// The body of a create, from `snapshot` when given (a snapshot `keep`
/// made, which stands in for the base snapshot or image).
fn create_body(options: &Options, labels: &[(&str, &str)], snapshot: Option<&str>) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let mut body = json!({
        "env": {},
        "labels": labels,
        "autoStopInterval": options.auto_stop_min,
    });
    if let Some(n) = options.auto_delete_min {
        body["autoDeleteInterval"] = json!(n);
    }
    let base = snapshot.or(options.snapshot.as_deref());
    for (key, value) in [
        ("snapshot", base),
        ("target", options.target.as_deref()),
        ("user", options.user.as_deref()),
    ] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    if let Some(image) = options.image.as_ref().filter(|_| snapshot.is_none()) {
        body["buildInfo"] = json!({ "dockerfileContent": format!("FROM {image}\n") });
    }
    for (key, value) in [
        ("cpu", options.cpu),
        ("memory", options.memory_gb),
        ("disk", options.disk_gb),
    ] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    match &options.network {
        Network::AllowAll => {}
        Network::BlockAll => body["networkBlockAll"] = json!(true),
        Network::Allow(cidrs) => body["networkAllowList"] = json!(cidrs.join(",")),
    }
    body
}

impl<T: Transport> DaytonaSandbox<T> {
    /// Create a sandbox. Credentials and options are checked before any
    /// request; once the sandbox exists, any later failure stops and deletes it.
    pub fn create(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        (run_id, name): (&str, &str),
        env: Vec<(String, String)>,
        snapshot: Option<&str>,
    ) -> Result<Self, String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config, env_lookup)?;
        let api = Api::new(options.api_url.clone(), creds, transport);
        let label_name: String = name.chars().take(63).collect();
        let created = api
            .create(&create_body(
                &options,
                &[(LABEL_RUN, run_id), (LABEL_NAME, &label_name)],
                snapshot,
            ))
            .map_err(err)?;
        let mut sandbox = DaytonaSandbox {
            api,
            state: State {
                id: created.id.clone(),
                toolbox: created.toolbox_proxy_url.clone(),
                cwd: String::new(),
                scratch: String::new(),
                home: String::new(),
            },
            env: sandbox_env(env),
            closed: Cell::new(false),
            counter: Cell::new(random()),
            session: RefCell::new(None),
            pending_kills: RefCell::new(vec![]),
        };
        match sandbox.finish_create(created.state, &options) {
            Ok(()) => Ok(sandbox),
            Err(e) => {
                let cleanup = sandbox
                    .close()
                    .err()
                    .map(|c| format!("; cleaning up also failed: {c}"))
                    .unwrap_or_default();
                Err(format!("{e}{cleanup}"))
            }
        }
    }

    fn finish_create(&mut self, state: String, options: &Options) -> Result<(), String> {
        let started = Instant::now();
        let mut state = state;
        let mut wait = Duration::from_millis(100);
        while state != "started" {
            if matches!(
                state.as_str(),
                "error" | "build_failed" | "destroyed" | "destroying"
            ) {
                let info = self.api.sandbox(&self.state.id).ok();
                let why = info
                    .and_then(|i| i.error_reason)
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                return Err(format!(
                    "the Daytona sandbox {} failed to start ({state}){why}",
                    self.state.id
                ));
            }
            if started.elapsed() > START_WAIT {
                return Err(format!(
                    "the Daytona sandbox {} did not start within {} s (it is {state})",
                    self.state.id,
                    START_WAIT.as_secs()
                ));
            }
            self.api.transport.sleep(wait);
            wait = (wait * 3 / 2).min(Duration::from_secs(1));
            let info = self.api.sandbox(&self.state.id).map_err(err)?;
            state = info.state;
            self.state.toolbox = info.toolbox_proxy_url;
        }
        self.api.toolbox = Some(toolbox_base(
            &self.state.toolbox,
            &self.state.id,
            &options.toolbox_url,
        )?);
        let work = self.api.work_dir().map_err(err)?;
        let home = self.api.home_dir().map_err(err)?;
        let cwd = format!("{}/workspace", work.trim_end_matches('/'));
        let scratch = format!("{}/.sanddune", home.trim_end_matches('/'));
        for dir in [&cwd, &scratch] {
            self.api.folder(dir).map_err(err)?;
        }
        self.state.cwd = cwd;
        self.state.scratch = scratch;
        self.state.home = home.trim_end_matches('/').to_string();
        Ok(())
    }

    /// Keep the sandbox's filesystem as a Daytona snapshot named `name`
    /// and a suffix of its own, and return that name (what a create takes).
    /// Daytona does not refuse a name already taken: it keeps the older
    /// snapshot and drops the new one. The suffix keeps names apart, and
    /// the snapshot is looked up once the sandbox is back.
    pub fn keep(&self, name: &str) -> Result<String, String> {
        self.check_open()?;
        let name = format!("{name}-{:08x}", random() as u32);
        self.api
            .snapshot_sandbox(&self.state.id, &name)
            .map_err(err)?;
        let started = Instant::now();
        let mut wait = Duration::from_millis(100);
        loop {
            let state = self.api.sandbox(&self.state.id).map_err(err)?.state;
            match state.as_str() {
                "snapshotting" if started.elapsed() > SNAPSHOT_WAIT => {
                    return Err(format!(
                        "the Daytona sandbox {} was still snapshotting after {} s",
                        self.state.id,
                        SNAPSHOT_WAIT.as_secs()
                    ));
                }
                "snapshotting" => {}
                "started" => break,
                other => {
                    return Err(format!(
                        "the Daytona sandbox {} is {other} after its snapshot, not started",
                        self.state.id
                    ));
                }
            }
            self.api.transport.sleep(wait);
            wait = (wait * 3 / 2).min(Duration::from_secs(1));
        }
        match self.api.snapshot(&name).map_err(err)? {
            Some((_, state)) if state == "active" => Ok(name),
            Some((_, state)) => Err(format!("Daytona's snapshot {name} is {state}, not active")),
            None => Err(format!("Daytona kept no snapshot {name}")),
        }
    }

    /// Remove the snapshot named `name`; gone already is fine.
    pub fn remove_snapshot(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        name: &str,
    ) -> Result<(), String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config, env_lookup)?;
        let api = Api::new(options.api_url, creds, transport);
        match api.snapshot(name).map_err(err)? {
            Some((id, _)) => api.delete_snapshot(&id).map_err(err),
            None => Ok(()),
        }
    }

    /// The states of the sandboxes labelled with `run_id`: closing one
    /// stops and deletes it. Only `close` may be asked of them (their
    /// working directories are not known).
    pub fn find(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        run_id: &str,
    ) -> Result<Vec<String>, String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config, env_lookup)?;
        let api = Api::new(options.api_url, creds, transport);
        let found = api.list_by_label(LABEL_RUN, run_id).map_err(err)?;
        Ok(found
            .into_iter()
            .map(|info| {
                State {
                    id: info.id,
                    toolbox: info.toolbox_proxy_url,
                    cwd: String::new(),
                    scratch: String::new(),
                    home: String::new(),
                }
                .encode()
            })
            .collect())
    }

    pub fn attach(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        state: &str,
        env: Vec<(String, String)>,
    ) -> Result<Self, String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config, env_lookup)?;
        let state = State::decode(state)?;
        let mut api = Api::new(options.api_url, creds, transport);
        api.toolbox = Some(toolbox_base(
            &state.toolbox,
            &state.id,
            &options.toolbox_url,
        )?);
        Ok(DaytonaSandbox {
            api,
            state,
            env: sandbox_env(env),
            closed: Cell::new(false),
            counter: Cell::new(random()),
            session: RefCell::new(None),
            pending_kills: RefCell::new(vec![]),
        })
    }

    pub fn worktree_path(&self) -> &str {
        &self.state.cwd
    }

    /// `cwd` resolved (`..` taken lexically) and checked to be inside the
    /// sandbox user's home, where the worktree is: a cwd outside it is
    /// refused (seed 001), whether it names another directory of the
    /// sandbox or a host path that climbs out with `../`.
    fn confined_cwd(&self, cwd: &str) -> Result<String, String> {
        let resolved = self.resolve(cwd);
        let mut parts: Vec<&str> = vec![];
        for part in resolved.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                p => parts.push(p),
            }
        }
        let clean = format!("/{}", parts.join("/"));
        let home = &self.state.home;
        let inside = |root: &str| clean == root || clean.starts_with(&format!("{root}/"));
        if inside(home) || inside(&self.state.cwd) {
            Ok(clean)
        } else {
            Err(format!(
                "path confinement: cwd {cwd} is outside the sandbox user's home {home}"
            ))
        }
    }

    fn check_open(&self) -> Result<(), String> {
        if self.closed.get() {
            return Err(format!("the Daytona sandbox {} was closed", self.state.id));
        }
        // Commands cut off by a cancelled call: kill them now.
        let pending: Vec<String> = self.pending_kills.borrow_mut().drain(..).collect();
        for session in pending {
            if let Err(e) = self.api.delete_session(&session)
                && e.kind == ErrorKind::Cancelled
            {
                self.pending_kills.borrow_mut().push(session);
            }
        }
        Ok(())
    }

    fn next(&self) -> u64 {
        let n = self.counter.get().wrapping_add(1);
        self.counter.set(n);
        n
    }

    /// This instance's session, made when first needed.
    fn session(&self) -> Result<String, String> {
        if let Some(s) = self.session.borrow().as_ref() {
            return Ok(s.clone());
        }
        let id = format!("sanddune-{:016x}", self.next());
        self.api.create_session(&id).map_err(err)?;
        *self.session.borrow_mut() = Some(id.clone());
        Ok(id)
    }

    /// Kill what runs in this instance's session by deleting it; the next
    /// exec makes a new one.
    fn kill_session(&self, session: &str) -> Result<(), ApiError> {
        self.session.borrow_mut().take();
        self.api.delete_session(session)
    }

    /// Run a command and send its output lines to `sink` as they arrive.
    pub fn exec(
        &self,
        spec: ExecSpec,
        sink: &mut dyn FnMut(Stream, String),
    ) -> Result<ExecOutcome, String> {
        self.check_open()?;
        let mut argv = match spec.command {
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(argv) => argv,
            Command::Shell(line) => vec!["sh".into(), "-c".into(), line],
        };
        if spec.sudo {
            argv.splice(0..0, ["sudo", "-n", "-E", "--"].map(String::from));
        }
        let session = self.session()?;
        // The bytes for stdin go to a file the command reads and removes
        // before it runs; without bytes stdin is /dev/null, never open.
        let stdin = match spec.stdin.filter(|d| !d.is_empty()) {
            Some(data) => {
                let file = format!("{}/stdin-{:016x}", self.state.scratch, self.next());
                self.api.upload(&[(&file, &data)]).map_err(err)?;
                file
            }
            None => "/dev/null".to_string(),
        };
        let env: Vec<(String, String)> = self
            .env
            .iter()
            .chain(
                spec.env
                    .iter()
                    .filter(|(k, _)| !ENV_KEYS.contains(&k.as_str())),
            )
            .cloned()
            .collect();
        let cwd = self.confined_cwd(spec.cwd.as_deref().unwrap_or(""))?;
        let line = command::line(&argv, &cwd, &stdin, &env);
        let started = Instant::now();
        let cmd = self.api.exec(&session, &line).map_err(err)?;
        let timeout = spec.timeout_ms.map(Duration::from_millis);
        self.follow(&session, &cmd, started, timeout, sink)
    }

    /// Poll the command until its exit code, handing on each new line of
    /// its log once. A lost connection is retried by the API layer (these
    /// reads are idempotent, and the log is read from its start, so nothing
    /// is lost or repeated); a session that disappears fails the exec.
    fn follow(
        &self,
        session: &str,
        cmd: &str,
        started: Instant,
        timeout: Option<Duration>,
        sink: &mut dyn FnMut(Stream, String),
    ) -> Result<ExecOutcome, String> {
        let mut cursor = LogCursor::default();
        let failed = |e: ApiError| -> String {
            match e.kind {
                ErrorKind::Cancelled => {
                    // The host cut the call: kill the command at the next one.
                    self.session.borrow_mut().take();
                    self.pending_kills.borrow_mut().push(session.to_string());
                    e.message
                }
                ErrorKind::Gone => {
                    self.session.borrow_mut().take();
                    format!(
                        "command {cmd} was lost: its session {session} in the Daytona sandbox {} ended before the command exited ({})",
                        self.state.id, e.message
                    )
                }
                _ => {
                    // The command may run on, holding the session: end it.
                    if self.kill_session(session).is_err() {
                        self.pending_kills.borrow_mut().push(session.to_string());
                    }
                    format!("following command {cmd}: {}", e.message)
                }
            }
        };
        loop {
            let exit = self.api.exit_code(session, cmd).map_err(failed)?;
            let log = self.api.logs(session, cmd).map_err(failed)?;
            for (stream, line) in cursor.take(&log, exit.is_some()) {
                sink(stream, line);
            }
            if let Some(code) = exit {
                return Ok(ExecOutcome {
                    exit_code: code,
                    timed_out: false,
                });
            }
            if timeout.is_some_and(|t| started.elapsed() >= t) {
                self.kill_session(session).map_err(err)?;
                return Ok(ExecOutcome {
                    exit_code: -1,
                    timed_out: true,
                });
            }
            let mut wait = poll_wait(started.elapsed());
            if let Some(t) = timeout {
                wait = wait.min(t.saturating_sub(started.elapsed()));
            }
            self.api.transport.sleep(wait);
        }
    }

    pub fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.check_open()?;
        self.api
            .download(&self.resolve(path))
            .map_err(err)?
            .ok_or_else(|| format!("reading {path}: no such file in the sandbox"))
    }

    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<(), String> {
        self.put(vec![(path.to_string(), data.to_vec())])
    }

    /// Copy files (already read by the caller) into the sandbox, parents
    /// created, in one upload.
    pub fn put(&self, files: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        self.check_open()?;
        let files: Vec<(String, Vec<u8>)> = files
            .into_iter()
            .map(|(p, d)| (self.resolve(&p), d))
            .collect();
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, d)| (p.as_str(), d.as_slice()))
            .collect();
        self.api.upload(&refs).map_err(err)
    }

    /// Recursive: the toolbox's folder call (it creates parents); one
    /// level: `mkdir`, which fails when the parent is missing.
    pub fn mkdir(&self, path: &str, recursive: bool) -> Result<(), String> {
        self.check_open()?;
        let full = self.resolve(path);
        if recursive {
            self.api.folder(&full).map_err(err)
        } else {
            self.run_script_ok(&format!("mkdir {path}"), shell_fs::MKDIR, &[&full])
                .map(|_| ())
        }
    }

    pub fn remove(&self, path: &str, recursive: bool, force: bool) -> Result<(), String> {
        let full = self.resolve(path);
        self.run_script_ok(
            &format!("removing {path}"),
            shell_fs::REMOVE,
            &[
                &full,
                if recursive { "1" } else { "0" },
                if force { "1" } else { "0" },
            ],
        )
        .map(|_| ())
    }

    /// Stop and delete the sandbox. Idempotent. The delete is what counts
    /// (Daytona deletes a running sandbox too); a failed stop is reported
    /// only when the delete fails as well.
    pub fn close(&self) -> Result<(), String> {
        if self.closed.replace(true) {
            return Ok(());
        }
        let stopped = self.api.stop(&self.state.id);
        let deleted = self.api.delete(&self.state.id);
        match (stopped, deleted) {
            (_, Ok(())) => Ok(()),
            (Err(s), Err(d)) => {
                self.closed.set(false);
                Err(format!("{}; {}", s.message, d.message))
            }
            (Ok(()), Err(d)) => {
                self.closed.set(false);
                Err(d.message)
            }
        }
    }
}

impl<T: Transport> ShellFs for DaytonaSandbox<T> {
    fn run_script(&self, script: &str, args: &[&str]) -> Result<(i32, String, String), String> {
        let (mut out, mut errout) = (String::new(), String::new());
        let outcome = self.exec(ExecSpec::script(script, args), &mut |s, line| {
            let buf = if s == Stream::Stdout {
                &mut out
            } else {
                &mut errout
            };
            buf.push_str(&line);
            buf.push('\n');
        })?;
        Ok((outcome.exit_code, out, errout))
    }

    fn worktree(&self) -> &str {
        &self.state.cwd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_wait_a_quarter_of_the_commands_age_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(poll_wait(ms(0)), ms(5));
        assert_eq!(poll_wait(ms(100)), ms(25));
        assert_eq!(poll_wait(ms(60_000)), ms(500));
    }

    #[test]
    fn state_round_trips() {
        let s = State {
            id: "sb-1".into(),
            toolbox: "https://proxy.app.daytona.io/toolbox".into(),
            cwd: "/home/daytona/workspace".into(),
            scratch: "/home/daytona/.sanddune".into(),
            home: "/home/daytona".into(),
        };
        assert_eq!(State::decode(&s.encode()).unwrap(), s);
        assert!(State::decode("{}").unwrap_err().contains("without id"));
    }

    #[test]
    fn the_toolbox_must_be_on_the_granted_origin() {
        let granted = BaseUrl::parse("https://proxy.app.daytona.io/toolbox").unwrap();
        let b = toolbox_base("https://proxy.app.daytona.io/toolbox/", "sb-1", &granted).unwrap();
        assert_eq!(b.prefix, "/toolbox/sb-1");
        let e = toolbox_base("https://proxy.eu.daytona.io/toolbox", "sb-1", &granted).unwrap_err();
        assert!(
            e.contains("--sandbox-opt toolbox-url=https://proxy.eu.daytona.io/toolbox"),
            "{e}"
        );
    }

    #[test]
    fn the_create_body_carries_the_options() {
        let none = |_: &str| None;
        let cfg: Vec<(String, String)> = [
            ("image", "debian:12"),
            ("cpu", "2"),
            ("network", "block-all"),
            ("auto-stop", "15"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let o = config::options(&cfg, &none).unwrap();
        let b = create_body(&o, &[(LABEL_RUN, "r1")], None);
        assert_eq!(b["labels"][LABEL_RUN], "r1");
        assert_eq!(b["buildInfo"]["dockerfileContent"], "FROM debian:12\n");
        assert_eq!(
            (b["cpu"].clone(), b["autoStopInterval"].clone()),
            (json!(2), json!(15))
        );
        assert_eq!(b["autoDeleteInterval"], 0);
        assert_eq!(b["networkBlockAll"], true);
        assert!(b.get("snapshot").is_none());
    }
}
