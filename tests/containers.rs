//! The docker and podman sandbox providers and the confined `containers`
//! capability, on real engines.
//!
//! These tests need a running engine and the image `sanddune-test:latest`
//! (`tests/images/build.sh docker|podman`, which `.ci/run` runs). Without
//! them each test is counted as ignored, with the reason; with `CI` set that
//! is a failure.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use common::engines::*;
use common::trials::{self, trial};
use common::{TestRepo, fakes_dir, plugin_file, stderr};
use sanddune::plugin::PluginRef;
use sanddune::plugin::sandbox::{
    Command as SandboxCommand, ExecRequest, Sandbox, SandboxProvider, SandboxSpec,
};
use sanddune::run::{AgentOptions, BranchStrategy, LogMode, Prompt, RunOptions, SandboxOptions};

/// `sanddune run` with the fake claude inside the test image; HOME in the
/// container is the repo's fake home, mounted, so the fake's call log lands
/// on the host.
fn run_in(
    engine: &str,
    repo: &TestRepo,
    branch: &str,
    prompt: &str,
    extra: &[&str],
) -> std::process::Output {
    let mounts = fake_mounts(repo);
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--branch",
        branch,
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(extra);
    repo.sanddune(&args)
}

fn commit_lands_on_the_branch_with_the_stdin_prompt(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    let branch = unique("fix");
    let out = run_in(engine, &repo, &branch, "fix the typo", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", &branch]),
        "Fix typo in README"
    );
    assert_eq!(
        repo.git(&["show", &format!("{branch}:README.md")])
            .lines()
            .last(),
        Some("This is the readme.")
    );
    // The fake read the prompt from stdin, in the container, in the worktree.
    let calls = repo.calls("claude");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["prompt"], "fix the typo");
    // No positional prompt: the real CLI would put it before stdin's.
    assert!(
        !calls[0]["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "-")
    );
    assert_no_container_left(engine, "name", &branch);
}

fn docker_run_commits_on_the_branch_with_the_stdin_prompt_and_removes_its_container() {
    commit_lands_on_the_branch_with_the_stdin_prompt("docker");
}

fn podman_run_commits_on_the_branch_with_the_stdin_prompt_and_removes_its_container() {
    commit_lands_on_the_branch_with_the_stdin_prompt("podman");
}

fn docker_run_defaults_to_head_and_commits_there() {
    require_engine("docker");
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--sandbox-opt",
        &format!("image={IMAGE}"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "Fix typo in README"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

/// The agent commits in a git dir of its own (ADR 0025), and what the
/// repository's config and hooks gave its commits still holds: the agent's
/// author, the user as committer, the co-author trailer, and the
/// repository's own commit-msg hook (run in the sandbox).
fn docker_the_agents_commits_keep_their_identity_trailer_and_the_repositorys_hook() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[git]\nagentName = \"Fake Agent\"\nagentEmail = \"agent@sanddune.invalid\"\ncoAuthoredBy = \"user\"\n",
    )
    .unwrap();
    let hook = repo.path().join(".git/hooks/commit-msg");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'Reviewed-by: the repo hook' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let branch = unique("identity");
    let out = run_in("docker", &repo, &branch, "fix the typo", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>", &branch]),
        format!(
            "Fake Agent <agent@sanddune.invalid>|{} <{}>",
            common::USER_NAME,
            common::USER_EMAIL
        )
    );
    let message = repo.git(&["log", "-1", "--format=%B", &branch]);
    assert!(
        message.contains(&format!(
            "Co-authored-by: {} <{}>",
            common::USER_NAME,
            common::USER_EMAIL
        )) && message.contains("Reviewed-by: the repo hook"),
        "{message}"
    );
}

fn docker_reports_only_what_the_agent_left_uncommitted_and_round_trips_its_session() {
    require_engine("docker");
    let repo = TestRepo::new();
    // The user's own change before the run is not the agent's.
    std::fs::write(repo.path().join("mine.txt"), "mine\n").unwrap();
    // HOME in the container is the image's own: the session file exists
    // only there until it is captured.
    let home = repo.home.path().display();
    let fakes = fakes_dir();
    let image = format!("image={IMAGE}");
    let mounts = [
        format!("mount={home}:/sanddune-fakes"),
        format!("mount={}:/sanddune-fakes/bin:ro", fakes.display()),
    ];
    let run = |prompt: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--sandbox",
            "docker",
            "--agent",
            "claude-code",
            "--json",
            "--prompt",
            prompt,
            "--sandbox-opt",
            &image,
        ];
        for m in &mounts {
            args.extend(["--sandbox-opt", m]);
        }
        args.extend_from_slice(extra);
        let out = repo.sanddune(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = run("fix the typo FAKE:no-commit", &[]);
    assert_eq!(
        first["uncommittedChanges"],
        serde_json::json!([" M README.md"])
    );
    let it = &first["iterations"][0];
    let id = it["sessionId"].as_str().unwrap();
    let path = it["sessionFilePath"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionFilePath: {first}"));
    assert!(path.starts_with(&*home.to_string()), "{path}");
    let root = repo.path().canonicalize().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(root.to_str().unwrap()), "{text}");
    // As private on the host as the CLI made it in the container.
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{path}: {mode:o}");

    // A fresh container: the agent finds the session where it keeps it.
    repo.git(&["checkout", "--", "README.md"]);
    run("add a note", &["--resume", id]);
    let calls = repo.calls("claude");
    let argv = calls.last().unwrap()["argv"].to_string();
    assert!(argv.contains("--resume") && argv.contains(id), "{argv}");
}

