//! The transport of the component: `wasi:http/outgoing-handler`, which the
//! host allows to the granted origin only.

use std::time::Duration;

use crate::bindings::wasi::clocks::monotonic_clock;
use crate::bindings::wasi::http::outgoing_handler;
use crate::bindings::wasi::http::types::{
    ErrorCode, Fields, IncomingBody, IncomingResponse, Method as WasiMethod, OutgoingBody,
    OutgoingRequest, RequestOptions, Scheme,
};
use crate::bindings::wasi::io::streams::{InputStream, StreamError};
use crate::transport::{BaseUrl, Body, Method, Request, Response, Transport, TransportError};

pub struct WasiHttp;

/// A command may stay silent for a long time (an agent thinking): its
/// stream gets this long between bytes, not the host's default.
const STREAM_IDLE: Duration = Duration::from_secs(6 * 3600);

fn error(code: ErrorCode) -> TransportError {
    match code {
        ErrorCode::HttpRequestDenied => TransportError::Denied("the origin is not granted".into()),
        ErrorCode::InternalError(Some(m)) if m.contains("cancelled") => {
            TransportError::Cancelled(m)
        }
        other => TransportError::Network(format!("{other:?}")),
    }
}

struct WasiBody {
    // Field order matters: the stream must drop before its body.
    stream: Option<InputStream>,
    _body: Option<IncomingBody>,
    _response: IncomingResponse,
}

impl Body for WasiBody {
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) if chunk.is_empty() => continue,
                Ok(chunk) => return Ok(Some(chunk)),
                Err(StreamError::Closed) => {
                    self.stream = None;
                    return Ok(None);
                }
                Err(StreamError::LastOperationFailed(e)) => {
                    let text = e.to_debug_string();
                    self.stream = None;
                    return Err(if text.contains("cancelled") {
                        TransportError::Cancelled(text)
                    } else {
                        TransportError::Network(format!("connection lost mid-response: {text}"))
                    });
                }
            }
        }
    }
}

impl Transport for WasiHttp {
    fn send(&self, base: &BaseUrl, request: Request) -> Result<Response, TransportError> {
        let fields = Fields::new();
        for (name, value) in &request.headers {
            fields
                .append(name, value.as_bytes())
                .map_err(|e| TransportError::Network(format!("header {name}: {e:?}")))?;
        }
        if !request.body.is_empty() || request.method == Method::Post {
            let _ = fields.append("content-length", request.body.len().to_string().as_bytes());
        }
        let outgoing = OutgoingRequest::new(fields);
        let method = match request.method {
            Method::Get => WasiMethod::Get,
            Method::Post => WasiMethod::Post,
            Method::Delete => WasiMethod::Delete,
        };
        let bad = |what: &str| TransportError::Network(format!("invalid request {what}"));
        outgoing.set_method(&method).map_err(|()| bad("method"))?;
        let scheme = if base.scheme == "http" {
            Scheme::Http
        } else {
            Scheme::Https
        };
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("scheme"))?;
        outgoing
            .set_authority(Some(&base.authority))
            .map_err(|()| bad("authority"))?;
        outgoing
            .set_path_with_query(Some(&request.path))
            .map_err(|()| bad("path"))?;
        let body = outgoing.body().map_err(|()| bad("body"))?;
        let options = if request.streaming {
            let o = RequestOptions::new();
            let ns = STREAM_IDLE.as_nanos() as u64;
            let _ = o.set_first_byte_timeout(Some(ns));
            let _ = o.set_between_bytes_timeout(Some(ns));
            Some(o)
        } else {
            None
        };
        let pending = outgoing_handler::handle(outgoing, options).map_err(error)?;
        {
            let stream = body.write().map_err(|()| bad("body stream"))?;
            for chunk in request.body.chunks(4096) {
                stream.blocking_write_and_flush(chunk).map_err(|e| {
                    TransportError::Network(format!("sending the request body: {e:?}"))
                })?;
            }
        }
        OutgoingBody::finish(body, None).map_err(error)?;
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(error(code)),
            _ => return Err(TransportError::Network("no response".into())),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let incoming = response.consume().map_err(|()| bad("response body"))?;
        let stream = incoming.stream().map_err(|()| bad("response stream"))?;
        Ok(Response {
            status,
            headers,
            body: Box::new(WasiBody {
                stream: Some(stream),
                _body: Some(incoming),
                _response: response,
            }),
        })
    }

    fn sleep(&self, duration: Duration) {
        monotonic_clock::subscribe_duration(duration.as_nanos() as u64).block();
    }
}
