//! sanddune as a non-root user, as most people run it: rootless Podman
//! through the user's own API socket (keep-id user namespace), and Docker
//! through the `docker` group with an image built for the user's UID. The
//! files the agent writes must belong to the user.
//!
//! Needs root and the non-root test user (see `common::non_root`).

mod common;

use std::process::Command;

use common::non_root::*;
use common::servers;
use common::trials::{self, trial};
use common::{TestRepo, USER_EMAIL, USER_NAME, stderr};

/// The run of the fake claude in `image`, its call log and HOME mounted
/// from the test's home (see tests/containers.rs).
fn run_args<'a>(
    engine: &'a str,
    image: &'a str,
    branch: &'a str,
    mounts: &'a [String],
) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--branch",
        branch,
        "--sandbox-opt",
        image,
    ];
    for m in mounts {
        args.extend(["--sandbox-opt", m.as_str()]);
    }
    args
}

fn mounts(repo: &TestRepo) -> Vec<String> {
    let home = repo.home.path().display();
    vec![
        format!("mount={home}:/home/agent"),
        format!("mount={home}:/sanddune-fakes"),
        format!(
            "mount={}:/sanddune-fakes/bin:ro",
            common::fakes_dir().display()
        ),
    ]
}

fn commits_as_the_user(engine: &str, image: &str) {
    let user = user();
    let repo = repo_of(&user);
    let branch = branch(&format!("{engine}-non-root"));
    let (image, mounts) = (format!("image={image}"), mounts(&repo));
    let out = sanddune_as(&user, &repo, &run_args(engine, &image, &branch, &mounts));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s|%an <%ae>", &branch]),
        format!("Fix typo in README|{USER_NAME} <{USER_EMAIL}>")
    );
    assert_eq!(
        git(&repo, &["show", &format!("{branch}:README.md")]),
        "# Project\n\nThis is the readme."
    );
    // Everything the run and the agent wrote is the user's.
    assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
    assert_eq!(not_owned_by(&user, repo.home.path()), Vec::<String>::new());
}

fn rootless_podman_commits_as_the_user_and_everything_written_is_theirs() {
    commits_as_the_user("podman", "sanddune-test:latest");
}

/// Runs started together on one rootless Podman service all commit, and
/// the service is still up afterwards: Podman 4.3 dies of two keep-id
/// creates at once (libsubid is not thread-safe), so sanddune sends them
/// one at a time.
fn rootless_podman_takes_runs_started_together() {
    let user = user();
    let runs: Vec<_> = (0..6)
        .map(|i| {
            let user = user.clone();
            std::thread::spawn(move || {
                let repo = repo_of(&user);
                let branch = branch(&format!("podman-together-{i}"));
                let (image, mounts) = ("image=sanddune-test:latest".to_string(), mounts(&repo));
                let out = sanddune_as(&user, &repo, &run_args("podman", &image, &branch, &mounts));
                let log = git(&repo, &["log", "-1", "--format=%s", &branch]);
                (out, log)
            })
        })
        .collect();
    for run in runs {
        let (out, log) = run.join().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(log, "Fix typo in README");
    }
    let socket = format!("{}/podman/podman.sock", user.runtime_dir);
    let ping = Command::new("runuser")
        .args([
            "-u",
            &user.name,
            "--",
            "curl",
            "-sf",
            "--unix-socket",
            &socket,
        ])
        .arg("http://d/_ping")
        .output()
        .unwrap();
    assert!(ping.status.success(), "the podman service died");
}

fn docker_as_a_non_root_user_commits_with_an_image_of_their_uid() {
    commits_as_the_user("docker", "sanddune-test-non-root:latest");
}

fn docker_as_a_non_root_user_refuses_an_image_of_another_uid_with_the_fix() {
    let user = user();
    let repo = repo_of(&user);
    let branch = branch("docker-other-uid");
    // The root image: its agent user is UID 0.
    let (image, mounts) = ("image=sanddune-test:latest".to_string(), mounts(&repo));
    let out = sanddune_as(&user, &repo, &run_args("docker", &image, &branch, &mounts));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is UID:GID 0:0"), "{err}");
    assert!(err.contains(&format!("AGENT_UID={}", user.uid)), "{err}");
    assert!(err.contains("sanddune docker build-image"), "{err}");
    assert!(repo.calls("claude").is_empty(), "the agent ran");
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
}