fn docker_an_empty_prompt_fails_before_any_container_exists() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("empty");
    let out = run_in("docker", &repo, &branch, "", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
    assert_no_container_left("docker", "name", &branch);
}

fn docker_a_failed_run_removes_its_container_and_keeps_the_commit() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("failed");
    let out = run_in("docker", &repo, &branch, "note this FAKE:is-error", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The agent committed before failing: the branch keeps its work.
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", &branch]),
        "Add a note"
    );
    assert_no_container_left("docker", "name", &branch);
}

/// Best-of-N on docker where every candidate fails its check: nothing
/// lands, exit 1, and no candidate leaves a container or a worktree.
fn docker_best_of_with_every_check_failing_lands_nothing_and_leaves_no_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let (branch, name) = (unique("best"), unique("best-of"));
    let out = run_in(
        "docker",
        &repo,
        &branch,
        "add a note",
        &["--best-of", "2", "--check", "false", "--name", &name],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no candidate passed the check `false`"),
        "{}",
        stderr(&out)
    );
    assert!(
        repo.git(&["branch", "--list", &branch]).is_empty(),
        "nothing landed"
    );
    for k in 1..=2 {
        assert_no_container_left("docker", "name", &format!("{name}-{k}"));
    }
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

/// A user other than the image's labelled `agent` is checked against the
/// image's own /etc/passwd: root is 0:0 there, so the run commits when the
/// host user is root and is refused naming 0:0 otherwise.
fn docker_a_named_user_is_checked_against_the_images_passwd() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("named-user");
    let out = run_in(
        "docker",
        &repo,
        &branch,
        "fix the typo",
        &["--sandbox-opt", "user=root"],
    );
    let err = stderr(&out);
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        assert!(out.status.success(), "{err}");
        assert_eq!(
            repo.git(&["log", "-1", "--format=%s", &branch]),
            "Fix typo in README"
        );
    } else {
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("user `root` of image"), "{err}");
        assert!(err.contains("is UID:GID 0:0"), "{err}");
    }
    assert_no_container_left("docker", "name", &branch);
}

fn docker_a_uid_mismatch_is_an_actionable_error_and_leaves_nothing() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("uid");
    let out = run_in(
        "docker",
        &repo,
        &branch,
        "fix the typo",
        &["--sandbox-opt", "user=4242:4242"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("UID:GID 4242:4242"), "{err}");
    assert!(err.contains("sanddune docker build-image"), "{err}");
    assert_no_container_left("docker", "name", &branch);
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

fn docker_ctrl_c_mid_iteration_exits_130_and_leaves_no_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("abort");
    let child = repo
        .command(&[
            "run",
            "--sandbox",
            "docker",
            "--agent",
            "claude-code",
            "--prompt",
            "FAKE:hang",
            "--branch",
            &branch,
            "--sandbox-opt",
            &format!("image={IMAGE}"),
        ])
        .args(fake_mounts(&repo))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the fake agent is running inside the container.
    let deadline = Instant::now() + Duration::from_secs(60);
    while repo.calls("claude").is_empty() {
        assert!(Instant::now() < deadline, "the agent never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "abort took {:?}",
        started.elapsed()
    );
    assert_no_container_left("docker", "name", &branch);
}

fn spec(repo: &TestRepo, run_id: &str, config: &[(&str, &str)]) -> SandboxSpec {
    SandboxSpec {
        run_id: run_id.into(),
        name: run_id.into(),
        worktree: repo.path().to_path_buf(),
        git_dir: repo.path().join(".git"),
        branch: "main".into(),
        env: vec![],
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    }
}

fn shell(line: &str) -> ExecRequest {
    ExecRequest {
        command: SandboxCommand::Shell(line.into()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: None,
    }
}

async fn docker_sandbox(repo: &TestRepo, run_id: &str) -> Sandbox {
    sandbox_in("docker", repo, run_id, &[]).await
}

/// A sandbox of the built-in provider `engine` on the test image.
async fn sandbox_in(
    engine: &str,
    repo: &TestRepo,
    run_id: &str,
    config: &[(&str, &str)],
) -> Sandbox {
    let provider = SandboxProvider::load(&runtime(), &PluginRef::Builtin(engine.into()))
        .await
        .unwrap();
    let mut config = config.to_vec();
    config.push(("image", IMAGE));
    provider.create(&spec(repo, run_id, &config)).await.unwrap()
}

async fn docker_exec_streams_each_line_before_the_command_ends() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mut sandbox = docker_sandbox(&repo, &unique("stream")).await;
    let start = Instant::now();
    let mut first = None;
    let out = sandbox
        .exec(
            shell("echo first; sleep 2; echo second >&2; exit 3"),
            |line| {
                if line.text == "first" {
                    first.get_or_insert(start.elapsed());
                }
            },
        )
        .await
        .unwrap();
    let total = start.elapsed();
    let first = first.expect("no first line");
    assert!(
        total - first >= Duration::from_millis(1500),
        "first line at {first:?} of {total:?}"
    );
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stdout, "first\n");
    assert_eq!(out.stderr, "second\n");
    sandbox.close().await.unwrap();
}

