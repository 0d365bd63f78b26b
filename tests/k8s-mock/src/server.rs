//! The HTTP side: connections, the bearer token, authorization, routing,
//! and the pod and namespace calls.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::{Shared, api, exec, pods, sandboxes, status, table};

pub type Body = BoxBody<Bytes, Infallible>;

pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut stopped = shared.stopped.subscribe();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
            _ = stopped.wait_for(|s| *s) => return,
        };
        let shared = shared.clone();
        let mut stopped = shared.stopped.subscribe();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                _ = conn => {}
                _ = stopped.wait_for(|s| *s) => {}
            }
        });
    }
}

pub fn json_response(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap()
}

fn error((code, body): (u16, Value)) -> Response<Body> {
    json_response(code, &body)
}

/// `key`'s first value in the query string, percent-decoded.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query_params(query, key).into_iter().next()
}

/// Every value of `key` in the query string (exec's `command` repeats).
pub fn query_params(query: &str, key: &str) -> Vec<String> {
    query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k) == key).then(|| decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A boolean parameter as the API parses it (the Python client sends
/// `True`).
pub fn is_true(query: &str, key: &str) -> bool {
    query_param(query, key).is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let token = shared.state.lock().unwrap().token.clone();
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == token);
    if !authorized {
        return json_response(401, &status::unauthorized());
    }
    let path = req.uri().path().trim_end_matches('/').to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let method = req.method().clone();
    let accept = req
        .headers()
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .map(str::to_string);
    match (segments.as_slice(), method.clone()) {
        (["version"], Method::GET) => {
            let minor = shared.state.lock().unwrap().release_minor;
            json_response(200, &api::version(minor))
        }
        (["api"], Method::GET) => json_response(200, &api::api_versions()),
        (["apis"], Method::GET) => json_response(200, &api::api_groups()),
        (["apis", group, version], Method::GET) => match sandboxes::resources(group) {
            Some(list) if *version == sandboxes::VERSION => json_response(200, &list),
            _ => json_response(404, &status::no_route()),
        },
        (["apis", group, version, "namespaces", ns, plural], _)
        | (["apis", group, version, "namespaces", ns, plural, _], _) => {
            let Some(kind) = sandboxes::kind(group, version, plural) else {
                return json_response(404, &status::no_route());
            };
            let ns = ns.to_string();
            let name = segments.get(6).map(|n| n.to_string());
            custom_object(&shared, kind, &ns, name.as_deref(), &query, req).await
        }
        (["api", "v1"], Method::GET) => json_response(200, &api::core_v1_resources()),
        (["openapi", "v3"], Method::GET) => json_response(200, &api::openapi_v3_root()),
        (["openapi", "v3", "api", "v1"], Method::GET) => {
            json_response(200, &api::openapi_v3_core())
        }
        (["openapi", "v3", "apis", group, _], Method::GET) => {
            json_response(200, &api::openapi_v3_group(group))
        }
        (["api", "v1", "namespaces"], Method::GET) => {
            let st = shared.state.lock().unwrap();
            let items: Vec<Value> = st.namespaces.values().cloned().collect();
            json_response(200, &list("NamespaceList", st.rv, items))
        }
        (["api", "v1", "namespaces", ns], Method::GET) => {
            let st = shared.state.lock().unwrap();
            match st.namespaces.get(*ns) {
                Some(n) => json_response(200, n),
                None => json_response(404, &status::not_found("namespaces", ns)),
            }
        }
        (["api", "v1", "pods"], Method::GET) => {
            read_pods(&shared, None, &query, accept.as_deref()).await
        }
        (["api", "v1", "namespaces", ns, "pods"], _) => {
            let ns = ns.to_string();
            match method {
                Method::GET => {
                    let verb = if is_true(&query, "watch") {
                        "watch"
                    } else {
                        "list"
                    };
                    if let Some(denied) = forbidden(&shared, verb, ("", "pods"), None, None, &ns) {
                        return denied;
                    }
                    read_pods(&shared, Some(&ns), &query, accept.as_deref()).await
                }
                Method::POST => {
                    if let Some(denied) =
                        forbidden(&shared, "create", ("", "pods"), None, None, &ns)
                    {
                        return denied;
                    }
                    create_pod(&shared, &ns, req).await
                }
                _ => json_response(405, &status::method_not_allowed()),
            }
        }
        (["api", "v1", "namespaces", ns, "pods", name], _)
        | (["api", "v1", "namespaces", ns, "pods", name, "status"], _) => {
            let (ns, name) = (ns.to_string(), name.to_string());
            let verb = match method {
                Method::GET => "get",
                Method::DELETE => "delete",
                _ => return json_response(405, &status::method_not_allowed()),
            };
            if let Some(denied) = forbidden(&shared, verb, ("", "pods"), None, Some(&name), &ns) {
                return denied;
            }
            if method == Method::DELETE {
                return delete_pod(&shared, &ns, &name).await;
            }
            let st = shared.state.lock().unwrap();
            match st.pods.get(&(ns, name.clone())) {
                Some(p) if table::wanted(accept.as_deref()) => json_response(
                    200,
                    &table::pods(
                        std::slice::from_ref(&p.object),
                        st.rv,
                        crate::time::unix_now(),
                    ),
                ),
                Some(p) => json_response(200, &p.object),
                None => json_response(404, &status::not_found("pods", &name)),
            }
        }
        (["api", "v1", "namespaces", ns, "pods", name, "exec"], Method::GET | Method::POST) => {
            let (ns, name) = (ns.to_string(), name.to_string());
            let denied = forbidden(
                &shared,
                "create",
                ("", "pods"),
                Some("exec"),
                Some(&name),
                &ns,
            );
            if let Some(denied) = denied {
                return denied;
            }
            exec::upgrade(shared, &ns, &name, &query, req)
        }
        _ => json_response(404, &status::no_route()),
    }
}

/// The agent-sandbox objects: create, get, list, watch, delete.
async fn custom_object(
    shared: &Arc<Shared>,
    kind: &'static sandboxes::Kind,
    ns: &str,
    name: Option<&str>,
    query: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let resource = format!("{}.{}", kind.plural, kind.group);
    let verb = match (req.method(), name) {
        (&Method::POST, _) => "create",
        (&Method::GET, None) if is_true(query, "watch") => "watch",
        (&Method::GET, None) => "list",
        (&Method::GET, Some(_)) => "get",
        (&Method::DELETE, _) => "delete",
        _ => "",
    };
    let target = (kind.group, kind.plural);
    if let Some(denied) = forbidden(shared, verb, target, None, name, ns) {
        return denied;
    }
    match (req.method().clone(), name) {
        (Method::POST, None) => {
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return json_response(
                        400,
                        &status::bad_request(format!("reading the body: {e}")),
                    );
                }
            };
            match serde_json::from_slice(&body) {
                Ok(body) => match sandboxes::create(shared, kind, ns, body) {
                    Ok(object) => json_response(201, &object),
                    Err(e) => error(e),
                },
                Err(e) => json_response(
                    400,
                    &status::bad_request(format!("the body is not a JSON object: {e}")),
                ),
            }
        }
        (Method::GET, None) => {
            let filter = match Filter::new(kind.kind, Some(ns), query) {
                Ok(f) => f,
                Err(e) => return error(e),
            };
            if is_true(query, "watch") {
                return watch(shared.clone(), filter, query, false);
            }
            let st = shared.state.lock().unwrap();
            let items = st
                .objects
                .values()
                .filter(|o| filter.matches(o))
                .cloned()
                .collect();
            json_response(200, &list(&format!("{}List", kind.kind), st.rv, items))
        }
        (Method::GET, Some(name)) => {
            let st = shared.state.lock().unwrap();
            let key = (kind.plural.to_string(), ns.to_string(), name.to_string());
            match st.objects.get(&key) {
                Some(o) => json_response(200, o),
                None => json_response(404, &status::not_found(&resource, name)),
            }
        }
        (Method::DELETE, Some(name)) => match sandboxes::delete(shared, kind, ns, name).await {
            Some(o) => json_response(200, &o),
            None => json_response(404, &status::not_found(&resource, name)),
        },
        _ => json_response(405, &status::method_not_allowed()),
    }
}

