//! The egress policy of a container sandbox (`egress=`): which hosts a
//! program in it may reach. The host enforces it, not the provider:
//!
//! - `allow-all`: the engine's default network, as without a policy.
//! - `none`: the container has only its loopback interface. No route out.
//! - `deny-all` and a domain list: the container has only its loopback
//!   interface too, and on it, at 127.0.0.1:3128, a forwarder to a proxy
//!   the host serves on a unix socket bind-mounted into the container
//!   (`capability::link`, `proxy`): the same for root, a user in the
//!   docker group and rootless Podman. The proxy lets through HTTP and HTTPS (CONNECT)
//!   to the listed domains and the model-API hosts the agent provider
//!   declares, and nothing else. A program that ignores `HTTP(S)_PROXY` has
//!   no route, no DNS, nothing.
//!
//! Each refusal by the proxy is recorded (host, port, time) for the run's
//! result and log. A direct connection attempt fails in the kernel and is
//! not seen.

mod proxy;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;

pub use proxy::{PROXY_PORT, Proxy};
pub(crate) use proxy::{read_head, respond};

/// The key the host takes out of a container provider's options.
pub const KEY: &str = "egress";
/// The key of the set-up phase's policy: in force while the sandbox's
/// onSandboxReady hooks run, until the agent starts.
pub const SETUP_KEY: &str = "egress.setup";

/// What a sandbox may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EgressPolicy {
    /// The engine's network, unrestricted.
    #[default]
    AllowAll,
    /// No network at all.
    None,
    /// Only these (and the agent's declared hosts), through the proxy;
    /// empty is `deny-all`.
    Allow(Vec<HostRule>),
}

impl EgressPolicy {
    /// `allow-all`, `deny-all`, `none`, or comma-separated domains:
    /// `example.com`, `*.example.com` (its subdomains), `host:port`.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "" | "allow-all" => Ok(Self::AllowAll),
            "none" => Ok(Self::None),
            "deny-all" => Ok(Self::Allow(vec![])),
            list => list
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(HostRule::parse)
                .collect::<Result<Vec<_>, _>>()
                .map(Self::Allow),
        }
    }
}

impl fmt::Display for EgressPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AllowAll => f.write_str("allow-all"),
            Self::None => f.write_str("none"),
            Self::Allow(rules) if rules.is_empty() => f.write_str("deny-all"),
            Self::Allow(rules) => {
                let list: Vec<String> = rules.iter().map(ToString::to_string).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// One allowed destination: a host name or address, or every subdomain
/// of a domain (`*.example.com`), on a port (80 and 443 when not given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    host: String,
    subdomains: bool,
    port: Option<u16>,
}

