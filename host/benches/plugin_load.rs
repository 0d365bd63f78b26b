//! Plugin load times: compiling a component (cold cache), loading it from the
//! compiled-component cache, and instantiating it plus a `describe` call.
//! Run: cargo bench -p sanddune --bench plugin_load

use std::time::{Duration, Instant};

use sanddune::plugin::agent::AgentProvider;
use sanddune::plugin::sandbox::SandboxProvider;
use sanddune::plugin::{PluginKind, PluginRuntime, RuntimeConfig, builtin};

const ROUNDS: u32 = 50;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!(
        "{:<15} {:>9} {:>14} {:>14} {:>24}",
        "plugin", "size", "compile (cold)", "cached load", "instantiate + describe"
    );
    for (name, bytes) in builtin::BUILTIN {
        let cache = tempfile::tempdir().unwrap();
        let runtime = PluginRuntime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let t = Instant::now();
        let plugin = runtime.load_bytes(bytes, name, None).unwrap();
        let cold = t.elapsed();
        let cached = median(
            (0..ROUNDS)
                .map(|_| {
                    let t = Instant::now();
                    runtime.load_bytes(bytes, name, None).unwrap();
                    t.elapsed()
                })
                .collect(),
        );
        let instantiate = median(
            (0..ROUNDS)
                .map(|_| {
                    let p = plugin.clone();
                    rt.block_on(async {
                        let t = Instant::now();
                        match p.kind {
                            PluginKind::Sandbox => {
                                drop(SandboxProvider::from_plugin(p).await.unwrap())
                            }
                            PluginKind::Agent => drop(AgentProvider::from_plugin(p).await.unwrap()),
                        }
                        t.elapsed()
                    })
                })
                .collect(),
        );
        println!(
            "{:<15} {:>6} KiB {:>11.1} ms {:>11.2} ms {:>21.1} us",
            name,
            bytes.len() / 1024,
            cold.as_secs_f64() * 1e3,
            cached.as_secs_f64() * 1e3,
            instantiate.as_secs_f64() * 1e6
        );
    }
}
