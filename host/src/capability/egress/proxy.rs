//! The egress proxy: an HTTP proxy the host serves on a unix socket that is
//! bind-mounted into the sandbox, where the forwarder (`capability::link`)
//! makes it 127.0.0.1:3128. It connects out from the host's network.
//!
//! `CONNECT host:port` (TLS and anything else tunnelled) is checked by the
//! name the client asked for; a plain request (`GET http://host/...`) by its
//! absolute URL. Nothing is decrypted: a TLS client may still present
//! another name inside an allowed tunnel, and a request on a kept-alive
//! plain connection reaches the host the connection was opened to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener};
use tokio::task::JoinHandle;

use super::EgressLog;
use crate::capability::http::{AddressClass, classify};

/// Where programs in the sandbox find the proxy.
pub const PROXY_PORT: u16 = 3128;
/// A request head larger than this is refused.
const MAX_HEAD: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running proxy; dropping it stops accepting and ends its connections.
pub struct Proxy {
    task: JoinHandle<()>,
}

impl Proxy {
    /// Serve `log`'s rules on `listener`, on the current tokio runtime.
    pub fn serve(listener: UnixListener, log: Arc<EgressLog>) -> Self {
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let log = log.clone();
                // What the set-up phase opened ends with it: the agent gets
                // no tunnel its own policy would refuse.
                let (setup, mut over) = log.setup_phase();
                connections.spawn(async move {
                    tokio::select! {
                        _ = handle(client, &log) => {}
                        _ = over.wait_for(|over| *over), if setup => {}
                    }
                });
                // Reap finished connections as we go.
                while connections.try_join_next().is_some() {}
            }
        });
        Self { task }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every
        // connection in flight.
        self.task.abort();
    }
}

/// One client connection: read the request head, check, connect, splice.
async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    log: &EgressLog,
) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut client).await?;
    let Some(request) = Request::parse(&head) else {
        return respond(
            &mut client,
            "400 Bad Request",
            "sanddune egress proxy: not an HTTP proxy request\n",
        )
        .await;
    };
    if !log.check(&request.host, request.port) {
        let body = format!(
            "sanddune: egress to {}:{} is not allowed by this sandbox's egress policy\n",
            request.host, request.port
        );
        return respond(&mut client, "403 Forbidden", &body).await;
    }
    let upstream =
        tokio::time::timeout(CONNECT_TIMEOUT, connect(&request.host, request.port)).await;
    let mut upstream = match upstream {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            log.refuse(&request.host, request.port);
            let body = format!(
                "sanddune: egress to {}:{} refused: {e}\n",
                request.host, request.port
            );
            return respond(&mut client, "403 Forbidden", &body).await;
        }
        Ok(Err(e)) => {
            let body = format!(
                "sanddune egress proxy: cannot reach {}:{}: {e}\n",
                request.host, request.port
            );
            return respond(&mut client, "502 Bad Gateway", &body).await;
        }
        Err(_) => {
            return respond(
                &mut client,
                "504 Gateway Timeout",
                "sanddune egress proxy: connect timed out\n",
            )
            .await;
        }
    };
    if request.connect {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
    } else {
        upstream.write_all(&request.forward_head).await?;
    }
    upstream.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Connect to `host:port` as the rule named it.
async fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return TcpStream::connect((ip, port)).await;
    }
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    TcpStream::connect(&reachable(host, &resolved)?[..]).await
}

/// The addresses a name may be reached at: public ones, and loopback for
/// `localhost`. A DNS answer must not turn an allowed domain into the
/// host's own services or its network (as in the http capability); an
/// address literal in the rule reaches that address.
fn reachable(host: &str, resolved: &[SocketAddr]) -> std::io::Result<Vec<SocketAddr>> {
    let allowed: Vec<SocketAddr> = resolved
        .iter()
        .copied()
        .filter(|a| match classify(a.ip()) {
            AddressClass::Public => true,
            AddressClass::Loopback => host == "localhost",
            _ => false,
        })
        .collect();
    if allowed.is_empty() {
        let class = resolved
            .first()
            .map_or("no".to_string(), |a| classify(a.ip()).to_string());
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{host} resolves to a {class} address, which a domain rule does not reach (name the address itself)"
            ),
        ));
    }
    Ok(allowed)
}

