//! The mark an exec carries in its environment inside a sandbox, so the
//! host can find and kill everything it started there: killing the exec's
//! client (docker's or the Kubernetes API server's stream) would leave it
//! running. Shared by the `containers` and `pods` capabilities.

use std::sync::atomic::{AtomicU64, Ordering};

/// The env variable that marks every process of one exec inside the
/// container, so the host can find and kill them all (descendants inherit it).
pub(crate) const EXEC_MARK: &str = "SANDDUNE_EXEC";

/// Run inside a sandbox as `sh -c KILL_SCRIPT sanddune-kill SANDDUNE_EXEC=MARK`:
/// stop every process whose environment carries the exec's mark, twice
/// over to catch children forked meanwhile, then SIGKILL them all. Stopped
/// first, because the walk goes in the order of /proc's names (`10` before
/// `7`): a shell whose child died first would otherwise run its next
/// command ("Killed", then on).
pub(crate) const KILL_SCRIPT: &str = r#"pids=
for round in 1 2; do
  for d in /proc/[0-9]*; do
    if grep -qs "$1" "$d/environ"; then
      kill -STOP "${d#/proc/}" 2>/dev/null && pids="$pids ${d#/proc/}"
    fi
  done
done
[ -z "$pids" ] || kill -9 $pids 2>/dev/null
exit 0"#;

/// A random-enough marker for one exec.
pub(crate) fn exec_mark() -> String {
    use sha2::Digest;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{nanos}:{}:{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let digest = sha2::Sha256::digest(seed.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}