/// The 403 for `verb` on the resource (`pods`, `pods/exec`, or an
/// agent-sandbox plural in its group) when a test forbade it.
fn forbidden(
    shared: &Shared,
    verb: &str,
    (group, resource): (&str, &str),
    subresource: Option<&str>,
    name: Option<&str>,
    namespace: &str,
) -> Option<Response<Body>> {
    let full = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    let st = shared.state.lock().unwrap();
    st.forbidden
        .iter()
        .any(|(v, r)| v == verb && *r == full)
        .then(|| {
            json_response(
                403,
                &status::forbidden(
                    crate::USER,
                    verb,
                    (group, resource),
                    subresource,
                    name,
                    namespace,
                ),
            )
        })
}

fn list(kind: &str, rv: u64, items: Vec<Value>) -> Value {
    json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

/// The selectors of a list or watch, checked as the API checks them.
struct Filter {
    kind: &'static str,
    namespace: Option<String>,
    labels: Vec<pods::Requirement>,
    fields: String,
}

impl Filter {
    fn new(
        kind: &'static str,
        namespace: Option<&str>,
        query: &str,
    ) -> Result<Filter, (u16, Value)> {
        let labels = pods::parse_selector(&query_param(query, "labelSelector").unwrap_or_default())
            .map_err(|e| (400, status::bad_request(e)))?;
        let fields = query_param(query, "fieldSelector").unwrap_or_default();
        pods::field_matches(&fields, &json!({})).map_err(|e| (400, status::bad_request(e)))?;
        Ok(Filter {
            kind,
            namespace: namespace.map(str::to_string),
            labels,
            fields,
        })
    }

    fn matches(&self, pod: &Value) -> bool {
        pod["kind"] == self.kind
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| pod["metadata"]["namespace"] == ns)
            && pods::matches(&self.labels, &pod["metadata"]["labels"])
            && pods::field_matches(&self.fields, pod).unwrap_or(false)
    }
}

