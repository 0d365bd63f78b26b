//! Credentials and provider options, checked before anything is created.

use sanddune_cloud_http::transport::BaseUrl;

pub const DEFAULT_API_URL: &str = "https://app.daytona.io/api";
pub const DEFAULT_TOOLBOX_URL: &str = "https://proxy.app.daytona.io/toolbox";

/// The environment keys the provider reads (the Daytona SDK's names). They
/// are the provider's own: none of them is passed on to commands in the
/// sandbox.
pub const ENV_KEYS: &[&str] = &[
    "DAYTONA_API_KEY",
    "DAYTONA_JWT_TOKEN",
    "DAYTONA_ORGANIZATION_ID",
    "DAYTONA_API_URL",
    "DAYTONA_TARGET",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// `DAYTONA_API_KEY`: the key names its organization.
    ApiKey(String),
    /// `DAYTONA_JWT_TOKEN` with `DAYTONA_ORGANIZATION_ID`.
    Jwt { token: String, organization: String },
}

impl Credentials {
    pub fn bearer(&self) -> &str {
        match self {
            Credentials::ApiKey(k) => k,
            Credentials::Jwt { token, .. } => token,
        }
    }

    pub fn organization(&self) -> Option<&str> {
        match self {
            Credentials::ApiKey(_) => None,
            Credentials::Jwt { organization, .. } => Some(organization),
        }
    }

    /// The variable holding the secret, for error messages.
    pub fn variable(&self) -> &'static str {
        match self {
            Credentials::ApiKey(_) => "DAYTONA_API_KEY",
            Credentials::Jwt { .. } => "DAYTONA_JWT_TOKEN",
        }
    }
}

