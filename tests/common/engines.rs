//! The real container engines, for the tests that use them: whether one is
//! ready, the containers it holds, and mounts for the fakes.

use std::process::Command;

use sanddune::capability::Capabilities;
use sanddune::capability::Limits;
use sanddune::plugin::sandbox::SandboxProvider;
use sanddune::plugin::{Approval, PluginKind, PluginRef, PluginRuntime, RuntimeConfig};

use super::trials::skip;
use super::{TestRepo, cache_dir, fakes_dir, plugin_file, stderr};

pub const IMAGE: &str = "sanddune-test:latest";

/// Skip the test unless `engine` answers and has the test image (under CI
/// a failure).
pub fn require_engine(engine: &str) {
    // Through the engine's API socket, as sanddune reaches it: the podman
    // CLI alone would read its storage without the service running.
    let remote: &[&str] = if engine == "podman" {
        &["--remote"]
    } else {
        &[]
    };
    let out = Command::new(engine)
        .args(remote)
        .args(["image", "inspect", IMAGE])
        .output();
    let why = match out {
        Ok(out) if out.status.success() => return,
        Ok(out) => stderr(&out),
        Err(e) => e.to_string(),
    };
    // The engine's last line says why; podman's first ones are generic advice.
    let why = why.trim().lines().last().unwrap_or_default();
    skip(format!(
        "{engine} is not reachable or has no {IMAGE} (run tests/images/build.sh {engine}): {why}"
    ));
}

/// `docker ps --format` of every sanddune container, running or not.
pub fn containers_with_format(engine: &str, format: &str) -> Vec<String> {
    let out = Command::new(engine)
        .args([
            "ps",
            "-a",
            "--filter",
            "label=sanddune.owner",
            "--format",
            format,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// Containers carrying `label` (KEY=VALUE), running or not.
/// What the engine says of a container, from `inspect --format`.
pub fn inspect(engine: &str, id: &str, format: &str) -> String {
    let out = Command::new(engine)
        .args(["inspect", "--format", format, id])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn containers_with(engine: &str, label: &str) -> Vec<String> {
    let out = Command::new(engine)
        .args(["ps", "-a", "-q", "--filter", &format!("label={label}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// No container labelled `sanddune.<key>=<value>` exists any more.
pub fn assert_no_container_left(engine: &str, key: &str, value: &str) {
    let left = containers_with(engine, &format!("sanddune.{key}={value}"));
    assert!(left.is_empty(), "{engine} containers left behind: {left:?}");
}

/// `--sandbox-opt` mounts that let the fakes record their calls on the
/// host: the test's home is the container's HOME, and the current fakes run
/// from `/sanddune-fakes/bin` (first on the image's PATH) with the test's home
/// as their parent directory, whichever of the two places a fake logs to.
pub fn fake_mounts(repo: &TestRepo) -> Vec<String> {
    let home = repo.home.path().display();
    let fakes = fakes_dir();
    [
        format!("mount={home}:/home/agent"),
        format!("mount={home}:/sanddune-fakes"),
        format!("mount={}:/sanddune-fakes/bin:ro", fakes.display()),
    ]
    .into_iter()
    .flat_map(|m| ["--sandbox-opt".to_string(), m])
    .collect()
}

/// A plugin runtime for the tests that load container providers through
/// the library: the shared component cache, a 64 MiB instance limit.
pub fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache_dir()),
        store_dir: None,
        limits: Limits {
            memory_bytes: 64 << 20,
            cpu_time_per_call: std::time::Duration::from_secs(30),
            http: Default::default(),
        },
        ..Default::default()
    })
    .unwrap()
}

/// A name unique to this test process and moment, for branches and run ids
/// (the providers label their containers with it).
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000)
}

/// The hostile container provider (tests/plugins/hostile-containers),
/// explicitly approved for the containers capability.
pub async fn hostile_provider() -> SandboxProvider {
    let mut plugin = runtime()
        .load(
            &PluginRef::File(plugin_file("sanddune-test-plugin-hostile-containers")),
            Some(PluginKind::Sandbox),
        )
        .unwrap();
    plugin.approval =
        Approval::Approved(Capabilities::from_requests([("containers", "")]).unwrap());
    SandboxProvider::from_plugin(plugin).await.unwrap()
}

/// Build `name` FROM the test image with `dockerfile_tail` after it and
/// the `devcontainer.metadata` label `metadata`, as the official images
/// carry it (given on the command line: a Dockerfile's LABEL would
/// substitute its `${...}`).
pub fn labelled_image(engine: &str, name: &str, dockerfile_tail: &str, metadata: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new(engine)
        .args(["build", "-q", "-t", name, "--label"])
        .arg(format!("devcontainer.metadata={metadata}"))
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    write!(
        child.stdin.take().unwrap(),
        "FROM {IMAGE}\n{dockerfile_tail}"
    )
    .unwrap();
    assert!(child.wait().unwrap().success(), "building {name}");
}

/// `sanddune run --sandbox docker` of the fake claude in the test image,
/// with `extra` arguments.
pub fn docker_run(repo: &TestRepo, prompt: &str, extra: &[&str]) -> Command {
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--sandbox-opt",
        &image,
    ];
    let mounts = fake_mounts(repo);
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(extra);
    repo.command(&args)
}
