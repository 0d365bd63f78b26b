//! What the user's policy contains in a container sandbox: its resource
//! limits and its egress policy. The host takes these keys out of a
//! container provider's options before the provider sees them and applies
//! them to every container the grant creates (ADR 0022).

use std::sync::Arc;

use super::limits::{self, ResourceLimits};
use crate::capability::egress::{self, EgressLog, EgressPolicy};
use crate::capability::gateway::Gateway;

/// A sandbox's containment, part of its containers grant.
#[derive(Clone, Debug, Default)]
pub struct Containment {
    pub limits: ResourceLimits,
    pub egress: EgressPolicy,
    /// The set-up phase's policy (`egress.setup`), when it differs.
    pub setup_egress: Option<EgressPolicy>,
    /// The proxy's rules and refusals, when the sandbox goes through the
    /// proxy ([`Containment::proxied`]); shared by the grant's instances
    /// and the run.
    pub egress_log: Option<Arc<EgressLog>>,
    /// The run's credential gateway, which the container reaches through
    /// its link (set by the run, not by a key).
    pub gateway: Option<Arc<Gateway>>,
    /// `limits.memory` is a fan-out's share, not the user's: an engine
    /// that cannot apply it (rootless on cgroup v1) runs without it.
    pub shared_memory: bool,
}

impl Containment {
    /// Whether `key` is one the host takes for containment.
    pub fn is_key(key: &str) -> bool {
        key == egress::KEY || key == egress::SETUP_KEY || limits::KEYS.contains(&key)
    }

    /// The containment `config` asks for; its keys are removed from it.
    /// A key given twice takes the last value, as other options do.
    pub fn take_from(config: &mut Vec<(String, String)>) -> Result<Self, String> {
        let mut containment = Containment::default();
        let mut rest = Vec::with_capacity(config.len());
        for (key, value) in config.drain(..) {
            if key == egress::KEY {
                containment.egress = EgressPolicy::parse(&value)?;
            } else if key == egress::SETUP_KEY {
                containment.setup_egress = Some(
                    EgressPolicy::parse(&value)
                        .map_err(|e| format!("{}: {e}", egress::SETUP_KEY))?,
                );
            } else if !containment.limits.set(&key, &value)? {
                rest.push((key, value));
            }
        }
        *config = rest;
        if containment.setup_egress.as_ref() == Some(&containment.egress) {
            containment.setup_egress = None;
        }
        if containment.proxied() {
            containment.egress_log = Some(EgressLog::new(
                &containment.egress,
                containment.setup_egress.as_ref(),
            ));
        }
        Ok(containment)
    }

    /// Whether programs in the sandbox reach out through the host's proxy:
    /// under a domain list or `deny-all`, and whenever the set-up phase's
    /// policy differs from the agent's (the proxy switches between them;
    /// the network could not).
    pub fn proxied(&self) -> bool {
        matches!(self.egress, EgressPolicy::Allow(_)) || self.setup_egress.is_some()
    }

    /// Whether the host decides the sandbox's network: a provider may not
    /// name one.
    pub fn decides_network(&self) -> bool {
        self.egress != EgressPolicy::AllowAll || self.proxied()
    }

    /// Give each of `share` sandboxes run side by side an equal part of the
    /// machine's memory, when the user set no `memory=`: the parts never add
    /// up to more than the machine has, less a quarter kept for the host.
    pub fn share_memory(&mut self, share: u32) {
        if self.limits.memory.is_some() || share <= 1 {
            return;
        }
        if let Some(total) = machine_memory() {
            let part = total / 4 * 3 / u64::from(share);
            // Below this an agent CLI cannot start; leave it to the engine.
            if part >= 256 << 20 {
                self.limits.memory = Some(part);
                self.shared_memory = true;
            }
        }
    }
}

/// The machine's memory in bytes, from /proc/meminfo.
fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_containment_keys_leave_the_providers_options() {
        let mut config = vec![
            ("image".to_string(), "x".to_string()),
            ("memory".into(), "1g".into()),
            ("egress".into(), "github.com".into()),
            ("pids".into(), "100".into()),
        ];
        let c = Containment::take_from(&mut config).unwrap();
        assert_eq!(config, [("image".to_string(), "x".to_string())]);
        assert_eq!(c.limits.memory, Some(1 << 30));
        assert_eq!(c.egress.to_string(), "github.com");
        assert!(c.egress_log.is_some());
        let mut bad = vec![("memory".to_string(), "lots".to_string())];
        assert!(
            Containment::take_from(&mut bad)
                .unwrap_err()
                .contains("memory")
        );
    }

    #[test]
    fn a_setup_policy_puts_the_sandbox_behind_the_proxy_when_it_differs() {
        let take = |pairs: &[(&str, &str)]| {
            let mut config: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Containment::take_from(&mut config)
        };
        let c = take(&[("egress", "none"), ("egress.setup", "allow-all")]).unwrap();
        assert!(c.proxied() && c.decides_network() && c.egress_log.is_some());
        assert_eq!(c.setup_egress, Some(EgressPolicy::AllowAll));
        let same = take(&[("egress", "deny-all"), ("egress.setup", "deny-all")]).unwrap();
        assert_eq!(same.setup_egress, None, "one phase is no phase");
        let open = take(&[]).unwrap();
        assert!(!open.proxied() && !open.decides_network());
        let err = take(&[("egress.setup", "https://x")]).unwrap_err();
        assert!(err.starts_with("egress.setup: "), "{err}");
    }

    #[test]
    fn a_fan_out_shares_memory_without_overcommitting() {
        let total = machine_memory().unwrap();
        let mut c = Containment::default();
        c.share_memory(4);
        let part = c.limits.memory.unwrap();
        assert!(part * 4 <= total, "{part} x 4 > {total}");
        assert!(c.shared_memory, "a default, which an engine may lack");
        let mut given = Containment::default();
        given.limits.memory = Some(1 << 30);
        given.share_memory(4);
        assert_eq!(given.limits.memory, Some(1 << 30), "the user's value wins");
        assert!(!given.shared_memory);
    }
}