/// `egress.setup`: a set-up hook reaches what the agent then cannot, and
/// the agent's refusal is its own in the result.
fn docker_as_a_non_root_user_a_setup_hook_reaches_what_the_agent_cannot() {
    let user = user();
    let repo = repo_of(&user);
    let any = std::net::Ipv4Addr::UNSPECIFIED.into();
    let registry = format!("127.0.0.1:{}", servers::serve(any, "packages"));
    let fetch = format!("curl -sSf --noproxy '' --max-time 20 http://{registry}/");
    let prompt = format!(
        "fix the typo\nFAKE:run:curl -s --noproxy '' --max-time 20 -o /dev/null -w %{{http_code}} http://{registry}/"
    );
    let (image, mounts) = (
        "image=sanddune-test-non-root:latest".to_string(),
        mounts(&repo),
    );
    let branch = branch("docker-egress-setup");
    let mut args = run_args("docker", &image, &branch, &mounts);
    let at = args.iter().position(|a| *a == "fix the typo").unwrap();
    args[at] = &prompt;
    let setup = format!("egress.setup={registry}");
    args.extend([
        "--sandbox-opt",
        "egress=deny-all",
        "--sandbox-opt",
        &setup,
        "--hook-sandbox-ready",
        &fetch,
        "--json",
    ]);
    let out = sanddune_as(&user, &repo, &args);
    assert!(
        out.status.success(),
        "the set-up hook was refused: {}",
        stderr(&out)
    );
    let result: serde_json::Value =
        serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains(" 403 (exit 0)"),
        "the agent reached it: {text}"
    );
    let denied = result["deniedEgress"].as_array().unwrap();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0].get("duringSetup"), None, "{denied:?}");
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(log.contains("packages"), "the hook's output: {log}");
    assert!(
        log.contains(&format!(
            "the set-up phase (egress.setup={registry}) is over: egress=deny-all"
        )),
        "{log}"
    );

    // The other way round: a set-up phase narrower than the agent's.
    let branch = crate::branch("docker-egress-setup-narrow");
    assert_eq!(repo.calls("claude").len(), 1);
    let mut args = run_args("docker", &image, &branch, &mounts);
    let allowed = format!("egress={registry}");
    args.extend([
        "--sandbox-opt",
        &allowed,
        "--sandbox-opt",
        "egress.setup=none",
        "--hook-sandbox-ready",
        &fetch,
    ]);
    let out = sanddune_as(&user, &repo, &args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("403"), "{err}");
    assert_eq!(
        repo.calls("claude").len(),
        1,
        "the agent ran after a failed set-up"
    );
}

/// The credential gateway for a user in the docker group and on rootless
/// Podman: the agent's request, with the placeholder it holds, reaches the
/// API with the real key.
fn gateway_as_a_non_root_user(engine: &str, image: &str) {
    let user = user();
    let repo = repo_of(&user);
    let mock = sanddune_model_mock::ModelMock::start();
    let key = "sk-ant-non-root-real-key";
    let prompt = "fix the typo\nFAKE:run:curl -s -o /dev/null -w %{http_code} -H \"x-api-key: $ANTHROPIC_API_KEY\" -H 'content-type: application/json' -d '{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' \"$ANTHROPIC_BASE_URL/v1/messages\"\nFAKE:say-env:ANTHROPIC_API_KEY";
    let (image, mounts) = (format!("image={image}"), mounts(&repo));
    let branch = branch(&format!("{engine}-gateway"));
    let mut args = run_args(engine, &image, &branch, &mounts);
    let at = args.iter().position(|a| *a == "fix the typo").unwrap();
    args[at] = prompt;
    args.push("--json");
    let env = [
        ("ANTHROPIC_API_KEY", key),
        ("ANTHROPIC_BASE_URL", mock.url()),
    ];
    let out = sanddune_as_with(&user, &repo, &args, &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value =
        serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(text.contains(" 200 (exit 0)"), "{text}");
    assert!(
        text.contains("sk-ant-sanddune-placeholder-") && !text.contains(key),
        "{text}"
    );
    let exchanges = mock.exchanges();
    assert_eq!(exchanges.len(), 1);
    assert_eq!(
        exchanges[0].headers.get("x-api-key").map(String::as_str),
        Some(key)
    );
}

fn docker_as_a_non_root_user_the_gateway_keeps_the_key_outside() {
    gateway_as_a_non_root_user("docker", "sanddune-test-non-root:latest");
}

fn rootless_podman_the_gateway_keeps_the_key_outside() {
    gateway_as_a_non_root_user("podman", "sanddune-test:latest");
}

fn docker_as_a_non_root_user_egress_policies_hold() {
    let options = image_and_mounts("sanddune-test-non-root:latest");
    egress_policies_hold_as_the_user("docker", &options);
}

fn rootless_podman_egress_policies_hold() {
    let options = image_and_mounts("sanddune-test:latest");
    egress_policies_hold_as_the_user("podman", &options);
}

/// A limit rootless podman cannot apply (cgroup v1) is refused, never
/// silently dropped; where it can (cgroup v2), the run goes through.
fn rootless_podman_applies_a_memory_limit_or_refuses_it() {
    let user = user();
    let repo = repo_of(&user);
    let (image, mounts) = ("image=sanddune-test:latest".to_string(), mounts(&repo));
    let branch = branch("podman-memory");
    let mut args = run_args("podman", &image, &branch, &mounts);
    args.extend(["--sandbox-opt", "memory=256m"]);
    let out = sanddune_as(&user, &repo, &args);
    if !out.status.success() {
        let err = stderr(&out);
        assert!(err.contains("the engine did not apply memory="), "{err}");
        assert!(
            repo.calls("claude").is_empty(),
            "the agent ran without its limit"
        );
    }
}

/// A dev container whose remote user `dev` has UID 4321, built FROM the
/// test image; the repository is the user's again afterwards.
fn write_devcontainer(user: &User, repo: &TestRepo, update_uid: bool) {
    let dir = repo.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM sanddune-test:latest\nUSER root\nRUN useradd -m -u 4321 dev\nUSER dev\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("devcontainer.json"),
        format!(
            r#"{{ "build": {{ "dockerfile": "Dockerfile" }}, "remoteUser": "dev",
                 "updateRemoteUserUID": {update_uid},
                 // the home must be the user's too
                 "postCreateCommand": "touch $HOME/ok && id -u > dc-uid.txt" }}"#
        ),
    )
    .unwrap();
    let out = Command::new("chown")
        .args(["-R", &format!("{}:", user.name)])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The images the user's runs built for the test's repository.
