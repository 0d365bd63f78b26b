//! The gateway's server: one request per connection. The request head's
//! placeholder is swapped for the real key and its Host for the API's, the
//! response head is told `Connection: close`, and both bodies stream
//! through as they come, so a later request on a kept-alive connection
//! never reaches the API without its key swapped.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinHandle;

use super::{Route, Routes};
use crate::capability::egress::{read_head, respond};
use crate::capability::http::tls_config;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Hop-by-hop headers the gateway sets itself, `Host`, and `Expect` (a
/// 100 Continue would be a second response head on the connection).
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "expect",
    "upgrade",
];

/// A running server; dropping it stops accepting and ends its connections.
pub struct GatewayServer {
    task: JoinHandle<()>,
}

/// A listener the server accepts on.
trait Accept: Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn next(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Accept for UnixListener {
    type Stream = UnixStream;
    async fn next(&self) -> std::io::Result<UnixStream> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    async fn next(&self) -> std::io::Result<TcpStream> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl GatewayServer {
    pub(super) fn unix(listener: UnixListener, routes: Arc<Routes>) -> Self {
        Self::spawn(listener, routes)
    }

    pub(super) fn tcp(listener: TcpListener, routes: Arc<Routes>) -> Self {
        Self::spawn(listener, routes)
    }

    fn spawn(listener: impl Accept, routes: Arc<Routes>) -> Self {
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok(client) = listener.next().await {
                let routes = routes.clone();
                connections.spawn(async move {
                    if let Err(e) = handle(client, &routes).await {
                        tracing::debug!("credential gateway: {e}");
                    }
                });
                // Reap finished connections as we go.
                while connections.try_join_next().is_some() {}
            }
        });
        Self { task }
    }
}

impl Drop for GatewayServer {
    fn drop(&mut self) {
        // The accept task owns the connections' JoinSet: aborting it ends
        // them too.
        self.task.abort();
    }
}

/// Where a route's requests go: the API's scheme, host, port and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Upstream {
    tls: bool,
    host: String,
    port: u16,
    path: String,
}

impl Upstream {
    pub(super) fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err("expected an http:// or https:// URL".into());
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => (
                host,
                port.parse::<u16>()
                    .map_err(|_| format!("`{port}` is not a port"))?,
            ),
            _ => (authority, if tls { 443 } else { 80 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || authority.contains('@') {
            return Err("expected a URL with a host and no credentials".into());
        }
        Ok(Self {
            tls,
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }

    /// The path the API's URL has, which clients append theirs to.
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// The Host header's value.
    fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match (self.tls, self.port) {
            (true, 443) | (false, 80) => host,
            (_, port) => format!("{host}:{port}"),
        }
    }

    fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }

    async fn connect(&self) -> std::io::Result<Box<dyn Stream>> {
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if !self.tls {
            return Ok(Box::new(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(std::io::Error::other)?;
        let config = tls_config().map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let tls = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsConnector::from(config).connect(name, tcp),
        )
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        Ok(Box::new(tls))
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// One request: check, swap, forward, stream the response back.
async fn handle<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut client: S,
    routes: &Routes,
) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut client).await?;
    let Ok(text) = std::str::from_utf8(&head) else {
        return respond(
            &mut client,
            "400 Bad Request",
            "sanddune credential gateway: the request head is not UTF-8\n",
        )
        .await;
    };
    let Some(route) = routes.find(text) else {
        tracing::warn!("credential gateway: refused a request with no key of this run");
        return respond(
            &mut client,
            "401 Unauthorized",
            "sanddune credential gateway: this request carries no key of this run\n",
        )
        .await;
    };
    let mut upstream = match route.upstream.connect().await {
        Ok(stream) => stream,
        Err(e) => {
            // The CLI meets what it would without the gateway: no answer,
            // which its own errors and retries know.
            tracing::warn!(
                "credential gateway: cannot reach {}: {e}",
                route.upstream.url()
            );
            return Ok(());
        }
    };
    upstream
        .write_all(swap_request(text, route).as_bytes())
        .await?;
    upstream.write_all(&rest).await?;
    upstream.flush().await?;
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut upstream_read, mut upstream_write) = tokio::io::split(upstream);
    // The request body, as it comes, while the response is read.
    let body = async {
        let _ = tokio::io::copy(&mut client_read, &mut upstream_write).await;
        let _ = upstream_write.shutdown().await;
    };
    let response = async {
        let (head, rest) = read_head(&mut upstream_read).await?;
        client_write.write_all(&close_response(&head)).await?;
        client_write.write_all(&rest).await?;
        client_write.flush().await?;
        tokio::io::copy(&mut upstream_read, &mut client_write).await?;
        client_write.shutdown().await
    };
    tokio::pin!(body, response);
    let mut sent = false;
    loop {
        tokio::select! {
            r = &mut response => return r,
            // The client is done sending: the response still comes.
            () = &mut body, if !sent => sent = true,
        }
    }
}

/// The request head for the API: the placeholder swapped for the key
/// (wherever it is: a header, the query), the API's Host, one request per
/// connection.
fn swap_request(head: &str, route: &Route) -> String {
    let mut lines = head.split("\r\n").filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let mut out = first.replace(&route.placeholder, &route.secret);
    out.push_str("\r\n");
    for line in lines {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if DROPPED.contains(&name.as_str()) {
            continue;
        }
        out.push_str(&line.replace(&route.placeholder, &route.secret));
        out.push_str("\r\n");
    }
    out.push_str(&format!(
        "Host: {}\r\nConnection: close\r\n\r\n",
        route.upstream.authority()
    ));
    out
}

/// The response head with `Connection: close`, so the client opens a new
/// connection (and the gateway sees a new head) for its next request.
fn close_response(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if name == "connection" || name == "keep-alive" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}