fn get(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<String> {
    env(key)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `DAYTONA_API_KEY`, or else `DAYTONA_JWT_TOKEN` with
/// `DAYTONA_ORGANIZATION_ID` (as the Daytona SDK reads them). A missing
/// piece is an error naming it.
pub fn credentials(env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials, String> {
    if let Some(key) = get(env, "DAYTONA_API_KEY") {
        return Ok(Credentials::ApiKey(key));
    }
    if let Some(token) = get(env, "DAYTONA_JWT_TOKEN") {
        let organization = get(env, "DAYTONA_ORGANIZATION_ID").ok_or(
            "DAYTONA_JWT_TOKEN is set but DAYTONA_ORGANIZATION_ID is not: a Daytona JWT needs the organization it acts for (or set DAYTONA_API_KEY instead)",
        )?;
        return Ok(Credentials::Jwt {
            token,
            organization,
        });
    }
    Err("no Daytona credentials: set DAYTONA_API_KEY (an API key from the Daytona dashboard), or DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID".into())
}

#[derive(Clone, Debug, PartialEq)]
pub enum Network {
    AllowAll,
    BlockAll,
    /// Only these CIDR blocks.
    Allow(Vec<String>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub api_url: BaseUrl,
    pub toolbox_url: BaseUrl,
    pub snapshot: Option<String>,
    pub image: Option<String>,
    pub target: Option<String>,
    pub user: Option<String>,
    pub cpu: Option<u32>,
    pub memory_gb: Option<u32>,
    pub disk_gb: Option<u32>,
    pub auto_stop_min: u32,
    pub auto_delete_min: Option<i64>,
    pub network: Network,
}

/// (name, description, default) of every option, for `describe`.
pub const OPTIONS: &[(&str, &str, Option<&str>)] = &[
    (
        "api-url",
        "Base URL of the Daytona API (DAYTONA_API_URL; a self-hosted Daytona, or a local mock in tests)",
        Some(DEFAULT_API_URL),
    ),
    (
        "toolbox-url",
        "Base URL of the toolbox proxy the sandboxes answer on (their toolboxProxyUrl; it depends on the region)",
        Some(DEFAULT_TOOLBOX_URL),
    ),
    (
        "base-snapshot",
        "Daytona snapshot to create the sandbox from (default: the organization's default snapshot); sanddune's own `snapshot=auto` keeps prepared ones",
        None,
    ),
    (
        "image",
        "A registry image to build the sandbox from instead of a snapshot",
        None,
    ),
    (
        "target",
        "Region to create the sandbox in (DAYTONA_TARGET; default: the organization's)",
        None,
    ),
    (
        "user",
        "The sandbox's OS user (default: the snapshot's)",
        None,
    ),
    ("cpu", "CPU cores", None),
    ("memory", "Memory in GiB", None),
    ("disk", "Disk in GiB", None),
    (
        "auto-stop",
        "Minutes without activity before Daytona stops the sandbox (0: never)",
        Some("30"),
    ),
    (
        "auto-delete",
        "Minutes after it stops before Daytona deletes the sandbox (0: at once, -1: never), so a crashed run leaves nothing billed",
        Some("0"),
    ),
    (
        "egress",
        "Egress: allow-all, deny-all (or none, block-all), or comma-separated CIDR blocks to allow (Daytona filters by address, not by domain); the key every sandbox provider takes",
        Some("allow-all"),
    ),
    ("network", "Another name for egress", Some("allow-all")),
];

fn number(key: &str, value: &str, range: std::ops::RangeInclusive<i64>) -> Result<i64, String> {
    value
        .parse::<i64>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "{key} `{value}`: expected a whole number from {} to {}",
                range.start(),
                range.end()
            )
        })
}

/// The options from `config` (the user's `--sandbox-opt`s) over their
/// defaults. `DAYTONA_API_URL` and `DAYTONA_TARGET` stand in for `api-url`
/// and `target` when those are not given; the host grants only the origin
/// of the `api-url` option, so an environment URL elsewhere is refused here,
/// naming both, rather than at the first request.
pub fn options(
    config: &[(String, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Options, String> {
    let mut o = Options {
        api_url: BaseUrl::parse_option("api-url", DEFAULT_API_URL)?,
        toolbox_url: BaseUrl::parse_option("toolbox-url", DEFAULT_TOOLBOX_URL)?,
        snapshot: None,
        image: None,
        target: get(env, "DAYTONA_TARGET"),
        user: None,
        cpu: None,
        memory_gb: None,
        disk_gb: None,
        auto_stop_min: 30,
        auto_delete_min: Some(0),
        network: Network::AllowAll,
    };
    let mut api_url_given = false;
    let text = |v: &str| Some(v.to_string()).filter(|v| !v.is_empty());
    for (key, value) in config {
        let value = value.trim();
        match key.as_str() {
            "api-url" => {
                o.api_url = BaseUrl::parse_option("api-url", value)?;
                api_url_given = true;
            }
            "toolbox-url" => o.toolbox_url = BaseUrl::parse_option("toolbox-url", value)?,
            "base-snapshot" => o.snapshot = text(value),
            "image" => o.image = text(value),
            "target" => o.target = text(value),
            "user" => o.user = text(value),
            "cpu" => o.cpu = Some(number("cpu", value, 1..=64)? as u32),
            "memory" => o.memory_gb = Some(number("memory", value, 1..=256)? as u32),
            "disk" => o.disk_gb = Some(number("disk", value, 1..=1024)? as u32),
            "auto-stop" => o.auto_stop_min = number("auto-stop", value, 0..=525_600)? as u32,
            "auto-delete" => {
                o.auto_delete_min = match number("auto-delete", value, -1..=525_600)? {
                    -1 => None,
                    n => Some(n),
                }
            }
            "egress" | "network" => {
                o.network = match value {
                    "allow-all" | "" => Network::AllowAll,
                    "block-all" | "deny-all" | "none" => Network::BlockAll,
                    list => Network::Allow(
                        list.split(',')
                            .map(|d| d.trim().to_string())
                            .filter(|d| !d.is_empty())
                            .map(|d| {
                                if is_cidr(&d) {
                                    Ok(d)
                                } else {
                                    Err(format!(
                                        "{key} entry `{d}`: Daytona allows egress by CIDR block (10.0.0.0/8), not by domain"
                                    ))
                                }
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                }
            }
            other => {
                let known: Vec<&str> = OPTIONS.iter().map(|o| o.0).collect();
                return Err(format!(
                    "daytona has no option `{other}` (options: {})",
                    known.join(", ")
                ));
            }
        }
    }
    if !api_url_given && let Some(url) = get(env, "DAYTONA_API_URL") {
        let from_env = BaseUrl::parse_option("DAYTONA_API_URL", &url)?;
        if from_env.origin() != o.api_url.origin() {
            return Err(format!(
                "DAYTONA_API_URL is {url}, but the daytona provider may reach only the origin of its api-url option ({}): pass --sandbox-opt api-url={url}",
                o.api_url.origin()
            ));
        }
        o.api_url = from_env;
    }
    if o.snapshot.is_some() && o.image.is_some() {
        return Err("base-snapshot and image cannot be used together".into());
    }
    Ok(o)
}

/// `a.b.c.d/n`, the form Daytona's allow list takes.
fn is_cidr(value: &str) -> bool {
    let Some((addr, bits)) = value.split_once('/') else {
        return false;
    };
    addr.parse::<std::net::Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32)
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

    fn cfg(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_api_key_or_a_jwt_with_its_organization() {
        assert_eq!(
            credentials(&env(&[("DAYTONA_API_KEY", "k")])).unwrap(),
            Credentials::ApiKey("k".into())
        );
        let jwt = credentials(&env(&[
            ("DAYTONA_JWT_TOKEN", "j"),
            ("DAYTONA_ORGANIZATION_ID", "org"),
        ]))
        .unwrap();
        assert_eq!((jwt.bearer(), jwt.organization()), ("j", Some("org")));
        let e = credentials(&env(&[("DAYTONA_JWT_TOKEN", "j")])).unwrap_err();
        assert!(e.contains("DAYTONA_ORGANIZATION_ID is not"), "{e}");
        let e = credentials(&env(&[("DAYTONA_API_KEY", "  ")])).unwrap_err();
        assert!(
            e.starts_with("no Daytona credentials") && e.contains("DAYTONA_API_KEY"),
            "{e}"
        );
    }

    #[test]
    fn options_parse_and_refuse_with_the_option_named() {
        let none = env(&[]);
        let o = options(&[], &none).unwrap();
        assert_eq!(o.api_url.origin(), "https://app.daytona.io");
        assert_eq!(o.api_url.prefix, "/api");
        assert_eq!(o.toolbox_url.origin(), "https://proxy.app.daytona.io");
        assert_eq!((o.auto_stop_min, o.auto_delete_min), (30, Some(0)));
        let o = options(
            &cfg(&[
                ("api-url", "http://127.0.0.1:4567/api"),
                ("base-snapshot", "daytona-small"),
                ("cpu", "2"),
                ("memory", "4"),
                ("auto-stop", "0"),
                ("auto-delete", "-1"),
                ("network", "10.0.0.0/8, 192.168.0.0/16"),
            ]),
            &none,
        )
        .unwrap();
        assert_eq!(o.api_url.origin(), "http://127.0.0.1:4567");
        assert_eq!(o.snapshot.as_deref(), Some("daytona-small"));
        assert_eq!((o.cpu, o.memory_gb, o.auto_stop_min), (Some(2), Some(4), 0));
        assert_eq!(o.auto_delete_min, None);
        assert_eq!(
            o.network,
            Network::Allow(vec!["10.0.0.0/8".into(), "192.168.0.0/16".into()])
        );
        for (pairs, needle) in [
            (vec![("cpus", "2")], "no option `cpus`"),
            (vec![("cpu", "lots")], "cpu `lots`"),
            (vec![("auto-stop", "-5")], "auto-stop `-5`"),
            (vec![("toolbox-url", "ftp://x")], "toolbox-url `ftp://x`"),
            (
                vec![("base-snapshot", "a"), ("image", "b")],
                "cannot be used together",
            ),
        ] {
            let e = options(&cfg(&pairs), &none).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn the_environment_stands_in_for_unset_options_within_the_granted_origin() {
        let e = env(&[
            ("DAYTONA_API_URL", "https://app.daytona.io/api/v2"),
            ("DAYTONA_TARGET", "eu"),
        ]);
        let o = options(&[], &e).unwrap();
        assert_eq!(o.api_url.prefix, "/api/v2");
        assert_eq!(o.target.as_deref(), Some("eu"));
        let o = options(&cfg(&[("target", "us")]), &e).unwrap();
        assert_eq!(o.target.as_deref(), Some("us"));
        let elsewhere = env(&[("DAYTONA_API_URL", "https://daytona.example.com/api")]);
        let err = options(&[], &elsewhere).unwrap_err();
        assert!(
            err.contains("DAYTONA_API_URL") && err.contains("--sandbox-opt api-url="),
            "{err}"
        );
        // Given as the option, the same URL is the user's choice of origin.
        let o = options(
            &cfg(&[("api-url", "https://daytona.example.com/api")]),
            &elsewhere,
        )
        .unwrap();
        assert_eq!(o.api_url.origin(), "https://daytona.example.com");
    }

    #[test]
    fn egress_is_network_by_the_key_every_provider_takes() {
        let none = env(&[]);
        let o = options(&cfg(&[("egress", "deny-all")]), &none).unwrap();
        assert_eq!(o.network, Network::BlockAll);
        let o = options(&cfg(&[("egress", "10.0.0.0/8")]), &none).unwrap();
        assert_eq!(o.network, Network::Allow(vec!["10.0.0.0/8".into()]));
        let e = options(&cfg(&[("egress", "github.com")]), &none).unwrap_err();
        assert!(e.contains("`github.com`") && e.contains("CIDR"), "{e}");
    }
}
