//! The credential gateway: the agent never holds the real model API key.
//!
//! When the run plans its sandbox, each key of a known API convention that
//! the agent declares (`ANTHROPIC_API_KEY` with `ANTHROPIC_BASE_URL`, ...)
//! is taken out of the env the sandbox gets. In its place the sandbox gets
//! a placeholder made for this run, and a base URL that reaches the
//! gateway: in a container, `http://127.0.0.1:3129` through the sandbox's
//! link (`capability::link`); for a sandbox that runs on the host, a
//! loopback port of its own. The gateway takes requests that carry a
//! placeholder of this run, puts the real key in its place, and forwards
//! them to the real API, over TLS where its URL says https. A request with
//! no placeholder of this run is refused. The response streams back as it
//! comes (ADR 0032).

mod server;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use server::GatewayServer;

/// Where programs in a container sandbox find the gateway.
pub const GATEWAY_PORT: u16 = 3129;

/// An API's convention for its key and base URL, as its SDKs read them.
struct Convention {
    /// The env keys that hold a secret for this API.
    keys: &'static [&'static str],
    /// The env key the API's clients read the base URL from.
    base_url: &'static str,
    /// The API's base URL when the user sets none; without one, the key
    /// goes through the gateway only when the user names the API's URL.
    default: Option<&'static str>,
}

/// The conventions of the APIs the built-in agents speak. An agent uses
/// one when it declares its base-URL key (it reads it, so it honours it).
const CONVENTIONS: &[Convention] = &[
    Convention {
        keys: &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
        base_url: "ANTHROPIC_BASE_URL",
        default: Some("https://api.anthropic.com"),
    },
    Convention {
        keys: &["OPENAI_API_KEY"],
        base_url: "OPENAI_BASE_URL",
        default: Some("https://api.openai.com/v1"),
    },
    Convention {
        keys: &["GEMINI_API_KEY"],
        base_url: "GOOGLE_GEMINI_BASE_URL",
        default: Some("https://generativelanguage.googleapis.com"),
    },
    Convention {
        keys: &["COPILOT_PROVIDER_API_KEY"],
        base_url: "COPILOT_PROVIDER_BASE_URL",
        default: None,
    },
];

/// Where the sandbox reaches the gateway from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// A container: through its link, at 127.0.0.1:[`GATEWAY_PORT`].
    Link,
    /// A sandbox whose programs run on the host: a loopback port.
    Loopback,
}

/// One key kept outside: requests carrying `placeholder` go to `upstream`
/// with `secret` in its place.
struct Route {
    placeholder: String,
    secret: String,
    upstream: server::Upstream,
}

/// A run's routes, shared by its servers.
struct Routes(Vec<Route>);

impl Routes {
    /// The route whose placeholder the request head carries.
    fn find(&self, head: &str) -> Option<&Route> {
        self.0.iter().find(|r| head.contains(&r.placeholder))
    }
}

/// A run's gateway: its routes, and the loopback server of a sandbox on
/// the host. Dropping it stops that server; a link's server stops with
/// the link.
pub struct Gateway {
    routes: Arc<Routes>,
    _loopback: Option<GatewayServer>,
}

/// What [`Gateway::plan`] did to the env, for the run's log.
#[derive(Debug, Default)]
pub struct Planned {
    pub gateway: Option<Arc<Gateway>>,
    /// `KEY → API URL` for each key kept outside.
    pub kept_out: Vec<(String, String)>,
    /// The keys of a known API that go into the sandbox as they are: the
    /// sandbox cannot reach the gateway, or the caller turned it off.
    pub kept_in: Vec<String>,
    /// The gateway's URLs as the agent sees them, and the API's each
    /// stands for.
    pub urls: ApiUrls,
}

/// The gateway's URLs and the APIs they stand for: an agent's error names
/// the URL it used, and the user should read the one they set.
#[derive(Clone, Debug, Default)]
pub struct ApiUrls(Vec<(String, String)>);

impl ApiUrls {
    /// `text` with each gateway URL in it replaced by its API's.
    pub fn as_the_user_set_them(&self, text: &str) -> String {
        self.0.iter().fold(text.to_string(), |text, (inside, api)| {
            text.replace(inside, api)
        })
    }
}

