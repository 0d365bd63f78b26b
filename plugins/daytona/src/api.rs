//! The Daytona API (`/sandbox`) and a sandbox's toolbox API (`process/...`,
//! `files/...`): request building, error mapping and bounded retries, over
//! the `Transport` seam. Facts: docs/reference/protocols.md, "Daytona REST API".

use std::time::Duration;

use sanddune_cloud_http::retry::{self, Decision, Outcome};
use sanddune_cloud_http::transport::{
    BaseUrl, Method, Request, Response, Transport, TransportError, encode,
};
use serde_json::{Value, json};

use crate::config::Credentials;
use crate::multipart;

/// The toolbox keeps stdout and stderr apart (and answers logs as JSON)
/// only for callers naming an SDK version from 0.167 on: this is the one
/// the provider's requests were read from.
pub const SDK_VERSION: &str = "0.190.0";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 401: the credentials were rejected.
    Unauthorized,
    /// 403: the key may not do this.
    Forbidden,
    /// 404 / 410: the sandbox, session, command or file is gone.
    Gone,
    /// 409: a state change is in progress, or the thing exists already.
    Conflict,
    /// 400 / 422: the request was refused as it stands.
    Refused,
    RateLimited,
    Server,
    OtherStatus,
    Network,
    Denied,
    Cancelled,
    /// The answer is not what the protocol says.
    Protocol,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub type Result<T> = std::result::Result<T, ApiError>;

impl ApiError {
    pub fn protocol(message: String) -> Self {
        ApiError {
            kind: ErrorKind::Protocol,
            status: None,
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
            message: format!("Daytona, {what}: {e}"),
        }
    }