async fn docker_abort_kills_the_process_inside_the_container_and_keeps_the_sandbox_and_worktree() {
    abort_kills_inside("docker").await;
}

async fn podman_abort_kills_the_process_inside_the_container_and_keeps_the_sandbox_and_worktree() {
    abort_kills_inside("podman").await;
}

async fn abort_kills_inside(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    let run_id = unique("kill");
    let mut sandbox = sandbox_in(engine, &repo, &run_id, &[]).await;
    let canceller = sandbox.canceller();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        canceller.kill_all();
    });
    let start = Instant::now();
    let out = sandbox
        .exec(
            shell("echo partial > partial.txt; sh -c 'sleep 300' & sleep 301; echo never"),
            |_| {},
        )
        .await
        .unwrap();
    killer.await.unwrap();
    // Killed at 2 s; returning before the host's 3 s drain grace means the
    // processes really died and their output ended.
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "took {:?}",
        start.elapsed()
    );
    assert_ne!(out.exit_code, 0);
    assert!(!out.stdout.contains("never"), "{out:?}");
    // The work so far is in the worktree on the host.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("partial.txt")).unwrap(),
        "partial\n"
    );
    // Nothing of that exec is left running in the container, and the
    // sandbox still works.
    let ps = sandbox
        .exec(shell("ps -eo args | grep -c '[s]leep 30'"), |_| {})
        .await
        .unwrap();
    assert_eq!(ps.stdout.trim(), "0", "{}", ps.stdout);
    sandbox.close().await.unwrap();
    assert_no_container_left(engine, "run", &run_id);
}

async fn docker_a_sandbox_dropped_without_close_still_loses_its_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let run_id = unique("drop");
    let sandbox = docker_sandbox(&repo, &run_id).await;
    assert_eq!(
        containers_with("docker", &format!("sanddune.run={run_id}")).len(),
        1
    );
    drop(sandbox);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !containers_with("docker", &format!("sanddune.run={run_id}")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the container outlived its sandbox"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn docker_file_operations_and_copies_work_through_the_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mut sandbox = docker_sandbox(&repo, &unique("files")).await;
    let src = repo.path().join("in.txt");
    std::fs::write(&src, "hello\n").unwrap();
    sandbox
        .copy_file_in(&src, "/tmp/deep/copied.txt")
        .await
        .unwrap();
    let out = sandbox
        .exec(shell("cat /tmp/deep/copied.txt"), |_| {})
        .await
        .unwrap();
    assert_eq!(out.stdout, "hello\n");
    sandbox
        .copy_file_out("/tmp/deep/copied.txt", &repo.path().join("out/back.txt"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(repo.path().join("out/back.txt")).unwrap(),
        "hello\n"
    );
    // Host paths outside the provider's grant (a session file under the
    // user's home): the host stages them through the scratch dir, so the
    // provider still opens nothing outside its grant.
    let outside = tempfile::tempdir().unwrap();
    let session = outside.path().join("sessions/s.jsonl");
    sandbox
        .copy_file_out("/tmp/deep/copied.txt", &session)
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&session).unwrap(), "hello\n");
    std::fs::write(&session, "resumed\n").unwrap();
    sandbox
        .copy_file_in(&session, "/tmp/deep/resumed.txt")
        .await
        .unwrap();
    let out = sandbox
        .exec(shell("cat /tmp/deep/resumed.txt"), |_| {})
        .await
        .unwrap();
    assert_eq!(out.stdout, "resumed\n");
    sandbox.close().await.unwrap();
}

/// The hostile container provider, explicitly approved for containers: its
/// error, after checking that it left no container behind.
async fn hostile(repo: &TestRepo, attack: &str, target: &str) -> String {
    let run_id = unique("hostile");
    let provider = hostile_provider().await;
    let config = [("attack", attack), ("image", IMAGE), ("target", target)];
    let err = match provider.create(&spec(repo, &run_id, &config)).await {
        Ok(_) => panic!("the hostile provider's create succeeded"),
        Err(e) => e.to_string(),
    };
    assert_no_container_left("docker", "run", &run_id);
    err
}