fn remove_devcontainer_images(engine: &str, user: &User, repo: &TestRepo) {
    let dir = repo
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let dir = dir.trim_start_matches('.');
    let remote: &[&str] = if engine == "podman" {
        &["--remote"]
    } else {
        &[]
    };
    let line = format!(
        "XDG_RUNTIME_DIR={} {engine} {} images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep 'sanddune-devcontainer:{dir}-' | xargs -r {engine} {} rmi -f",
        user.runtime_dir,
        remote.join(" "),
        remote.join(" ")
    );
    let _ = Command::new("runuser")
        .args(["-u", &user.name, "--", "sh", "-c", &line])
        .output();
}

fn dev_container_user_gets_the_users_uid(engine: &str) {
    let user = user();
    let repo = repo_of(&user);
    write_devcontainer(&user, &repo, true);
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        "note",
    ];
    let mounts = mounts(&repo);
    for m in &mounts {
        args.extend(["--sandbox-opt", m.as_str()]);
    }
    let out = sanddune_as(&user, &repo, &args);
    remove_devcontainer_images(engine, &user, &repo);
    assert!(out.status.success(), "{}", stderr(&out));
    // The remote user ran the hook with the user's UID, in a home it owns.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-uid.txt")).unwrap(),
        format!("{}\n", user.uid)
    );
    assert_eq!(git(&repo, &["log", "-1", "--format=%s"]), "Add a note");
    assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
}

/// A file as the devcontainers templates write it: only `image`, an image
/// that runs as `USER root` and names its user (`vscode`) in its
/// `devcontainer.metadata` label, as the official images do. The run is
/// that user's, with the user's UID.
fn docker_as_a_non_root_user_a_templates_style_dev_container_runs_as_the_labels_user() {
    let user = user();
    let repo = repo_of(&user);
    let image = format!("sanddune-test-dc-template:{}", std::process::id());
    common::engines::labelled_image(
        "docker",
        &image,
        "USER root\nRUN useradd -m -u 4323 -s /bin/sh vscode\n",
        r#"[{"id": "ghcr.io/devcontainers/features/common-utils:2"}, {"remoteUser": "vscode"}]"#,
    );
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        format!(
            r#"{{ "name": "Default Linux Universal", "image": "{image}",
                 "postCreateCommand": "id -un > dc-user.txt && id -u >> dc-user.txt" }}"#
        ),
    )
    .unwrap();
    let _ = Command::new("chown")
        .args([&format!("{}:", user.name)])
        .arg(repo.path().join(".devcontainer.json"))
        .output();
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "note",
    ];
    let mounts = mounts(&repo);
    for m in &mounts {
        args.extend(["--sandbox-opt", m.as_str()]);
    }
    let out = sanddune_as(&user, &repo, &args);
    remove_devcontainer_images("docker", &user, &repo);
    let _ = Command::new("docker").args(["rmi", "-f", &image]).output();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-user.txt")).unwrap(),
        format!("vscode\n{}\n", user.uid)
    );
    assert_eq!(git(&repo, &["log", "-1", "--format=%s"]), "Add a note");
    assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
}

