//! One Vercel sandbox as sanddune's `sandbox` resource: create (tags naming
//! the run), exec with live output, the file operations, stop and delete.
//! Generic over the transport, so native tests drive it against the mock.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{Api, ApiError, ErrorKind, Streaming};
use crate::archive::{self, Entry};
use crate::config::{self, Credentials, ENV_KEYS, Options};
use crate::ndjson::{Event, OutputLines, Stream};
use crate::transport::{Transport, TransportError};
pub use sanddune_cloud_http::exec::{Command, ExecOutcome, ExecSpec};
use sanddune_cloud_http::shell_fs::{self, ShellFs};

/// Tag keys on every sandbox sanddune creates; `sanddune gc` finds
/// leftovers by them.
pub const TAG_RUN: &str = "sanddune-run";
pub const TAG_NAME: &str = "sanddune-name";
const SIGKILL: i32 = 9;
/// How long `create` waits for a pending session to run.
const START_WAIT: Duration = Duration::from_secs(120);

/// What `state` carries to another instance (`attach`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub name: String,
    pub session: String,
    pub cwd: String,
    /// A directory for the provider's own files (stdin of commands).
    pub scratch: String,
    /// The sandbox's `timeout`, and when (wall clock, ms) Vercel stops it
    /// unless it is extended.
    pub timeout_ms: u64,
    pub expires_ms: Cell<u64>,
}

/// A random start for an instance's counter of stdin files, so the
/// instances attached to one sandbox (lanes) never pick the same name.
/// (`std::process::id` is unsupported on wasm32-wasip2; std seeds each
/// `RandomState` from the platform's random source.)
fn random_start() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The tags a sandbox of run `run_id` named `name` gets: how `find`
/// reaches it.
fn tags(run_id: &str, name: &str) -> [(&'static str, String); 2] {
    [
        (TAG_RUN, run_id.to_string()),
        (TAG_NAME, name.chars().take(200).collect()),
    ]
}

impl State {
    /// No sandbox yet: what a create starts from.
    fn none() -> State {
        State {
            name: String::new(),
            session: String::new(),
            cwd: String::new(),
            scratch: String::new(),
            timeout_ms: 0,
            expires_ms: Cell::new(u64::MAX),
        }
    }

    pub fn encode(&self) -> String {
        json!({
            "name": self.name, "session": self.session, "cwd": self.cwd, "scratch": self.scratch,
            "timeoutMs": self.timeout_ms, "expiresMs": self.expires_ms.get(),
        })
        .to_string()
    }

    pub fn decode(text: &str) -> Result<State, String> {
        let v: Value = serde_json::from_str(text)
            .map_err(|_| format!("not a vercel sandbox state: {text}"))?;
        let f = |k: &str| {
            v[k].as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("vercel sandbox state without {k}"))
        };
        Ok(State {
            name: f("name")?,
            session: f("session")?,
            cwd: f("cwd")?,
            scratch: f("scratch")?,
            timeout_ms: v["timeoutMs"].as_u64().unwrap_or(0),
            expires_ms: Cell::new(v["expiresMs"].as_u64().unwrap_or(u64::MAX)),
        })
    }
}

