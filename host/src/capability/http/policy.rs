//! The pure policy of the `http` capability: what an origin is, which
//! requests a grant allows, and which addresses a granted name may reach.
//! No I/O here: the caller resolves names and hands the addresses in.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lowercased.
    Name(String),
    /// An IP address literal (IPv6 written in brackets).
    Ip(IpAddr),
}

/// `scheme://host[:port]`: what a provider declares and what a request is
/// checked against. Two origins are the same when scheme, host and port
/// (default ports filled in) are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub scheme: Scheme,
    pub host: Host,
    pub port: u16,
}

impl Origin {
    /// Parse a declared origin. Plain `http` is only for loopback (a mock
    /// server in a test); everything else must be `https`.
    pub fn parse(text: &str) -> Result<Origin, String> {
        let origin = Self::parse_any(text)?;
        if origin.scheme == Scheme::Http && !origin.is_loopback() {
            return Err(format!(
                "origin `{text}`: plain http is allowed only for localhost and loopback addresses; use https://"
            ));
        }
        Ok(origin)
    }

    /// The origin a request goes to, from its scheme and authority. Any
    /// scheme the parser knows; the grant decides whether it is allowed.
    pub fn of_request(scheme: &str, authority: &str) -> Result<Origin, String> {
        Self::parse_any(&format!("{scheme}://{authority}"))
    }

    fn parse_any(text: &str) -> Result<Origin, String> {
        let bad = |why: &str| format!("origin `{text}`: {why}; expected https://host[:port]");
        let (scheme, authority) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            _ => return Err(bad("the scheme must be https (or http for loopback)")),
        };
        if authority.contains(['/', '?', '#']) {
            return Err(bad("an origin has no path, query or fragment"));
        }
        if authority.contains('@') {
            return Err(bad("an origin has no user info"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| bad("malformed host"))?;
        let host = parse_host(host).ok_or_else(|| bad("malformed host"))?;
        let port = match port {
            None => scheme.default_port(),
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                match p.parse::<u16>() {
                    Ok(port) if port != 0 => port,
                    _ => return Err(bad("the port must be 1-65535")),
                }
            }
            Some(_) => return Err(bad("the port must be 1-65535")),
        };
        Ok(Origin { scheme, host, port })
    }

    /// `localhost` or a loopback address literal.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            Host::Name(name) => name == "localhost",
            Host::Ip(ip) => classify(*ip) == AddressClass::Loopback,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://")?;
        match &self.host {
            Host::Name(name) => write!(f, "{name}")?,
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.split_once(':') {
        Some((host, port)) => Some((host, Some(port))),
        None => Some((authority, None)),
    }
}

fn parse_host(host: &str) -> Option<Host> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Some(Host::Ip(IpAddr::V4(ip)));
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return Some(Host::Ip(IpAddr::V6(ip)));
    }
    let name = host.to_ascii_lowercase();
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    // An all-digit last label is a short IPv4 form (`127.1`) that a resolver
    // would read as an address: refuse it rather than guess.
    let numeric_tail = labels.last()?.bytes().all(|b| b.is_ascii_digit());
    if name.len() > 253 || !labels.iter().all(label_ok) || numeric_tail {
        return None;
    }
    Some(Host::Name(name))
}

/// What kind of address a name resolved to, for the refusal message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressClass {
    Public,
    Loopback,
    Private,
    LinkLocal,
    Unspecified,
    /// Multicast, broadcast and reserved ranges: never a server.
    Reserved,
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Reserved => "reserved",
        })
    }
}

pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        // `::ffff:127.0.0.1` reaches 127.0.0.1.
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if a == 0 {
        AddressClass::Unspecified // 0.0.0.0/8: "this network"
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private // RFC 1918 and carrier-grade NAT
    } else if ip.is_link_local() {
        AddressClass::LinkLocal // includes cloud metadata, 169.254.169.254
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        AddressClass::Private // unique local, deprecated site-local
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if ip.is_multicast() {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

/// Whether a request to `origin` may connect to `ip` (one of the addresses
/// its host resolved to). Public addresses are fine. Anything else only when
/// the origin names it: an address literal names itself, and `localhost`
/// names the loopback addresses. A granted name that resolves to 127.0.0.1
/// (or to a private address) is refused, so a DNS answer cannot turn a
/// grant for a public API into access to the host or its network.
pub fn address_allowed(origin: &Origin, ip: IpAddr) -> Result<(), AddressClass> {
    let class = classify(ip);
    let named = match &origin.host {
        Host::Ip(literal) => *literal == ip,
        Host::Name(name) => name == "localhost" && class == AddressClass::Loopback,
    };
    if class == AddressClass::Public || named {
        Ok(())
    } else {
        Err(class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_declared_origins() {
        let ok = [
            ("https://api.vercel.com", "https://api.vercel.com", 443),
            ("HTTPS://API.Vercel.com:443", "https://api.vercel.com", 443),
            ("https://example.com:8443", "https://example.com:8443", 8443),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080", 8080),
            ("http://localhost", "http://localhost", 80),
            ("http://[::1]:9000", "http://[::1]:9000", 9000),
            ("https://10.0.0.5", "https://10.0.0.5", 443),
            ("https://[2001:db8::1]", "https://[2001:db8::1]", 443),
        ];
        for (text, shown, port) in ok {
            let origin = Origin::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(origin.to_string(), shown, "{text}");
            assert_eq!(origin.port, port, "{text}");
        }
    }

    #[test]
    fn refuses_malformed_origins() {
        let bad = [
            ("api.vercel.com", "no scheme"),
            ("ftp://example.com", "scheme"),
            ("https://example.com/", "path"),
            ("https://example.com/v1", "path"),
            ("https://example.com?x=1", "path"),
            ("https://user:pw@example.com", "user info"),
            ("https://*.example.com", "malformed host"),
            ("https://", "malformed host"),
            ("https://exa_mple.com", "malformed host"),
            ("https://-example.com", "malformed host"),
            ("https://example..com", "malformed host"),
            ("https://127.1", "malformed host"),
            ("https://[::1", "malformed host"),
            ("https://example.com:0", "port"),
            ("https://example.com:65536", "port"),
            ("https://example.com:+80", "port"),
            ("https://example.com:", "port"),
            ("http://example.com", "plain http"),
            ("http://10.0.0.5:8080", "plain http"),
        ];
        for (text, why) in bad {
            let err = Origin::parse(text).expect_err(text);
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains(text), "{text}: the error names it: {err}");
        }
    }

    #[test]
    fn requests_match_scheme_host_and_port() {
        let granted = Origin::parse("https://api.example.com").unwrap();
        let cases = [
            ("https", "api.example.com", true),
            ("https", "API.EXAMPLE.COM", true),
            ("https", "api.example.com:443", true),
            ("https", "api.example.com:444", false),
            ("http", "api.example.com", false),
            ("http", "api.example.com:443", false),
            ("https", "example.com", false),
            ("https", "evil.api.example.com", false),
            ("https", "api.example.com.evil.com", false),
        ];
        for (scheme, authority, allowed) in cases {
            let request = Origin::of_request(scheme, authority).unwrap();
            assert_eq!(request == granted, allowed, "{scheme}://{authority}");
        }
        assert!(Origin::of_request("https", "user@api.example.com").is_err());
    }

    #[test]
    fn classifies_addresses() {
        let cases = [
            ("93.184.215.14", AddressClass::Public),
            ("2606:2800:21f:cb07::1", AddressClass::Public),
            ("127.0.0.1", AddressClass::Loopback),
            ("127.8.9.10", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("10.1.2.3", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("172.31.255.255", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("100.64.0.1", AddressClass::Private),
            ("fd00::1", AddressClass::Private),
            ("::ffff:10.0.0.1", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("0.0.0.0", AddressClass::Unspecified),
            ("0.1.2.3", AddressClass::Unspecified),
            ("::", AddressClass::Unspecified),
            ("224.0.0.1", AddressClass::Reserved),
            ("255.255.255.255", AddressClass::Reserved),
            ("ff02::1", AddressClass::Reserved),
            ("172.32.0.1", AddressClass::Public),
            ("100.128.0.1", AddressClass::Public),
        ];
        for (ip, class) in cases {
            assert_eq!(classify(ip.parse().unwrap()), class, "{ip}");
        }
    }

    #[test]
    fn non_public_addresses_only_when_named() {
        let o = |s: &str| Origin::parse(s).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let cases = [
            ("https://api.example.com", "93.184.215.14", Ok(())),
            (
                "https://api.example.com",
                "127.0.0.1",
                Err(AddressClass::Loopback),
            ),
            (
                "https://api.example.com",
                "10.0.0.7",
                Err(AddressClass::Private),
            ),
            (
                "https://api.example.com",
                "169.254.169.254",
                Err(AddressClass::LinkLocal),
            ),
            (
                "https://api.example.com",
                "0.0.0.0",
                Err(AddressClass::Unspecified),
            ),
            ("http://localhost:8080", "127.0.0.1", Ok(())),
            ("http://localhost:8080", "::1", Ok(())),
            (
                "http://localhost:8080",
                "10.0.0.7",
                Err(AddressClass::Private),
            ),
            ("http://127.0.0.1:8080", "127.0.0.1", Ok(())),
            (
                "http://127.0.0.1:8080",
                "127.0.0.2",
                Err(AddressClass::Loopback),
            ),
            ("https://10.0.0.7", "10.0.0.7", Ok(())),
            ("http://[::1]:80", "::1", Ok(())),
        ];
        for (origin, addr, expected) in cases {
            assert_eq!(
                address_allowed(&o(origin), ip(addr)),
                expected,
                "{origin} -> {addr}"
            );
        }
    }
}
