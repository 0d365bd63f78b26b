//! Containment of container sandboxes on real engines: the egress policy
//! (`egress=`) and the resource limits (`memory=`, `pids=`, `cpus=`, a
//! fan-out's share), applied by the host to every container (ADR 0022).
//!
//! The egress tests serve two HTTP servers on one of the host's own
//! non-loopback addresses: one on the list, one not. From inside the
//! sandbox the listed one is reachable through the proxy only, and nothing
//! is reachable without it.

mod common;

use common::engines::*;
use common::servers;
use common::trials::{self, trial};
use common::{TestRepo, scaffolded, stderr, stdout};
use sanddune::plugin::PluginRef;
use sanddune::plugin::sandbox::{
    Command as SandboxCommand, ExecRequest, Sandbox, SandboxProvider, SandboxSpec,
};
use serde_json::Value;

/// An HTTP server on one of the host's own non-loopback addresses
/// answering every request with `body`. Returns `ip:port`.
fn serve(body: &'static str) -> String {
    let ip = servers::host_address();
    format!("{ip}:{}", servers::serve(ip, body))
}

fn spec(repo: &TestRepo, run_id: &str, config: &[(&str, &str)], side_by_side: u32) -> SandboxSpec {
    let mut config: Vec<(String, String)> = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    config.push(("image".into(), IMAGE.into()));
    SandboxSpec {
        run_id: run_id.into(),
        name: run_id.into(),
        worktree: repo.path().to_path_buf(),
        git_dir: repo.path().join(".git"),
        branch: "main".into(),
        env: vec![],
        config,
        side_by_side,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    }
}

async fn sandbox(engine: &str, repo: &TestRepo, config: &[(&str, &str)]) -> Sandbox {
    let provider = SandboxProvider::load(&runtime(), &PluginRef::Builtin(engine.into()))
        .await
        .unwrap();
    provider
        .create(&spec(repo, &unique("contain"), config, 1))
        .await
        .unwrap()
}

/// `sh -c line` in the sandbox: (exit code, stdout + stderr).
async fn sh(sandbox: &mut Sandbox, line: &str) -> (i32, String) {
    let request = ExecRequest {
        command: SandboxCommand::Shell(line.into()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(60_000),
    };
    let out = sandbox.exec(request, |_| {}).await.unwrap();
    let text = format!("{}{}", out.stdout, out.stderr);
    (out.exit_code, text.trim_end().to_string())
}

async fn docker_egress_lets_the_listed_host_through_the_proxy_and_nothing_else() {
    egress_list("docker").await
}

async fn podman_egress_lets_the_listed_host_through_the_proxy_and_nothing_else() {
    egress_list("podman").await
}

async fn egress_list(engine: &str) {
    require_engine(engine);
    let (allowed, other) = (serve("allowed"), serve("other"));
    let repo = TestRepo::new();
    let policy = format!("{allowed},example.com");
    let mut sb = sandbox(engine, &repo, &[("egress", &policy)]).await;
    // Plain HTTP through the proxy (absolute URL), and a CONNECT tunnel.
    let (code, out) = sh(
        &mut sb,
        &format!("curl -sS --max-time 20 http://{allowed}/"),
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "allowed"), "plain http");
    let (code, out) = sh(
        &mut sb,
        &format!("curl -sS --max-time 20 --proxytunnel http://{allowed}/"),
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "allowed"), "CONNECT");
    // Not on the list: the proxy refuses, naming it.
    let (_, out) = sh(
        &mut sb,
        &format!("curl -s --max-time 20 -w ' %{{http_code}}' http://{other}/"),
    )
    .await;
    assert!(out.ends_with(" 403") && out.contains(&other), "{out}");
    // Around the proxy there is nothing: curl told not to use it, a raw
    // TCP connect, and DNS all fail, even for the listed host.
    let (code, out) = sh(
        &mut sb,
        &format!("curl -sS --noproxy '*' --max-time 10 http://{allowed}/"),
    )
    .await;
    assert_ne!(code, 0, "a direct connection got through: {out}");
    let (host, port) = allowed.rsplit_once(':').unwrap();
    let (code, out) = sh(
        &mut sb,
        &format!(
            "python3 -c 'import socket; socket.create_connection((\"{host}\", {port}), timeout=10)'"
        ),
    )
    .await;
    assert_ne!(code, 0, "a raw TCP connect got through: {out}");
    assert!(out.contains("unreachable"), "{out}");
    let (code, _) = sh(&mut sb, "getent hosts example.com").await;
    assert_ne!(code, 0, "DNS resolved a name");
    let denied = sb
        .containment()
        .unwrap()
        .egress_log
        .as_ref()
        .unwrap()
        .denied();
    let (other_host, other_port) = other.rsplit_once(':').unwrap();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0].host, other_host);
    assert_eq!(denied[0].port.to_string(), other_port);
    sb.close().await.unwrap();
}