pub struct VercelSandbox<T: Transport> {
    pub api: Api<T>,
    pub state: State,
    /// The options and tags it was created with, for the sandbox that
    /// takes its place when it is kept as a snapshot.
    options: Options,
    tags: [(&'static str, String); 2],
    env: Vec<(String, String)>,
    closed: Cell<bool>,
    counter: Cell<u64>,
    /// Commands whose stream the host cancelled (abort, idle timeout): no
    /// request may be sent in that call, so they are killed at the start of
    /// the next one.
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

impl<T: Transport> VercelSandbox<T> {
    /// Create a sandbox. Credentials and options are checked before any
    /// request; once the sandbox exists, any later failure stops and deletes it.
    /// Create a sandbox, from `snapshot` when given. Credentials and
    /// options are checked before any request; once the sandbox exists,
    /// any later failure stops and deletes it.
    pub fn create(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        (run_id, name): (&str, &str),
        env: Vec<(String, String)>,
        snapshot: Option<&str>,
    ) -> Result<Self, String> {
        let creds: Credentials = config::credentials(env_lookup)?;
        let options: Options = config::options(config)?;
        let api = Api::new(options.api_url.clone(), creds, transport);
        let mut sandbox = VercelSandbox {
            api,
            state: State::none(),
            tags: tags(run_id, name),
            options,
            env: sandbox_env(env),
            closed: Cell::new(false),
            counter: Cell::new(random_start()),
            pending_kills: RefCell::new(vec![]),
        };
        sandbox.start(snapshot)?;
        Ok(sandbox)
    }

    /// Create a Vercel sandbox with this one's options and tags, wait for
    /// it to run and make it this one; the state it replaces is returned.
    /// A sandbox that does not come up is stopped and deleted, and this
    /// one is left as it was.
    fn start(&mut self, snapshot: Option<&str>) -> Result<State, String> {
        let tags = self.tags.each_ref().map(|(k, v)| (*k, v.as_str()));
        let requested = now_ms();
        let created = self
            .api
            .create(&self.options, &tags, snapshot)
            .map_err(err)?;
        let next = State {
            name: created.name.clone(),
            session: created.session_id.clone(),
            cwd: created.cwd.clone(),
            scratch: String::new(),
            timeout_ms: self.options.timeout_ms,
            // Counted from before the request: never later than Vercel's.
            expires_ms: Cell::new(requested + self.options.timeout_ms),
        };
        let previous = std::mem::replace(&mut self.state, next);
        match self.finish_create(&created.status) {
            Ok(()) => Ok(previous),
            Err(e) => {
                let _ = self.api.stop(&self.state.session);
                let deleted = self.api.delete(&self.state.name);
                self.state = previous;
                let cleanup = deleted
                    .err()
                    .map(|d| format!("; cleaning up also failed: {}", d.message))
                    .unwrap_or_default();
                Err(format!("{e}{cleanup}"))
            }
        }
    }

    /// Keep this sandbox's filesystem as a snapshot and return its id.
    /// Vercel stops the session it snapshots, so a sandbox started from
    /// the snapshot takes this one's place (its state changes), and the
    /// stopped one is deleted.
    pub fn keep(&mut self) -> Result<String, String> {
        self.check_open()?;
        let id = self.api.snapshot(&self.state.session).map_err(err)?;
        let old = self.start(Some(&id)).map_err(|e| {
            format!("kept snapshot {id}, but a sandbox started from it did not come up: {e}")
        })?;
        // Stopped already; a delete that fails leaves it to expire.
        let _ = self.api.delete(&old.name);
        Ok(id)
    }

    /// Remove the snapshot `id`; gone already is fine.
    pub fn remove_snapshot(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        id: &str,
    ) -> Result<(), String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config)?;
        let api = Api::new(options.api_url, creds, transport);
        api.delete_snapshot(id).map_err(err)
    }

    fn finish_create(&mut self, status: &str) -> Result<(), String> {
        let started = Instant::now();
        let mut status = status.to_string();
        while status == "pending" {
            if started.elapsed() > START_WAIT {
                return Err(format!(
                    "the Vercel sandbox {} did not start within {} s",
                    self.state.name,
                    START_WAIT.as_secs()
                ));
            }
            self.api.transport.sleep(Duration::from_millis(500));
            status = self.api.session_status(&self.state.session).map_err(err)?;
        }
        if status != "running" {
            return Err(format!(
                "the Vercel sandbox {} is {status}, not running",
                self.state.name
            ));
        }
        // The provider's own directory, under the sandbox user's HOME.
        let (code, out, errout) = self.run_script(
            r#"d="${HOME:-/tmp}/.sanddune" && mkdir -p "$d" && cd "$d" && pwd -P"#,
            &[],
        )?;
        let dir = out.trim();
        if code != 0 || !dir.starts_with('/') {
            return Err(format!(
                "preparing the sandbox failed ({code}): {}",
                errout.trim()
            ));
        }
        self.state.scratch = dir.to_string();
        Ok(())
    }

    /// The states of the sandboxes tagged with `run_id`, stopped or not:
    /// closing one stops and deletes it. Only `close` may be asked of them
    /// (their working directory is not known).
    pub fn find(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        run_id: &str,
    ) -> Result<Vec<String>, String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config)?;
        let api = Api::new(options.api_url, creds, transport);
        let found = api.list_by_tag(TAG_RUN, run_id).map_err(err)?;
        Ok(found
            .into_iter()
            .map(|(name, session, _status)| {
                State {
                    name,
                    session,
                    cwd: String::new(),
                    scratch: String::new(),
                    timeout_ms: 0,
                    expires_ms: Cell::new(u64::MAX),
                }
                .encode()
            })
            .collect())
    }

    pub fn attach(
        transport: T,
        env_lookup: &dyn Fn(&str) -> Option<String>,
        config: &[(String, String)],
        (run_id, name): (&str, &str),
        state: &str,
        env: Vec<(String, String)>,
    ) -> Result<Self, String> {
        let creds = config::credentials(env_lookup)?;
        let options = config::options(config)?;
        let state = State::decode(state)?;
        Ok(VercelSandbox {
            api: Api::new(options.api_url.clone(), creds, transport),
            state,
            tags: tags(run_id, name),
            options,
            env: sandbox_env(env),
            closed: Cell::new(false),
            counter: Cell::new(random_start()),
            pending_kills: RefCell::new(vec![]),
        })
    }

    pub fn worktree_path(&self) -> &str {
        &self.state.cwd
    }

    fn check_open(&self) -> Result<(), String> {
        if self.closed.get() {
            return Err(format!("the Vercel sandbox {} was closed", self.state.name));
        }
        self.keep_alive();
        // Commands cut off by a cancelled call: kill them now.
        let pending: Vec<String> = self.pending_kills.borrow_mut().drain(..).collect();
        for cmd in pending {
            if let Err(e) = self.api.kill(&self.state.session, &cmd, SIGKILL)
                && e.kind == ErrorKind::Cancelled
            {
                self.pending_kills.borrow_mut().push(cmd);
            }
        }
        Ok(())
    }

    /// Vercel stops a sandbox when its `timeout` is up. A run that is still
    /// using it extends it by another `timeout` when less than half of it
    /// (at most 10 minutes) is left; the plan's maximum still applies.
    fn keep_alive(&self) {
        let timeout = self.state.timeout_ms;
        if timeout == 0 {
            return;
        }
        let margin = (timeout / 2).min(600_000);
        if now_ms() + margin < self.state.expires_ms.get() {
            return;
        }
        // A refusal (the plan's maximum) is not fatal: the sandbox runs
        // until it stops, and calls then say that it has.
        if self
            .api
            .extend_timeout(&self.state.session, timeout)
            .is_ok()
        {
            self.state
                .expires_ms
                .set(self.state.expires_ms.get() + timeout);
        }
    }

    /// Run a command and send its output lines to `sink` as they arrive.
    pub fn exec(
        &self,
        spec: ExecSpec,
        sink: &mut dyn FnMut(&Stream, String),
    ) -> Result<ExecOutcome, String> {
        self.check_open()?;
        let (command, mut args) = match spec.command {
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(mut argv) => {
                let first = argv.remove(0);
                (first, argv)
            }
            Command::Shell(line) => ("sh".to_string(), vec!["-c".to_string(), line]),
        };
        // Vercel commands have no stdin of their own: the bytes go to a file,
        // which the command reads as stdin and which is removed before it
        // runs. Without bytes stdin is /dev/null, never an open pipe.
        let stdin_file = match spec.stdin.filter(|d| !d.is_empty()) {
            Some(data) => {
                let n = self.counter.get().wrapping_add(1);
                self.counter.set(n);
                let file = format!("{}/stdin-{n:016x}", self.state.scratch);
                let archive = archive::tar_gz(&[Entry {
                    path: &file,
                    data: &data,
                    mode: 0o600,
                }])?;
                self.api
                    .write_files(&self.state.session, &archive)
                    .map_err(err)?;
                file
            }
            None => "/dev/null".to_string(),
        };
        let mut wrapped = vec![
            "-c".to_string(),
            r#"exec <"$0" || exit 125; [ "$0" = /dev/null ] || rm -f -- "$0"; exec "$@""#
                .to_string(),
            stdin_file,
            command,
        ];
        wrapped.append(&mut args);
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .chain(
                spec.env
                    .iter()
                    .filter(|(k, _)| !ENV_KEYS.contains(&k.as_str())),
            )
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect();
        let mut body = json!({
            "command": "sh",
            "args": wrapped,
            "cwd": self.resolve(spec.cwd.as_deref().unwrap_or("")),
            "env": env,
            "sudo": spec.sudo,
        });
        if let Some(ms) = spec.timeout_ms {
            body["timeout"] = json!(ms);
        }
        let started = Instant::now();
        let stream = self
            .api
            .start_command(&self.state.session, &body)
            .map_err(err)?;
        let exit_code = self.follow(stream, sink)?;
        let timed_out = spec
            .timeout_ms
            .is_some_and(|ms| exit_code != 0 && started.elapsed() >= Duration::from_millis(ms));
        Ok(ExecOutcome {
            exit_code: if timed_out { -1 } else { exit_code },
            timed_out,
        })
    }

    /// Deliver a command's output until its exit code. When the stream
    /// breaks (connection lost, or ended before the exit code), reattach
    /// through the command's logs, which replay from its start, deliver
    /// only what was not delivered yet, then ask for the exit code.
    fn follow(
        &self,
        stream: Streaming,
        sink: &mut dyn FnMut(&Stream, String),
    ) -> Result<i32, String> {
        enum Next {
            Exit(i32),
            /// A logs stream ended: the command has; its exit code comes apart.
            LogsEnded,
            Fatal(String),
            Reattach(String),
        }
        let cmd = stream.id.clone();
        let cancelled = |m: String| {
            self.pending_kills.borrow_mut().push(cmd.clone());
            m
        };
        let mut lines = OutputLines::default();
        let (mut stream, mut is_logs) = (stream, false);
        let (mut delivered, mut reattached) = (0usize, 0u64);
        let result = loop {
            let mut seen = 0usize;
            let next = loop {
                match stream.next_event() {
                    Ok(Some(Event::Log { stream: s, data })) => {
                        seen += 1;
                        if seen > delivered {
                            delivered = seen;
                            lines.push(&s, &data, sink);
                        }
                    }
                    Ok(Some(Event::Command {
                        exit_code: Some(code),
                        ..
                    })) => break Next::Exit(code),
                    Ok(Some(Event::Error { code, message })) => {
                        break Next::Fatal(format!(
                            "the Vercel sandbox {} stopped while command {cmd} ran ({code}: {message})",
                            self.state.name
                        ));
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if is_logs => break Next::LogsEnded,
                    Ok(None) => {
                        break Next::Reattach(
                            "the command stream ended before the exit code".into(),
                        );
                    }
                    Err(TransportError::Cancelled(m)) => break Next::Fatal(cancelled(m)),
                    Err(e) => break Next::Reattach(e.to_string()),
                }
            };
            match next {
                Next::Exit(code) => break Ok(code),
                Next::Fatal(m) => break Err(m),
                Next::LogsEnded => {
                    break self
                        .api
                        .wait(&self.state.session, &cmd)
                        .map_err(|e| match e.kind {
                            ErrorKind::Cancelled => cancelled(e.message),
                            _ => format!("waiting for command {cmd} failed: {}", e.message),
                        });
                }
                Next::Reattach(why) => {
                    reattached += 1;
                    if reattached > 3 {
                        break Err(format!("lost command {cmd}'s output: {why}"));
                    }
                    self.api
                        .transport
                        .sleep(Duration::from_millis(200 * reattached));
                    match self.api.logs(&self.state.session, &cmd) {
                        Ok(s) => (stream, is_logs) = (s, true),
                        Err(e) if e.kind == ErrorKind::Cancelled => {
                            break Err(cancelled(e.message));
                        }
                        Err(e) => {
                            break Err(format!(
                                "{why}, and reattaching to command {cmd} failed: {}",
                                e.message
                            ));
                        }
                    }
                }
            }
        };
        lines.finish(sink);
        result
    }

    pub fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.check_open()?;
        let full = self.resolve(path);
        self.api
            .read_file(&self.state.session, &full)
            .map_err(err)?
            .ok_or_else(|| format!("reading {path}: no such file in the sandbox"))
    }

    pub fn write_file(&self, path: &str, data: &[u8]) -> Result<(), String> {
        self.write_files(&[(self.resolve(path), data.to_vec(), 0o644)])
    }

    fn write_files(&self, files: &[(String, Vec<u8>, u32)]) -> Result<(), String> {
        self.check_open()?;
        let entries: Vec<Entry<'_>> = files
            .iter()
            .map(|(p, d, m)| Entry {
                path: p,
                data: d,
                mode: *m,
            })
            .collect();
        let archive = archive::tar_gz(&entries)?;
        self.api
            .write_files(&self.state.session, &archive)
            .map_err(err)
    }

    pub fn mkdir(&self, path: &str, recursive: bool) -> Result<(), String> {
        self.check_open()?;
        let full = self.resolve(path);
        if recursive {
            self.run_script_ok(&format!("mkdir {path}"), shell_fs::MKDIR_P, &[&full])
                .map(|_| ())
        } else {
            self.api.mkdir(&self.state.session, &full).map_err(err)
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

    /// Copy host files (already read by the caller) into the sandbox.
    pub fn put(&self, files: Vec<(String, Vec<u8>, u32)>) -> Result<(), String> {
        let files: Vec<(String, Vec<u8>, u32)> = files
            .into_iter()
            .map(|(p, d, m)| (self.resolve(&p), d, m))
            .collect();
        self.write_files(&files)
    }

    /// Stop the session and delete the sandbox. Idempotent.
    pub fn close(&self) -> Result<(), String> {
        if self.closed.replace(true) {
            return Ok(());
        }
        let stopped = self.api.stop(&self.state.session);
        let deleted = self.api.delete(&self.state.name);
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

impl<T: Transport> ShellFs for VercelSandbox<T> {
    fn run_script(&self, script: &str, args: &[&str]) -> Result<(i32, String, String), String> {
        let (mut out, mut errout) = (String::new(), String::new());
        let outcome = self.exec(ExecSpec::script(script, args), &mut |s, line| {
            let buf = if *s == Stream::Stdout {
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
