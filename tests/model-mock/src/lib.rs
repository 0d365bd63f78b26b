//! A scripted loopback mock of the model APIs the agent CLIs speak, so
//! sanddune's tests can run each real CLI end to end (docs/reference/protocols.md).
//!
//! The script is one exchange: a request whose last message carries no tool
//! result yet gets a call of the CLI's shell tool running [`SHELL_COMMAND`]
//! (a plain `git commit`); once the tool result is there, the answer is text
//! ending in [`COMPLETION_SIGNAL`]. Each response reports usage of its own
//! ([`Usage::nth`]), and the mock records every request and the usage it
//! answered, so a test compares what sanddune reports with what was sent.
//! Faults ([`Fault`]) make it answer the way the real APIs fail.
//!
//! One module per API, each serving its paths from [`ROUTES`].

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use serde_json::Value;

pub mod anthropic;
pub mod gemini;
pub mod openai;

/// What the scripted model asks the shell tool to run: a new line in
/// `agent.txt`, committed with a plain `git commit` (whatever identity git
/// finds), so every run adds one commit.
pub const SHELL_COMMAND: &str = r#"echo "line $(date +%s%N)" >> agent.txt && git add agent.txt && git commit -q -m "agent: add line""#;

/// The commit message of [`SHELL_COMMAND`].
pub const COMMIT_MESSAGE: &str = "agent: add line";

pub const COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

/// The final answer once the tool has run.
pub const FINAL_TEXT: &str = "Added the line and committed it. <promise>COMPLETE</promise>";

/// The final answer under [`Fault::NeverComplete`].
pub const UNFINISHED_TEXT: &str = "Added the line; there is more to do.";

/// Token counts one response reported, in the API's own terms mapped to
/// one shape: fresh input, output, cache reads and cache writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// The usage of the mock's `n`th answer (from 1): every field and every
    /// answer distinct, so a sum or a field taken for another shows.
    pub fn nth(n: u64) -> Usage {
        Usage {
            input: 100 * n + 11,
            output: 10 * n + 7,
            cache_read: 1000 * n + 5,
            cache_write: 20 * n + 3,
        }
    }

    pub fn total(usages: &[Usage]) -> Usage {
        usages.iter().fold(Usage::default(), |a, u| Usage {
            input: a.input + u.input,
            output: a.output + u.output,
            cache_read: a.cache_read + u.cache_read,
            cache_write: a.cache_write + u.cache_write,
        })
    }
}

/// How the mock misbehaves, as the real APIs do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every model request is refused 401 with the API's authentication
    /// error body.
    Unauthorized,
    /// The next model request is answered 429 with `retry-after` seconds.
    RateLimited { retry_after: u64 },
    /// The next streamed answer stops half-way: the API's error event
    /// after part of the answer (status 200 is already sent).
    ServerErrorMidStream,
    /// Every final answer leaves the completion signal out.
    NeverComplete,
}

impl Fault {
    fn persists(&self) -> bool {
        matches!(self, Fault::Unauthorized | Fault::NeverComplete)
    }
}

/// One request as the mock saw it, and what it answered.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (Null when there was none or it was not JSON).
    pub body: Value,
    pub status: u16,
    /// The usage the answer reported, if it reported any.
    pub usage: Option<Usage>,
    /// The answer asked for a shell tool call.
    pub tool_call: bool,
}

#[derive(Default)]
struct State {
    faults: Vec<Fault>,
    exchanges: Vec<Exchange>,
    /// Answers that reported usage so far.
    answers: u64,
    /// Ids handed out so far (tool calls, messages).
    ids: u64,
}

type Shared = Arc<Mutex<State>>;

pub type Body = BoxBody<Bytes, std::io::Error>;

/// One request, as a route's handler gets it.
pub struct Call {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
    state: Shared,
}

impl Call {
    /// The fault this request meets: a lasting one, or the next one-shot
    /// one (taken). `streaming` says whether a mid-stream fault can apply.
    pub fn fault(&self, streaming: bool) -> Option<Fault> {
        let mut st = self.state.lock().unwrap();
        let i = st.faults.iter().position(|f| match f {
            Fault::Unauthorized | Fault::RateLimited { .. } => true,
            Fault::ServerErrorMidStream => streaming,
            Fault::NeverComplete => false,
        })?;
        let fault = st.faults[i].clone();
        if !fault.persists() {
            st.faults.remove(i);
        }
        Some(fault)
    }

