//! Plugin load times: compiling a component (cold cache), loading it by name
//! from the compiled-component cache (a built-in by its build-time hash, an
//! installed plugin by the hash recorded at install: no reading, no
//! hashing), the same component loaded as a file (read and hashed every
//! time), and instantiating it plus a `describe` call.
//! Run: cargo bench -p sanddune --bench plugin_load [-- FILE.wasm ...]
//! The 0.1 and 0.2 test guests and any component files given after `--` (e.g. the
//! Python and JS examples in target/examples/) are measured as installed
//! plugins after the built-ins.

use std::path::Path;
use std::time::{Duration, Instant};

use sanddune::capability::Capabilities;
use sanddune::plugin::agent::AgentProvider;
use sanddune::plugin::sandbox::SandboxProvider;
use sanddune::plugin::store::{PluginStore, Record};
use sanddune::plugin::{PluginKind, PluginRef, PluginRuntime, RuntimeConfig, builtin, cache};

const ROUNDS: u32 = 50;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(f: impl Fn()) -> Duration {
    median(
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!(
        "{:<24} {:>4} {:>9} {:>11} {:>13} {:>11} {:>14}",
        "plugin", "api", "size", "compile", "load by name", "load file", "inst.+describe"
    );
    let test_dir = Path::new(env!("SANDDUNE_TEST_PLUGIN_DIR"));
    // cargo bench passes `--bench`; everything else is a component file.
    let files: Vec<String> = ["v0_1_sandbox", "v0_1_agent", "v0_2_sandbox", "v0_2_agent"]
        .iter()
        .map(|g| {
            test_dir
                .join(format!("sanddune_test_plugin_{g}.wasm"))
                .display()
                .to_string()
        })
        .chain(std::env::args().skip(1).filter(|a| !a.starts_with("--")))
        .collect();
    let mut plugins: Vec<(String, Vec<u8>, bool)> = builtin::BUILTIN
        .iter()
        .map(|b| (b.name.to_string(), b.bytes.to_vec(), true))
        .collect();
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let name = Path::new(path)
            .file_stem()
            .map_or(path.clone(), |n| n.to_string_lossy().replace('_', "-"));
        plugins.push((name, bytes, false));
    }
    for (name, bytes, is_builtin) in plugins {
        let cache = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        let runtime = PluginRuntime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            store_dir: Some(store.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let t = Instant::now();
        let plugin = runtime.load_bytes(&bytes, &name, None).unwrap();
        let cold = t.elapsed();
        if !is_builtin {
            // Installed as `plugin add` would.
            let record = Record {
                name: name.clone(),
                kind: plugin.kind.noun().split(' ').next().unwrap().into(),
                version: "bench".into(),
                api_version: plugin.api_version.clone(),
                sha256: cache::sha256_hex(&bytes),
                source: name.clone(),
                shadows_builtin: false,
                grants: Capabilities::default(),
                stamp: None,
            };
            PluginStore::open(store.path().to_path_buf())
                .put(&record, &bytes)
                .unwrap();
        }
        let by_name = time(|| {
            runtime
                .load(&PluginRef::Builtin(name.clone()), None)
                .unwrap();
        });
        let file = time(|| {
            runtime.load_bytes(&bytes, &name, None).unwrap();
        });
        let instantiate = time(|| {
            let p = plugin.clone();
            rt.block_on(async {
                match p.kind {
                    PluginKind::Sandbox => drop(SandboxProvider::from_plugin(p).await.unwrap()),
                    PluginKind::Agent => drop(AgentProvider::from_plugin(p).await.unwrap()),
                }
            })
        });
        println!(
            "{:<24} {:>4} {:>5} KiB {:>8.1} ms {:>10.3} ms {:>8.2} ms {:>11.1} us",
            name,
            plugin.api,
            bytes.len() / 1024,
            cold.as_secs_f64() * 1e3,
            by_name.as_secs_f64() * 1e3,
            file.as_secs_f64() * 1e3,
            instantiate.as_secs_f64() * 1e6
        );
    }
}
