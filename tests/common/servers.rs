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
