//! The toolbox's process calls: sessions (a long-lived `sh` each),
//! commands run in them synchronously or async, their state and logs,
//! stdin for async commands, and one-shot `process/execute`.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use serde_json::{Value, json};

use crate::server::{Body, Req, empty, full, ok, toolbox_error};
use crate::{Cmd, Fault, Op, Sandbox, Session, Shared};

const STDOUT: &[u8] = b"\x01\x01\x01";
const STDERR: &[u8] = b"\x02\x02\x02";

fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn err(r: &Req, status: u16, code: &str, message: &str) -> Response<Body> {
    toolbox_error(status, &r.method, &r.path, code, message)
}

fn kill_group(pgid: i32) {
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Kill every session of a sandbox (it stops, or is deleted).
pub(crate) fn end_sessions(sb: &mut Sandbox) {
    for (_, s) in std::mem::take(&mut sb.sessions) {
        kill_group(s.pgid);
    }
}

fn sandbox<'a>(st: &'a mut crate::State, id: &str) -> &'a mut Sandbox {
    st.sandboxes
        .iter_mut()
        .find(|s| s.id == id && !s.deleted)
        .expect("checked by the router")
}

pub(crate) async fn route(
    state: &Shared,
    counter: &AtomicU64,
    id: &str,
    op: Op,
    parts: &[&str],
    r: &Req,
) -> Response<Body> {
    match op {
        Op::CreateSession => create_session(state, id, r),
        Op::DeleteSession => delete_session(state, id, parts[4], r),
        Op::GetSession => get_session(state, id, parts[4], r),
        Op::ListSessions => list_sessions(state, id),
        Op::Exec => exec(state, counter, id, parts[4], r).await,
        Op::GetCommand => get_command(state, id, parts[4], parts[6], r),
        Op::Logs => logs(state, id, parts[4], parts[6], r),
        Op::Input => input(state, id, parts[4], parts[6], r),
        Op::Execute => execute(state, id, r).await,
        _ => err(r, 404, "NOT_FOUND", "no such call"),
    }
}

fn create_session(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let Some(sid) = r.json()["sessionId"].as_str().map(str::to_string) else {
        return err(
            r,
            400,
            "BAD_REQUEST",
            "invalid request body: sessionId is required",
        );
    };
    let mut st = state.lock().unwrap();
    let path = st.path.clone();
    let sb = sandbox(&mut st, id);
    if sb.sessions.contains_key(&sid) {
        return err(r, 409, "CONFLICT", "session already exists");
    }
    let dir = sb
        .control
        .as_ref()
        .unwrap()
        .path()
        .join("sessions")
        .join(&sid);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return err(r, 400, "BAD_REQUEST", &e.to_string());
    }
    let spawned = std::process::Command::new("sh")
        .current_dir(&sb.home)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &sb.home)
        .env("USER", "daytona")
        .env("LANG", "C.UTF-8")
        .envs(&sb.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return err(r, 400, "BAD_REQUEST", &e.to_string()),
    };
    let stdin = child.stdin.take().unwrap();
    let pgid = child.id() as i32;
    std::thread::spawn(move || child.wait());
    sb.sessions.insert(
        sid,
        Session {
            pgid,
            stdin,
            dir,
            commands: Default::default(),
        },
    );
    empty(201)
}

fn command_json(c: &Cmd) -> Value {
    let mut v = json!({ "id": c.id, "command": c.command });
    if let Some(code) = c.exit {
        v["exitCode"] = json!(code);
    }
    v
}

fn session_json(sid: &str, s: &Session) -> Value {
    let commands: Vec<Value> = s.commands.values().map(command_json).collect();
    json!({ "sessionId": sid, "commands": commands })
}

fn get_session(state: &Shared, id: &str, sid: &str, r: &Req) -> Response<Body> {
    let mut st = state.lock().unwrap();
    match sandbox(&mut st, id).sessions.get(sid) {
        Some(s) => ok(200, session_json(sid, s)),
        None => err(r, 404, "NOT_FOUND", "session not found"),
    }
}

fn list_sessions(state: &Shared, id: &str) -> Response<Body> {
    let mut st = state.lock().unwrap();
    let all: Vec<Value> = sandbox(&mut st, id)
        .sessions
        .iter()
        .map(|(sid, s)| session_json(sid, s))
        .collect();
    ok(200, Value::Array(all))
}

fn delete_session(state: &Shared, id: &str, sid: &str, r: &Req) -> Response<Body> {
    let mut st = state.lock().unwrap();
    let sb = sandbox(&mut st, id);
    match sb.sessions.remove(sid) {
        Some(s) => {
            kill_group(s.pgid);
            let _ = std::fs::remove_dir_all(&s.dir);
            empty(204)
        }
        None => err(r, 404, "NOT_FOUND", "session not found"),
    }
}

