//! HTTP servers on the host for the egress tests: a sandbox's proxy may
//! reach them, a program around the proxy may not.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::process::Command;

/// One of this host's addresses that is not loopback: reachable from the
/// host's proxy, and, without a policy, from a container on the engine's
/// default network.
pub fn host_address() -> IpAddr {
    let routed = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
        .and_then(|s| s.local_addr());
    if let Ok(addr) = routed
        && !addr.ip().is_loopback()
        && !addr.ip().is_unspecified()
    {
        return addr.ip();
    }
    let out = Command::new("hostname").arg("-I").output().unwrap();
    super::stdout(&out)
        .split_whitespace()
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
        .expect("the host has no non-loopback IPv4 address")
}

/// An HTTP server on `ip` answering every request with `body`, until the
/// test process ends. Returns its port.
pub fn serve(ip: IpAddr, body: &'static str) -> u16 {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// What a test server was asked: each request's path and the status it got.
pub type Requests = std::sync::Arc<std::sync::Mutex<Vec<(String, u16)>>>;

/// A git smart-HTTP server on `ip` for the bare repositories under `root`
/// (`git http-backend`, as a forge runs it), that answers 401 to a request
/// without `user`:`token` in Basic auth, as a forge does. Returns its port
/// and, per request, its path and status, until the test process ends.
pub fn serve_git(ip: IpAddr, root: &std::path::Path, user: &str, token: &str) -> (u16, Requests) {
    use std::io::{BufRead, BufReader};
    use std::sync::{Arc, Mutex};

    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let expected = format!("Basic {}", base64(format!("{user}:{token}").as_bytes()));
    let (root, log, user) = (root.to_path_buf(), seen.clone(), user.to_string());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut parts = line.split_whitespace();
            let (method, target) = (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let header = |k: &str| {
                headers
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let mut body = Vec::new();
            if let Some(len) = header("content-length") {
                body.resize(len.parse().unwrap(), 0);
                reader.read_exact(&mut body).unwrap();
            } else if header("transfer-encoding").as_deref() == Some("chunked") {
                loop {
                    let mut size = String::new();
                    reader.read_line(&mut size).unwrap();
                    let size = usize::from_str_radix(size.trim(), 16).unwrap();
                    let mut chunk = vec![0; size + 2];
                    reader.read_exact(&mut chunk).unwrap();
                    if size == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..size]);
                }
            }
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            let mut stream = stream;
            if header("authorization").as_deref() != Some(expected.as_str()) {
                log.lock().unwrap().push((path.to_string(), 401));
                let _ = write!(
                    stream,
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                continue;
            }
            let mut cgi = Command::new("git")
                .arg("http-backend")
                .env("GIT_PROJECT_ROOT", &root)
                .env("GIT_HTTP_EXPORT_ALL", "1")
                .env("REQUEST_METHOD", &method)
                .env("PATH_INFO", path)
                .env("QUERY_STRING", query)
                .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
                .env("CONTENT_LENGTH", body.len().to_string())
                .env(
                    "HTTP_CONTENT_ENCODING",
                    header("content-encoding").unwrap_or_default(),
                )
                .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
                .env("REMOTE_USER", &user)
                .env("REMOTE_ADDR", "127.0.0.1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            cgi.stdin.take().unwrap().write_all(&body).unwrap();
            let out = cgi.wait_with_output().unwrap();
            let split = out
                .stdout
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| (i, 4))
                .or_else(|| {
                    out.stdout
                        .windows(2)
                        .position(|w| w == b"\n\n")
                        .map(|i| (i, 2))
                })
                .unwrap_or((0, 0));
            let head = String::from_utf8_lossy(&out.stdout[..split.0]).to_string();
            let status = head
                .lines()
                .find_map(|l| l.strip_prefix("Status: "))
                .unwrap_or("200 OK")
                .to_string();
            log.lock()
                .unwrap()
                .push((path.to_string(), status[..3].parse().unwrap_or(0)));
            let _ = write!(stream, "HTTP/1.0 {status}\r\n");
            for l in head.lines().filter(|l| !l.starts_with("Status: ")) {
                let _ = write!(stream, "{}\r\n", l.trim_end());
            }
            let _ = write!(stream, "Connection: close\r\n\r\n");
            let _ = stream.write_all(&out.stdout[split.0 + split.1..]);
        }
    });
    (port, seen)
}

/// Standard base64, padded: what HTTP Basic auth sends.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ABC[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}