async fn docker_egress_deny_all_and_none_reach_nothing() {
    require_engine("docker");
    let target = serve("reached");
    let repo = TestRepo::new();
    let mut sb = sandbox("docker", &repo, &[("egress", "deny-all")]).await;
    let (_, out) = sh(
        &mut sb,
        &format!("curl -s --max-time 20 -w ' %{{http_code}}' http://{target}/"),
    )
    .await;
    assert!(out.ends_with(" 403"), "deny-all: {out}");
    sb.close().await.unwrap();

    let mut sb = sandbox("docker", &repo, &[("egress", "none")]).await;
    let (code, out) = sh(
        &mut sb,
        "env | grep -ci _proxy; ip route 2>/dev/null; tail -n +2 /proc/net/route",
    )
    .await;
    assert_eq!(
        out.trim(),
        "0",
        "no proxy variables and no routes: {code} {out}"
    );
    let (code, out) = sh(&mut sb, &format!("curl -sS --max-time 10 http://{target}/")).await;
    assert_ne!(code, 0, "none: {out}");
    sb.close().await.unwrap();
}

/// The egress run end to end: the agent's request to a host not on the list
/// is in the result's `deniedEgress` and the log, and the run still lands.
fn docker_a_runs_refused_egress_is_in_its_result_and_log() {
    require_engine("docker");
    let (allowed, other) = (serve("allowed"), serve("other"));
    let repo = TestRepo::new();
    let branch = unique("egress");
    let policy = format!("egress={allowed}");
    let prompt = format!(
        "add a note\nFAKE:run:curl -s http://{allowed}/\nFAKE:run:curl -s -o /dev/null -w %{{http_code}} http://{other}/"
    );
    let out = docker_run(
        &repo,
        &prompt,
        &["--branch", &branch, "--json", "--sandbox-opt", &policy],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains("allowed (exit 0)") && text.contains("403 (exit 0)"),
        "{text}"
    );
    let denied = result["deniedEgress"].as_array().unwrap();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        format!(
            "{}:{}",
            denied[0]["host"].as_str().unwrap(),
            denied[0]["port"]
        ),
        other
    );
    assert!(denied[0]["atMs"].as_u64().unwrap() > 0);
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(log.contains(&format!("egress refused: {other}")), "{log}");
    assert!(
        log.contains("the agent may reach api.anthropic.com"),
        "{log}"
    );
    assert!(!repo.git(&["log", "-1", "--format=%s", &branch]).is_empty());
    assert_no_container_left("docker", "name", &branch);
}

/// `[sandboxOptions]` in .sanddune/config.toml sets containment for every
/// run; a flag wins over it.
fn docker_the_project_config_sets_limits_and_a_flag_wins() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[sandboxOptions]\nmemory = \"300m\"\negress = \"none\"\n",
    )
    .unwrap();
    let out = docker_run(
        &repo,
        "add a note",
        &["--json", "--sandbox-opt", "egress=allow-all"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["limits"]["memory"], 300u64 << 20);
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(!log.contains("egress"), "the flag's allow-all won: {log}");
}

fn run_limited(repo: &TestRepo, branch: &str, prompt: &str, limit: &str) -> std::process::Output {
    docker_run(repo, prompt, &["--branch", branch, "--sandbox-opt", limit])
        .output()
        .unwrap()
}

fn docker_an_agent_killed_at_its_memory_limit_fails_naming_memory() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("hog");
    let out = run_limited(&repo, &branch, "eat memory FAKE:hog-memory", "memory=128m");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("memory=128m") && err.contains("OOM"), "{err}");
    assert_no_container_left("docker", "name", &branch);
}

fn docker_a_fork_bomb_stops_at_the_pids_limit_and_fails_naming_pids() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("forks");
    let out = run_limited(&repo, &branch, "fork FAKE:fork-bomb", "pids=64");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("pids=64"), "{err}");
    assert_no_container_left("docker", "name", &branch);
}