async fn a_hostile_provider_is_refused_privileges_namespaces_and_host_mounts_every_time() {
    require_engine("docker");
    let repo = TestRepo::new();
    let cases = [
        ("privileged", "privileged mode"),
        ("mount-root", "bind mount of host path `/`"),
        ("mount-escape", "bind mount of host path"),
        ("cap-add", "added capabilities (SYS_ADMIN)"),
        ("device", "host devices (/dev/sda)"),
        ("pid-host", "pid-mode=host"),
        ("network-host", "network-mode=host"),
        ("ipc-host", "ipc-mode=host"),
        ("userns-host", "userns=host"),
        ("label", "label `sanddune.run`"),
    ];
    for round in 0..3 {
        for (attack, refusal) in cases {
            let err = hostile(&repo, attack, "").await;
            assert!(!err.contains("LEAKED"), "round {round}, {attack}: {err}");
            assert!(
                err.contains("refused") && err.contains(refusal),
                "round {round}, {attack}: {err}"
            );
        }
    }
}

async fn a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let start = |labels: &[&str]| {
        let mut args = vec!["run", "-d", "--entrypoint", "sleep"];
        for label in labels {
            args.extend(["--label", label]);
        }
        args.extend([IMAGE, "infinity"]);
        let out = Command::new("docker").args(&args).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // Same plugin name, another run; and no labels at all.
    let other_run = start(&[
        "sanddune.run=another-run",
        "sanddune.plugin=hostile-containers",
    ]);
    let unlabelled = start(&[]);
    for round in 0..3 {
        for target in [&other_run, &unlabelled] {
            let err = hostile(&repo, "foreign", target).await;
            assert!(!err.contains("LEAKED"), "round {round}, {target}: {err}");
            assert_eq!(
                err.matches("refused: container").count(),
                4,
                "round {round}: {err}"
            );
        }
    }
    for id in [&other_run, &unlabelled] {
        let alive = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Running}}", id])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&alive.stdout).trim(), "true");
        Command::new("docker")
            .args(["rm", "-f", id])
            .output()
            .unwrap();
    }
}

/// A provider's preflight must create nothing; the hostile one creates a
/// container anyway, and the host removes it when the check returns.
async fn a_container_made_in_a_preflight_does_not_outlive_it() {
    require_engine("docker");
    let repo = TestRepo::new();
    let run_id = unique("hostile-preflight");
    let provider = hostile_provider().await;
    let checked = provider
        .preflight(&spec(&repo, &run_id, &[("image", IMAGE)]))
        .await
        .unwrap();
    assert_eq!(checked, Some(Ok(())), "the hostile preflight ran");
    assert_no_container_left("docker", "run", &run_id);
}

fn a_component_file_asking_for_containers_is_refused_before_anything_exists() {
    // No engine needed: the refusal comes before the provider runs.
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-hostile-containers");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        file.to_str().unwrap(),
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("asks for containers"), "{err}");
    assert!(err.contains("pass --yes"), "{err}");
    assert!(
        !repo.path().join(".sanddune").exists(),
        "a refusal leaves no trace (no log file)"
    );
}