async fn read_pods(
    shared: &Arc<Shared>,
    namespace: Option<&str>,
    query: &str,
    accept: Option<&str>,
) -> Response<Body> {
    let filter = match Filter::new("Pod", namespace, query) {
        Ok(f) => f,
        Err(e) => return error(e),
    };
    if is_true(query, "watch") {
        return watch(shared.clone(), filter, query, table::wanted(accept));
    }
    let st = shared.state.lock().unwrap();
    let items = st
        .pods
        .values()
        .map(|p| p.object.clone())
        .filter(|p| filter.matches(p))
        .collect::<Vec<_>>();
    if table::wanted(accept) {
        return json_response(200, &table::pods(&items, st.rv, crate::time::unix_now()));
    }
    json_response(200, &list("PodList", st.rv, items))
}

/// A watch: one JSON event per line, from `resourceVersion` on (or the
/// current pods as ADDED first when there is none), until
/// `timeoutSeconds`, the client leaves, or the mock stops.
fn watch(shared: Arc<Shared>, filter: Filter, query: &str, as_table: bool) -> Response<Body> {
    let from = query_param(query, "resourceVersion")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|v| *v != 0);
    let timeout = query_param(query, "timeoutSeconds")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let mut changed = shared.changed.subscribe();
    let mut stopped = shared.stopped.subscribe();
    let mut initial = Vec::new();
    let mut seen = {
        let st = shared.state.lock().unwrap();
        match from {
            Some(rv) => rv,
            None => {
                let pods = st.pods.values().map(|p| p.object.clone());
                initial = pods
                    .chain(st.objects.values().cloned())
                    .map(|o| ("ADDED", o))
                    .collect();
                st.rv
            }
        }
    };
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        // Each object a one-row Table when kubectl asked for Tables.
        let line = |kind: &str, object: &Value| {
            let object = match as_table && object["kind"] == "Pod" {
                true => table::pods(std::slice::from_ref(object), 0, crate::time::unix_now()),
                false => object.clone(),
            };
            Bytes::from(format!("{}\n", json!({"type": kind, "object": object})))
        };
        for (kind, object) in initial.iter().filter(|(_, o)| filter.matches(o)) {
            if tx.send(line(kind, object)).await.is_err() {
                return;
            }
        }
        loop {
            let events: Vec<_> = {
                let st = shared.state.lock().unwrap();
                st.events.iter().filter(|e| e.rv > seen).cloned().collect()
            };
            for e in events {
                seen = e.rv;
                if filter.matches(&e.object) && tx.send(line(e.kind, &e.object)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = &mut deadline => return,
                _ = stopped.wait_for(|s| *s) => return,
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(StreamBody::new(stream).boxed())
        .unwrap()
}

async fn create_pod(shared: &Arc<Shared>, ns: &str, req: Request<Incoming>) -> Response<Body> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return json_response(400, &status::bad_request(format!("reading the body: {e}")));
        }
    };
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return json_response(
                400,
                &status::bad_request(format!("the body is not a JSON object: {e}")),
            );
        }
    };
    let mut st = shared.state.lock().unwrap();
    match pods::create(shared, &mut st, ns, body) {
        Ok(pod) => json_response(201, &pod),
        Err(e) => error(e),
    }
}

/// Delete at once, whatever the grace period: the container is removed
/// and the last state of the pod (with its deletionTimestamp) returned.
async fn delete_pod(shared: &Arc<Shared>, ns: &str, name: &str) -> Response<Body> {
    match pods::delete(shared, ns, name).await {
        Some(object) => json_response(200, &object),
        None => json_response(404, &status::not_found("pods", name)),
    }
}