/// `disk=` where the storage driver can cap a container (xfs with pquota,
/// btrfs, zfs) reaches the engine; elsewhere (overlay2 on ext4, as here)
/// create fails saying what it needs, and leaves no container.
async fn docker_disk_is_applied_or_refused_naming_what_it_needs() {
    require_engine("docker");
    let repo = TestRepo::new();
    let run_id = unique("disk");
    let provider = SandboxProvider::load(&runtime(), &PluginRef::Builtin("docker".into()))
        .await
        .unwrap();
    match provider
        .create(&spec(&repo, &run_id, &[("disk", "1g")], 1))
        .await
    {
        Ok(mut sb) => {
            let id = sb.state().await.unwrap();
            assert_eq!(
                inspect("docker", &id, "{{.HostConfig.StorageOpt.size}}"),
                (1u64 << 30).to_string()
            );
            sb.close().await.unwrap();
        }
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("disk= needs a storage driver that can cap"),
                "{e}"
            );
        }
    }
    assert_no_container_left("docker", "run", &run_id);
}

/// `ps` shows a running sandbox's limits and policy as the user wrote them.
fn docker_ps_shows_the_containment_of_a_running_sandbox() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mut run = docker_run(
        &repo,
        "wait FAKE:wait-attached",
        &[
            "--sandbox-opt",
            "memory=256m",
            "--sandbox-opt",
            "egress=none",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let runs = loop {
        let runs: Value = serde_json::from_str(&stdout(&repo.sanddune(&["ps", "--json"]))).unwrap();
        if runs[0]["containment"].is_string() {
            break runs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no containment in ps: {runs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(runs[0]["containment"], "memory=256m egress=none");
    let table = stdout(&repo.sanddune(&["ps"]));
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("CONTAINMENT") && table.contains("memory=256m egress=none"),
        "{table}"
    );
    // The fake goes on once `attached` is in the git dir.
    std::fs::write(repo.path().join(".git/attached"), "").unwrap();
    assert!(run.wait().unwrap().success());
}

/// A workflow fan-out onto docker: each item's sandbox gets an equal share
/// of the machine's memory (2 at once here), and the result says so.
fn docker_a_workflow_fan_out_gives_each_sandbox_a_share_of_memory() {
    require_engine("docker");
    let repo = scaffolded(
        "parallel-planner",
        &[("1", "one"), ("2", "two"), ("3", "three")],
    );
    // The planner runs on the host's test-isolated sandbox (the scripted
    // agent is on its PATH); the implementers in docker run the test
    // image's fake claude.
    let file = repo
        .path()
        .join(".sanddune/workflows/parallel-planner.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .replacen(
            "name = \"plan\"\n",
            "name = \"plan\"\nsandbox = \"test-isolated\"\n",
            1,
        )
        .replacen(
            "name = \"implement\"\n",
            &format!("name = \"implement\"\nsandbox = \"docker\"\nsandboxOptions = {{ image = \"{IMAGE}\" }}\n"),
            1,
        )
        // Its prompt without the template's `gh` calls, which the image's
        // PATH does not serve.
        .replacen(
            "promptFile = \"prompts/implement.md\"",
            "prompt = \"implement the task\"",
            1,
        )
        .lines()
        .filter(|l| !l.starts_with("promptArgs"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&file, text).unwrap();
    let out = repo.sanddune(&[
        "workflow",
        "run",
        "parallel-planner",
        "--parallel",
        "2",
        "--json",
    ]);
    let result: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stderr(&out)));
    assert!(out.status.success(), "{}", stderr(&out));
    let total = machine_memory();
    let items = result["steps"][1]["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for item in items {
        let memory = item["runs"][0]["limits"]["memory"].as_u64().unwrap();
        assert_eq!(memory, total / 4 * 3 / 2, "{item}");
    }
    // The planner's sandbox is no container: no limits.
    assert!(result["steps"][0]["items"][0]["runs"][0]["limits"].is_null());
}

fn machine_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

async fn docker_limits_reach_the_engine_and_a_fan_out_shares_memory() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mut sb = sandbox(
        "docker",
        &repo,
        &[("cpus", "1.5"), ("memory", "300m"), ("pids", "200")],
    )
    .await;
    let id = sb.state().await.unwrap();
    assert_eq!(
        inspect(
            "docker",
            &id,
            "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}}"
        ),
        format!("1500000000 {m} {m} 200", m = 300 << 20)
    );
    assert_eq!(
        sb.containment().unwrap().limits.to_string(),
        "cpus=1.5 memory=300m pids=200"
    );
    sb.close().await.unwrap();

    // Four side by side without memory=: each a quarter of three quarters.
    let provider = SandboxProvider::load(&runtime(), &PluginRef::Builtin("docker".into()))
        .await
        .unwrap();
    let mut sb = provider
        .create(&spec(&repo, &unique("share"), &[], 4))
        .await
        .unwrap();
    let id = sb.state().await.unwrap();
    let total = machine_memory();
    let memory: u64 = inspect("docker", &id, "{{.HostConfig.Memory}}")
        .parse()
        .unwrap();
    assert_eq!(memory, total / 4 * 3 / 4);
    assert!(memory * 4 <= total, "the shares overcommit the machine");
    sb.close().await.unwrap();
}

fn a_provider_that_cannot_enforce_a_policy_refuses_it_before_anything_exists() {
    let repo = TestRepo::new();
    // Where the keys are said: plugin inspect of a container provider.
    let inspect = stdout(&repo.sanddune(&["plugin", "inspect", "docker"]));
    assert!(
        inspect.contains("containment (applied by the host") && inspect.contains("memory=SIZE"),
        "{inspect}"
    );
    assert!(inspect.contains("snapshot=auto|off"), "{inspect}");
    let inspect = stdout(&repo.sanddune(&["plugin", "inspect", "test-isolated"]));
    assert!(!inspect.contains("containment"), "{inspect}");
    assert!(!inspect.contains("snapshot="), "{inspect}");
    for opt in ["egress=none", "memory=1g"] {
        let out = repo.sanddune(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--branch",
            "nope",
            "--sandbox-opt",
            opt,
        ]);
        assert_eq!(out.status.code(), Some(2), "{opt}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("cannot enforce {opt}")), "{err}");
        assert!(
            repo.git(&["branch", "--list", "nope"]).is_empty(),
            "a branch was made"
        );
    }
    // Nor can it keep a snapshot: only the host commits a container.
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
        "--sandbox-opt",
        "snapshot=auto",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot keep a snapshot (snapshot=auto)"),
        "{}",
        stderr(&out)
    );
    // A snapshot option that does not parse is refused by name.
    for (opt, says) in [
        ("snapshot=on", "snapshot must be auto or off"),
        ("snapshot.inputs=../x", "not a relative path inside"),
    ] {
        let out = repo.sanddune(&[
            "run",
            "--sandbox",
            "docker",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--sandbox-opt",
            "snapshot=auto",
            "--sandbox-opt",
            opt,
        ]);
        assert_eq!(out.status.code(), Some(2), "{opt}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{opt}: {}", stderr(&out));
    }
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
        "--sandbox-opt",
        "egress=https://github.com",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a URL"), "{}", stderr(&out));
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
        "--sandbox-opt",
        "egress=none",
        "--sandbox-opt",
        "network=bridge",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("do not go together"),
        "{}",
        stderr(&out)
    );
}

