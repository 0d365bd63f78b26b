//! A sandbox provider for the host's `http` capability tests. Its exec runs
//! no program: the argv picks a request, so one component serves every test.
//!
//!   get URL [NAME=VALUE ...]   one request, headers as given
//!   get! URL                   the same, but a failed request fails the exec
//!                              itself (a provider failure, not an exit code)
//!   follow URL                 follows redirects with new requests, as an
//!                              HTTP client does (wasi:http never follows them)
//!   echo TEXT                  no request: shows the sandbox still answers
//!
//! Output lines: `sending URL` (before each request), `status N`, `bytes N`, `body TEXT` (the first 200 bytes),
//! `redirect URL`, and `error ...` with exit code 1 when a request failed.

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../../wit",
    // wasi:http from the world, as any Rust provider would bind it.
    generate_all,
});

use crate::wasi::http::outgoing_handler;
use crate::wasi::http::types::{Fields, IncomingResponse, OutgoingRequest, Scheme};
use crate::wasi::io::streams::StreamError;
use exports::sanddune::plugin::sandbox_provider::{
    Command, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox, PreflightError,
    PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::types::{CapabilityRequest, OutputLine, OutputStream};

/// The origins the tests' mock servers listen on: fixed loopback addresses
/// no other program uses, one per test, so tests can run side by side.
pub const ORIGINS: &[&str] = &[
    "http://127.77.0.1:8080",
    "http://127.77.0.2:8080",
    "http://127.77.0.3:8080",
    "http://127.77.0.4:8080",
    "http://127.77.0.5:8080",
    "http://127.77.0.6:8080",
    "http://127.77.0.7:8080",
];

struct HostileHttp;

impl Guest for HostileHttp {
    type Sandbox = HttpSandbox;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "hostile-http".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Sends the HTTP requests its exec argv names, for the host's tests".into(),
            kind: SandboxKind::BindMount,
            config: vec![],
            capabilities: ORIGINS
                .iter()
                .map(|o| CapabilityRequest {
                    kind: "http".into(),
                    value: o.to_string(),
                })
                .collect(),
            container_engine: None,
            snapshots: false,
        }
    }

    fn preflight(_options: PreflightOptions) -> Result<(), PreflightError> {
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        Ok(Sandbox::new(HttpSandbox {
            worktree: options.host_worktree_path,
        }))
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        Ok(vec![])
    }

    fn attach(_state: String, options: CreateOptions) -> Result<Sandbox, String> {
        Self::create(options)
    }
}

struct HttpSandbox {
    worktree: String,
}

fn say(sink: &OutputSink, text: String) {
    sink.write(&OutputLine {
        stream: OutputStream::Stdout,
        text,
    });
}

/// `http://host:port/path` into its parts.
fn split_url(url: &str) -> Result<(Scheme, String, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.into()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    Ok((scheme, authority.into(), path.into()))
}

/// Send one GET; the response, or the error code the host answered with.
fn send(url: &str, headers: &[(String, String)]) -> Result<IncomingResponse, String> {
    let (scheme, authority, path) = split_url(url)?;
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| format!("header {name}: {e:?}"))?;
    }
    let request = OutgoingRequest::new(fields);
    request.set_scheme(Some(&scheme)).map_err(|()| "scheme")?;
    request
        .set_authority(Some(&authority))
        .map_err(|()| "authority")?;
    request
        .set_path_with_query(Some(&path))
        .map_err(|()| "path")?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(response))) => Ok(response),
        Some(Ok(Err(code))) => Err(format!("{code:?}")),
        _ => Err("no response".into()),
    }
}

/// Read the whole body: its length and its first bytes.
fn read_body(response: IncomingResponse) -> Result<(u64, String), String> {
    let body = response.consume().map_err(|()| "body taken")?;
    let stream = body.stream().map_err(|()| "stream taken")?;
    let (mut total, mut head) = (0u64, Vec::new());
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => {
                total += chunk.len() as u64;
                let room = 200usize.saturating_sub(head.len());
                head.extend(chunk.iter().take(room));
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!("after {total} bytes: {}", e.to_debug_string()));
            }
        }
    }
    Ok((total, String::from_utf8_lossy(&head).into_owned()))
}

fn location(response: &IncomingResponse) -> Option<String> {
    let values = response.headers().get("location");
    values
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// `get` and `follow`: what happened, as output lines; Err for a failure.
fn request(argv: &[String], sink: &OutputSink) -> Result<(), String> {
    let (verb, url) = match argv {
        [verb, url, ..] => (verb.as_str(), url.clone()),
        _ => return Err("usage: get|get!|follow URL".into()),
    };
    let headers: Vec<(String, String)> = argv[2..]
        .iter()
        .filter_map(|h| h.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut url = url;
    for _ in 0..5 {
        say(sink, format!("sending {url}"));
        let response = send(&url, &headers)?;
        let status = response.status();
        say(sink, format!("status {status}"));
        match location(&response) {
            Some(next) if verb == "follow" && (300..400).contains(&status) => {
                say(sink, format!("redirect {next}"));
                url = next;
            }
            _ => {
                let (bytes, head) = read_body(response)?;
                say(sink, format!("bytes {bytes}"));
                say(sink, format!("body {head}"));
                return Ok(());
            }
        }
    }
    Err("too many redirects".into())
}

const UNSUPPORTED: &str = "not supported by hostile-http";

impl GuestSandbox for HttpSandbox {
    fn worktree_path(&self) -> String {
        self.worktree.clone()
    }

    fn state(&self) -> String {
        String::new()
    }

    fn exec(&self, exec: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        let Command::Argv(argv) = exec.command else {
            return Err("argv only".into());
        };
        let outcome = match argv.first().map(String::as_str) {
            Some("echo") => {
                say(sink, argv[1..].join(" "));
                Ok(())
            }
            Some("get" | "follow") => request(&argv, sink),
            Some("get!") => {
                return request(&argv, sink).map(|()| ExecResult {
                    exit_code: 0,
                    timed_out: false,
                });
            }
            _ => Err(format!("unknown command {argv:?}")),
        };
        let exit_code = match outcome {
            Ok(()) => 0,
            Err(e) => {
                say(sink, format!("error {e}"));
                1
            }
        };
        Ok(ExecResult {
            exit_code,
            timed_out: false,
        })
    }

    fn interactive_exec(&self, _request: ExecRequest) -> Result<i32, String> {
        Err(UNSUPPORTED.into())
    }

    fn copy_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn copy_file_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn copy_file_out(&self, _sandbox_path: String, _host_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn read_file(&self, _path: String) -> Result<Vec<u8>, String> {
        Err(UNSUPPORTED.into())
    }

    fn write_file(&self, _path: String, _data: Vec<u8>) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn stat(&self, _path: String) -> Result<FileStat, String> {
        Err(UNSUPPORTED.into())
    }

    fn read_dir(&self, _path: String) -> Result<Vec<String>, String> {
        Err(UNSUPPORTED.into())
    }

    fn exists(&self, _path: String) -> Result<bool, String> {
        Err(UNSUPPORTED.into())
    }

    fn mkdir(&self, _path: String, _recursive: bool) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn remove(&self, _path: String, _recursive: bool, _force: bool) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

// The export glue only links as a wasm component.
#[cfg(target_arch = "wasm32")]
export!(HostileHttp);
