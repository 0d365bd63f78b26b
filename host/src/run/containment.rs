//! What a run does with its sandbox's containment (ADR 0022): lets the
//! agent's model API through the egress proxy, explains a failure a
//! resource limit caused, and reports the limits and refusals.

use super::env::EnvMap;
use super::log::RunLog;
use crate::capability::containers::ResourceLimits;
use crate::capability::egress::{Denial, EgressPolicy};
use crate::error::Error;
use crate::plugin::sandbox::Sandbox;

/// The hosts the agent may reach through the proxy: those its provider
/// declares (`egress-hosts`, its model APIs), and every http(s) URL in the
/// env it gets (a gateway in ANTHROPIC_BASE_URL, a local model server), so
/// that the agent can still think.
pub(super) fn agent_hosts(declared: &[String], env: &EnvMap) -> Vec<String> {
    let mut hosts = declared.to_vec();
    for value in env.values() {
        if let Some(host) = url_host(value) {
            hosts.push(host);
        }
    }
    hosts
}

/// `host:port` of an `http://` or `https://` URL.
fn url_host(value: &str) -> Option<String> {
    let (scheme, rest) = value.trim().split_once("://")?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    Some(match authority.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => authority.to_string(),
        _ => format!("{authority}:{default}"),
    })
}

/// The agent starts in the sandbox: the set-up phase's egress policy, if
/// any, ends, and the agent's hosts are let through the proxy, if the
/// sandbox has one.
pub(super) fn start_agent_phase(
    sandbox: &Sandbox,
    declared: &[String],
    env: &EnvMap,
    log: &RunLog,
) {
    let Some(containment) = sandbox.containment() else {
        return;
    };
    let Some(egress) = &containment.egress_log else {
        return;
    };
    if let Some(setup) = &containment.setup_egress {
        log.line(&format!(
            "egress: the set-up phase (egress.setup={setup}) is over: egress={} from now on",
            containment.egress
        ));
    }
    let hosts = agent_hosts(declared, env);
    if !hosts.is_empty() && matches!(containment.egress, EgressPolicy::Allow(_)) {
        log.line(&format!("egress: the agent may reach {}", hosts.join(", ")));
    }
    egress.start_agent_phase(&hosts);
}

/// The sandbox's limits and egress policy as the user would write them,
/// when it has any: what `ps` shows.
pub(super) fn describe(sandbox: &Sandbox) -> Option<String> {
    let c = sandbox.containment()?;
    let mut words = vec![c.limits.to_string()];
    if c.decides_network() {
        words.push(format!("egress={}", c.egress));
    }
    if let Some(setup) = &c.setup_egress {
        words.push(format!("egress.setup={setup}"));
    }
    let words = words
        .into_iter()
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>();
    (!words.is_empty()).then(|| words.join(" "))
}

/// A failed run's error, with the limit that caused it when the sandbox
/// hit one.
pub(super) async fn explain(sandbox: &Sandbox, error: Error) -> Error {
    let hits = sandbox.limit_hits().await;
    if hits.is_empty() {
        return error;
    }
    let why: Vec<String> = hits.iter().map(ToString::to_string).collect();
    match error {
        Error::Agent(message) | Error::Plugin(message) => {
            Error::Agent(format!("{message}: {}", why.join("; ")))
        }
        other => other,
    }
}

/// The sandbox's limits (when any) and the egress the proxy refused, for
/// the run's result; each refusal is also said in the log.
pub(super) fn report(sandbox: &Sandbox, log: &RunLog) -> (Option<ResourceLimits>, Vec<Denial>) {
    let Some(containment) = sandbox.containment() else {
        return (None, vec![]);
    };
    let denied = containment
        .egress_log
        .as_ref()
        .map(|e| e.denied())
        .unwrap_or_default();
    for d in &denied {
        let policy = match &containment.setup_egress {
            Some(setup) if d.during_setup => format!("egress.setup={setup}"),
            _ => format!("egress={}", containment.egress),
        };
        log.line(&format!("egress refused: {}:{} ({policy})", d.host, d.port));
    }
    let limits = (!containment.limits.is_empty()).then_some(containment.limits);
    (limits, denied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_the_agents_env_become_hosts_it_may_reach() {
        let env: EnvMap = [
            (
                "ANTHROPIC_BASE_URL".to_string(),
                "http://127.0.0.1:8080/v1".to_string(),
            ),
            (
                "OPENAI_BASE_URL".into(),
                "https://user:pw@gw.example.com/api".into(),
            ),
            ("ANTHROPIC_API_KEY".into(), "sk-not-a-url".into()),
        ]
        .into_iter()
        .collect();
        let mut hosts = agent_hosts(&["api.anthropic.com".to_string()], &env);
        hosts.sort();
        assert_eq!(
            hosts,
            ["127.0.0.1:8080", "api.anthropic.com", "gw.example.com:443"]
        );
        assert!(agent_hosts(&[], &EnvMap::new()).is_empty());
    }
}
