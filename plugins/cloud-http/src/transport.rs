//! The seam between the API logic and the wire: one request, one response
//! whose body is read chunk by chunk. The wasm build sends through
//! `wasi:http/outgoing-handler` (`wasi_http`), native tests through a plain
//! TCP client (`native`).

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// Where the API lives: `https://vercel.com/api` is scheme `https`,
/// authority `vercel.com`, prefix `/api`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrl {
    pub scheme: String,
    pub authority: String,
    pub prefix: String,
}

impl BaseUrl {
    /// `url`, which the user gave as option `option` (named in errors).
    pub fn parse_option(option: &str, url: &str) -> Result<BaseUrl, String> {
        let bad = |why: &str| {
            format!(
                "{option} `{url}`: {why}; expected an https URL such as https://api.example.com/api"
            )
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "https" && scheme != "http" {
            return Err(bad("the scheme must be https (or http for a local mock)"));
        }
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains(['@', '?', '#']) {
            return Err(bad("malformed host"));
        }
        if prefix.contains(['?', '#']) {
            return Err(bad("no query or fragment"));
        }
        Ok(BaseUrl {
            scheme,
            authority: authority.to_ascii_lowercase(),
            prefix: prefix.to_string(),
        })
    }

    pub fn parse(url: &str) -> Result<BaseUrl, String> {
        Self::parse_option("url", url)
    }

    /// `scheme://authority`: what the provider asks the host to reach.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }
}

pub struct Request {
    pub method: Method,
    /// Path and query, starting with `/`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// A long-lived streamed response (a command's output): no idle timeout
    /// shorter than the command may stay silent.
    pub streaming: bool,
}

/// A response body, read as it arrives.
pub trait Body {
    /// The next chunk; None at the end of the body.
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, TransportError>;
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Box<dyn Body>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The whole body (bounded by the transport's own cap).
    pub fn read_all(&mut self) -> Result<Vec<u8>, TransportError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.body.next_chunk()? {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The host refused the request (origin not granted).
    Denied(String),
    /// The host cancelled the request: the run was aborted or timed out.
    Cancelled(String),
    /// Connection refused, reset, timed out, or closed mid-body.
    Network(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Denied(m) => write!(f, "request refused by the host: {m}"),
            TransportError::Cancelled(m) => write!(f, "{m}"),
            TransportError::Network(m) => write!(f, "network error: {m}"),
        }
    }
}

pub trait Transport {
    fn send(&self, base: &BaseUrl, request: Request) -> Result<Response, TransportError>;
    fn sleep(&self, duration: Duration);
}

/// Percent-encode a query value or path segment.
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
