//! Builds the wasm plugins (built-in providers and the test-only components)
//! for wasm32-wasip2 with a nested cargo, the way wasmtime builds its
//! test-programs, so a plain `cargo build` / `cargo test` at the root is enough.
//! The built-in ones are embedded in the binary (see `plugin::builtin`).
//! It builds the egress forwarder the same way, as a static musl binary
//! that runs in any container (see `capability::egress::forward`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Built-in providers: (plugin name, crate name).
const BUILTIN: &[(&str, &str)] = &[
    ("claude-code", "sanddune-plugin-claude-code"),
    ("test-isolated", "sanddune-plugin-test-isolated"),
    ("demo", "sanddune-plugin-demo"),
    ("codex", "sanddune-plugin-codex"),
    ("cursor", "sanddune-plugin-cursor"),
    ("copilot", "sanddune-plugin-copilot"),
    ("gemini", "sanddune-plugin-gemini"),
    ("qwen-code", "sanddune-plugin-qwen-code"),
    ("opencode", "sanddune-plugin-opencode"),
    ("pi", "sanddune-plugin-pi"),
    ("docker", "sanddune-plugin-docker"),
    ("podman", "sanddune-plugin-podman"),
    ("vercel", "sanddune-plugin-vercel"),
    ("daytona", "sanddune-plugin-daytona"),
    ("kubernetes", "sanddune-plugin-kubernetes"),
    ("bubblewrap", "sanddune-plugin-bubblewrap"),
];

/// Components built only for the tests (not embedded).
const TEST_ONLY: &[(&str, &str)] = &[
    ("hostile", "sanddune-test-plugin-hostile"),
    (
        "hostile-containers",
        "sanddune-test-plugin-hostile-containers",
    ),
    ("hostile-http", "sanddune-test-plugin-hostile-http"),
    ("hostile-pods", "sanddune-test-plugin-hostile-pods"),
    ("future-api", "sanddune-test-plugin-future-api"),
    ("not-a-plugin", "sanddune-test-plugin-not-a-plugin"),
    (
        "undeclared-import",
        "sanddune-test-plugin-undeclared-import",
    ),
    ("liar", "sanddune-test-plugin-liar"),
    (
        "third-party-preflight",
        "sanddune-test-plugin-third-party-preflight",
    ),
    // Built against the frozen wit/v0.1 to v0.6: older components keep
    // loading.
    ("v0-1-sandbox", "sanddune-test-plugin-v0-1-sandbox"),
    ("v0-1-agent", "sanddune-test-plugin-v0-1-agent"),
    ("v0-2-sandbox", "sanddune-test-plugin-v0-2-sandbox"),
    ("v0-2-agent", "sanddune-test-plugin-v0-2-agent"),
    ("v0-3-sandbox", "sanddune-test-plugin-v0-3-sandbox"),
    ("v0-3-agent", "sanddune-test-plugin-v0-3-agent"),
    ("v0-4-sandbox", "sanddune-test-plugin-v0-4-sandbox"),
    ("v0-4-agent", "sanddune-test-plugin-v0-4-agent"),
    ("v0-5-sandbox", "sanddune-test-plugin-v0-5-sandbox"),
    ("v0-5-agent", "sanddune-test-plugin-v0-5-agent"),
    ("v0-6-sandbox", "sanddune-test-plugin-v0-6-sandbox"),
    ("v0-6-agent", "sanddune-test-plugin-v0-6-agent"),
    ("v0-7-sandbox", "sanddune-test-plugin-v0-7-sandbox"),
    ("v0-7-agent", "sanddune-test-plugin-v0-7-agent"),
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for dir in ["wit", "plugins", "tests/plugins", "egress-forward"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );

    // Under cargo-fuzz (`--cfg fuzzing`, a nightly that may lack the wasm
    // target) the fuzz targets need only the pure modules: embed nothing.
    if env::var_os("CARGO_CFG_FUZZING").is_some() {
        let test_dir = out_dir.join("test-plugins");
        fs::create_dir_all(&test_dir).unwrap();
        fs::write(out_dir.join("builtin_plugins.rs"), "&[]").unwrap();
        let forward = out_dir.join("sanddune-egress-forward");
        fs::write(&forward, b"").unwrap();
        println!(
            "cargo:rustc-env=SANDDUNE_EGRESS_FORWARD={}",
            forward.display()
        );
        println!(
            "cargo:rustc-env=SANDDUNE_TEST_PLUGIN_DIR={}",
            test_dir.display()
        );
        return;
    }

    // A target dir of its own: the outer cargo holds the lock on the main one.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(|t| t.join("wasm-plugins"))
        .unwrap_or_else(|| root.join("target/wasm-plugins"));

    let mut cmd = nested_cargo(&root, "wasm32-wasip2", &target_dir);
    for (_, krate) in BUILTIN.iter().chain(TEST_ONLY) {
        cmd.args(["-p", krate]);
    }
    let status = cmd
        .status()
        .expect("failed to start cargo for the wasm plugins");
    if !status.success() {
        panic!(
            "building the wasm plugins failed (the cargo output above says why); if the target is missing: rustup target add wasm32-wasip2"
        );
    }
    build_forwarder(&root, &target_dir, &out_dir);

    let wasm_dir = target_dir.join("wasm32-wasip2/release");
    let mut table = String::from("&[\n");
    for (name, krate) in BUILTIN {
        let dest = copy_component(&wasm_dir, krate, &out_dir);
        // The hash is taken here, once, so loading a built-in never hashes.
        let sha = sha256_hex(&fs::read(&dest).unwrap());
        table.push_str(&format!(
            "    Builtin {{ name: {name:?}, bytes: include_bytes!({:?}), sha256: {sha:?} }},\n",
            dest.display().to_string()
        ));
    }
    table.push(']');
    fs::write(out_dir.join("builtin_plugins.rs"), table).unwrap();

    let test_dir = out_dir.join("test-plugins");
    fs::create_dir_all(&test_dir).unwrap();
    // The tests also load the built-ins from files, as a user's plugin would be.
    for (_, krate) in BUILTIN.iter().chain(TEST_ONLY) {
        copy_component(&wasm_dir, krate, &test_dir);
    }
    println!(
        "cargo:rustc-env=SANDDUNE_TEST_PLUGIN_DIR={}",
        test_dir.display()
    );
}