    /// The server answered `status` with `body`: the API's
    /// `{statusCode, message, error}` or the toolbox's `{statusCode,
    /// message, code, ...}`.
    fn from_status(
        what: &str,
        status: u16,
        body: &[u8],
        retry_after: Option<u64>,
        creds: &Credentials,
    ) -> Self {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        let server = parsed
            .as_ref()
            .and_then(|v| match &v["message"] {
                Value::String(s) => Some(s.clone()),
                Value::Array(a) => Some(
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                _ => None,
            })
            .or_else(|| {
                let text = String::from_utf8_lossy(body).trim().to_string();
                (!text.is_empty() && parsed.is_none()).then(|| clip(&text))
            });
        let said = server.map(|m| format!(" ({m})")).unwrap_or_default();
        let (kind, text) = match status {
            401 => (
                ErrorKind::Unauthorized,
                format!(
                    "Daytona rejected the credentials (401){said}: check {}",
                    creds.variable()
                ),
            ),
            403 => (
                ErrorKind::Forbidden,
                match creds.organization() {
                    None => format!(
                        "Daytona refused access (403){said}: the key in DAYTONA_API_KEY may not do this (its permissions, or its organization's quota)"
                    ),
                    Some(_) => format!(
                        "Daytona refused access (403){said}: DAYTONA_JWT_TOKEN may not act for the organization DAYTONA_ORGANIZATION_ID, or may not do this"
                    ),
                },
            ),
            404 => (ErrorKind::Gone, format!("not found (404){said}")),
            410 => (ErrorKind::Gone, format!("gone (410){said}")),
            409 => (ErrorKind::Conflict, format!("Daytona answered 409{said}")),
            400 | 422 => (
                ErrorKind::Refused,
                format!("Daytona refused the request ({status}){said}"),
            ),
            429 => (
                ErrorKind::RateLimited,
                match retry_after {
                    Some(s) => format!(
                        "Daytona rate-limited the request (429){said}; it asks to retry after {s} s"
                    ),
                    None => format!("Daytona rate-limited the request (429){said}"),
                },
            ),
            500..=599 => (
                ErrorKind::Server,
                format!("the Daytona API failed ({status}){said}"),
            ),
            _ => (
                ErrorKind::OtherStatus,
                format!("the Daytona API answered {status}{said}"),
            ),
        };
        ApiError {
            kind,
            status: Some(status),
            message: format!("{what}: {text}"),
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Which of the two APIs a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Api,
    Toolbox,
}

/// What a sandbox looks like to the provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxInfo {
    pub id: String,
    pub state: String,
    pub toolbox_proxy_url: String,
    pub error_reason: Option<String>,
}

fn sandbox_info(what: &str, v: &Value) -> Result<SandboxInfo> {
    let s = |k: &str| v[k].as_str().map(str::to_string);
    match (s("id"), s("toolboxProxyUrl")) {
        (Some(id), Some(toolbox_proxy_url)) => Ok(SandboxInfo {
            id,
            state: s("state").unwrap_or_default(),
            toolbox_proxy_url,
            error_reason: s("errorReason").filter(|r| !r.is_empty()),
        }),
        _ => Err(ApiError::protocol(format!(
            "{what}: the answer is not a sandbox: {}",
            clip(&v.to_string())
        ))),
    }
}

pub struct Api<T: Transport> {
    pub api: BaseUrl,
    /// The sandbox's toolbox: its `toolboxProxyUrl` + `/` + its id.
    pub toolbox: Option<BaseUrl>,
    creds: Credentials,
    pub transport: T,
}

enum Body {
    None,
    Json(Value),
    Raw(String, Vec<u8>),
}

impl<T: Transport> Api<T> {
    pub fn new(api: BaseUrl, creds: Credentials, transport: T) -> Self {
        Api {
            api,
            toolbox: None,
            creds,
            transport,
        }
    }

    fn base(&self, base: Base) -> &BaseUrl {
        match base {
            Base::Api => &self.api,
            Base::Toolbox => self
                .toolbox
                .as_ref()
                .expect("the toolbox is known once the sandbox exists"),
        }
    }

    fn request(&self, base: Base, method: Method, path: &str, body: &Body) -> Request {
        let mut headers = vec![
            (
                "authorization".to_string(),
                format!("Bearer {}", self.creds.bearer()),
            ),
            ("x-daytona-source".into(), "sanddune".into()),
            ("x-daytona-sdk-version".into(), SDK_VERSION.into()),
            ("x-daytona-split-output".into(), "true".into()),
            (
                "user-agent".into(),
                format!("sanddune-daytona/{}", env!("CARGO_PKG_VERSION")),
            ),
            ("accept".into(), "application/json".into()),
        ];
        if let Some(org) = self.creds.organization() {
            headers.push(("x-daytona-organization-id".into(), org.to_string()));
        }
        let bytes = match body {
            Body::None => vec![],
            Body::Json(v) => {
                headers.push(("content-type".into(), "application/json".into()));
                v.to_string().into_bytes()
            }
            Body::Raw(ct, data) => {
                headers.push(("content-type".into(), ct.clone()));
                data.clone()
            }
        };
        Request {
            method,
            path: format!("{}{path}", self.base(base).prefix),
            headers,
            body: bytes,
            streaming: false,
        }
    }

    /// Send with the shared retry policy; `idempotent` requests are also
    /// retried when the connection is lost. A non-2xx answer is an error.
    fn send(
        &self,
        what: &str,
        base: Base,
        method: Method,
        path: &str,
        body: Body,
        idempotent: bool,
    ) -> Result<Response> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let request = self.request(base, method, path, &body);
            let (decision, error) = match self.transport.send(self.base(base), request) {
                Ok(r) if (200..300).contains(&r.status) => return Ok(r),
                Ok(mut r) => {
                    let after = retry::retry_after(r.header("retry-after"));
                    let bytes = r.read_all().unwrap_or_default();
                    let error = ApiError::from_status(what, r.status, &bytes, after, &self.creds);
                    let outcome = Outcome::Status {
                        status: r.status,
                        retry_after: after,
                    };
                    (retry::decide(outcome, attempt), error)
                }
                Err(e @ TransportError::Network(_)) => (
                    retry::decide(Outcome::Network { idempotent }, attempt),
                    ApiError::transport(what, e),
                ),
                Err(e) => return Err(ApiError::transport(what, e)),
            };
            match decision {
                Decision::Retry(wait) => self.transport.sleep(wait),
                Decision::Fail if attempt > 1 => {
                    return Err(ApiError {
                        message: format!("{} (after {attempt} attempts)", error.message),
                        ..error
                    });
                }
                Decision::Fail => return Err(error),
            }
        }
    }

