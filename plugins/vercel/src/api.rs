//! The Vercel Sandbox v2 REST API: request building, error mapping and
//! retries. Everything here is plain Rust over the `Transport` seam.

use serde_json::{Value, json};

use crate::config::{Credentials, Network, Options};
use crate::ndjson::{self, Event, LineSplitter};
use crate::transport::{BaseUrl, Method, Request, Response, Transport, TransportError};

use sanddune_cloud_http::retry::{self, Decision, Outcome};
/// The retry policy (cloud-http's, the Vercel SDK's: 429 and 5xx twice,
/// 400 ms then 800 ms, a `Retry-After` of at most 20 s honoured).
pub use sanddune_cloud_http::retry::{MAX_RETRY_AFTER_S, RETRIES};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 401: the credentials were rejected.
    Unauthorized,
    /// 403: the token may not use this team or project.
    Forbidden,
    /// 404 / 410: the sandbox (or what was asked for) is gone.
    Gone,
    /// 422: the sandbox is stopping or snapshotting.
    Unprocessable,
    RateLimited,
    Server,
    OtherStatus,
    Network,
    Denied,
    Cancelled,
    /// The response is not what the protocol says.
    Protocol,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ApiError {
    fn protocol(message: String) -> Self {
        ApiError {
            kind: ErrorKind::Protocol,
            status: None,
            code: None,
            message,
        }
    }

    fn transport(what: &str, e: TransportError) -> Self {
        let kind = match e {
            TransportError::Denied(_) => ErrorKind::Denied,
            TransportError::Cancelled(_) => ErrorKind::Cancelled,
            TransportError::Network(_) => ErrorKind::Network,
        };
        ApiError {
            kind,
            status: None,
            code: None,
            message: format!("Vercel API, {what}: {e}"),
        }
    }

    /// The server answered `status` with `body` (`{"error":{code,message}}`).
    fn from_status(what: &str, status: u16, body: &[u8], retry_after: Option<u64>) -> Self {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        let field = |k: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get("error"))
                .and_then(|e| e.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let (code, server) = (field("code"), field("message"));
        let said = match (&code, &server) {
            (Some(c), Some(m)) => format!(" ({c}: {m})"),
            (Some(c), None) => format!(" ({c})"),
            (None, Some(m)) => format!(" ({m})"),
            (None, None) => String::new(),
        };
        let (kind, text) = match status {
            401 => (
                ErrorKind::Unauthorized,
                format!(
                    "Vercel rejected the credentials (401){said}: check VERCEL_TOKEN, or VERCEL_OIDC_TOKEN (an OIDC token expires after 12 hours; `vercel env pull` renews it)"
                ),
            ),
            403 => (
                ErrorKind::Forbidden,
                format!(
                    "Vercel refused access (403){said}: the token has no access to the team VERCEL_TEAM_ID or the project VERCEL_PROJECT_ID, or Sandbox is not enabled for them"
                ),
            ),
            404 => (
                ErrorKind::Gone,
                format!("the Vercel sandbox is gone (404){said}"),
            ),
            410 => (
                ErrorKind::Gone,
                format!("the Vercel sandbox has stopped (410){said}"),
            ),
            422 => (
                ErrorKind::Unprocessable,
                format!("Vercel cannot do this now (422){said}"),
            ),
            429 => (
                ErrorKind::RateLimited,
                match retry_after {
                    Some(s) => format!(
                        "Vercel rate-limited the request (429){said}; it asks to retry after {s} s"
                    ),
                    None => format!("Vercel rate-limited the request (429){said}"),
                },
            ),
            500..=599 => (
                ErrorKind::Server,
                format!("the Vercel API failed ({status}){said}"),
            ),
            _ => (
                ErrorKind::OtherStatus,
                format!("the Vercel API answered {status}{said}"),
            ),
        };
        ApiError {
            kind,
            status: Some(status),
            code,
            message: format!("{what}: {text}"),
        }
    }
}

pub type Result<T> = std::result::Result<T, ApiError>;

/// What `create` returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    pub name: String,
    pub session_id: String,
    pub status: String,
    pub cwd: String,
}

/// A command whose output is being streamed.
pub struct Streaming {
    pub id: String,
    response: Response,
    lines: LineSplitter,
    pending: std::collections::VecDeque<String>,
    ended: bool,
}

