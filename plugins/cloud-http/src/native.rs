//! A plain HTTP/1.1 client over `std::net` (http:// only), so the provider
//! logic runs natively against the loopback mock in tests and benchmarks.
//! One connection per request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::transport::{BaseUrl, Body, Request, Response, Transport, TransportError};

#[derive(Clone, Copy, Default)]
pub struct NativeHttp;

fn net(e: impl std::fmt::Display) -> TransportError {
    TransportError::Network(e.to_string())
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

struct NativeBody {
    reader: BufReader<TcpStream>,
    framing: Framing,
    /// Bytes left in the current chunk (chunked) or body (length).
    left: u64,
    done: bool,
}

impl NativeBody {
    fn read_some(&mut self, max: u64) -> Result<Vec<u8>, TransportError> {
        let mut buf = vec![0u8; max.min(64 << 10) as usize];
        let n = self.reader.read(&mut buf).map_err(net)?;
        buf.truncate(n);
        Ok(buf)
    }
}

impl Body for NativeBody {
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, TransportError> {
        if self.done {
            return Ok(None);
        }
        match self.framing {
            Framing::Length(_) => {
                if self.left == 0 {
                    self.done = true;
                    return Ok(None);
                }
                let chunk = self.read_some(self.left)?;
                if chunk.is_empty() {
                    self.done = true;
                    return Err(net("connection closed mid-body"));
                }
                self.left -= chunk.len() as u64;
                Ok(Some(chunk))
            }
            Framing::UntilClose => {
                let chunk = self.read_some(64 << 10)?;
                if chunk.is_empty() {
                    self.done = true;
                    return Ok(None);
                }
                Ok(Some(chunk))
            }
            Framing::Chunked => {
                if self.left == 0 {
                    let mut line = String::new();
                    if self.reader.read_line(&mut line).map_err(net)? == 0 {
                        self.done = true;
                        return Err(net("connection closed mid-body"));
                    }
                    let size = line.trim().split(';').next().unwrap_or("");
                    let size = u64::from_str_radix(size, 16)
                        .map_err(|_| net(format!("bad chunk size {line:?}")))?;
                    if size == 0 {
                        self.done = true;
                        return Ok(None);
                    }
                    self.left = size;
                }
                let chunk = self.read_some(self.left)?;
                if chunk.is_empty() {
                    self.done = true;
                    return Err(net("connection closed mid-body"));
                }
                self.left -= chunk.len() as u64;
                if self.left == 0 {
                    let mut crlf = String::new();
                    self.reader.read_line(&mut crlf).map_err(net)?;
                }
                Ok(Some(chunk))
            }
        }
    }
}

impl Transport for NativeHttp {
    fn send(&self, base: &BaseUrl, request: Request) -> Result<Response, TransportError> {
        if base.scheme != "http" {
            return Err(net("the native test client speaks plain http only"));
        }
        let mut stream = TcpStream::connect(&base.authority).map_err(net)?;
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            request.method.as_str(),
            request.path,
            base.authority,
            request.body.len()
        );
        for (k, v) in &request.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).map_err(net)?;
        stream.write_all(&request.body).map_err(net)?;
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        if reader.read_line(&mut status_line).map_err(net)? == 0 {
            return Err(net("connection closed before the response"));
        }
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| net(format!("bad status line {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).map_err(net)? == 0 {
                return Err(net("connection closed in the response headers"));
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let framing = if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            Framing::Chunked
        } else if let Some(len) = find("content-length").and_then(|v| v.parse().ok()) {
            Framing::Length(len)
        } else {
            Framing::UntilClose
        };
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Ok(Response {
            status,
            headers,
            body: Box::new(NativeBody {
                reader,
                framing,
                left,
                done: false,
            }),
        })
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}