fn uuid(counter: &AtomicU64) -> String {
    let n = counter.fetch_add(1, Ordering::SeqCst);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{t:08x}-{:04x}-4{:03x}-8000-{n:012x}",
        n & 0xffff,
        n & 0xfff
    )
}

struct Files {
    out: PathBuf,
    err: PathBuf,
    exit: PathBuf,
}

async fn exec(state: &Shared, counter: &AtomicU64, id: &str, sid: &str, r: &Req) -> Response<Body> {
    let body = r.json();
    let Some(command) = body["command"].as_str().map(str::to_string) else {
        return err(
            r,
            400,
            "BAD_REQUEST",
            "invalid request body: command is required",
        );
    };
    if command.trim().is_empty() {
        return err(r, 400, "BAD_REQUEST", "command cannot be empty");
    }
    let run_async =
        body["runAsync"].as_bool() == Some(true) || body["async"].as_bool() == Some(true);
    let cid = uuid(counter);
    let (files, lost) = {
        let mut st = state.lock().unwrap();
        let lost = st
            .faults
            .iter()
            .position(|f| matches!(f, Fault::SessionLost { command_contains, .. } if command.contains(command_contains.as_str())))
            .and_then(|i| st.faults.remove(i));
        let sb = sandbox(&mut st, id);
        let Some(session) = sb.sessions.get_mut(sid) else {
            return err(r, 404, "NOT_FOUND", "session not found");
        };
        let dir = session.dir.join(&cid);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return err(r, 400, "BAD_REQUEST", &e.to_string());
        }
        let files = Files {
            out: dir.join("stdout"),
            err: dir.join("stderr"),
            exit: dir.join("exit_code"),
        };
        let script = dir.join("cmd.sh");
        for (p, data) in [
            (&script, command.as_str()),
            (&files.out, ""),
            (&files.err, ""),
        ] {
            if let Err(e) = std::fs::write(p, data) {
                return err(r, 400, "BAD_REQUEST", &e.to_string());
            }
        }
        // An async command's stdin stays open until it ends (input can be
        // sent to it); a synchronous one's is at its end at once.
        let (stdin_path, input) = if run_async {
            let fifo = dir.join("input");
            let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                return err(r, 400, "BAD_REQUEST", "mkfifo failed");
            }
            let held = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&fifo)
                .ok();
            (fifo, held)
        } else {
            (PathBuf::from("/dev/null"), None)
        };
        let line = format!(
            "{{ . {}; }} <{} >{} 2>{}; echo $? >{}\n",
            q(&script),
            q(&stdin_path),
            q(&files.out),
            q(&files.err),
            q(&files.exit)
        );
        if let Err(e) = session.stdin.write_all(line.as_bytes()) {
            return err(
                r,
                400,
                "BAD_REQUEST",
                &format!("failed to write command: {e}"),
            );
        }
        session.commands.insert(
            cid.clone(),
            Cmd {
                id: cid.clone(),
                command: command.clone(),
                log: vec![],
                exit: None,
                lines: 0,
                input,
            },
        );
        (files, lost)
    };
    let lost_after = match lost {
        Some(Fault::SessionLost { after_lines, .. }) => Some(after_lines),
        _ => None,
    };
    let task = tokio::spawn(tail(
        state.clone(),
        id.to_string(),
        sid.to_string(),
        cid.clone(),
        files,
        lost_after,
    ));
    if run_async {
        return ok(202, json!({ "cmdId": cid }));
    }
    let _ = task.await;
    let st = state.lock().unwrap();
    let cmd = st
        .sandboxes
        .iter()
        .find(|s| s.id == id)
        .and_then(|s| s.sessions.get(sid))
        .and_then(|s| s.commands.get(&cid));
    match cmd {
        Some(c) => {
            let (out, errs) = demux(&c.log);
            ok(
                200,
                json!({
                    "cmdId": cid,
                    "output": String::from_utf8_lossy(&c.log),
                    "stdout": String::from_utf8_lossy(&out),
                    "stderr": String::from_utf8_lossy(&errs),
                    "exitCode": c.exit,
                }),
            )
        }
        None => err(r, 400, "BAD_REQUEST", "session cancelled"),
    }
}