impl Streaming {
    /// The next event; None when the stream ended (cleanly or not: the
    /// caller knows whether it saw the exit code).
    pub fn next_event(&mut self) -> std::result::Result<Option<Event>, TransportError> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                match ndjson::parse(&line) {
                    Ok(event) => return Ok(Some(event)),
                    Err(e) => return Err(TransportError::Network(e)),
                }
            }
            if self.ended {
                return Ok(None);
            }
            match self.response.body.next_chunk()? {
                Some(chunk) => self.pending.extend(self.lines.push(&chunk)),
                None => {
                    self.ended = true;
                    self.pending.extend(self.lines.finish());
                }
            }
        }
    }
}

pub struct Api<T: Transport> {
    pub base: BaseUrl,
    creds: Credentials,
    pub transport: T,
}

fn retry_after(response: &Response) -> Option<u64> {
    retry::retry_after(response.header("retry-after"))
}

impl<T: Transport> Api<T> {
    pub fn new(base: BaseUrl, creds: Credentials, transport: T) -> Self {
        Api {
            base,
            creds,
            transport,
        }
    }

    pub fn project_id(&self) -> &str {
        &self.creds.project_id
    }

    fn path(&self, path: &str, query: &[(&str, &str)]) -> String {
        let mut out = format!(
            "{}{path}?teamId={}",
            self.base.prefix,
            encode(&self.creds.team_id)
        );
        for (k, v) in query {
            out.push_str(&format!("&{k}={}", encode(v)));
        }
        out
    }

    fn request(
        &self,
        method: Method,
        path: String,
        body: Option<Value>,
        streaming: bool,
    ) -> Request {
        let mut headers = vec![
            (
                "authorization".to_string(),
                format!("Bearer {}", self.creds.token),
            ),
            ("content-type".to_string(), "application/json".to_string()),
            (
                "user-agent".to_string(),
                format!("sanddune-vercel/{}", env!("CARGO_PKG_VERSION")),
            ),
        ];
        if streaming {
            headers.push(("accept".into(), "application/x-ndjson".into()));
        }
        Request {
            method,
            path,
            headers,
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            streaming,
        }
    }

    /// Send, retrying 429 (waiting `Retry-After` when it is at most
    /// `MAX_RETRY_AFTER_S`), 5xx and network errors `RETRIES` times; never
    /// other 4xx. `retry_network` is false for requests that must not run
    /// twice (starting a command). A non-2xx answer becomes an `ApiError`.
    /// `send` (network errors retried) for a call whose answer is only its
    /// status: the body is read to its end and dropped.
    fn send_and_drain(&self, what: &str, build: &dyn Fn() -> Request) -> Result<()> {
        let mut response = self.send(what, build, true)?;
        let _ = response.read_all();
        Ok(())
    }