/// `cargo build --release --target TARGET` into `target_dir`.
fn nested_cargo(root: &Path, target: &str, target_dir: &Path) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--release", "--target", target, "--target-dir"])
        .arg(target_dir);
    // Flags meant for the host (coverage, target-cpu) must not reach these.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The egress forwarder for this machine's architecture, static (musl),
/// stripped, in `$SANDDUNE_EGRESS_FORWARD` for `include_bytes!`.
fn build_forwarder(root: &Path, target_dir: &Path, out_dir: &Path) {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let target = format!("{arch}-unknown-linux-musl");
    let mut cmd = nested_cargo(root, &target, target_dir);
    cmd.args(["-p", "sanddune-egress-forward"]);
    let status = cmd
        .status()
        .expect("failed to start cargo for the egress forwarder");
    if !status.success() {
        panic!(
            "building the egress forwarder failed (the cargo output above says why); if the target is missing: rustup target add {target}"
        );
    }
    let dest = out_dir.join("sanddune-egress-forward");
    fs::copy(
        target_dir
            .join(&target)
            .join("release/sanddune-egress-forward"),
        &dest,
    )
    .unwrap_or_else(|e| panic!("missing the egress forwarder: {e}"));
    println!("cargo:rustc-env=SANDDUNE_EGRESS_FORWARD={}", dest.display());
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn copy_component(wasm_dir: &Path, krate: &str, dest_dir: &Path) -> PathBuf {
    let file = format!("{}.wasm", krate.replace('-', "_"));
    let dest = dest_dir.join(&file);
    fs::copy(wasm_dir.join(&file), &dest)
        .unwrap_or_else(|e| panic!("missing component {file}: {e}"));
    dest
}
