//! Resource limits the user sets on a container sandbox (`cpus=`,
//! `memory=`, `pids=`, `disk=`): parsed by the host, applied by the host to
//! every container the grant creates, and read back from the container's
//! cgroup to say which one stopped the agent. A provider cannot set or
//! widen them: the contract has no field for them.

use std::fmt;

use bollard::models::HostConfig;
use serde::Serialize;

/// The keys the host takes out of a container provider's options.
pub const KEYS: [&str; 4] = ["cpus", "memory", "pids", "disk"];

/// What one sandbox may use; None is the engine's default (no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ResourceLimits {
    /// CPUs, fractional (`1.5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory in bytes, swap included (no swap beyond it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Processes and threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<i64>,
    /// Size of the container's writable layer, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<u64>,
}

impl ResourceLimits {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Take `key=value` when `key` is one of [`KEYS`]; false for any other key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let value = value.trim();
        match key {
            "cpus" => {
                self.cpus = Some(
                    value
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite() && *n >= 0.01)
                        .ok_or_else(|| {
                            format!("cpus=`{value}`: expected a number of CPUs such as 2 or 0.5")
                        })?,
                )
            }
            "memory" => self.memory = Some(size("memory", value, 6 << 20)?),
            "pids" => {
                self.pids = Some(value.parse::<i64>().ok().filter(|n| *n >= 16).ok_or_else(
                    || format!("pids=`{value}`: expected a number of processes, at least 16"),
                )?)
            }
            "disk" => self.disk = Some(size("disk", value, 64 << 20)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Put the limits on a container's host config. Memory caps swap too,
    /// so a hog is killed at the limit instead of swapping the machine.
    pub(super) fn apply(&self, host: &mut HostConfig) {
        if let Some(cpus) = self.cpus {
            host.nano_cpus = Some((cpus * 1e9) as i64);
        }
        if let Some(memory) = self.memory {
            host.memory = Some(memory as i64);
            host.memory_swap = Some(memory as i64);
        }
        if let Some(pids) = self.pids {
            host.pids_limit = Some(pids);
        }
        if let Some(disk) = self.disk {
            host.storage_opt = Some([("size".to_string(), disk.to_string())].into());
        }
    }

    /// The limits a container hit, from its cgroup counters read on the
    /// host (no exec: a container at its pids limit cannot start one).
    /// Empty when none was hit or the counters cannot be read.
    pub fn hits(&self, pid: u32) -> Vec<LimitHit> {
        let mut hits = Vec::new();
        if let Some(memory) = self.memory
            && counter(
                pid,
                "memory",
                &["memory.events", "memory.oom_control"],
                "oom_kill",
            ) > 0
        {
            hits.push(LimitHit::Memory(memory));
        }
        if let Some(pids) = self.pids
            && counter(pid, "pids", &["pids.events"], "max") > 0
        {
            hits.push(LimitHit::Pids(pids));
        }
        hits
    }
}

impl fmt::Display for ResourceLimits {
    /// `cpus=2 memory=512m`, as the user would write them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(cpus) = self.cpus {
            parts.push(format!("cpus={cpus}"));
        }
        if let Some(memory) = self.memory {
            parts.push(format!("memory={}", human(memory)));
        }
        if let Some(pids) = self.pids {
            parts.push(format!("pids={pids}"));
        }
        if let Some(disk) = self.disk {
            parts.push(format!("disk={}", human(disk)));
        }
        f.write_str(&parts.join(" "))
    }
}

/// A limit that stopped something in the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitHit {
    Memory(u64),
    Pids(i64),
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitHit::Memory(m) => write!(
                f,
                "the sandbox reached its memory limit (memory={}) and the kernel's OOM killer ended a process; raise it with --sandbox-opt memory=SIZE",
                human(*m)
            ),
            LimitHit::Pids(n) => write!(
                f,
                "the sandbox reached its process limit (pids={n}) and a fork failed; raise it with --sandbox-opt pids=N"
            ),
        }
    }
}