/// The command's output files, tailed into its log line by line (each
/// prefixed with its stream's marker) until its exit code is written.
async fn tail(
    state: Shared,
    id: String,
    sid: String,
    cid: String,
    files: Files,
    lost_after: Option<usize>,
) {
    let mut offsets = [0u64; 2];
    let mut partial: [Vec<u8>; 2] = [vec![], vec![]];
    loop {
        let exit = std::fs::read_to_string(&files.exit)
            .ok()
            .filter(|t| t.ends_with('\n'))
            .and_then(|t| t.trim().parse::<i32>().ok());
        let mut fresh: Vec<(usize, Vec<u8>)> = vec![];
        for (i, path) in [&files.out, &files.err].into_iter().enumerate() {
            if let Ok(data) = std::fs::read(path)
                && (data.len() as u64) > offsets[i]
            {
                let new = &data[offsets[i] as usize..];
                offsets[i] = data.len() as u64;
                partial[i].extend_from_slice(new);
                while let Some(n) = partial[i].iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = partial[i].drain(..=n).collect();
                    fresh.push((i, line));
                }
            }
        }
        if exit.is_some() {
            for (i, rest) in partial.iter_mut().enumerate() {
                if !rest.is_empty() {
                    let mut line = std::mem::take(rest);
                    line.push(b'\n');
                    fresh.push((i, line));
                }
            }
        }
        if record(&state, &id, &sid, &cid, fresh, exit, lost_after) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Add `fresh` lines to the command's log, and its exit code when it has
/// one; lose the session when the fault says so. True when the tailing is
/// over.
fn record(
    state: &Shared,
    id: &str,
    sid: &str,
    cid: &str,
    fresh: Vec<(usize, Vec<u8>)>,
    exit: Option<i32>,
    lost_after: Option<usize>,
) -> bool {
    let mut st = state.lock().unwrap();
    let Some(sb) = st.sandboxes.iter_mut().find(|s| s.id == id) else {
        return true;
    };
    let Some(session) = sb.sessions.get_mut(sid) else {
        return true;
    };
    let Some(cmd) = session.commands.get_mut(cid) else {
        return true;
    };
    for (i, line) in fresh {
        cmd.log
            .extend_from_slice(if i == 0 { STDOUT } else { STDERR });
        cmd.log.extend_from_slice(&line);
        cmd.lines += 1;
    }
    if lost_after.is_some_and(|n| cmd.lines >= n) && exit.is_none() {
        // The daemon restarted: the session and its commands are gone.
        let session = sb.sessions.remove(sid).unwrap();
        kill_group(session.pgid);
        return true;
    }
    if let Some(code) = exit {
        cmd.exit = Some(code);
        cmd.input.take();
        return true;
    }
    false
}

fn demux(log: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut out, mut errs) = (vec![], vec![]);
    for line in log.split_inclusive(|&b| b == b'\n') {
        if let Some(rest) = line.strip_prefix(STDOUT) {
            out.extend_from_slice(rest);
        } else if let Some(rest) = line.strip_prefix(STDERR) {
            errs.extend_from_slice(rest);
        }
    }
    (out, errs)
}

fn with_cmd<T>(
    state: &Shared,
    id: &str,
    sid: &str,
    cid: &str,
    f: impl FnOnce(&mut Cmd) -> T,
) -> Result<T, &'static str> {
    let mut st = state.lock().unwrap();
    let sb = sandbox(&mut st, id);
    let session = sb.sessions.get_mut(sid).ok_or("session not found")?;
    let cmd = session.commands.get_mut(cid).ok_or("command not found")?;
    Ok(f(cmd))
}

fn get_command(state: &Shared, id: &str, sid: &str, cid: &str, r: &Req) -> Response<Body> {
    match with_cmd(state, id, sid, cid, |c| command_json(c)) {
        Ok(v) => ok(200, v),
        Err(m) => err(r, 404, "NOT_FOUND", m),
    }
}

/// (major, minor, patch) of an SDK version; a version that does not parse
/// counts as new, as the daemon's comparison does.
fn version(v: &str) -> (u64, u64, u64) {
    let mut it = v
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().ok());
    match (
        it.next().flatten(),
        it.next().flatten(),
        it.next().flatten(),
    ) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => (u64::MAX, 0, 0),
    }
}

