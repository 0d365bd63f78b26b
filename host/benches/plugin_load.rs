//! Plugin load times: compiling a component (cold cache), loading it from the
//! compiled-component cache, and instantiating it plus a `describe` call.
//! Run: cargo bench -p sanddune --bench plugin_load [-- FILE.wasm ...]
//! Component files given after `--` (e.g. the Python and JS examples in
//! target/examples/) are measured after the built-ins.

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
        "{:<20} {:>9} {:>14} {:>14} {:>24}",
        "plugin", "size", "compile (cold)", "cached load", "instantiate + describe"
    );
    // cargo bench passes `--bench`; everything else is a component file.
    let files: Vec<(String, Vec<u8>)> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let name = std::path::Path::new(&path)
                .file_name()
                .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
            (name, bytes)
        })
        .collect();
    let plugins = builtin::BUILTIN
        .iter()
        .map(|(name, bytes)| (*name, *bytes))
        .chain(
            files
                .iter()
                .map(|(name, bytes)| (name.as_str(), bytes.as_slice())),
        );
    for (name, bytes) in plugins {
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
            "{:<20} {:>6} KiB {:>11.1} ms {:>11.2} ms {:>21.1} us",
            name,
            bytes.len() / 1024,
            cold.as_secs_f64() * 1e3,
            cached.as_secs_f64() * 1e3,
            instantiate.as_secs_f64() * 1e6
        );
    }
}
