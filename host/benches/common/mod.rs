//! What the per-exec benches share: the rounds asked for, a sandbox of a
//! built-in provider, `exec` of `true` timed through it, and the report of
//! the provider against a bare client making the same calls.

use std::path::Path;
use std::time::{Duration, Instant};

use sanddune::plugin::sandbox::{Command, ExecRequest, Sandbox, SandboxProvider, SandboxSpec};
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};

/// Calls before the timed ones, so connections and caches are warm.
const WARM_UP: usize = 10;

/// The rounds given after `--`, else `default`.
pub fn rounds(default: usize) -> usize {
    std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(default)
}

/// A sandbox of the built-in sandbox provider `name` over `worktree`, and
/// the runtime it runs on, to keep while the sandbox is used.
pub async fn sandbox(
    name: &str,
    worktree: &Path,
    env: &[(&str, &str)],
    config: &[(&str, &str)],
) -> (PluginRuntime, Sandbox) {
    let runtime = PluginRuntime::new(RuntimeConfig::default()).unwrap();
    let provider = SandboxProvider::load(&runtime, &PluginRef::Builtin(name.into()))
        .await
        .unwrap();
    let pairs = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let spec = SandboxSpec {
        run_id: "bench".into(),
        name: "bench".into(),
        worktree: worktree.to_path_buf(),
        git_dir: worktree.join(".git"),
        branch: "main".into(),
        env: pairs(env),
        config: pairs(config),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    let sandbox = provider.create(&spec).await.unwrap();
    (runtime, sandbox)
}

/// How long each of `rounds` calls of `exec` of `true` took, after the
/// warm-up.
pub async fn exec_times(sandbox: &mut Sandbox, rounds: usize) -> Vec<Duration> {
    let request = || ExecRequest {
        command: Command::Argv(vec!["true".into()]),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: None,
    };
    let mut times = Vec::with_capacity(rounds);
    for i in 0..WARM_UP + rounds {
        let t = Instant::now();
        let out = sandbox.exec(request(), |_| {}).await.unwrap();
        if i >= WARM_UP {
            times.push(t.elapsed());
        }
        assert_eq!(out.exit_code, 0);
    }
    times
}

/// How long each of `rounds` calls of `call` took, after the warm-up.
pub fn times(rounds: usize, mut call: impl FnMut()) -> Vec<Duration> {
    for _ in 0..WARM_UP {
        call();
    }
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            call();
            t.elapsed()
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Prints the medians of the provider's and the bare client's times and
/// the provider's overhead per exec.
pub fn report(what: &str, bare: &str, provider: Vec<Duration>, bare_times: Vec<Duration>) {
    let rounds = provider.len();
    let (p, b) = (median(provider), median(bare_times));
    let (p, b) = (p.as_secs_f64(), b.as_secs_f64());
    println!("{what}, {rounds} rounds, medians:");
    println!("  {:<34}{:>8.2} ms", "through the provider:", p * 1e3);
    println!("  {:<34}{:>8.2} ms", format!("{bare}:"), b * 1e3);
    println!(
        "  {:<34}{:>8.2} ms ({:.2}x)",
        "overhead per exec:",
        (p - b) * 1e3,
        p / b
    );
}
