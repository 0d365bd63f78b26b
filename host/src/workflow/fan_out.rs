//! Bounded parallel fan-out: at most `parallel` items in flight at once.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::{FutureExt, StreamExt};

/// Run `f(index, item)` for every item, at most `parallel` at a time (at
/// least one), and return the results in the items' order. Items run
/// concurrently on the caller's task, so their futures need not be `Send`
/// (an agent run spends its time waiting on the sandbox). One item failing
/// does not stop the others; a panicking item is reported through
/// `on_panic`.
pub async fn fan_out<T, R, F, Fut>(
    items: Vec<T>,
    parallel: usize,
    f: F,
    on_panic: impl Fn(usize, String) -> R,
) -> Vec<R>
where
    F: Fn(usize, T) -> Fut,
    Fut: Future<Output = R>,
{
    let f = &f;
    let settled: Vec<(usize, std::thread::Result<R>)> =
        futures_util::stream::iter(items.into_iter().enumerate())
            .map(|(i, item)| async move { (i, AssertUnwindSafe(f(i, item)).catch_unwind().await) })
            .buffered(parallel.max(1))
            .collect()
            .await;
    settled
        .into_iter()
        .map(|(i, r)| {
            r.unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                on_panic(i, message)
            })
        })
        .collect()
}

/// The default cap: the number of cores.
pub fn default_parallel() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_more_than_the_cap_and_results_keep_their_order() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let results = fan_out(
            (0..12).collect(),
            3,
            |i, n: u64| {
                let (running, peak) = (running.clone(), peak.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    // Later items finish first: order must still hold.
                    tokio::time::sleep(Duration::from_millis(30 - 2 * n)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    i * 10
                }
            },
            |_, _| usize::MAX,
        )
        .await;
        assert_eq!(results, (0..12).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_panicking_item_is_reported_and_the_rest_finish() {
        let results = fan_out(
            vec![1, 2, 3],
            0,
            |_, n: i32| async move {
                if n == 2 {
                    panic!("boom");
                }
                Ok(n)
            },
            |i, e| Err(format!("{i}: {e}")),
        )
        .await;
        assert_eq!(results[0], Ok(1));
        assert_eq!(results[1], Err("1: boom".to_string()));
        assert_eq!(results[2], Ok(3));
    }
}