pub(crate) async fn respond<S: AsyncWrite + Unpin>(
    client: &mut S,
    status: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

/// The request head (through the blank line) and any bytes read past it.
pub(crate) async fn read_head<S: AsyncRead + Unpin>(
    client: &mut S,
) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A proxy request: where to, and for plain HTTP the head to send there.
#[derive(Debug, PartialEq)]
struct Request {
    connect: bool,
    host: String,
    port: u16,
    /// The head rewritten to origin form, without proxy headers.
    forward_head: Vec<u8>,
}

impl Request {
    fn parse(head: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(head).ok()?;
        let mut lines = text.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let (method, target, version) = (first.next()?, first.next()?, first.next()?);
        if method == "CONNECT" {
            let (host, port) = split_host_port(target, None)?;
            return Some(Self {
                connect: true,
                host,
                port,
                forward_head: vec![],
            });
        }
        // Plain HTTP only: an https:// URL would need the proxy to speak TLS.
        let rest = target.strip_prefix("http://")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority, Some(80))?;
        let mut forward = format!("{method} {path} {version}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
            if !name.starts_with("proxy-") {
                forward.push_str(line);
                forward.push_str("\r\n");
            }
        }
        forward.push_str("\r\n");
        Some(Self {
            connect: false,
            host,
            port,
            forward_head: forward.into_bytes(),
        })
    }
}

/// `host:port`, `[v6]:port`, or `host` with `default` port.
fn split_host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        (host, rest.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::egress::EgressPolicy;
    use tokio::net::{TcpListener, UnixStream};

    fn serve_in_tempdir(log: Arc<EgressLog>) -> (tempfile::TempDir, std::path::PathBuf, Proxy) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let proxy = Proxy::serve(UnixListener::bind(&socket).unwrap(), log);
        (dir, socket, proxy)
    }

    #[test]
    fn connect_and_absolute_requests_name_their_destination() {
        let c = Request::parse(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert!(c.connect);
        assert_eq!((c.host.as_str(), c.port), ("api.example.com", 443));
        let g = Request::parse(
            b"GET http://Example.com:8080/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
        .unwrap();
        assert_eq!((g.host.as_str(), g.port), ("example.com", 8080));
        assert_eq!(
            String::from_utf8(g.forward_head).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: example.com\r\n\r\n"
        );
        assert!(
            Request::parse(b"GET /local HTTP/1.1\r\n\r\n").is_none(),
            "not a proxy request"
        );
        assert!(Request::parse(b"CONNECT nohost HTTP/1.1\r\n\r\n").is_none());
    }

    #[test]
    fn a_name_reaches_public_addresses_only_and_localhost_loopback() {
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        let public = at("93.184.216.34:443");
        let both = [at("127.0.0.1:443"), public];
        assert_eq!(reachable("example.com", &both).unwrap(), [public]);
        for inside in [
            "127.0.0.1:443",
            "10.0.0.5:443",
            "169.254.169.254:80",
            "[::1]:443",
        ] {
            let e = reachable("rebound.example.com", &[at(inside)]).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{inside}");
            assert!(e.to_string().contains("name the address itself"), "{e}");
        }
        assert_eq!(
            reachable("localhost", &[at("127.0.0.1:8080")])
                .unwrap()
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn the_proxy_tunnels_to_an_allowed_host_and_refuses_another() {
        // An upstream that answers one line.
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.unwrap();
            s.write_all(b"hello from upstream").await.unwrap();
        });
        let policy = EgressPolicy::parse(&format!("127.0.0.1:{port}")).unwrap();
        let log = EgressLog::new(&policy, None);
        let (_dir, socket, _proxy) = serve_in_tempdir(log.clone());

        let mut c = UnixStream::connect(&socket).await.unwrap();
        c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).await.unwrap();
        assert_eq!(
            got,
            "HTTP/1.1 200 Connection established\r\n\r\nhello from upstream"
        );

        let mut c = UnixStream::connect(&socket).await.unwrap();
        c.write_all(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).await.unwrap();
        assert!(got.starts_with("HTTP/1.1 403"), "{got}");
        assert!(got.contains("example.com:443"), "{got}");
        assert_eq!(log.denied().len(), 1);
    }

    #[tokio::test]
    async fn a_tunnel_opened_in_the_setup_phase_closes_when_the_agent_starts() {
        // An upstream that greets, then holds the connection open.
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.unwrap();
            s.write_all(b"hi").await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let setup = EgressPolicy::AllowAll;
        let log = EgressLog::new(&EgressPolicy::parse("deny-all").unwrap(), Some(&setup));
        let (_dir, socket, _proxy) = serve_in_tempdir(log.clone());
        let mut c = UnixStream::connect(&socket).await.unwrap();
        c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut greeting = [0u8; 41];
        c.read_exact(&mut greeting).await.unwrap();
        assert!(greeting.ends_with(b"\r\n\r\nhi"), "{greeting:?}");

        log.start_agent_phase(&[]);
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest)).await;
        assert!(
            matches!(closed, Ok(Ok(0))),
            "the tunnel outlived the set-up phase: {closed:?}"
        );
    }
}
