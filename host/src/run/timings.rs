//! How long each phase of a run took: `sanddune run --timings` prints them,
//! and the JSON result carries them as `timings`. They say where a run's
//! time goes beyond the agent's own work (host/benches/docker_run.sh).

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

/// One phase: its name (`plugin load`, `iteration 1 exec`, ...), length,
/// and for a sync, the bytes it moved (into the sandbox for `sync in`, out
/// of it for `sync out`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Phase {
    pub phase: String,
    pub ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// The phases of one run, in the order they ended. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Timings(Arc<Mutex<Vec<Phase>>>);

impl Timings {
    pub fn record(&self, phase: impl Into<String>, took: Duration) {
        self.push(phase.into(), took, None);
    }

    /// A sync's phase, with the bytes it moved.
    pub fn record_bytes(&self, phase: impl Into<String>, took: Duration, bytes: u64) {
        self.push(phase.into(), took, Some(bytes));
    }

    fn push(&self, phase: String, took: Duration, bytes: Option<u64>) {
        let phase = Phase {
            phase,
            ms: took.as_secs_f64() * 1000.0,
            bytes,
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(phase);
    }

    /// Run `work` and record how long it took.
    pub async fn time<T>(&self, phase: impl Into<String>, work: impl Future<Output = T>) -> T {
        let start = Instant::now();
        let out = work.await;
        self.record(phase, start.elapsed());
        out
    }

    pub fn phases(&self) -> Vec<Phase> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Called first thing in `main`: the `process start` phase runs from here
/// to the start of the run (arguments, the async runtime).
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

/// Time since [`mark_process_start`]; none in a library that never called it.
pub fn since_process_start() -> Option<Duration> {
    PROCESS_START.get().map(Instant::elapsed)
}

/// A table for `--timings`: each phase, its share of the total.
pub fn table(phases: &[Phase]) -> String {
    let total: f64 = phases.iter().map(|p| p.ms).sum();
    let width = phases
        .iter()
        .map(|p| p.phase.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = String::new();
    for p in phases {
        let share = if total > 0.0 {
            p.ms * 100.0 / total
        } else {
            0.0
        };
        out += &format!("{:<width$}  {:>9.1} ms  {share:>5.1}%", p.phase, p.ms);
        if let Some(bytes) = p.bytes {
            out += &format!("  {}", human_bytes(bytes));
        }
        out.push('\n');
    }
    out += &format!("{:<width$}  {total:>9.1} ms\n", "total");
    out
}

/// `1.5 MB`, `830 B`: what a sync moved, for people.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_keep_their_order_and_the_table_totals_them() {
        let t = Timings::default();
        t.record("worktree", Duration::from_millis(30));
        t.record("merge", Duration::from_millis(10));
        let phases = t.clone().phases();
        assert_eq!(phases[0].phase, "worktree");
        assert_eq!(phases[1].ms, 10.0);
        let table = table(&phases);
        assert!(
            table.contains("worktree") && table.contains("75.0%"),
            "{table}"
        );
        assert!(table.lines().last().unwrap().contains("40.0 ms"), "{table}");
    }

    #[test]
    fn a_sync_phase_shows_and_serializes_its_bytes() {
        let t = Timings::default();
        t.record_bytes("sync in", Duration::from_millis(5), 7_077_773);
        t.record("hooks", Duration::from_millis(1));
        let table = table(&t.phases());
        assert!(table.lines().next().unwrap().ends_with("7.1 MB"), "{table}");
        assert!(!table.lines().nth(1).unwrap().contains('B'), "{table}");
        let json = serde_json::to_value(t.phases()).unwrap();
        assert_eq!(json[0]["bytes"], 7_077_773);
        assert!(json[1].get("bytes").is_none(), "{json}");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 KB");
        assert_eq!(human_bytes(2_000_000_000), "2.0 GB");
    }
}