impl HostRule {
    pub fn parse(rule: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("egress entry `{rule}`: {why}");
        let lower = rule.trim().to_ascii_lowercase();
        if lower.contains("://") || lower.contains('/') {
            return Err(bad("expected a domain such as example.com, not a URL"));
        }
        let (host, port) = match lower.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (
                host.to_string(),
                Some(
                    port.parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| bad("the port is not a number 1-65535"))?,
                ),
            ),
            _ => (lower.clone(), None),
        };
        let (host, subdomains) = match host.strip_prefix("*.") {
            Some(rest) => (rest.to_string(), true),
            None => (host, false),
        };
        let host = host.trim_end_matches('.').to_string();
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
        if !valid {
            return Err(bad(
                "expected a domain such as example.com or *.example.com",
            ));
        }
        Ok(Self {
            host,
            subdomains,
            port,
        })
    }

    fn allows(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        let host_ok = if self.subdomains {
            host.strip_suffix(&self.host)
                .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
        } else {
            host == self.host
        };
        port_ok && host_ok
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subdomains {
            f.write_str("*.")?;
        }
        f.write_str(&self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// One connection the proxy refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    pub host: String,
    pub port: u16,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Refused by the set-up phase's policy (`egress.setup`), before the
    /// agent started.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub during_setup: bool,
}

/// What the proxy lets through in one phase.
#[derive(Debug)]
enum Rules {
    /// Any host, by the proxy's address rules (`allow-all` under a phase).
    Everything,
    /// These, and the agent's hosts once it runs.
    Only(Vec<HostRule>),
    /// Nothing, not even the agent's hosts (`none` under a phase).
    Nothing,
}

impl Rules {
    fn of(policy: &EgressPolicy) -> Self {
        match policy {
            EgressPolicy::AllowAll => Self::Everything,
            EgressPolicy::None => Self::Nothing,
            EgressPolicy::Allow(rules) => Self::Only(rules.clone()),
        }
    }

    fn allows(&self, host: &str, port: u16) -> bool {
        match self {
            Self::Everything => true,
            Self::Only(rules) => rules.iter().any(|r| r.allows(host, port)),
            Self::Nothing => false,
        }
    }
}

/// A sandbox's live egress state: the rules in force (the set-up phase's
/// until the agent starts, then the agent's, which its hosts join) and what
/// was refused. Shared by the proxy, the grant and the run.
#[derive(Debug)]
pub struct EgressLog {
    rules: Mutex<Rules>,
    setup: Mutex<Option<Rules>>,
    /// True once the set-up phase is over: the proxy closes the
    /// connections opened in it.
    setup_over: tokio::sync::watch::Sender<bool>,
    denied: Mutex<Vec<Denial>>,
}

impl EgressLog {
    /// The proxy's state for `agent`'s policy, and `setup`'s until
    /// [`EgressLog::start_agent_phase`].
    pub fn new(agent: &EgressPolicy, setup: Option<&EgressPolicy>) -> Arc<Self> {
        Arc::new(Self {
            rules: Mutex::new(Rules::of(agent)),
            setup: Mutex::new(setup.map(Rules::of)),
            setup_over: tokio::sync::watch::Sender::new(setup.is_none()),
            denied: Mutex::new(vec![]),
        })
    }

    /// The set-up phase is over: the agent's policy is in force from now
    /// on, its declared hosts let through unless that policy is `none`.
    pub fn start_agent_phase(&self, hosts: &[String]) {
        self.setup.lock().unwrap().take();
        self.setup_over.send_replace(true);
        if let Rules::Only(rules) = &mut *self.rules.lock().unwrap() {
            for host in hosts {
                if let Ok(rule) = HostRule::parse(host)
                    && !rules.contains(&rule)
                {
                    rules.push(rule);
                }
            }
        }
    }

    /// Whether the set-up phase is on, and a way to wait for its end.
    pub fn setup_phase(&self) -> (bool, tokio::sync::watch::Receiver<bool>) {
        let over = self.setup_over.subscribe();
        let on = !*over.borrow();
        (on, over)
    }

    /// Whether `host:port` may be reached now; a refusal is recorded.
    pub fn check(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let setup = self.setup.lock().unwrap();
        let allowed = match &*setup {
            Some(rules) => rules.allows(&host, port),
            None => self.rules.lock().unwrap().allows(&host, port),
        };
        drop(setup);
        if !allowed {
            self.refuse(&host, port);
        }
        allowed
    }

    /// Record a refusal of `host:port`.
    pub fn refuse(&self, host: &str, port: u16) {
        let at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let during_setup = self.setup.lock().unwrap().is_some();
        tracing::warn!(
            "egress refused: {host}:{port}{}",
            if during_setup { " (set-up phase)" } else { "" }
        );
        self.denied.lock().unwrap().push(Denial {
            host: host.to_string(),
            port,
            at_ms,
            during_setup,
        });
    }

    /// Every refusal so far, oldest first.
    pub fn denied(&self) -> Vec<Denial> {
        self.denied.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(policy: &str) -> Arc<EgressLog> {
        EgressLog::new(&EgressPolicy::parse(policy).unwrap(), None)
    }

    #[test]
    fn the_policy_words_and_lists_parse() {
        assert_eq!(EgressPolicy::parse("allow-all"), Ok(EgressPolicy::AllowAll));
        assert_eq!(EgressPolicy::parse("none"), Ok(EgressPolicy::None));
        assert_eq!(
            EgressPolicy::parse("deny-all"),
            Ok(EgressPolicy::Allow(vec![]))
        );
        let list = EgressPolicy::parse("github.com, *.npmjs.org,127.0.0.1:8080").unwrap();
        assert_eq!(list.to_string(), "github.com,*.npmjs.org,127.0.0.1:8080");
        assert!(
            EgressPolicy::parse("https://x.com")
                .unwrap_err()
                .contains("not a URL")
        );
        assert!(
            EgressPolicy::parse("x.com:http")
                .unwrap_err()
                .contains("port")
        );
        assert!(EgressPolicy::parse("a b").unwrap_err().contains("`a b`"));
    }

    #[test]
    fn a_rule_allows_its_host_and_ports_and_nothing_near_them() {
        let log = log("github.com,*.npmjs.org,127.0.0.1:8080");
        assert!(log.check("github.com", 443) && log.check("GitHub.com.", 80));
        assert!(!log.check("github.com", 22), "ssh is not http(s)");
        assert!(
            !log.check("api.github.com", 443),
            "no subdomains without *."
        );
        assert!(!log.check("evilgithub.com", 443));
        assert!(log.check("registry.npmjs.org", 443));
        assert!(!log.check("npmjs.org", 443), "*. is subdomains only");
        assert!(!log.check("evilnpmjs.org", 443));
        assert!(log.check("127.0.0.1", 8080) && !log.check("127.0.0.1", 8081));
        let denied = log.denied();
        assert_eq!(denied.len(), 6);
        assert_eq!(
            (denied[0].host.as_str(), denied[0].port),
            ("github.com", 22)
        );
    }

    #[test]
    fn the_agents_hosts_join_deny_all() {
        let log = log("deny-all");
        assert!(!log.check("api.anthropic.com", 443));
        log.start_agent_phase(&["api.anthropic.com".into()]);
        assert!(log.check("api.anthropic.com", 443));
        assert_eq!(log.denied().len(), 1);
        let none = EgressLog::new(&EgressPolicy::None, None);
        none.start_agent_phase(&["api.anthropic.com".into()]);
        assert!(!none.check("api.anthropic.com", 443), "none is nothing");
    }

    #[test]
    fn the_setup_policy_holds_until_the_agent_starts() {
        let setup = EgressPolicy::parse("allow-all").unwrap();
        let log = EgressLog::new(&EgressPolicy::parse("deny-all").unwrap(), Some(&setup));
        assert!(log.check("registry.npmjs.org", 443), "set-up: allow-all");
        assert!(log.check("example.com", 8080));
        log.start_agent_phase(&["api.anthropic.com".into()]);
        assert!(!log.check("registry.npmjs.org", 443), "the agent: deny-all");
        assert!(log.check("api.anthropic.com", 443));
        let denied = log.denied();
        assert_eq!(denied.len(), 1);
        assert!(!denied[0].during_setup);

        let narrow = EgressPolicy::parse("deny-all").unwrap();
        let log = EgressLog::new(&EgressPolicy::AllowAll, Some(&narrow));
        assert!(!log.check("example.com", 443));
        assert!(log.denied()[0].during_setup);
        log.start_agent_phase(&[]);
        assert!(log.check("example.com", 443), "the agent: allow-all");
    }
}