    fn json(&self, what: &str, mut response: Response) -> Result<Value> {
        let body = response
            .read_all()
            .map_err(|e| ApiError::transport(what, e))?;
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::protocol(format!(
                "{what}: Daytona answered with something that is not JSON: {e}"
            ))
        })
    }

    /// The answer's body read and dropped: for calls whose status is all.
    fn done(&self, what: &str, mut response: Response) -> Result<()> {
        response
            .read_all()
            .map(|_| ())
            .map_err(|e| ApiError::transport(what, e))
    }

    /// `POST /sandbox`. Never repeated on a lost connection: that could
    /// leave a second sandbox behind.
    pub fn create(&self, body: &Value) -> Result<SandboxInfo> {
        let what = "creating the sandbox";
        let r = self.send(
            what,
            Base::Api,
            Method::Post,
            "/sandbox",
            Body::Json(body.clone()),
            false,
        )?;
        sandbox_info(what, &self.json(what, r)?)
    }

    /// `GET /sandbox/{id}`.
    pub fn sandbox(&self, id: &str) -> Result<SandboxInfo> {
        let what = "reading the sandbox's state";
        let r = self.send(
            what,
            Base::Api,
            Method::Get,
            &format!("/sandbox/{}", encode(id)),
            Body::None,
            true,
        )?;
        sandbox_info(what, &self.json(what, r)?)
    }

    /// `GET /sandbox?labels={"k":"v"}`, page by page (`items`, followed
    /// by `nextCursor`): the sandboxes carrying the label.
    pub fn list_by_label(&self, key: &str, value: &str) -> Result<Vec<SandboxInfo>> {
        let what = "listing sandboxes";
        let labels = encode(&serde_json::json!({ key: value }).to_string());
        let mut found = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded: a cursor that never ends is the API's fault, not a loop.
        for _ in 0..100 {
            let page = match &cursor {
                Some(c) => format!("/sandbox?labels={labels}&cursor={}", encode(c)),
                None => format!("/sandbox?labels={labels}"),
            };
            let r = self.send(what, Base::Api, Method::Get, &page, Body::None, true)?;
            let v = self.json(what, r)?;
            let items = v["items"].as_array().ok_or_else(|| {
                ApiError::protocol(format!("{what}: Daytona's answer has no `items` list"))
            })?;
            for item in items {
                found.push(sandbox_info(what, item)?);
            }
            match v["nextCursor"].as_str() {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => return Ok(found),
            }
        }
        Err(ApiError::protocol(format!(
            "{what}: Daytona kept answering with another page after 100"
        )))
    }

    /// `POST /sandbox/{id}/snapshot {name}`: the sandbox's filesystem kept
    /// as a Daytona snapshot of that name. The sandbox is `snapshotting`
    /// until it is done. Not repeated on a lost connection.
    pub fn snapshot_sandbox(&self, id: &str, name: &str) -> Result<()> {
        let what = "keeping the sandbox as a snapshot";
        let r = self.send(
            what,
            Base::Api,
            Method::Post,
            &format!("/sandbox/{}/snapshot", encode(id)),
            Body::Json(serde_json::json!({ "name": name })),
            false,
        )?;
        self.done(what, r)
    }

    /// `GET /snapshots/{name}`: the snapshot's id and state, None when
    /// there is none of that name.
    pub fn snapshot(&self, name: &str) -> Result<Option<(String, String)>> {
        let what = "reading the snapshot";
        let r = match self.send(
            what,
            Base::Api,
            Method::Get,
            &format!("/snapshots/{}", encode(name)),
            Body::None,
            true,
        ) {
            Ok(r) => r,
            Err(e) if e.kind == ErrorKind::Gone => return Ok(None),
            Err(e) => return Err(e),
        };
        let v = self.json(what, r)?;
        match (v["id"].as_str(), v["state"].as_str()) {
            (Some(id), Some(state)) => Ok(Some((id.to_string(), state.to_string()))),
            _ => Err(ApiError::protocol(format!(
                "{what}: no id and state in {}",
                clip(&v.to_string())
            ))),
        }
    }

    /// `DELETE /snapshots/{id}` (an id, not a name); gone already is fine.
    pub fn delete_snapshot(&self, id: &str) -> Result<()> {
        let what = "removing the snapshot";
        match self.send(
            what,
            Base::Api,
            Method::Delete,
            &format!("/snapshots/{}", encode(id)),
            Body::None,
            true,
        ) {
            Ok(r) => self.done(what, r),
            Err(e) if e.kind == ErrorKind::Gone => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /sandbox/{id}/stop`; a sandbox that is gone counts as stopped.
    pub fn stop(&self, id: &str) -> Result<()> {
        let what = "stopping the sandbox";
        match self.send(
            what,
            Base::Api,
            Method::Post,
            &format!("/sandbox/{}/stop", encode(id)),
            Body::None,
            true,
        ) {
            Ok(r) => self.done(what, r),
            Err(e) if e.kind == ErrorKind::Gone => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `DELETE /sandbox/{id}`; gone already is fine. While a state change
    /// (the stop) is still in progress Daytona answers 409: wait for it,
    /// a bounded while.
    pub fn delete(&self, id: &str) -> Result<()> {
        let what = "deleting the sandbox";
        let mut conflicts = 0;
        loop {
            match self.send(
                what,
                Base::Api,
                Method::Delete,
                &format!("/sandbox/{}", encode(id)),
                Body::None,
                true,
            ) {
                Ok(r) => return self.done(what, r),
                Err(e) if e.kind == ErrorKind::Gone => return Ok(()),
                Err(e) if e.kind == ErrorKind::Conflict && conflicts < 30 => {
                    conflicts += 1;
                    self.transport.sleep(Duration::from_secs(1));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn toolbox_dir(&self, what: &str, path: &str) -> Result<String> {
        let r = self.send(what, Base::Toolbox, Method::Get, path, Body::None, true)?;
        let v = self.json(what, r)?;
        v["dir"]
            .as_str()
            .filter(|d| d.starts_with('/'))
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::protocol(format!("{what}: no dir in {}", clip(&v.to_string())))
            })
    }

    /// `GET /work-dir`: where the sandbox's commands start.
    pub fn work_dir(&self) -> Result<String> {
        self.toolbox_dir("reading the sandbox's work dir", "/work-dir")
    }

    /// `GET /user-home-dir`.
    pub fn home_dir(&self) -> Result<String> {
        self.toolbox_dir("reading the sandbox user's home", "/user-home-dir")
    }

    /// `POST /process/session {sessionId}`. A retry after a lost answer
    /// finds it made: 409 then means done.
    pub fn create_session(&self, session: &str) -> Result<()> {
        let what = "starting a command session";
        match self.send(
            what,
            Base::Toolbox,
            Method::Post,
            "/process/session",
            Body::Json(json!({ "sessionId": session })),
            true,
        ) {
            Ok(r) => self.done(what, r),
            Err(e) if e.kind == ErrorKind::Conflict => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `DELETE /process/session/{id}`: ends the session and kills what
    /// runs in it. A session that is gone is fine.
    pub fn delete_session(&self, session: &str) -> Result<()> {
        let what = "stopping a command (deleting its session)";
        match self.send(
            what,
            Base::Toolbox,
            Method::Delete,
            &format!("/process/session/{}", encode(session)),
            Body::None,
            true,
        ) {
            Ok(r) => self.done(what, r),
            Err(e) if e.kind == ErrorKind::Gone => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /process/session/{id}/exec {command, runAsync: true}` -> the
    /// command's id. Never repeated on a lost connection (it would run twice).
    pub fn exec(&self, session: &str, command: &str) -> Result<String> {
        let what = "running a command";
        let r = self.send(
            what,
            Base::Toolbox,
            Method::Post,
            &format!("/process/session/{}/exec", encode(session)),
            Body::Json(json!({ "command": command, "runAsync": true })),
            false,
        )?;
        let v = self.json(what, r)?;
        v["cmdId"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::protocol(format!("{what}: no cmdId in {}", clip(&v.to_string())))
            })
    }

    /// `GET /process/session/{id}/command/{cmd}`: its exit code, None while
    /// it runs.
    pub fn exit_code(&self, session: &str, cmd: &str) -> Result<Option<i32>> {
        let what = "reading a command's state";
        let r = self.send(
            what,
            Base::Toolbox,
            Method::Get,
            &format!(
                "/process/session/{}/command/{}",
                encode(session),
                encode(cmd)
            ),
            Body::None,
            true,
        )?;
        let v = self.json(what, r)?;
        if v["id"].as_str().is_none() {
            return Err(ApiError::protocol(format!(
                "{what}: not a command: {}",
                clip(&v.to_string())
            )));
        }
        Ok(v["exitCode"].as_i64().map(|c| c as i32))
    }

    /// `GET /process/session/{id}/command/{cmd}/logs`: the whole log so
    /// far, stream markers included (`output` of the JSON answer; a plain
    /// text answer is the log itself).
    pub fn logs(&self, session: &str, cmd: &str) -> Result<String> {
        let what = "reading a command's output";
        let mut r = self.send(
            what,
            Base::Toolbox,
            Method::Get,
            &format!(
                "/process/session/{}/command/{}/logs",
                encode(session),
                encode(cmd)
            ),
            Body::None,
            true,
        )?;
        let is_json = r
            .header("content-type")
            .is_some_and(|c| c.contains("application/json"));
        let body = r.read_all().map_err(|e| ApiError::transport(what, e))?;
        if !is_json {
            return Ok(String::from_utf8_lossy(&body).into_owned());
        }
        let v: Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::protocol(format!("{what}: the log is not the JSON it says: {e}"))
        })?;
        v["output"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::protocol(format!("{what}: no output in the answer")))
    }

    /// `POST /files/bulk-upload`: every file at its path, parents created.
    pub fn upload(&self, files: &[(&str, &[u8])]) -> Result<()> {
        let what = "uploading files";
        let (ct, body) = multipart::upload_body(files);
        let r = self.send(
            what,
            Base::Toolbox,
            Method::Post,
            "/files/bulk-upload",
            Body::Raw(ct, body),
            true,
        )?;
        self.done(what, r)
    }

    /// `GET /files/download?path=`: the bytes, None when there is no file.
    pub fn download(&self, path: &str) -> Result<Option<Vec<u8>>> {
        let what = format!("reading {path}");
        match self.send(
            &what,
            Base::Toolbox,
            Method::Get,
            &format!("/files/download?path={}", encode(path)),
            Body::None,
            true,
        ) {
            Ok(mut r) => r
                .read_all()
                .map(Some)
                .map_err(|e| ApiError::transport(&what, e)),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /files/folder?path=&mode=0755`: the directory and its parents.
    pub fn folder(&self, path: &str) -> Result<()> {
        let what = format!("creating directory {path}");
        let r = self.send(
            &what,
            Base::Toolbox,
            Method::Post,
            &format!("/files/folder?path={}&mode=0755", encode(path)),
            Body::None,
            true,
        )?;
        self.done(&what, r)
    }
}