/// The hostile container provider names a network under an egress policy:
/// refused, every time, and nothing is left.
async fn a_hostile_provider_cannot_name_a_network_around_the_egress_policy() {
    require_engine("docker");
    let repo = TestRepo::new();
    for attack in ["network-bridge", "network-mode-bridge"] {
        for policy in ["deny-all", "none", "example.com"] {
            let run_id = unique("hostile");
            let provider = hostile_provider().await;
            let config = [("attack", attack), ("egress", policy)];
            let err = match provider.create(&spec(&repo, &run_id, &config, 1)).await {
                Ok(_) => panic!("{attack} under egress={policy} succeeded"),
                Err(e) => e.to_string(),
            };
            assert!(!err.contains("LEAKED"), "{attack}/{policy}: {err}");
            assert!(
                err.contains("refused: network `bridge`")
                    && err.contains(&format!("egress={policy}")),
                "{attack}/{policy}: {err}"
            );
            assert_no_container_left("docker", "run", &run_id);
        }
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(async docker_egress_lets_the_listed_host_through_the_proxy_and_nothing_else),
        trial!(async podman_egress_lets_the_listed_host_through_the_proxy_and_nothing_else),
        trial!(async docker_egress_deny_all_and_none_reach_nothing),
        trial!(docker_a_runs_refused_egress_is_in_its_result_and_log),
        trial!(docker_an_agent_killed_at_its_memory_limit_fails_naming_memory),
        trial!(docker_a_fork_bomb_stops_at_the_pids_limit_and_fails_naming_pids),
        trial!(async docker_limits_reach_the_engine_and_a_fan_out_shares_memory),
        trial!(docker_ps_shows_the_containment_of_a_running_sandbox),
        trial!(docker_a_workflow_fan_out_gives_each_sandbox_a_share_of_memory),
        trial!(docker_the_project_config_sets_limits_and_a_flag_wins),
        trial!(async docker_disk_is_applied_or_refused_naming_what_it_needs),
        trial!(a_provider_that_cannot_enforce_a_policy_refuses_it_before_anything_exists),
        trial!(async a_hostile_provider_cannot_name_a_network_around_the_egress_policy),
    ])
}
