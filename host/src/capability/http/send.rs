//! Sending one checked request: connect to exactly the addresses the policy
//! approved (never resolving the name a second time, so a DNS answer cannot
//! change between the check and the connection), with timeouts, a response
//! body cap and cancellation.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

use super::policy::{Host, Origin, Scheme};
use super::{BoxFuture, HttpLimits, Registration, cancelled};

/// What keeps watching a request after its response arrived.
pub(super) struct Watch {
    pub cancel: CancellationToken,
    pub registration: Arc<Registration>,
    /// Called once when the response body passes the cap, with the cap.
    pub on_cap: Box<dyn Fn(u64) + Send + Sync>,
}

/// The addresses `origin`'s host resolves to (an address literal is itself).
pub(super) async fn resolve(origin: &Origin, timeout: Duration) -> Result<Vec<IpAddr>, Error> {
    let name = match &origin.host {
        Host::Ip(ip) => return Ok(vec![*ip]),
        Host::Name(name) => name.as_str(),
    };
    let found = tokio::time::timeout(timeout, tokio::net::lookup_host((name, origin.port)))
        .await
        .map_err(|_| Error::DnsTimeout)?
        .map_err(|e| Error::DnsError {
            rcode: Some(e.to_string()),
            info_code: None,
        })?;
    let addresses: Vec<IpAddr> = found.map(|a| a.ip()).collect();
    if addresses.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    Ok(addresses)
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Send `request` to `origin` over a connection to one of `addresses`.
pub(super) async fn exchange(
    mut request: http::Request<WasiBody>,
    origin: &Origin,
    addresses: &[IpAddr],
    limits: HttpLimits,
    watch: Watch,
) -> Result<(http::Response<WasiBody>, BoxFuture<()>), Error> {
    let tcp = tokio::time::timeout(limits.connect_timeout, connect(addresses, origin.port))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let stream: Box<dyn Stream> = match origin.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = match &origin.host {
                Host::Name(name) => rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| Error::InternalError(Some(e.to_string())))?,
                Host::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
            };
            let tls = tokio_rustls::TlsConnector::from(tls_config()?);
            let handshake = tls.connect(name, tcp);
            let tls = tokio::time::timeout(limits.connect_timeout, handshake)
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;

    // On the wire the request line carries only the path and query; the
    // Host header (set by wasi:http) names the origin.
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|e| Error::InternalError(Some(e.to_string())))?;

    // The connection must be driven while the response is awaited.
    let mut conn = Box::pin(conn);
    let mut conn_done = false;
    let response = tokio::time::timeout(limits.first_byte_timeout, sender.send_request(request));
    tokio::pin!(response);
    let response = loop {
        tokio::select! {
            r = &mut response => break r.map_err(|_| Error::ConnectionReadTimeout)??,
            r = &mut conn, if !conn_done => {
                conn_done = true;
                r?;
            }
        }
    };

    let cancel = watch.cancel.clone();
    let registration = watch.registration.clone();
    let io: BoxFuture<()> = Box::new(async move {
        let _registration = registration;
        if conn_done {
            return Ok(());
        }
        tokio::select! {
            () = cancel.cancelled() => Ok(()),
            r = conn => r.map_err(Error::from),
        }
    });
    let response = response.map(|body| {
        Guarded {
            between_bytes: limits.between_bytes_timeout,
            timer: Box::pin(tokio::time::sleep(limits.between_bytes_timeout)),
            cancelled: Box::pin(watch.cancel.clone().cancelled_owned()),
            body,
            received: 0,
            cap: limits.max_response_body_bytes,
            watch,
            done: false,
        }
        .boxed_unsync()
    });
    Ok((response, io))
}

async fn connect(addresses: &[IpAddr], port: u16) -> Result<TcpStream, Error> {
    let mut last = None;
    for ip in addresses {
        match TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or(Error::DestinationNotFound, Error::Connect))
}

/// The TLS client configuration: the webpki roots, ring. Shared with the
/// credential gateway.
pub(crate) fn tls_config() -> Result<Arc<rustls::ClientConfig>, Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| Error::InternalError(Some(format!("TLS setup failed: {e}"))))
}

/// A response body that stops at the cap, at the between-bytes timeout and
/// on cancellation, each as an error the guest's next read returns.
struct Guarded {
    body: Incoming,
    received: u64,
    cap: u64,
    between_bytes: Duration,
    timer: Pin<Box<Sleep>>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    watch: Watch,
    done: bool,
}

impl Guarded {
    fn fail(&mut self, error: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.done = true;
        Poll::Ready(Some(Err(error)))
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if this.cancelled.as_mut().poll(cx).is_ready() {
            return this.fail(cancelled());
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if this.received > this.cap {
                        (this.watch.on_cap)(this.cap);
                        return this.fail(Error::HttpResponseBodySize(Some(this.cap)));
                    }
                }
                let next = Instant::now() + this.between_bytes;
                this.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => this.fail(Error::Hyper(e)),
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => this.fail(Error::ConnectionReadTimeout),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
