//! `pods/NAME/exec` over WebSocket, the channel protocol kubectl (1.30+)
//! and the official clients speak: every binary message starts with its
//! channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize); the error
//! channel carries the exit status as a `Status`; `v5.channel.k8s.io`
//! adds closing stdin (a message `[255, 0]`). The command runs through
//! docker's exec API in the pod's container.

use std::sync::Arc;

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::server::{Body, is_true, json_response, query_param, query_params};
use crate::{Shared, status};

/// The subprotocols served, preferred first.
const PROTOCOLS: &[&str] = &["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

struct Exec {
    container: String,
    command: Vec<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
    v5: bool,
    /// Drop the connection after the first output.
    cut: bool,
}

/// Check the request, answer 101 and run the exec on the upgraded
/// connection.
pub fn upgrade(
    shared: Arc<Shared>,
    ns: &str,
    name: &str,
    query: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let command = query_params(query, "command");
    if command.is_empty() {
        return json_response(
            400,
            &status::bad_request("you must specify at least 1 command".into()),
        );
    }
    let (container, cut, v4_only) = {
        let mut st = shared.state.lock().unwrap();
        let Some(pod) = st.pods.get(&(ns.to_string(), name.to_string())) else {
            return json_response(404, &status::not_found("pods", name));
        };
        let first = pod.object["spec"]["containers"][0]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if query_param(query, "container").is_some_and(|c| c != first) {
            let c = query_param(query, "container").unwrap_or_default();
            return json_response(
                400,
                &status::bad_request(format!("container {c} is not valid for pod {name}")),
            );
        }
        let phase = pod.object["status"]["phase"].as_str().unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            return json_response(
                400,
                &status::bad_request(format!(
                    "cannot exec into a container in a completed pod; current phase is {phase}"
                )),
            );
        }
        let Some(container) = pod.container.clone().filter(|_| phase == "Running") else {
            return json_response(
                400,
                &status::bad_request(format!("container not found (\"{first}\")")),
            );
        };
        let line = command.join(" ");
        st.exec_log.push(line.clone());
        let cut = st.exec_cuts.iter().position(|n| line.contains(n.as_str()));
        if let Some(i) = cut {
            st.exec_cuts.remove(i);
        }
        (container, cut.is_some(), st.exec_v4_only)
    };
    let key = req.headers().get("sec-websocket-key").cloned();
    let offered: Vec<String> = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect();
    let served = if v4_only { &PROTOCOLS[1..] } else { PROTOCOLS };
    let protocol = served.iter().find(|p| offered.iter().any(|o| o == *p));
    let (Some(key), Some(protocol)) = (key, protocol) else {
        return json_response(
            400,
            &status::bad_request(format!(
                "the mock serves exec only over WebSocket with one of the subprotocols {served:?}, offered {offered:?}"
            )),
        );
    };
    let exec = Exec {
        container,
        command,
        stdin: is_true(query, "stdin"),
        stdout: is_true(query, "stdout"),
        stderr: is_true(query, "stderr"),
        tty: is_true(query, "tty"),
        v5: *protocol == "v5.channel.k8s.io",
        cut,
    };
    let accept = derive_accept_key(key.as_bytes());
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        let mut stopped = shared.stopped.subscribe();
        tokio::select! {
            _ = run(&shared, exec, ws) => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
    });
    Response::builder()
        .status(101)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", accept)
        .header("sec-websocket-protocol", *protocol)
        .body(Empty::new().boxed())
        .unwrap()
}

async fn run<S>(shared: &Shared, exec: Exec, ws: WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let docker = &shared.docker;
    let options = CreateExecOptions {
        cmd: Some(exec.command.clone()),
        attach_stdin: Some(exec.stdin),
        attach_stdout: Some(exec.stdout),
        attach_stderr: Some(exec.stderr),
        tty: Some(exec.tty),
        ..Default::default()
    };
    let started = match docker.create_exec(&exec.container, options).await {
        Ok(created) => docker
            .start_exec(&created.id, None)
            .await
            .map(|r| (created.id, r)),
        Err(e) => Err(e),
    };
    let (id, mut output, input) = match started {
        Ok((id, StartExecResults::Attached { output, input })) => (id, output, input),
        Ok((_, StartExecResults::Detached)) => return,
        Err(e) => {
            let status = status::exec_error(format!("error executing command in container: {e}"));
            let _ = sink
                .send(channel(ERROR, status.to_string().as_bytes()))
                .await;
            close(&mut sink).await;
            return;
        }
    };
    // The client's side: stdin, its close (v5), terminal resizes.
    let (resize_docker, resize_id, v5, tty) = (docker.clone(), id.clone(), exec.v5, exec.tty);
    let mut reader = tokio::spawn(async move {
        let mut input = Some(input);
        while let Some(Ok(message)) = source.next().await {
            // The Python client sends stdin as text messages.
            let data = match message {
                Message::Binary(data) => data,
                Message::Text(text) => Bytes::from(text.as_str().as_bytes().to_vec()),
                Message::Close(_) => break,
                _ => continue,
            };
            match (data.first(), input.as_mut()) {
                (Some(&STDIN), Some(w)) => {
                    if w.write_all(&data[1..]).await.is_err() || w.flush().await.is_err() {
                        input = None;
                    }
                }
                (Some(&CLOSE), Some(w)) if v5 && data.get(1) == Some(&STDIN) => {
                    let _ = w.shutdown().await;
                    input = None;
                }
                (Some(&RESIZE), _) if tty => {
                    if let Ok(size) = serde_json::from_slice::<Value>(&data[1..]) {
                        let options = ResizeExecOptions {
                            width: size["Width"].as_u64().unwrap_or(80) as u16,
                            height: size["Height"].as_u64().unwrap_or(24) as u16,
                        };
                        let _ = resize_docker.resize_exec(&resize_id, options).await;
                    }
                }
                _ => {}
            }
        }
    });
    loop {
        let out = tokio::select! {
            out = output.next() => out,
            // The client closed the connection (the only end of stdin
            // v4 has) or dropped it: the exec ends there, with no status,
            // as the real server ends it.
            _ = &mut reader => {
                close(&mut sink).await;
                return;
            }
        };
        let Some(Ok(out)) = out else { break };
        let (chan, bytes) = match out {
            LogOutput::StdOut { message } | LogOutput::Console { message } => (STDOUT, message),
            LogOutput::StdErr { message } => (STDERR, message),
            LogOutput::StdIn { .. } => continue,
        };
        if sink.send(channel(chan, &bytes)).await.is_err() {
            reader.abort();
            return;
        }
        if exec.cut {
            // Dropped without a close frame or an exit status, as when
            // the connection to the API server is lost.
            reader.abort();
            return;
        }
    }
    reader.abort();
    // No exit code when the container went away under the exec.
    let status = match docker
        .inspect_exec(&id)
        .await
        .ok()
        .and_then(|i| i.exit_code)
    {
        Some(code) => status::exec_exit(code, &exec.command),
        None => status::exec_error("container not found: the exec's container is gone".into()),
    };
    let _ = sink
        .send(channel(ERROR, status.to_string().as_bytes()))
        .await;
    close(&mut sink).await;
}

/// A normal closure with its status code, as the real server closes:
/// clients take a close without one (1005) as an error.
async fn close<S>(sink: &mut S)
where
    S: futures_util::Sink<Message> + Unpin,
{
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
    let _ = sink.close().await;
}

fn channel(chan: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(chan);
    bytes.extend_from_slice(data);
    Message::Binary(Bytes::from(bytes))
}