/// The log as the daemon answers it: JSON with the streams apart for an
/// SDK from 0.167; otherwise plain text, with the markers only when the
/// caller asked for split output (an SDK from 0.27, or none and
/// `X-Daytona-Split-Output: true`).
fn logs(state: &Shared, id: &str, sid: &str, cid: &str, r: &Req) -> Response<Body> {
    let (log, command, lines) = match with_cmd(state, id, sid, cid, |c| {
        (c.log.clone(), c.command.clone(), c.lines)
    }) {
        Ok(v) => v,
        Err(m) => return err(r, 404, "NOT_FOUND", m),
    };
    let sdk = r.sdk_version.as_deref().filter(|v| !v.is_empty());
    let combined = match sdk {
        Some(v) => version(v) < (0, 27, 0),
        None => !r.split_output,
    };
    let json_answer = sdk.is_some_and(|v| version(v) >= (0, 167, 0));
    let (content_type, body) = if json_answer {
        let (out, errs) = demux(&log);
        (
            "application/json; charset=utf-8",
            json!({
                "output": String::from_utf8_lossy(&log),
                "stdout": String::from_utf8_lossy(&out),
                "stderr": String::from_utf8_lossy(&errs),
            })
            .to_string()
            .into_bytes(),
        )
    } else if combined {
        let (out, errs) = demux(&log);
        let mut both = out;
        both.extend(errs);
        ("text/plain; charset=utf-8", both)
    } else {
        ("text/plain; charset=utf-8", log)
    };
    let drop_now = {
        let mut st = state.lock().unwrap();
        let pos = st.faults.iter().position(|f| {
            matches!(f, Fault::DropMidExec { command_contains, after_lines }
                if command.contains(command_contains.as_str()) && lines >= *after_lines)
        });
        pos.and_then(|i| st.faults.remove(i)).is_some()
    };
    if drop_now {
        return cut(content_type, body);
    }
    full(200, content_type, body)
}

/// A 200 whose body stops partway: the connection drops.
fn cut(content_type: &str, body: Vec<u8>) -> Response<Body> {
    let half = Bytes::from(body[..body.len() / 2].to_vec());
    let chunks: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
        Ok(Frame::data(half)),
        Err(std::io::Error::other(
            "injected: connection dropped mid-exec",
        )),
    ];
    Response::builder()
        .status(200)
        .header("content-type", content_type)
        .header("content-length", body.len().to_string())
        .body(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
            chunks,
        ))))
        .unwrap()
}

fn input(state: &Shared, id: &str, sid: &str, cid: &str, r: &Req) -> Response<Body> {
    let Some(data) = r.json()["data"].as_str().map(str::to_string) else {
        return err(
            r,
            400,
            "BAD_REQUEST",
            "invalid request body: data is required",
        );
    };
    match with_cmd(state, id, sid, cid, |c| match &mut c.input {
        Some(f) => f.write_all(data.as_bytes()).map_err(|e| e.to_string()),
        None => Err("command is not running".into()),
    }) {
        Ok(Ok(())) => empty(200),
        Ok(Err(m)) => err(r, 400, "BAD_REQUEST", &m),
        Err(m) => err(r, 404, "NOT_FOUND", m),
    }
}

/// `POST /process/execute {command, cwd?, timeout?(s)}`: run to the end,
/// answer `{exitCode, result}` (stdout and stderr together).
async fn execute(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let body = r.json();
    let Some(command) = body["command"].as_str().map(str::to_string) else {
        return err(
            r,
            400,
            "BAD_REQUEST",
            "invalid request body: command is required",
        );
    };
    let (home, path, env) = {
        let mut st = state.lock().unwrap();
        let path = st.path.clone();
        let sb = sandbox(&mut st, id);
        (sb.home.clone(), path, sb.env.clone())
    };
    let cwd = body["cwd"]
        .as_str()
        .map(PathBuf::from)
        .unwrap_or(home.clone());
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .env("USER", "daytona")
        .envs(&env)
        .envs(
            body["envs"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let timeout = body["timeout"]
        .as_u64()
        .filter(|t| *t > 0)
        .unwrap_or(10_000);
    match tokio::time::timeout(Duration::from_secs(timeout), child).await {
        Ok(Ok(out)) => ok(
            200,
            json!({
                "exitCode": out.status.code().unwrap_or(-1),
                "result": String::from_utf8_lossy(&out.stdout),
            }),
        ),
        Ok(Err(e)) => err(r, 400, "BAD_REQUEST", &e.to_string()),
        Err(_) => err(r, 408, "REQUEST_TIMEOUT", "command execution timeout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_the_daemon_does() {
        assert!(version("0.190.0") >= (0, 167, 0));
        assert!(version("0.166.9") < (0, 167, 0));
        assert!(version("not-a-version") >= (0, 167, 0));
    }

    #[test]
    fn demux_keeps_each_streams_lines() {
        let (o, e) = demux(b"\x01\x01\x01a\n\x02\x02\x02b\n\x01\x01\x01c\n");
        assert_eq!((o.as_slice(), e.as_slice()), (&b"a\nc\n"[..], &b"b\n"[..]));
    }
}