impl Gateway {
    /// Take every key of a known convention whose base-URL key the agent
    /// declares (`declared`) out of `env`, putting a placeholder and the
    /// gateway's URL in its place. No such key: no gateway. With no
    /// `reach`, the keys stay and are named in [`Planned::kept_in`].
    pub fn plan(
        declared: &[String],
        env: &mut BTreeMap<String, String>,
        reach: Option<Reach>,
    ) -> Result<Planned, String> {
        // Each convention the agent reads, with its API and the keys set.
        let mut uses = Vec::new();
        for convention in CONVENTIONS {
            if !declared.iter().any(|k| k == convention.base_url) {
                continue;
            }
            let api = env
                .get(convention.base_url)
                .map(String::as_str)
                .or(convention.default);
            let Some(api) = api else { continue };
            let upstream = server::Upstream::parse(api)
                .map_err(|e| format!("{}={api}: {e}", convention.base_url))?;
            let keys: Vec<(&str, String)> = convention
                .keys
                .iter()
                .filter_map(|k| Some((*k, env.get(*k).filter(|v| !v.trim().is_empty())?.clone())))
                .collect();
            if !keys.is_empty() {
                uses.push((convention, api.to_string(), upstream, keys));
            }
        }
        let Some(reach) = reach.filter(|_| !uses.is_empty()) else {
            let kept_in = uses
                .iter()
                .flat_map(|(_, _, _, keys)| keys.iter().map(|(k, _)| k.to_string()))
                .collect();
            return Ok(Planned {
                kept_in,
                ..Planned::default()
            });
        };
        let loopback = match reach {
            Reach::Link => None,
            Reach::Loopback => Some(
                std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .and_then(tokio::net::TcpListener::from_std)
                    .map_err(|e| {
                        format!("cannot listen on loopback for the credential gateway: {e}")
                    })?,
            ),
        };
        let mut routes = Vec::new();
        let mut kept_out = Vec::new();
        let mut urls = Vec::new();
        let origin = match &loopback {
            None => format!("http://127.0.0.1:{GATEWAY_PORT}"),
            Some(listener) => format!(
                "http://127.0.0.1:{}",
                listener.local_addr().map_err(|e| e.to_string())?.port()
            ),
        };
        for (convention, api, upstream, keys) in uses {
            // The gateway's origin with the API's path, which the client
            // appends its own to.
            let inside = format!("{origin}{}", upstream.path());
            urls.push((inside.clone(), api.trim_end_matches('/').to_string()));
            env.insert(convention.base_url.to_string(), inside);
            for (key, secret) in keys {
                let placeholder = placeholder(&secret);
                env.insert(key.to_string(), placeholder.clone());
                kept_out.push((key.to_string(), api.clone()));
                routes.push(Route {
                    placeholder,
                    secret,
                    upstream: upstream.clone(),
                });
            }
        }
        let routes = Arc::new(Routes(routes));
        let gateway = Arc::new(Gateway {
            _loopback: loopback.map(|l| GatewayServer::tcp(l, routes.clone())),
            routes,
        });
        Ok(Planned {
            gateway: Some(gateway),
            kept_out,
            kept_in: vec![],
            urls: ApiUrls(urls),
        })
    }

    /// Serve this gateway on a link's socket.
    pub fn serve(&self, listener: tokio::net::UnixListener) -> GatewayServer {
        GatewayServer::unix(listener, self.routes.clone())
    }
}

// Never the keys: a gateway in a debug print says only how many it holds.
impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gateway({} keys)", self.routes.0.len())
    }
}

/// A per-run placeholder: random, and in the real key's family (`sk-ant-`,
/// `sk-`) where it has one, since some clients check the prefix.
fn placeholder(secret: &str) -> String {
    let family = ["sk-ant-", "sk-"]
        .into_iter()
        .find(|p| secret.starts_with(p))
        .unwrap_or("");
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system's random source failed");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{family}sanddune-placeholder-{hex}")
}

#[cfg(test)]
mod tests;