fn docker_exported_builtins_run_as_files_like_the_builtins() {
    require_engine("docker");
    let repo = TestRepo::new();
    let dir = tempfile::tempdir().unwrap();
    let (docker, claude) = (
        dir.path().join("docker.wasm"),
        dir.path().join("claude-code.wasm"),
    );
    for (name, file) in [("docker", &docker), ("claude-code", &claude)] {
        let out = repo.sanddune(&["plugin", "export", name, "-o", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // The README's usage, as written: no approval asked, it is the built-in.
    let branch = unique("exported");
    let mounts = fake_mounts(&repo);
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        docker.to_str().unwrap(),
        "--agent",
        claude.to_str().unwrap(),
        "--prompt",
        "fix the typo",
        "--branch",
        &branch,
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", &branch]),
        "Fix typo in README"
    );
    assert_no_container_left("docker", "name", &branch);
}

fn docker_build_image_streams_the_build_and_remove_image_removes_it() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::write(
        repo.path().join("Dockerfile.test"),
        "FROM sanddune-test-base:latest\nARG AGENT_UID\nCOPY . /ctx\n\
         RUN echo \"agent uid is $AGENT_UID\" && test -e /ctx/README.md && test ! -e /ctx/ignored\n",
    )
    .unwrap();
    // The context is the current directory, minus what .dockerignore says.
    std::fs::create_dir(repo.path().join("ignored")).unwrap();
    std::fs::write(repo.path().join("ignored/big"), "x").unwrap();
    std::fs::write(repo.path().join(".dockerignore"), "ignored\n").unwrap();
    let name = format!("sanddune:{}", unique("build"));
    let out = repo.sanddune(&[
        "docker",
        "build-image",
        "--dockerfile",
        "Dockerfile.test",
        "--image-name",
        &name,
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert!(err.contains(&format!("agent uid is {uid}")), "{err}");
    assert!(
        Command::new("docker")
            .args(["image", "inspect", &name])
            .output()
            .unwrap()
            .status
            .success()
    );
    let out = repo.sanddune(&["docker", "remove-image", "--image-name", &name]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !Command::new("docker")
            .args(["image", "inspect", &name])
            .output()
            .unwrap()
            .status
            .success()
    );
}

fn gc_removes_containers_whose_sanddune_is_gone_and_keeps_live_ones() {
    require_engine("docker");
    let start = |owner: &str, run: &str| {
        let out = Command::new("docker")
            .args([
                "run",
                "-d",
                "--label",
                &format!("sanddune.owner={owner}"),
                "--label",
                &format!("sanddune.run={run}"),
                "--label",
                "sanddune.plugin=docker",
                "--entrypoint",
                "sleep",
                IMAGE,
                "infinity",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // This test process is alive: its pid and start time, as the host labels.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let started = stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .nth(19)
        .unwrap()
        .to_string();
    let orphan_run = unique("orphan");
    let live_run = unique("live");
    start("999999999:1", &orphan_run);
    start(&format!("{}:{started}", std::process::id()), &live_run);
    let repo = TestRepo::new();
    // Two at once: one removes the orphan, the other waits for that.
    let gcs = std::thread::scope(|s| {
        let spawn = || s.spawn(|| repo.command(&["gc"]).output().unwrap());
        let (a, b) = (spawn(), spawn());
        [a.join().unwrap(), b.join().unwrap()]
    });
    for out in &gcs {
        assert!(out.status.success(), "{}", stderr(out));
    }
    assert!(
        gcs.iter()
            .any(|out| common::stdout(out).contains(&format!("run {orphan_run}"))),
        "{:?}",
        gcs.iter().map(common::stdout).collect::<Vec<_>>()
    );
    assert_no_container_left("docker", "run", &orphan_run);
    let live = containers_with("docker", &format!("sanddune.run={live_run}"));
    assert_eq!(live.len(), 1);
    Command::new("docker")
        .args(["rm", "-f", &live[0]])
        .output()
        .unwrap();
}

fn docker_a_silent_agent_is_stopped_by_the_idle_timeout_and_its_container_removed() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("idle");
    let started = Instant::now();
    let out = run_in(
        "docker",
        &repo,
        &branch,
        "FAKE:hang",
        &["--idle-timeout", "2"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("idle timeout"), "{err}");
    // The fake sleeps 60 s: only a kill inside the container ends it sooner.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert_no_container_left("docker", "name", &branch);
}

fn docker_declared_mounts_resolve_home_and_relative_paths_and_honour_read_only() {
    require_engine("docker");
    let repo = TestRepo::new();
    let cache = repo.home.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::write(cache.join("hi"), "from home").unwrap();
    // Outside the worktree, relative to the current directory (the repo).
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("hello"), "from outside").unwrap();
    let relative = format!(
        "../{}",
        outside.path().file_name().unwrap().to_str().unwrap()
    );
    assert!(repo.path().join(&relative).exists());
    std::fs::write(
        repo.path().join("prompt.md"),
        "note !`cat /data/hello; cat /cache/hi; touch /data/w 2>/dev/null || echo read-only`\n",
    )
    .unwrap();
    let branch = unique("mounts");
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    let data_mount = format!("mount={relative}:/data:ro");
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt-file",
        "prompt.md",
        "--branch",
        &branch,
        "--sandbox-opt",
        &image,
        "--sandbox-opt",
        &data_mount,
        "--sandbox-opt",
        "mount=~/cache:/cache",
    ];
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = repo.calls("claude");
    let prompt = calls[0]["prompt"].as_str().unwrap();
    assert!(prompt.contains("from outside"), "{prompt}");
    assert!(prompt.contains("from home"), "{prompt}");
    assert!(prompt.contains("read-only"), "{prompt}");
    assert!(!outside.path().join("w").exists());
}

async fn docker_networks_are_attached_by_name() {
    require_engine("docker");
    let nets = [unique("net-a"), unique("net-b")];
    for net in &nets {
        let out = Command::new("docker")
            .args(["network", "create", net])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let repo = TestRepo::new();
    let run_id = unique("nets");
    let joined = nets.join(",");
    let mut sandbox = sandbox_in("docker", &repo, &run_id, &[("network", &joined)]).await;
    let id = containers_with("docker", &format!("sanddune.run={run_id}")).remove(0);
    let out = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}",
            &id,
        ])
        .output()
        .unwrap();
    let attached = String::from_utf8_lossy(&out.stdout).to_string();
    sandbox.close().await.unwrap();
    for net in &nets {
        assert!(attached.contains(net.as_str()), "{attached}");
        Command::new("docker")
            .args(["network", "rm", net])
            .output()
            .unwrap();
    }
}

fn docker_interactive_gives_the_agent_a_tty_in_the_container() {
    interactive_gives_the_agent_a_tty_in_the_container("docker");
}

fn podman_interactive_gives_the_agent_a_tty_in_the_container() {
    interactive_gives_the_agent_a_tty_in_the_container("podman");
}

/// `sanddune interactive --sandbox ENGINE` in a real terminal (tmux): the
/// agent's UI runs in the container on a TTY of the window's size, a
/// resize reaches it, typed prompts and Ctrl-C are the agent's, the
/// terminal comes back and the commit is handled as for `run`.
fn interactive_gives_the_agent_a_tty_in_the_container(engine: &str) {
    use common::tmux::{self, Tmux};
    tmux::require();
    require_engine(engine);
    let patience = Duration::from_secs(60);
    let repo = TestRepo::new();
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    let mut args = vec![
        "interactive",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    let term = Tmux::start(
        &tmux::reporting_cooked(&repo.shell_line(&args)),
        repo.path(),
        100,
        30,
    );
    let (status, screen) = tmux::play_the_fake_ui(&term, "container", patience);
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("agent exited with code 0"), "{screen}");
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    // Raw mode was given back.
    assert!(screen.contains("terminal-cooked"), "{screen}");
}

/// The engine dies under a run (its API service is killed while the agent
/// works): the run fails with exit 1 naming the engine instead of hanging,
/// the agent's commit stays on the branch, the user's tree is untouched, and
/// once the engine is back `gc` removes the container.
fn podman_an_engine_that_stops_mid_run_fails_the_run_and_keeps_the_commit() {
    require_engine("podman");
    let repo = TestRepo::new();
    let dir = tempfile::tempdir().unwrap();
    let host = format!("unix://{}", dir.path().join("podman.sock").display());
    // A service of its own on its own socket, over the same storage.
    let service = || {
        let child = Command::new("podman")
            .args(["system", "service", "--time=0", &host])
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::os::unix::net::UnixStream::connect(dir.path().join("podman.sock")).is_err() {
            assert!(Instant::now() < deadline, "podman service never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        child
    };
    let mut engine = service();
    let branch = unique("engine-stops");
    let image = format!("image={IMAGE}");
    let mut run = repo
        .command(&[
            "run",
            "--sandbox",
            "podman",
            "--agent",
            "claude-code",
            "--prompt",
            "note engine\nFAKE:file:notes/engine.md\nFAKE:slow",
            "--branch",
            &branch,
            "--sandbox-opt",
            &image,
        ])
        .args(fake_mounts(&repo))
        .env("CONTAINER_HOST", &host)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The commit lands on the host through the mount as the agent makes it.
    let committed = || {
        Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["log", "--format=%s", &branch, "--"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Add a note"))
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !committed() {
        assert!(Instant::now() < deadline, "the agent never committed");
        std::thread::sleep(Duration::from_millis(20));
    }
    engine.kill().unwrap();
    engine.wait().unwrap();
    // A hang guard, not a timing assertion.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            panic!("the run hung after its engine stopped");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    println!("the run's output after its engine stopped:\n{err}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("podman at unix://") && err.contains("stopped answering"),
        "the error does not say the engine stopped: {err}"
    );
    assert!(committed(), "the commit was lost");
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "the user's tree changed"
    );

    // Back up: gc removes the dead run's container.
    let mut engine = service();
    let gc = repo
        .command(&["gc"])
        .env("CONTAINER_HOST", &host)
        .output()
        .unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert_no_container_left("podman", "name", &branch);
    let _ = engine.kill();
    let _ = engine.wait();
}

/// The result comes back once the sandbox is stopped, not removed: the
/// container is paused, so the writer the agent left running in the
/// background writes nothing more, the commit is on the branch, and the
/// close is the `Closing` the caller finishes, which removes the container.
async fn the_result_comes_before_the_container_is_removed(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    let branch = unique("early");
    let mut so = SandboxOptions::new(PluginRef::Builtin(engine.into()));
    so.cwd = repo.path().to_path_buf();
    so.runtime = Some(runtime());
    so.log = LogMode::Terminal;
    so.name = Some(branch.clone());
    so.sandbox_config = vec![("image".into(), IMAGE.into())];
    so.sandbox_config
        .extend(fake_mounts(&repo).chunks(2).map(|opt| {
            (
                "mount".to_string(),
                opt[1].trim_start_matches("mount=").to_string(),
            )
        }));
    let mut agent = AgentOptions::new(
        PluginRef::Builtin("claude-code".into()),
        Prompt::Inline(
            "add a note\nFAKE:run:(while :; do echo x >> BG.md; sleep 0.02; done) >/dev/null 2>&1 &"
                .into(),
        ),
    );
    agent.capture_sessions = false;
    agent.agent_env = vec![("ANTHROPIC_API_KEY".into(), "sk-ant-sanddune-test".into())];
    let options = RunOptions {
        sandbox: so,
        agent,
        strategy: Some(BranchStrategy::Branch(branch.clone())),
        resume_session: None,
        check: None,
        push: None,
    };
    let (result, closing) = sanddune::run::plan(options)
        .await
        .unwrap()
        .run_to_result()
        .await
        .unwrap();
    assert_eq!(result.commits.len(), 1);
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..{branch}")]),
        "1"
    );
    let left = containers_with(engine, &format!("sanddune.name={branch}"));
    assert_eq!(left.len(), 1, "the container is there until the close");
    let state = Command::new(engine)
        .args(["inspect", "-f", "{{.State.Status}}", &left[0]])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&state.stdout).trim(), "paused");
    // The writer's file left the worktree dirty, so it was kept; it stays
    // as the result found it.
    let kept = result
        .preserved_worktree_path
        .clone()
        .expect("a dirty worktree is kept");
    let written = || std::fs::read_to_string(format!("{kept}/BG.md")).unwrap();
    let at_the_result = written();
    assert!(!at_the_result.is_empty());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(written(), at_the_result, "a paused process wrote");
    assert!(!closing.is_done());
    closing.finish().await.unwrap();
    assert_no_container_left(engine, "name", &branch);
}

async fn docker_the_result_comes_before_the_container_is_removed() {
    the_result_comes_before_the_container_is_removed("docker").await;
}

async fn podman_the_result_comes_before_the_container_is_removed() {
    the_result_comes_before_the_container_is_removed("podman").await;
}

/// Prepared snapshots (ADR 0035), through `sanddune run` as a user runs
/// it: the first run with `snapshot=auto` runs its set-up and keeps the
/// sandbox as an image (with what the set-up wrote in the worktree, and
/// none of the run's env); the next starts from it and skips the set-up;
/// a changed input runs it again. `snapshot ls`, `rm` and gc's age see them.
fn a_snapshot_skips_the_set_up_until_an_input_changes(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    let write = |path: &str, text: &str| {
        let path = repo.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".gitignore", "deps/\n");
    write("deps.lock", "left-pad 1.0\n");
    write(
        ".sanddune/config.toml",
        r#"[sandboxOptions]
snapshot = "auto"
"snapshot.inputs" = "deps.lock"

[[hooks.sandbox.onSandboxReady]]
command = "echo prepared > /opt/prepared"
sudo = true

[[hooks.sandbox.onSandboxReady]]
command = "mkdir -p deps && date +%s%N > deps/stamp && echo ran >> $HOME/setup-runs"
"#,
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "a lockfile and a set-up"]);
    let runs = || {
        std::fs::read_to_string(repo.home.path().join("setup-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let ls = || {
        let out = repo.sanddune(&["snapshot", "ls"]);
        assert!(out.status.success(), "{}", stderr(&out));
        common::stdout(&out)
            .lines()
            .filter(|l| l.starts_with(engine))
            .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let run = |prompt: &str| {
        // Under head: the worktree is the repository, so what the set-up
        // wrote there stays to be seen.
        let image = format!("image={IMAGE}");
        let mut args = vec!["run", "--sandbox", engine, "--agent", "claude-code"];
        args.extend(["--prompt", prompt, "--sandbox-opt", &image]);
        args.extend([
            "--env",
            "SANDDUNE_TEST_SECRET=hunter2",
            "--trust",
            "--log",
            "terminal",
        ]);
        let mounts = fake_mounts(&repo);
        args.extend(mounts.iter().map(String::as_str));
        let out = repo.sanddune(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };

    let first = run("first");
    assert!(
        first.contains("snapshot: kept the prepared sandbox as sanddune-snapshot:"),
        "{first}"
    );
    assert!(first.contains("with deps from the worktree"), "{first}");
    assert_eq!(runs(), 1);
    let kept = ls();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let stamp = std::fs::read_to_string(repo.path().join("deps/stamp")).unwrap();
    // The agent had the run's env; the image has none of it.
    let calls = repo.calls("claude");
    assert_eq!(
        calls[0]["env"]["SANDDUNE_TEST_SECRET"], "hunter2",
        "{calls:?}"
    );
    let env = Command::new(engine)
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .Config.Env}}",
            &kept[0],
        ])
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&env.stdout).to_string();
    assert!(
        env.contains("PATH=") && !env.contains("hunter2") && !env.contains("SANDDUNE_TEST"),
        "{env}"
    );
    // The image holds what the set-up wrote in the container and in the worktree.
    let inside = Command::new(engine)
        .args(["run", "--rm", "--entrypoint", "sh", &kept[0], "-c"])
        .arg("cat /opt/prepared /var/lib/sanddune/snapshot/worktree/deps/stamp")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&inside.stdout),
        format!("prepared\n{stamp}")
    );

    // The next run starts from it: no set-up, the worktree's files back.
    std::fs::remove_dir_all(repo.path().join("deps")).unwrap();
    let second = run("second");
    assert!(
        second.contains("snapshot: started from prepared image"),
        "{second}"
    );
    assert!(
        second.contains("its set-up (2 sandbox hook(s)) is skipped"),
        "{second}"
    );
    assert_eq!(runs(), 1, "the set-up did not run again");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("deps/stamp")).unwrap(),
        stamp
    );
    assert_eq!(ls(), kept, "nothing new kept");

    // A changed input runs the set-up again and keeps another.
    write("deps.lock", "left-pad 1.1\n");
    repo.git(&["commit", "-qam", "bump"]);
    let third = run("third");
    assert!(
        third.contains("snapshot: kept the prepared sandbox"),
        "{third}"
    );
    assert_eq!(runs(), 2);
    let both = ls();
    assert_eq!(both.len(), 2, "{both:?}");

    // gc removes those past the age given; rm removes by id, or all.
    let out = repo.sanddune(&["gc", "--snapshot-max-age", "1d"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ls().len(), 2, "none is a day old");
    let out = repo.sanddune(&["snapshot", "rm", &both[1]]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ls(), &both[..1]);
    let out = repo.sanddune(&["snapshot", "rm", "0123456789ab"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no snapshot is 0123456789ab"),
        "{}",
        stderr(&out)
    );
    std::thread::sleep(Duration::from_millis(1100));
    let out = repo.sanddune(&["gc", "--snapshot-max-age", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        common::stdout(&out).contains(&format!("removed {engine} snapshot {}", both[0])),
        "{}",
        common::stdout(&out)
    );
    assert!(ls().is_empty());
}

fn docker_a_snapshot_skips_the_set_up_until_an_input_changes() {
    a_snapshot_skips_the_set_up_until_an_input_changes("docker");
}

fn podman_a_snapshot_skips_the_set_up_until_an_input_changes() {
    a_snapshot_skips_the_set_up_until_an_input_changes("podman");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(docker_run_commits_on_the_branch_with_the_stdin_prompt_and_removes_its_container),
        trial!(podman_run_commits_on_the_branch_with_the_stdin_prompt_and_removes_its_container),
        trial!(docker_run_defaults_to_head_and_commits_there),
        trial!(docker_reports_only_what_the_agent_left_uncommitted_and_round_trips_its_session),
        trial!(docker_the_agents_commits_keep_their_identity_trailer_and_the_repositorys_hook),
        trial!(docker_an_empty_prompt_fails_before_any_container_exists),
        trial!(docker_a_failed_run_removes_its_container_and_keeps_the_commit),
        trial!(docker_best_of_with_every_check_failing_lands_nothing_and_leaves_no_container),
        trial!(docker_a_named_user_is_checked_against_the_images_passwd),
        trial!(docker_a_uid_mismatch_is_an_actionable_error_and_leaves_nothing),
        trial!(docker_ctrl_c_mid_iteration_exits_130_and_leaves_no_container),
        trial!(async docker_exec_streams_each_line_before_the_command_ends),
        trial!(async docker_abort_kills_the_process_inside_the_container_and_keeps_the_sandbox_and_worktree),
        trial!(async podman_abort_kills_the_process_inside_the_container_and_keeps_the_sandbox_and_worktree),
        trial!(async docker_a_sandbox_dropped_without_close_still_loses_its_container),
        trial!(async docker_file_operations_and_copies_work_through_the_container),
        trial!(async a_hostile_provider_is_refused_privileges_namespaces_and_host_mounts_every_time),
        trial!(async a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_container),
        trial!(async a_container_made_in_a_preflight_does_not_outlive_it),
        trial!(a_component_file_asking_for_containers_is_refused_before_anything_exists),
        trial!(docker_exported_builtins_run_as_files_like_the_builtins),
        trial!(docker_build_image_streams_the_build_and_remove_image_removes_it),
        trial!(gc_removes_containers_whose_sanddune_is_gone_and_keeps_live_ones),
        trial!(docker_a_silent_agent_is_stopped_by_the_idle_timeout_and_its_container_removed),
        trial!(docker_declared_mounts_resolve_home_and_relative_paths_and_honour_read_only),
        trial!(async docker_networks_are_attached_by_name),
        trial!(docker_interactive_gives_the_agent_a_tty_in_the_container),
        trial!(podman_interactive_gives_the_agent_a_tty_in_the_container),
        trial!(podman_an_engine_that_stops_mid_run_fails_the_run_and_keeps_the_commit),
        trial!(async docker_the_result_comes_before_the_container_is_removed),
        trial!(async podman_the_result_comes_before_the_container_is_removed),
        trial!(docker_a_snapshot_skips_the_set_up_until_an_input_changes),
        trial!(podman_a_snapshot_skips_the_set_up_until_an_input_changes),
    ])
}
