//! Credentials and provider options, checked before anything is created.

use crate::transport::BaseUrl;

pub const DEFAULT_API_URL: &str = "https://vercel.com/api";

/// The environment keys the provider reads. They are the provider's own:
/// none of them is passed on to commands in the sandbox.
pub const ENV_KEYS: &[&str] = &[
    "VERCEL_TOKEN",
    "VERCEL_TEAM_ID",
    "VERCEL_PROJECT_ID",
    "VERCEL_OIDC_TOKEN",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub token: String,
    pub team_id: String,
    pub project_id: String,
}

/// `VERCEL_TOKEN` with `VERCEL_TEAM_ID` and `VERCEL_PROJECT_ID`, or else
/// `VERCEL_OIDC_TOKEN` (a JWT whose `owner_id` and `project_id` claims are
/// the team and the project). A missing piece is an error naming it.
pub fn credentials(env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, String> {
    let get = |k: &str| {
        env(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(token) = get("VERCEL_TOKEN") {
        let missing: Vec<&str> = ["VERCEL_TEAM_ID", "VERCEL_PROJECT_ID"]
            .into_iter()
            .filter(|k| get(k).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "VERCEL_TOKEN is set but {} {} not: a Vercel access token needs the team and the project it creates sandboxes in (or use VERCEL_OIDC_TOKEN instead)",
                missing.join(" and "),
                if missing.len() == 1 { "is" } else { "are" }
            ));
        }
        return Ok(Credentials {
            token,
            team_id: get("VERCEL_TEAM_ID").unwrap(),
            project_id: get("VERCEL_PROJECT_ID").unwrap(),
        });
    }
    if let Some(token) = get("VERCEL_OIDC_TOKEN") {
        let (team_id, project_id) = oidc_claims(&token)?;
        return Ok(Credentials {
            token,
            team_id,
            project_id,
        });
    }
    Err("no Vercel credentials: set VERCEL_TOKEN with VERCEL_TEAM_ID and VERCEL_PROJECT_ID, or VERCEL_OIDC_TOKEN (`vercel env pull` writes one)".into())
}

/// The `owner_id` and `project_id` claims of an OIDC token (not verified:
/// the API does that; the provider only needs to know where to create).
fn oidc_claims(token: &str) -> Result<(String, String), String> {
    let bad = |why: &str| format!("VERCEL_OIDC_TOKEN is not a usable Vercel OIDC token: {why}");
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err(bad("not a JWT (three dot-separated parts)"));
    }
    let payload = base64url(parts[1]).ok_or_else(|| bad("its payload is not base64url"))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|_| bad("its payload is not JSON"))?;
    let claim = |k: &str| claims.get(k).and_then(|v| v.as_str()).map(str::to_string);
    match (claim("owner_id"), claim("project_id")) {
        (Some(o), Some(p)) => Ok((o, p)),
        (None, _) => Err(bad("it has no owner_id claim")),
        (_, None) => Err(bad("it has no project_id claim")),
    }
}

fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[derive(Clone, Debug, PartialEq)]
pub enum Network {
    AllowAll,
    DenyAll,
    /// Only these domains (`*.npmjs.org` style wildcards allowed).
    Allow(Vec<String>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub api_url: BaseUrl,
    pub runtime: Option<String>,
    pub image: Option<String>,
    pub vcpus: Option<u32>,
    pub timeout_ms: u64,
    pub ports: Vec<u16>,
    pub network: Network,
}

/// (name, description, default) of every option, for `describe`.
pub const OPTIONS: &[(&str, &str, Option<&str>)] = &[
    (
        "api-url",
        "Base URL of the Vercel API (a proxy, or a local mock in tests)",
        Some(DEFAULT_API_URL),
    ),
    (
        "runtime",
        "Sandbox runtime image: node24, node22 or python3.13 (default: Vercel's default image)",
        None,
    ),
    ("image", "A custom image instead of a runtime", None),
    ("vcpus", "Virtual CPUs (2 GiB of memory each)", Some("2")),
    (
        "timeout",
        "How long the sandbox may live before Vercel stops it: 90s, 45m, 5h",
        Some("45m"),
    ),
    ("ports", "Ports to expose, comma-separated", None),
    (
        "egress",
        "Egress: allow-all, deny-all (none is the same here), or comma-separated domains to allow; the key every sandbox provider takes",
        Some("allow-all"),
    ),
    ("network", "Another name for egress", Some("allow-all")),
];

pub fn options(config: &[(String, String)]) -> Result<Options, String> {
    let mut o = Options {
        api_url: BaseUrl::parse_option("api-url", DEFAULT_API_URL)?,
        runtime: None,
        image: None,
        vcpus: Some(2),
        timeout_ms: 45 * 60_000,
        ports: vec![],
        network: Network::AllowAll,
    };
    for (key, value) in config {
        let value = value.trim();
        match key.as_str() {
            "api-url" => o.api_url = BaseUrl::parse_option("api-url", value)?,
            "runtime" => o.runtime = Some(value.to_string()).filter(|v| !v.is_empty()),
            "image" => o.image = Some(value.to_string()).filter(|v| !v.is_empty()),
            "vcpus" => {
                o.vcpus = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|n| (1..=32).contains(n))
                        .ok_or_else(|| {
                            format!("vcpus `{value}`: expected a number of CPUs, 1-32")
                        })?,
                )
            }
            "timeout" => o.timeout_ms = duration_ms(value)?,
            "ports" => {
                o.ports = value
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        p.parse::<u16>()
                            .ok()
                            .filter(|p| *p != 0)
                            .ok_or_else(|| format!("ports: `{p}` is not a port"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "egress" | "network" => {
                o.network = match value {
                    "allow-all" | "" => Network::AllowAll,
                    "deny-all" | "none" => Network::DenyAll,
                    list => Network::Allow(
                        list.split(',')
                            .map(|d| d.trim().to_string())
                            .filter(|d| !d.is_empty())
                            .collect(),
                    ),
                }
            }
            other => {
                let known: Vec<&str> = OPTIONS.iter().map(|o| o.0).collect();
                return Err(format!(
                    "vercel has no option `{other}` (options: {})",
                    known.join(", ")
                ));
            }
        }
    }
    if o.runtime.is_some() && o.image.is_some() {
        return Err("runtime and image cannot be used together".into());
    }
    Ok(o)
}

/// `300`, `90s`, `45m`, `5h` as milliseconds (a bare number is seconds).
fn duration_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("timeout `{text}`: expected e.g. 90s, 45m or 5h");
    let (num, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, "s"),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(bad()),
    };
    if ms == 0 {
        return Err(bad());
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone())
    }

    fn jwt(payload: &str) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in payload.as_bytes().chunks(3) {
            let n = chunk.iter().fold(0u32, |a, &b| (a << 8) | b as u32) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        format!("eyJhbGciOiJSUzI1NiJ9.{out}.sig")
    }

    #[test]
    fn token_needs_team_and_project_and_names_what_is_missing() {
        let ok = credentials(&env(&[
            ("VERCEL_TOKEN", "t"),
            ("VERCEL_TEAM_ID", "team_1"),
            ("VERCEL_PROJECT_ID", "prj_1"),
        ]))
        .unwrap();
        assert_eq!(
            (
                ok.token.as_str(),
                ok.team_id.as_str(),
                ok.project_id.as_str()
            ),
            ("t", "team_1", "prj_1")
        );
        let e = credentials(&env(&[("VERCEL_TOKEN", "t"), ("VERCEL_TEAM_ID", "x")])).unwrap_err();
        assert!(e.contains("VERCEL_PROJECT_ID is not"), "{e}");
        let e = credentials(&env(&[("VERCEL_TOKEN", "t")])).unwrap_err();
        assert!(
            e.contains("VERCEL_TEAM_ID and VERCEL_PROJECT_ID are not"),
            "{e}"
        );
        let e = credentials(&env(&[])).unwrap_err();
        assert!(
            e.contains("VERCEL_TOKEN") && e.contains("VERCEL_OIDC_TOKEN"),
            "{e}"
        );
        let e = credentials(&env(&[("VERCEL_TOKEN", "  ")])).unwrap_err();
        assert!(e.starts_with("no Vercel credentials"), "{e}");
    }

    #[test]
    fn oidc_token_gives_team_and_project_from_its_claims() {
        let token = jwt(r#"{"owner_id":"team_o","project_id":"prj_o","sub":"x"}"#);
        let c = credentials(&env(&[("VERCEL_OIDC_TOKEN", &token)])).unwrap();
        assert_eq!(
            (c.team_id.as_str(), c.project_id.as_str()),
            ("team_o", "prj_o")
        );
        let e =
            credentials(&env(&[("VERCEL_OIDC_TOKEN", &jwt(r#"{"owner_id":"o"}"#))])).unwrap_err();
        assert!(
            e.contains("VERCEL_OIDC_TOKEN") && e.contains("project_id"),
            "{e}"
        );
        let e = credentials(&env(&[("VERCEL_OIDC_TOKEN", "opaque")])).unwrap_err();
        assert!(e.contains("not a JWT"), "{e}");
    }

    #[test]
    fn options_parse_and_refuse_with_the_option_named() {
        let cfg = |pairs: &[(&str, &str)]| {
            options(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        let o = cfg(&[]).unwrap();
        assert_eq!(o.api_url.origin(), "https://vercel.com");
        assert_eq!(o.api_url.prefix, "/api");
        assert_eq!(o.timeout_ms, 45 * 60_000);
        let o = cfg(&[
            ("api-url", "http://127.0.0.1:4567/"),
            ("runtime", "node22"),
            ("vcpus", "4"),
            ("timeout", "2h"),
            ("ports", "3000, 8080"),
            ("network", "*.npmjs.org,github.com"),
        ])
        .unwrap();
        assert_eq!(o.api_url.origin(), "http://127.0.0.1:4567");
        assert_eq!(o.api_url.prefix, "");
        assert_eq!(
            (o.runtime.as_deref(), o.vcpus, o.timeout_ms),
            (Some("node22"), Some(4), 7_200_000)
        );
        assert_eq!(o.ports, vec![3000, 8080]);
        assert_eq!(
            o.network,
            Network::Allow(vec!["*.npmjs.org".into(), "github.com".into()])
        );
        for (pairs, needle) in [
            (vec![("vcpu", "2")], "no option `vcpu`"),
            (vec![("vcpus", "lots")], "vcpus `lots`"),
            (vec![("timeout", "1d")], "timeout `1d`"),
            (vec![("ports", "80,x")], "`x` is not a port"),
            (vec![("api-url", "ftp://x")], "api-url `ftp://x`"),
            (
                vec![("runtime", "node22"), ("image", "x")],
                "cannot be used together",
            ),
        ] {
            let e = cfg(&pairs).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn egress_is_network_by_the_key_every_provider_takes() {
        let cfg = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            options(&cfg("egress", "none")).unwrap().network,
            Network::DenyAll
        );
        assert_eq!(
            options(&cfg("egress", "github.com")).unwrap().network,
            Network::Allow(vec!["github.com".into()])
        );
    }
}