fn docker_as_a_non_root_user_a_dev_containers_remote_user_gets_their_uid() {
    dev_container_user_gets_the_users_uid("docker");
}

fn docker_as_a_non_root_user_a_dev_container_without_the_uid_update_is_refused() {
    let user = user();
    let repo = repo_of(&user);
    write_devcontainer(&user, &repo, false);
    let args = [
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "note",
    ];
    let out = sanddune_as(&user, &repo, &args);
    remove_devcontainer_images("docker", &user, &repo);
    let err = stderr(&out);
    // Refused by the host before anything is created.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the container user `dev`")
            && err.contains("is UID:GID 4321:4321")
            && err.contains("updateRemoteUserUID is false"),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

/// The hostile agent of `tests/hostile_agent.rs`, run by the user under
/// `strategy`: nothing it plants in the git dir runs as the user, during
/// the run or in the user's next git commands, and the user's credential
/// stays out.
/// The image option and the mounts of a docker or podman run.
fn image_and_mounts(image: &str) -> impl Fn(&TestRepo) -> Vec<String> {
    move |repo| [vec![format!("image={image}")], mounts(repo)].concat()
}

fn rootless_podman_a_planted_hook_never_runs_as_the_user() {
    let options = image_and_mounts("sanddune-test:latest");
    a_planted_hook_never_runs_as_the_user("podman", &options, &[]);
}

fn rootless_podman_merge_to_head_a_planted_hook_never_runs_as_the_user() {
    let strategy = ["--strategy", "merge-to-head"];
    let options = image_and_mounts("sanddune-test:latest");
    a_planted_hook_never_runs_as_the_user("podman", &options, &strategy);
}

fn rootless_podman_branch_a_planted_hook_never_runs_as_the_user() {
    let strategy = ["--branch", "hostile"];
    let options = image_and_mounts("sanddune-test:latest");
    a_planted_hook_never_runs_as_the_user("podman", &options, &strategy);
}

fn docker_as_a_non_root_user_a_planted_hook_never_runs_as_them() {
    let options = image_and_mounts("sanddune-test-non-root:latest");
    a_planted_hook_never_runs_as_the_user("docker", &options, &[]);
}

/// A prepared snapshot (ADR 0035) as a non-root user: kept after the
/// set-up, started from by the next run, and what it brings back into the
/// worktree is the user's.
fn a_snapshot_is_kept_and_started_from_as_the_user(engine: &str, image: &str) {
    let user = user();
    let repo = repo_of(&user);
    std::fs::write(repo.path().join(".gitignore"), "deps/\n").unwrap();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        r#"[sandboxOptions]
snapshot = "auto"

[[hooks.sandbox.onSandboxReady]]
command = "echo prepared > /opt/prepared"
sudo = true

[[hooks.sandbox.onSandboxReady]]
command = "mkdir -p deps && date +%s%N > deps/stamp"
"#,
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "a set-up"]);
    let out = Command::new("chown")
        .args(["-R", &format!("{}:", user.name)])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let (image, mounts) = (format!("image={image}"), mounts(&repo));
    let run = || {
        // Under head, so what the set-up wrote stays in the repository.
        let mut args = vec!["run", "--sandbox", engine, "--agent", "claude-code"];
        args.extend(["--prompt", "fix the typo", "--sandbox-opt", &image]);
        args.extend(["--trust", "--log", "terminal"]);
        for m in &mounts {
            args.extend(["--sandbox-opt", m.as_str()]);
        }
        let out = sanddune_as(&user, &repo, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let first = run();
    assert!(
        first.contains("snapshot: kept the prepared sandbox"),
        "{first}"
    );
    let stamp = std::fs::read_to_string(repo.path().join("deps/stamp")).unwrap();
    std::fs::remove_dir_all(repo.path().join("deps")).unwrap();
    let second = run();
    assert!(
        second.contains("snapshot: started from prepared image"),
        "{second}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("deps/stamp")).unwrap(),
        stamp
    );
    assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
    let out = sanddune_as(&user, &repo, &["snapshot", "rm", "--all"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        common::stdout(&out).contains(&format!("removed {engine} snapshot")),
        "{}",
        common::stdout(&out)
    );
}

fn rootless_podman_a_snapshot_is_kept_and_started_from_as_the_user() {
    a_snapshot_is_kept_and_started_from_as_the_user("podman", "sanddune-test:latest");
}

fn docker_as_a_non_root_user_a_snapshot_is_kept_and_started_from() {
    a_snapshot_is_kept_and_started_from_as_the_user("docker", "sanddune-test-non-root:latest");
}

/// Warm sandboxes (ADR 0037) as the user: a run leaves a container waiting,
/// the next (another process) claims it and commits, everything written
/// is the user's, and `gc --drain-pool` removes the one left waiting.
fn a_warm_container_is_claimed_as_the_user(engine: &str, image: &str) {
    let user = user();
    let repo = repo_of(&user);
    let (image, mounts) = (format!("image={image}"), mounts(&repo));
    let before: u32 = git(&repo, &["rev-list", "--count", "HEAD"])
        .parse()
        .unwrap();
    let run = |prompt: &str| {
        let mut args = vec!["run", "--sandbox", engine, "--agent", "claude-code"];
        args.extend(["--prompt", prompt, "--sandbox-opt", &image]);
        args.extend(["--sandbox-opt", "pool=1", "--strategy", "merge-to-head"]);
        args.extend(["--log", "terminal"]);
        for m in &mounts {
            args.extend(["--sandbox-opt", m.as_str()]);
        }
        let out = sanddune_as(&user, &repo, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let first = run("fix the typo");
    assert!(first.contains("pool: started 1 warm sandbox"), "{first}");
    let second = run("add a note");
    assert!(second.contains("pool: took a warm container"), "{second}");
    let after: u32 = git(&repo, &["rev-list", "--count", "HEAD"])
        .parse()
        .unwrap();
    assert_eq!(after, before + 2, "both runs landed their commit");
    assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
    let out = sanddune_as(&user, &repo, &["gc", "--drain-pool"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        common::stdout(&out).contains("which no run claimed"),
        "{}",
        common::stdout(&out)
    );
}

fn rootless_podman_a_warm_container_is_claimed_as_the_user() {
    a_warm_container_is_claimed_as_the_user("podman", "sanddune-test:latest");
}

fn docker_as_a_non_root_user_a_warm_container_is_claimed() {
    a_warm_container_is_claimed_as_the_user("docker", "sanddune-test-non-root:latest");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(rootless_podman_a_warm_container_is_claimed_as_the_user),
        trial!(docker_as_a_non_root_user_a_warm_container_is_claimed),
        trial!(rootless_podman_a_planted_hook_never_runs_as_the_user),
        trial!(rootless_podman_merge_to_head_a_planted_hook_never_runs_as_the_user),
        trial!(rootless_podman_branch_a_planted_hook_never_runs_as_the_user),
        trial!(docker_as_a_non_root_user_a_planted_hook_never_runs_as_them),
        trial!(rootless_podman_commits_as_the_user_and_everything_written_is_theirs),
        trial!(rootless_podman_takes_runs_started_together),
        trial!(docker_as_a_non_root_user_commits_with_an_image_of_their_uid),
        trial!(docker_as_a_non_root_user_refuses_an_image_of_another_uid_with_the_fix),
        trial!(docker_as_a_non_root_user_egress_policies_hold),
        trial!(rootless_podman_egress_policies_hold),
        trial!(docker_as_a_non_root_user_a_setup_hook_reaches_what_the_agent_cannot),
        trial!(docker_as_a_non_root_user_the_gateway_keeps_the_key_outside),
        trial!(rootless_podman_the_gateway_keeps_the_key_outside),
        trial!(rootless_podman_applies_a_memory_limit_or_refuses_it),
        trial!(rootless_podman_a_snapshot_is_kept_and_started_from_as_the_user),
        trial!(docker_as_a_non_root_user_a_snapshot_is_kept_and_started_from),
        trial!(docker_as_a_non_root_user_a_dev_containers_remote_user_gets_their_uid),
        trial!(docker_as_a_non_root_user_a_templates_style_dev_container_runs_as_the_labels_user),
        trial!(docker_as_a_non_root_user_a_dev_container_without_the_uid_update_is_refused),
    ])
}