    pub fn never_complete(&self) -> bool {
        self.state
            .lock()
            .unwrap()
            .faults
            .contains(&Fault::NeverComplete)
    }

    /// The usage the next answer reports.
    pub fn next_usage(&self) -> Usage {
        let mut st = self.state.lock().unwrap();
        st.answers += 1;
        Usage::nth(st.answers)
    }

    /// A fresh id with `prefix`, e.g. `toolu_mock_3`.
    pub fn next_id(&self, prefix: &str) -> String {
        let mut st = self.state.lock().unwrap();
        st.ids += 1;
        format!("{prefix}_{}", st.ids)
    }
}

/// A handler's answer: the response and what the mock records of it.
pub struct Reply {
    pub response: Response<Body>,
    pub usage: Option<Usage>,
    pub tool_call: bool,
}

impl Reply {
    pub fn plain(response: Response<Body>) -> Reply {
        Reply {
            response,
            usage: None,
            tool_call: false,
        }
    }
}

type Handler = fn(&Call) -> Reply;

/// Method, path, handler: every API the mock speaks. A `*` in a path
/// stands for one path segment's part (the model in Gemini's paths).
const ROUTES: &[(&str, &str, Handler)] = &[
    ("POST", "/v1/messages", anthropic::messages),
    ("POST", "/v1/messages/count_tokens", anthropic::count_tokens),
    ("GET", "/v1/responses", openai::responses_websocket),
    ("POST", "/v1/responses", openai::responses),
    ("POST", "/v1/chat/completions", openai::chat_completions),
    (
        "POST",
        "/v1beta/models/*:streamGenerateContent",
        gemini::stream_generate_content,
    ),
];

/// Whether `path` is `pattern`, whose `*` matches anything without a `/`.
fn matches(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == path,
        Some((before, after)) => path
            .strip_prefix(before)
            .and_then(|rest| rest.strip_suffix(after))
            .is_some_and(|middle| !middle.is_empty() && !middle.contains('/')),
    }
}

pub struct ModelMock {
    url: String,
    state: Shared,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ModelMock {
    /// Start on `127.0.0.1` at a free port, serving from its own threads.
    pub fn start() -> ModelMock {
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
        let s = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let s = s.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, Infallible>(handle(s, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        ModelMock {
            url,
            state,
            runtime: Some(runtime),
        }
    }

    /// `http://127.0.0.1:PORT`, with no path: each CLI appends its own.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn inject(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push(fault);
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state.lock().unwrap().exchanges.clone()
    }

    /// The usage of every answer that reported one, in order.
    pub fn usages(&self) -> Vec<Usage> {
        self.exchanges().iter().filter_map(|e| e.usage).collect()
    }
}

impl Drop for ModelMock {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// A whole body at once.
pub fn full(status: u16, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::builder().status(status);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    )
    .unwrap()
}

/// A 200 body sent as `chunks`, one write each (an event stream).
pub fn streamed(headers: &[(&str, &str)], chunks: Vec<String>) -> Response<Body> {
    let stream = futures_util::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, std::io::Error>(Frame::data(Bytes::from(c)))),
    );
    let mut r = Response::builder().status(200);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(BodyExt::boxed(StreamBody::new(stream))).unwrap()
}

async fn handle(state: Shared, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let headers: BTreeMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let call = Call {
        method,
        path,
        headers,
        body,
        state: state.clone(),
    };
    let route = ROUTES
        .iter()
        .find(|(m, p, _)| *m == call.method && matches(p, &call.path));
    let reply = match route {
        Some((_, _, handler)) => handler(&call),
        None => Reply::plain(full(
            404,
            &[("content-type", "application/json")],
            format!(
                r#"{{"type":"error","error":{{"type":"not_found_error","message":"{} {} is not served by the model mock"}}}}"#,
                call.method, call.path
            ),
        )),
    };
    state.lock().unwrap().exchanges.push(Exchange {
        method: call.method,
        path: call.path,
        headers: call.headers,
        body: call.body,
        status: reply.response.status().as_u16(),
        usage: reply.usage,
        tool_call: reply.tool_call,
    });
    reply.response
}
