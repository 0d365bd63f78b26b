//! How long each phase of a run took: `sanddune run --timings` prints them,
//! and the JSON result carries them as `timings`. They say where a run's
//! time goes beyond the agent's own work (host/benches/docker_run.sh).

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

/// One phase: its name (`plugin load`, `iteration 1 exec`, ...) and length.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Phase {
    pub phase: String,
    pub ms: f64,
}

/// The phases of one run, in the order they ended. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Timings(Arc<Mutex<Vec<Phase>>>);

impl Timings {
    pub fn record(&self, phase: impl Into<String>, took: Duration) {
        let phase = Phase {
            phase: phase.into(),
            ms: took.as_secs_f64() * 1000.0,
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
        out += &format!("{:<width$}  {:>9.1} ms  {share:>5.1}%\n", p.phase, p.ms);
    }
    out += &format!("{:<width$}  {total:>9.1} ms\n", "total");
    out
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
}