    pub fn send(
        &self,
        what: &str,
        build: &dyn Fn() -> Request,
        retry_network: bool,
    ) -> Result<Response> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.transport.send(&self.base, build()) {
                Ok(response) if (200..300).contains(&response.status) => return Ok(response),
                Ok(mut response) => {
                    let status = response.status;
                    let after = retry_after(&response);
                    let body = response.read_all().unwrap_or_default();
                    let error = ApiError::from_status(what, status, &body, after);
                    let outcome = Outcome::Status {
                        status,
                        retry_after: after,
                    };
                    match retry::decide(outcome, attempt) {
                        Decision::Retry(wait) => self.transport.sleep(wait),
                        Decision::Fail if attempt > 1 => {
                            return Err(ApiError {
                                message: format!("{} (after {} attempts)", error.message, attempt),
                                ..error
                            });
                        }
                        Decision::Fail => return Err(error),
                    }
                }
                Err(e @ TransportError::Network(_)) => {
                    let outcome = Outcome::Network {
                        idempotent: retry_network,
                    };
                    match retry::decide(outcome, attempt) {
                        Decision::Retry(wait) => self.transport.sleep(wait),
                        Decision::Fail => return Err(ApiError::transport(what, e)),
                    }
                }
                Err(e) => return Err(ApiError::transport(what, e)),
            }
        }
    }

    fn json(&self, what: &str, mut response: Response) -> Result<Value> {
        let body = response
            .read_all()
            .map_err(|e| ApiError::transport(what, e))?;
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::protocol(format!(
                "{what}: the Vercel API answered with something that is not JSON: {e}"
            ))
        })
    }

    /// `POST /v3/sandboxes` (`/v2/sandboxes` with a runtime); from
    /// `snapshot` when given (`source: {type: "snapshot"}`), whose image it
    /// was made from is the sandbox's, so no runtime or image is sent.
    pub fn create(
        &self,
        options: &Options,
        tags: &[(&str, &str)],
        snapshot: Option<&str>,
    ) -> Result<Created> {
        let mut body = json!({
            "projectId": self.creds.project_id,
            "ports": options.ports,
            "timeout": options.timeout_ms,
            "tags": tags.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect::<serde_json::Map<_, _>>(),
        });
        if let Some(vcpus) = options.vcpus {
            body["resources"] = json!({ "vcpus": vcpus });
        }
        let runtime = options.runtime.as_ref().filter(|_| snapshot.is_none());
        if let Some(id) = snapshot {
            body["source"] = json!({ "type": "snapshot", "snapshotId": id });
        } else if let Some(runtime) = runtime {
            body["runtime"] = json!(runtime);
        } else if let Some(image) = &options.image {
            body["image"] = json!(image);
        }
        body["networkPolicy"] = match &options.network {
            Network::AllowAll => json!({ "mode": "allow-all" }),
            Network::DenyAll => json!({ "mode": "deny-all" }),
            Network::Allow(domains) => json!({ "allow": domains }),
        };
        let endpoint = if runtime.is_some() {
            "/v2/sandboxes"
        } else {
            "/v3/sandboxes"
        };
        let path = self.path(endpoint, &[]);
        // Creating twice would leave a sandbox behind: no retry on a lost
        // connection, only on answers that say nothing was created.
        let response = self.send(
            "creating the sandbox",
            &|| self.request(Method::Post, path.clone(), Some(body.clone()), false),
            false,
        )?;
        let v = self.json("creating the sandbox", response)?;
        parse_created(&v).ok_or_else(|| {
            ApiError::protocol(format!(
                "creating the sandbox: unexpected answer {}",
                clip(&v.to_string())
            ))
        })
    }

    /// `GET /v2/sandboxes/sessions/{id}`: the session's status.
    pub fn session_status(&self, session: &str) -> Result<String> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}"), &[]);
        let what = "reading the sandbox session";
        let r = self.send(
            what,
            &|| self.request(Method::Get, path.clone(), None, false),
            true,
        )?;
        let v = self.json(what, r)?;
        v["session"]["status"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::protocol(format!("{what}: no session.status")))
    }

    /// `POST .../cmd` with `wait` and `logs`: the command has started when
    /// this returns; read its output from `Streaming`.
    pub fn start_command(&self, session: &str, body: &Value) -> Result<Streaming> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/cmd"), &[]);
        let what = "running a command";
        let mut body = body.clone();
        body["wait"] = json!(true);
        body["logs"] = json!(true);
        let response = self.send(
            what,
            &|| self.request(Method::Post, path.clone(), Some(body.clone()), true),
            false,
        )?;
        self.streaming(what, response, None)
    }

    /// `GET .../cmd/{id}/logs`: the command's log lines from its start.
    pub fn logs(&self, session: &str, cmd: &str) -> Result<Streaming> {
        let path = self.path(
            &format!("/v2/sandboxes/sessions/{session}/cmd/{cmd}/logs"),
            &[],
        );
        let what = "reading a command's output";
        let response = self.send(
            what,
            &|| self.request(Method::Get, path.clone(), None, true),
            true,
        )?;
        self.streaming(what, response, Some(cmd.to_string()))
    }

    fn streaming(&self, what: &str, response: Response, id: Option<String>) -> Result<Streaming> {
        let content_type = response.header("content-type").unwrap_or("").to_string();
        if content_type.split(';').next().map(str::trim) != Some("application/x-ndjson") {
            return Err(ApiError::protocol(format!(
                "{what}: expected a stream of command data (application/x-ndjson), got `{content_type}`"
            )));
        }
        let mut stream = Streaming {
            id: id.clone().unwrap_or_default(),
            response,
            lines: LineSplitter::default(),
            pending: Default::default(),
            ended: false,
        };
        if id.is_none() {
            // The first line names the command.
            match stream.next_event() {
                Ok(Some(Event::Command { id, .. })) if !id.is_empty() => stream.id = id,
                Ok(Some(other)) => {
                    return Err(ApiError::protocol(format!(
                        "{what}: the stream began with {other:?}, not the command"
                    )));
                }
                Ok(None) => {
                    return Err(ApiError::protocol(format!(
                        "{what}: the stream ended before the command started"
                    )));
                }
                Err(e) => return Err(ApiError::transport(what, e)),
            }
        }
        Ok(stream)
    }

    /// `GET .../cmd/{id}?wait=true`: the exit code once the command ends.
    pub fn wait(&self, session: &str, cmd: &str) -> Result<i32> {
        let path = self.path(
            &format!("/v2/sandboxes/sessions/{session}/cmd/{cmd}"),
            &[("wait", "true")],
        );
        let what = "waiting for a command";
        let req = || {
            let mut r = self.request(Method::Get, path.clone(), None, false);
            r.streaming = true;
            r
        };
        let r = self.send(what, &req, true)?;
        let v = self.json(what, r)?;
        v["command"]["exitCode"]
            .as_i64()
            .map(|c| c as i32)
            .ok_or_else(|| {
                ApiError::protocol(format!(
                    "{what}: no command.exitCode in {}",
                    clip(&v.to_string())
                ))
            })
    }

    /// `POST .../cmd/{id}/kill`.
    pub fn kill(&self, session: &str, cmd: &str, signal: i32) -> Result<()> {
        let path = self.path(
            &format!("/v2/sandboxes/sessions/{session}/cmd/{cmd}/kill"),
            &[],
        );
        let body = json!({ "signal": signal });
        self.send(
            "stopping a command",
            &|| self.request(Method::Post, path.clone(), Some(body.clone()), false),
            true,
        )?;
        Ok(())
    }

    /// `POST .../fs/write`: a gzipped tar, names relative to `/`.
    pub fn write_files(&self, session: &str, archive: &[u8]) -> Result<()> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/fs/write"), &[]);
        let build = || {
            let mut r = self.request(Method::Post, path.clone(), None, false);
            r.headers.retain(|(k, _)| k != "content-type");
            r.headers
                .push(("content-type".into(), "application/gzip".into()));
            r.headers.push(("x-cwd".into(), "/".into()));
            r.body = archive.to_vec();
            r
        };
        self.send_and_drain("writing files", &build)
    }

    /// `POST .../fs/read`: the file's bytes, None when it does not exist.
    pub fn read_file(&self, session: &str, file: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/fs/read"), &[]);
        let body = json!({ "path": file });
        let what = format!("reading {file}");
        match self.send(
            &what,
            &|| self.request(Method::Post, path.clone(), Some(body.clone()), false),
            true,
        ) {
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
            Ok(mut r) => {
                let ct = r.header("content-type").unwrap_or("").to_string();
                if !ct.contains("application/octet-stream") {
                    return Err(ApiError::protocol(format!(
                        "{what}: expected application/octet-stream, got `{ct}`"
                    )));
                }
                r.read_all()
                    .map(Some)
                    .map_err(|e| ApiError::transport(&what, e))
            }
        }
    }

    /// `POST .../fs/mkdir` (one level).
    pub fn mkdir(&self, session: &str, dir: &str) -> Result<()> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/fs/mkdir"), &[]);
        let body = json!({ "path": dir });
        self.send_and_drain(&format!("creating directory {dir}"), &|| {
            self.request(Method::Post, path.clone(), Some(body.clone()), false)
        })
    }

    /// `POST .../stop`: blocks until the session stopped. A session that is
    /// already gone counts as stopped.
    pub fn stop(&self, session: &str) -> Result<()> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/stop"), &[]);
        match self.send_and_drain("stopping the sandbox", &|| {
            self.request(Method::Post, path.clone(), None, false)
        }) {
            Err(e) if e.kind == ErrorKind::Gone => Ok(()),
            done => done,
        }
    }

    /// `POST .../extend-timeout {duration}` (ms).
    pub fn extend_timeout(&self, session: &str, duration_ms: u64) -> Result<()> {
        let path = self.path(
            &format!("/v2/sandboxes/sessions/{session}/extend-timeout"),
            &[],
        );
        let body = json!({ "duration": duration_ms });
        self.send_and_drain("extending the sandbox's timeout", &|| {
            self.request(Method::Post, path.clone(), Some(body.clone()), false)
        })
    }

    /// `POST /v2/sandboxes/sessions/{id}/snapshot`: the session's
    /// filesystem kept as a snapshot, whose id is returned. The session
    /// stops with it.
    pub fn snapshot(&self, session: &str) -> Result<String> {
        let path = self.path(&format!("/v2/sandboxes/sessions/{session}/snapshot"), &[]);
        // Twice would keep two: no retry on a lost connection.
        let response = self.send(
            "keeping the sandbox as a snapshot",
            &|| self.request(Method::Post, path.clone(), None, false),
            false,
        )?;
        let v = self.json("keeping the sandbox as a snapshot", response)?;
        v["snapshot"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::protocol(format!(
                    "keeping the sandbox as a snapshot: unexpected answer {}",
                    clip(&v.to_string())
                ))
            })
    }

    /// `DELETE /v2/sandboxes/snapshots/{id}`; gone already is fine.
    pub fn delete_snapshot(&self, id: &str) -> Result<()> {
        let path = self.path(&format!("/v2/sandboxes/snapshots/{}", encode(id)), &[]);
        match self.send_and_drain("removing the snapshot", &|| {
            self.request(Method::Delete, path.clone(), None, false)
        }) {
            Err(e) if e.status == Some(404) => Ok(()),
            done => done,
        }
    }

    /// `DELETE /v2/sandboxes/{name}?projectId=`; gone already is fine.
    pub fn delete(&self, name: &str) -> Result<()> {
        let path = self.path(
            &format!("/v2/sandboxes/{}", encode(name)),
            &[("projectId", &self.creds.project_id)],
        );
        match self.send_and_drain("deleting the sandbox", &|| {
            self.request(Method::Delete, path.clone(), None, false)
        }) {
            Err(e) if e.status == Some(404) => Ok(()),
            done => done,
        }
    }

    /// `GET /v2/sandboxes?project=&tags=k:v`, page by page (following
    /// `pagination.next` as the cursor): names, sessions and statuses.
    pub fn list_by_tag(&self, key: &str, value: &str) -> Result<Vec<(String, String, String)>> {
        let tag = format!("{key}:{value}");
        let what = "listing sandboxes";
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded: a cursor that never ends is the API's fault, not a loop.
        for _ in 0..100 {
            let mut query = vec![("project", self.creds.project_id.as_str()), ("tags", &tag)];
            if let Some(c) = &cursor {
                query.push(("cursor", c));
            }
            let path = self.path("/v2/sandboxes", &query);
            let r = self.send(
                what,
                &|| self.request(Method::Get, path.clone(), None, false),
                true,
            )?;
            let v = self.json(what, r)?;
            found.extend(v["sandboxes"].as_array().into_iter().flatten().map(|s| {
                let f = |k: &str| s[k].as_str().unwrap_or("").to_string();
                (f("name"), f("currentSessionId"), f("status"))
            }));
            match v["pagination"]["next"].as_str() {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => return Ok(found),
            }
        }
        Err(ApiError::protocol(format!(
            "{what}: Vercel kept answering with another page after 100"
        )))
    }
}

fn parse_created(v: &Value) -> Option<Created> {
    let session = &v["session"];
    let sandbox = &v["sandbox"];
    Some(Created {
        name: sandbox["name"].as_str()?.to_string(),
        session_id: session["id"]
            .as_str()
            .or_else(|| sandbox["currentSessionId"].as_str())?
            .to_string(),
        status: session["status"].as_str().unwrap_or("pending").to_string(),
        cwd: session["cwd"]
            .as_str()
            .or_else(|| sandbox["cwd"].as_str())
            .unwrap_or("/vercel/sandbox")
            .to_string(),
    })
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

pub use sanddune_cloud_http::transport::encode;