/// `512m`, `4g`, `1.5g`, `1048576` (bytes); k/m/g/t are powers of 1024.
fn size(key: &str, value: &str, min: u64) -> Result<u64, String> {
    let bad = || format!("{key}=`{value}`: expected a size such as 512m, 4g or 1.5g");
    let lower = value.to_ascii_lowercase();
    let lower = lower.strip_suffix('b').unwrap_or(&lower);
    let (number, unit) = match lower.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&lower[..i], c),
        _ => (lower, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        't' => 40,
        _ => return Err(bad()),
    };
    let n: f64 = number.trim().parse().map_err(|_| bad())?;
    if !n.is_finite() || n <= 0.0 {
        return Err(bad());
    }
    let bytes = (n * (1u64 << shift) as f64) as u64;
    if bytes < min {
        return Err(format!(
            "{key}=`{value}` is below the least that works, {}",
            human(min)
        ));
    }
    Ok(bytes)
}

/// Bytes in the largest unit that keeps them whole-ish: `512m`, `1.5g`.
pub fn human(bytes: u64) -> String {
    for (shift, unit) in [(40, 't'), (30, 'g'), (20, 'm'), (10, 'k')] {
        let whole = 1u64 << shift;
        if bytes >= whole {
            let n = bytes as f64 / whole as f64;
            return if (n - n.round()).abs() < 0.005 {
                format!("{}{unit}", n.round() as u64)
            } else {
                format!("{n:.1}{unit}")
            };
        }
    }
    bytes.to_string()
}

/// The value of `key` in the first of `files` that exists in `pid`'s
/// cgroup for `controller` (cgroup v1), or in its unified cgroup (v2).
fn counter(pid: u32, controller: &str, files: &[&str], key: &str) -> u64 {
    let Ok(cgroups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return 0;
    };
    let mut dirs = Vec::new();
    for line in cgroups.lines() {
        // `ID:controllers:path`; v2's line is `0::path`.
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next(), fields.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        if controllers.is_empty() {
            dirs.push(format!("/sys/fs/cgroup{path}"));
        } else if controllers.split(',').any(|c| c == controller) {
            dirs.push(format!("/sys/fs/cgroup/{controllers}{path}"));
        }
    }
    dirs.iter()
        .flat_map(|dir| files.iter().map(move |f| format!("{dir}/{f}")))
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_parse_as_a_user_writes_them() {
        let mut l = ResourceLimits::default();
        assert!(l.set("memory", "512m").unwrap());
        assert!(l.set("cpus", "1.5").unwrap());
        assert!(l.set("pids", "256").unwrap());
        assert!(l.set("disk", "2G").unwrap());
        assert!(!l.set("image", "x").unwrap(), "not a limit");
        assert_eq!(l.memory, Some(512 << 20));
        assert_eq!(l.disk, Some(2 << 30));
        assert_eq!(l.to_string(), "cpus=1.5 memory=512m pids=256 disk=2g");
        let mut host = HostConfig::default();
        l.apply(&mut host);
        assert_eq!(host.nano_cpus, Some(1_500_000_000));
        assert_eq!(host.memory_swap, host.memory, "no swap beyond the limit");
        assert_eq!(host.pids_limit, Some(256));
    }

    #[test]
    fn bad_limits_are_refused_naming_the_key() {
        let mut l = ResourceLimits::default();
        assert!(
            l.set("memory", "lots")
                .unwrap_err()
                .contains("memory=`lots`")
        );
        assert!(l.set("memory", "1k").unwrap_err().contains("below"));
        assert!(l.set("cpus", "-1").unwrap_err().contains("cpus=`-1`"));
        assert!(l.set("pids", "3").unwrap_err().contains("at least 16"));
        assert!(l.set("disk", "5x").unwrap_err().contains("disk=`5x`"));
    }

    #[test]
    fn a_hit_names_the_limit_and_how_to_raise_it() {
        let m = LimitHit::Memory(256 << 20).to_string();
        assert!(m.contains("memory=256m") && m.contains("OOM"), "{m}");
        assert!(LimitHit::Pids(64).to_string().contains("pids=64"));
        assert_eq!(human(1536 << 20), "1.5g");
    }
}
