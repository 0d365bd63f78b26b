//! `.devcontainer/devcontainer.json` as the docker and podman sandbox
//! definition, on real engines with the real providers; only the agent is
//! a fake. The dev containers build FROM the local test image
//! `sanddune-test:latest` (`tests/images/build.sh docker|podman`): nothing
//! is pulled.

mod common;

use std::path::Path;
use std::process::Command;

use common::engines::*;
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};

/// A dev container with a Dockerfile, env, a remote user of its own (UID
/// 4321, which is not the host user's) and lifecycle commands, written as
/// JSONC.
fn write_devcontainer(repo: &TestRepo) {
    let dir = repo.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM {IMAGE}\nARG SHELL_NAME\nUSER root\n\
             RUN useradd -m -u 4321 -s \"$SHELL_NAME\" dev && mkdir -p /workspaces/proj\n\
             USER dev\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("devcontainer.json"),
        r#"{
  // JSONC: comments, trailing commas, and "//" inside strings.
  "name": "a // dev container",
  "build": { "dockerfile": "Dockerfile", "context": ".", "args": { "SHELL_NAME": "/bin/bash", }, },
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/proj",
  "containerEnv": { "SANDDUNE_TEST_DC_CONTAINER": "c-${localEnv:DC_TEST_VALUE}", "SANDDUNE_TEST_DC_DEFAULT": "${localEnv:DC_NOT_SET:fallback}" },
  "remoteEnv": { "SANDDUNE_TEST_DC_REMOTE": "r-${containerWorkspaceFolder}-${containerEnv:SANDDUNE_TEST_DC_CONTAINER}" },
  "initializeCommand": ["sh", "-c", "echo \"init on the host in $(basename \"$PWD\")\" > dc-init.txt"],
  "onCreateCommand": "echo created > /tmp/dc-order",
  "postCreateCommand": "echo \"$(cat /tmp/dc-order) $(id -u) $HOME $SANDDUNE_TEST_DC_CONTAINER $(cat ${containerWorkspaceFolder}/README.md | head -1)\" > dc-hook.txt",
  "postStartCommand": { "one": "true", "two": ["sh", "-c", "test -f dc-hook.txt"] },
  "customizations": { "vscode": { "extensions": ["x.y"] } }, /* ignored */
  "forwardPorts": [3000],
}"#,
    )
    .unwrap();
}

/// `sanddune run` with the fake claude, the fakes mounted as the other
/// container tests mount them.
fn run(engine: &str, repo: &TestRepo, prompt: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--json",
        // The file's initializeCommand and ${localEnv:...}, approved.
        "--trust",
    ];
    let mounts = fake_mounts(repo);
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(extra);
    repo.sanddune_with_env(&args, &[("DC_TEST_VALUE", "from-host")])
}

/// The image id a tag names, or None.
fn image_id(engine: &str, name: &str) -> Option<String> {
    let out = Command::new(engine)
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| stdout(&out).trim().to_string())
}

/// The dev container images sanddune built for a repository directory.
fn devcontainer_images(engine: &str, repo: &Path) -> Vec<String> {
    let out = Command::new(engine)
        .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
        .output()
        .unwrap();
    // Named as the tag names it: lower case, no leading dot.
    let dir = repo.file_name().unwrap().to_string_lossy().to_lowercase();
    let dir = dir.trim_start_matches('.');
    let mut images: Vec<String> = stdout(&out)
        .lines()
        // Podman qualifies the name (docker.io/library/...).
        .filter(|l| {
            let short = l.rsplit('/').next().unwrap_or(l);
            short.starts_with("sanddune-devcontainer:") && short.contains(dir)
        })
        .map(String::from)
        .collect();
    // The engine lists by creation time, which ties within a second.
    images.sort();
    images
}

fn remove_images(engine: &str, images: &[String]) {
    for image in images {
        let _ = Command::new(engine).args(["rmi", "-f", image]).output();
    }
}

fn the_dev_container_is_the_sandbox(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    write_devcontainer(&repo);
    let name = format!("dc-{}", std::process::id());
    let out = run(
        engine,
        &repo,
        "note\nFAKE:say-env:SANDDUNE_TEST_DC_CONTAINER\nFAKE:say-env:SANDDUNE_TEST_DC_REMOTE\nFAKE:say-env:HOME",
        &["--name", &name],
    );
    let images = devcontainer_images(engine, repo.path());
    let cleanup = scopeguard(engine, images.clone());
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The agent saw containerEnv and remoteEnv, variables substituted.
    let env = &repo.calls("claude")[0]["env"];
    assert_eq!(env["SANDDUNE_TEST_DC_CONTAINER"], "c-from-host");
    assert_eq!(env["SANDDUNE_TEST_DC_DEFAULT"], "fallback");
    assert_eq!(
        env["SANDDUNE_TEST_DC_REMOTE"],
        "r-/workspaces/proj-c-from-host"
    );
    // It ran as the remote user, with its home (and, as the hooks show
    // below, its UID changed to the host user's).
    let said = result["stdout"].as_str().unwrap();
    assert!(
        said.contains("c-from-host r-/workspaces/proj-c-from-host /home/dev"),
        "{said}"
    );
    // The lifecycle commands ran in order, as the remote user (with the
    // host user's UID), in the worktree, with the env, and workspaceFolder
    // leads to the worktree.
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-hook.txt")).unwrap(),
        format!("created {uid} /home/dev c-from-host # Project\n")
    );
    // initializeCommand ran on the host, in the worktree (the repository).
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-init.txt")).unwrap(),
        format!(
            "init on the host in {}\n",
            repo.path().file_name().unwrap().to_string_lossy()
        )
    );
    // The agent committed in that same worktree (head: the repository).
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    // Two images: the build, and the one with the host user's UID.
    assert_eq!(images.len(), if uid == 4321 { 1 } else { 2 }, "{images:?}");

    // A second run builds nothing: the same images, the same ids.
    let ids: Vec<_> = images.iter().map(|i| image_id(engine, i)).collect();
    std::fs::remove_file(repo.path().join("dc-hook.txt")).unwrap();
    let out = run(engine, &repo, "note", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("building dev container image"),
        "{}",
        stderr(&out)
    );
    assert_eq!(devcontainer_images(engine, repo.path()), images);
    assert_eq!(
        images
            .iter()
            .map(|i| image_id(engine, i))
            .collect::<Vec<_>>(),
        ids
    );
    assert_no_container_left(engine, "name", &name);
    drop(cleanup);
}

/// Removes the test's images when the test ends, passed or not.
fn scopeguard(engine: &str, images: Vec<String>) -> impl Drop {
    struct Guard(String, Vec<String>);
    impl Drop for Guard {
        fn drop(&mut self) {
            remove_images(&self.0, &self.1);
        }
    }
    Guard(engine.to_string(), images)
}

fn docker_a_dev_container_gives_the_agent_its_image_env_user_and_hooks_and_is_built_once() {
    the_dev_container_is_the_sandbox("docker");
}

fn podman_a_dev_container_gives_the_agent_its_image_env_user_and_hooks_and_is_built_once() {
    the_dev_container_is_the_sandbox("podman");
}

fn docker_features_are_refused_by_name_before_anything_is_created() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        r#"{ "image": "sanddune-test:latest",
             "features": { "ghcr.io/devcontainers/features/node:1": {} } }"#,
    )
    .unwrap();
    let out = run("docker", &repo, "note", &["--branch", "dc-refused"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("`features` (ghcr.io/devcontainers/features/node:1)")
            && err.contains("registry")
            && err.contains("nothing was created"),
        "{err}"
    );
    // No branch, no worktree, no container, no log.
    assert!(repo.git(&["branch", "--list", "dc-refused"]).is_empty());
    assert!(!repo.path().join(".sanddune/worktrees").exists());
    assert!(!repo.path().join(".sanddune/logs").exists());
    assert_no_container_left("docker", "name", "dc-refused");
    assert!(repo.calls("claude").is_empty());
}

fn docker_the_option_names_or_ignores_the_dev_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    // A broken file at the default place: ignored with devcontainer=none.
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        "{ \"privileged\": true, \"image\": \"x\" }",
    )
    .unwrap();
    let out = run("docker", &repo, "note", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`privileged`"), "{}", stderr(&out));
    let image = format!("image={IMAGE}");
    let out = run(
        "docker",
        &repo,
        "note",
        &[
            "--sandbox-opt",
            "devcontainer=none",
            "--sandbox-opt",
            &image,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // image= alone also leaves the file alone.
    let out = run("docker", &repo, "note", &["--sandbox-opt", &image]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Named explicitly: an image the engine lacks is an error saying to
    // pull it, and nothing is pulled.
    std::fs::create_dir(repo.path().join("dc")).unwrap();
    std::fs::write(
        repo.path().join("dc/devcontainer.json"),
        "{ \"image\": \"sanddune-no-such-image:1\" }",
    )
    .unwrap();
    let out = run(
        "docker",
        &repo,
        "note",
        &["--sandbox-opt", "devcontainer=dc/devcontainer.json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`sanddune-no-such-image:1` is not in docker: pull it"),
        "{}",
        stderr(&out)
    );
}

fn init_from_devcontainer_records_it_and_builds_nothing() {
    let repo = TestRepo::new();
    let init = |repo: &TestRepo| {
        repo.sanddune(&[
            "init",
            "--from-devcontainer",
            "--agent",
            "claude-code",
            "--backlog",
            "beads",
            "--template",
            "blank",
            "--yes",
        ])
    };
    let out = init(&repo);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("has no .devcontainer/devcontainer.json"),
        "{}",
        stderr(&out)
    );
    assert!(!repo.path().join(".sanddune").exists());

    write_devcontainer(&repo);
    let out = init(&repo);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = repo.path().join(".sanddune");
    let workflow = std::fs::read_to_string(dir.join("workflows/blank.toml")).unwrap();
    assert!(
        workflow.contains("sandbox = \"docker\"")
            && workflow.contains(
                "sandboxOptions = { devcontainer = \".devcontainer/devcontainer.json\" }"
            ),
        "{workflow}"
    );
    assert!(
        !dir.join("Dockerfile").exists(),
        "the dev container is the build file"
    );
    assert!(!stdout(&out).contains("built"), "{}", stdout(&out));
}

fn docker_a_workflow_scaffolded_from_the_dev_container_runs_in_it() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        format!(
            "{{ \"image\": \"{IMAGE}\", \"remoteUser\": \"agent\", // the test image's user\n\
             \"postCreateCommand\": \"echo hooked > dc-hook.txt\", }}"
        ),
    )
    .unwrap();
    let out = repo.sanddune(&[
        "init",
        "--from-devcontainer",
        "--agent",
        "claude-code",
        "--backlog",
        "beads",
        "--template",
        "blank",
        "--yes",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut args = vec!["workflow", "run", "blank"];
    let mounts = fake_mounts(&repo);
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-hook.txt")).unwrap(),
        "hooked\n"
    );
    assert_eq!(repo.calls("claude").len(), 1);
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    // The image's user already has the host user's ids: nothing was built.
    assert_eq!(
        devcontainer_images("docker", repo.path()),
        Vec::<String>::new()
    );
}

fn docker_a_failing_lifecycle_command_fails_the_setup_with_its_output() {
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        format!(
            r#"{{ "image": "{IMAGE}", "remoteUser": "agent",
                 "onCreateCommand": "echo first > dc-first.txt",
                 "postCreateCommand": {{ "ok": "true", "bad": "echo it broke >&2; exit 3" }},
                 "postStartCommand": "touch dc-never.txt" }}"#
        ),
    )
    .unwrap();
    let out = run("docker", &repo, "note", &[]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("devcontainer postCreateCommand")
            && err.contains("it broke | `bad` exited with code 3"),
        "{err}"
    );
    assert!(repo.path().join("dc-first.txt").exists());
    assert!(
        !repo.path().join("dc-never.txt").exists(),
        "the next one ran"
    );
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

/// A sandbox on an existing worktree (the library's `create_sandbox`, a
/// workflow's shared sandbox): initializeCommand still runs on the host in
/// the worktree before the sandbox, and the lifecycle commands in it.
async fn docker_a_sandbox_on_an_existing_worktree_runs_the_initialize_and_lifecycle_commands() {
    use sanddune::plugin::PluginRef;
    use sanddune::run::{LogMode, SandboxOptions, WorktreeStrategy, create_worktree};
    require_engine("docker");
    let repo = TestRepo::new();
    std::fs::write(
        repo.path().join(".devcontainer.json"),
        format!(
            r#"{{ "image": "{IMAGE}", "remoteUser": "agent",
                 "initializeCommand": "echo host > dc-init.txt",
                 "postStartCommand": "cat dc-init.txt > dc-start.txt" }}"#
        ),
    )
    .unwrap();
    let mut so = SandboxOptions::new(PluginRef::Builtin("docker".into()));
    so.cwd = repo.path().to_path_buf();
    so.log = LogMode::Terminal;
    so.runtime = Some(runtime());
    // The caller vouches for the file's initializeCommand.
    so.trust = sanddune::run::TrustPolicy::Trusted;
    let wt = create_worktree(WorktreeStrategy::Branch("dc-wt".into()), so.clone())
        .await
        .unwrap();
    let path = wt.path().to_path_buf();
    assert!(!path.join("dc-init.txt").exists(), "not before the sandbox");
    let sandbox = wt.create_sandbox(so).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(path.join("dc-start.txt")).unwrap(),
        "host\n"
    );
    sandbox.close().await.unwrap();
    wt.close().await.unwrap();
}

/// What the official images do: `USER root`, and the user to run as named
/// only in the metadata label. A Dockerfile FROM such an image gets the
/// label's user, env and lifecycle command merged before the file's; the
/// image's own `${localEnv:...}` reads nothing; a changed base image
/// rebuilds.
fn docker_the_images_metadata_label_names_the_user_and_a_changed_base_rebuilds() {
    require_engine("docker");
    let repo = TestRepo::new();
    let base = format!("sanddune-test-dc-label:{}", std::process::id());
    let metadata = r#"[{"id": "ghcr.io/devcontainers/features/common-utils:2"},
        {"remoteUser": "vscode", "containerEnv": {"DC_IMG": "label", "DC_BOTH": "label"},
         "remoteEnv": {"DC_IMG_SECRET": "${localEnv:DC_TEST_VALUE}"},
         "postCreateCommand": "echo $HOME > dc-order.txt", "capAdd": ["SYS_PTRACE"]}]"#;
    let user = "USER root\nRUN useradd -m -u 4322 -s /bin/sh vscode\n";
    labelled_image("docker", &base, user, metadata);
    let dir = repo.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Dockerfile"), format!("FROM {base}\n")).unwrap();
    std::fs::write(
        dir.join("devcontainer.json"),
        r#"{ "build": { "dockerfile": "Dockerfile" },
             "containerEnv": { "DC_BOTH": "file" },
             "postCreateCommand": "echo \"$(id -u) $HOME $DC_IMG $DC_BOTH [$DC_IMG_SECRET]\" >> dc-order.txt" }"#,
    )
    .unwrap();
    let out = run("docker", &repo, "note", &[]);
    let mut images = devcontainer_images("docker", repo.path());
    images.push(base.clone());
    let _cleanup = scopeguard("docker", images);
    assert!(out.status.success(), "{}", stderr(&out));
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-order.txt")).unwrap(),
        format!("/home/vscode\n{uid} /home/vscode label file []\n"),
        "the label's command first, as its user, with the merged env"
    );
    assert!(
        stderr(&out).contains("capAdd SYS_PTRACE"),
        "what is not applied is said: {}",
        stderr(&out)
    );
    // resolve prints what the run used.
    let out = repo.sanddune_with_env(
        &["devcontainer", "resolve", "--json"],
        &[("DC_TEST_VALUE", "from-host")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let resolved: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resolved["user"], "vscode");
    assert_eq!(resolved["remoteUser"], "vscode");
    assert_eq!(resolved["containerEnv"]["DC_BOTH"], "file");
    assert_eq!(resolved["postCreateCommands"].as_array().unwrap().len(), 2);

    // The base changes: the build is redone, though the context is the same.
    labelled_image(
        "docker",
        &base,
        &format!("{user}ENV DC_CHANGED=1\n"),
        metadata,
    );
    let out = run("docker", &repo, "note", &[]);
    let images = devcontainer_images("docker", repo.path());
    let _cleanup_new = scopeguard("docker", images);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("building dev container image"),
        "{}",
        stderr(&out)
    );
}

/// `${localEnv:...}` reaches the build as a build arg, and a workspace
/// folder the image already fills holds the repository instead.
fn docker_a_local_env_build_arg_reaches_the_build_and_the_workspace_folder_holds_the_repository() {
    require_engine("docker");
    let repo = TestRepo::new();
    let dir = repo.path().join(".devcontainer");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM {IMAGE}\nARG FROM_HOST\nARG TZ\nUSER root\n\
             RUN echo \"$FROM_HOST $TZ\" > /build-arg.txt && mkdir -p /opt/tool && echo image > /opt/tool/IMAGE.txt\n\
             USER agent\n"
        ),
    )
    .unwrap();
    // A byte-order mark first, as some editors write.
    std::fs::write(
        dir.join("devcontainer.json"),
        "\u{feff}{ \"build\": { \"dockerfile\": \"Dockerfile\",\n\
           \"args\": { \"FROM_HOST\": \"${localEnv:DC_TEST_VALUE}\", \"TZ\": \"${localEnv:DC_NOT_SET:UTC}\" } },\n\
           \"remoteUser\": \"${localEnv:DC_USER}\",\n\
           \"workspaceFolder\": \"/opt/tool\",\n\
           \"workspaceMount\": \"source=${localWorkspaceFolder},target=/opt/tool,type=bind\",\n\
           \"postCreateCommand\": \"cat /build-arg.txt > dc-arg.txt; ls ${containerWorkspaceFolder} > dc-ls.txt\" }",
    )
    .unwrap();
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "note",
        "--trust",
    ];
    let mounts = fake_mounts(&repo);
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune_with_env(
        &args,
        &[("DC_TEST_VALUE", "from-host"), ("DC_USER", "agent")],
    );
    let _cleanup = scopeguard("docker", devcontainer_images("docker", repo.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-arg.txt")).unwrap(),
        "from-host UTC\n"
    );
    let listed = std::fs::read_to_string(repo.path().join("dc-ls.txt")).unwrap();
    assert!(
        listed.contains("README.md") && !listed.contains("IMAGE.txt"),
        "{listed}"
    );
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
}

/// A user the image does not have, and an image user whose ids cannot be
/// the host user's, are refused before initializeCommand runs on the host.
fn docker_a_user_that_cannot_work_is_refused_before_initialize_command() {
    require_engine("docker");
    let repo = TestRepo::new();
    let write = |extra: &str| {
        std::fs::write(
            repo.path().join(".devcontainer.json"),
            format!(
                r#"{{ "image": "{IMAGE}", {extra}
                     "initializeCommand": "touch dc-init-ran" }}"#
            ),
        )
        .unwrap()
    };
    write(r#""remoteUser": "nobody-here","#);
    let out = run("docker", &repo, "note", &["--branch", "dc-nouser"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("user `nobody-here` is not in the image"),
        "{}",
        stderr(&out)
    );
    assert!(!repo.path().join("dc-init-ran").exists());
    assert!(repo.git(&["branch", "--list", "dc-nouser"]).is_empty());
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        write(r#""remoteUser": "root","#);
        let out = run("docker", &repo, "note", &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("root's ids are never changed"),
            "{}",
            stderr(&out)
        );
        assert!(!repo.path().join("dc-init-ran").exists());
    }
    // A registry feature is refused saying registry; no initializeCommand.
    write(r#""features": { "ghcr.io/devcontainers/features/node:1": {} },"#);
    let out = run("docker", &repo, "note", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("registry"), "{}", stderr(&out));
    assert!(!repo.path().join("dc-init-ran").exists());
}

/// A local feature's folder in `repo`'s `.devcontainer/features/`.
fn write_feature(repo: &TestRepo, name: &str, json: &str, install: &str) {
    let dir = repo.path().join(".devcontainer/features").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("devcontainer-feature.json"), json).unwrap();
    std::fs::write(dir.join("install.sh"), install).unwrap();
}

/// Local features install at build as root, with their options (the
/// user's, else the defaults), the users and their own containerEnv as
/// env, in installsAfter order; their containerEnv (quotes kept, ${PATH}
/// expanded) reaches the hooks and the agent, their
/// lifecycle command merges before the file's; the image is built once
/// until a feature's content changes.
fn docker_local_features_install_in_order_with_their_options_and_env() {
    require_engine("docker");
    let repo = TestRepo::new();
    write_feature(
        &repo,
        "first",
        r#"{ "id": "first", "version": "1.0.0",
             "options": { "greeting": { "type": "string", "default": "hello" },
                          "target-file": { "type": "string", "default": "/opt/dc-first.txt" } },
             "containerEnv": { "DC_FEATURE_ENV": "from-feature", "DC_FEATURE_QUOTED": "a \"b\" c\\d",
                               "PATH": "/opt/dc-first/bin:${PATH}" },
             "onCreateCommand": "cat /opt/dc-first.txt /opt/dc-order > dc-feature.txt" }"#,
        "#!/bin/sh\nset -e\n\
         echo \"$GREETING $_REMOTE_USER $_REMOTE_USER_HOME $_CONTAINER_USER $_CONTAINER_USER_HOME $(id -u) $DC_FEATURE_ENV\" > \"$TARGET_FILE\"\n\
         echo first >> /opt/dc-order\n",
    );
    write_feature(
        &repo,
        "second",
        r#"{ "id": "second", "installsAfter": ["first"] }"#,
        "#!/bin/sh\necho second >> /opt/dc-order\n",
    );
    // second comes first in the file; installsAfter puts it after first.
    std::fs::write(
        repo.path().join(".devcontainer/devcontainer.json"),
        r#"{ "image": "IMAGE",
             "features": { "./features/second": {}, "./features/first": { "greeting": "hi" } },
             "postCreateCommand": "echo \"$DC_FEATURE_ENV $DC_FEATURE_QUOTED ${PATH%%:*}\" >> dc-feature.txt" }"#
            .replace("IMAGE", IMAGE),
    )
    .unwrap();
    let out = run("docker", &repo, "note\nFAKE:say-env:DC_FEATURE_ENV", &[]);
    let images = devcontainer_images("docker", repo.path());
    let _cleanup = scopeguard("docker", images.clone());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        images.iter().any(|i| i.contains("-features-")),
        "{images:?}"
    );
    // The test image runs as agent (/home/agent) and names no other user.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("dc-feature.txt")).unwrap(),
        "hi agent /home/agent agent /home/agent 0 from-feature\nfirst\nsecond\nfrom-feature a \"b\" c\\d /opt/dc-first/bin\n"
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = result["stdout"].as_str().unwrap();
    assert!(said.contains("from-feature"), "{said}");

    // resolve shows the feature's command; nothing is rebuilt.
    let resolve = || repo.sanddune(&["devcontainer", "resolve", "--json"]);
    let out = resolve();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("building"), "{}", stderr(&out));
    let resolved: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        resolved["onCreateCommands"],
        serde_json::json!(["cat /opt/dc-first.txt /opt/dc-order > dc-feature.txt"])
    );
    assert!(
        resolved["image"].as_str().unwrap().contains("-features-"),
        "{resolved}"
    );
    // A feature's content changes: its image is built again.
    std::fs::write(
        repo.path().join(".devcontainer/features/second/install.sh"),
        "#!/bin/sh\necho second, changed >> /opt/dc-order\n",
    )
    .unwrap();
    let out = resolve();
    let _cleanup_new = scopeguard("docker", devcontainer_images("docker", repo.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("building dev container image"),
        "{}",
        stderr(&out)
    );
}

/// A local feature without install.sh, or whose folder is outside the
/// repository (`../`, absolute, or through a symlink), is refused by name
/// before anything is created, initializeCommand included.
fn docker_a_local_feature_without_install_sh_or_outside_the_repository_is_refused() {
    require_engine("docker");
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("devcontainer-feature.json"),
        r#"{ "id": "outside" }"#,
    )
    .unwrap();
    std::fs::write(outside.path().join("install.sh"), "#!/bin/sh\n").unwrap();
    write_feature(&repo, "broken", r#"{ "id": "broken" }"#, "");
    std::fs::remove_file(repo.path().join(".devcontainer/features/broken/install.sh")).unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join(".devcontainer/link")).unwrap();
    let absolute = outside.path().display().to_string();
    for (feature, said) in [
        ("./features/broken", "has no install.sh"),
        ("../../elsewhere", "is outside the repository"),
        (absolute.as_str(), "is outside the repository"),
        ("./link", "is outside the repository"),
    ] {
        std::fs::write(
            repo.path().join(".devcontainer/devcontainer.json"),
            format!(
                r#"{{ "image": "{IMAGE}", "features": {{ "{feature}": {{}} }},
                     "initializeCommand": "touch dc-init-ran" }}"#
            ),
        )
        .unwrap();
        let out = run("docker", &repo, "note", &["--branch", "dc-feature-refused"]);
        assert_eq!(out.status.code(), Some(2), "{feature}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("the feature {feature} {said}"))
                && err.contains("nothing was created"),
            "{feature}: {err}"
        );
        assert!(!repo.path().join("dc-init-ran").exists(), "{feature}");
        assert!(
            repo.git(&["branch", "--list", "dc-feature-refused"])
                .is_empty()
        );
        assert!(!repo.path().join(".sanddune/worktrees").exists());
        assert!(devcontainer_images("docker", repo.path()).is_empty());
        assert!(repo.calls("claude").is_empty());
    }
}

/// The reference implementation's CLI, pinned, installed under the target
/// dir once (npm from the registry).
fn reference_cli() -> std::path::PathBuf {
    const VERSION: &str = "0.89.0";
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("devcontainers-cli-{VERSION}"));
    let bin = dir.join("node_modules/.bin/devcontainer");
    if !bin.exists() {
        let out = Command::new("npm")
            .args(["install", "-q", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(format!("@devcontainers/cli@{VERSION}"))
            .output();
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => trials::skip(format!(
                "npm install @devcontainers/cli@{VERSION}: {}",
                stderr(&out)
            )),
            Err(e) => trials::skip(format!(
                "npm is needed to install @devcontainers/cli@{VERSION}: {e}"
            )),
        }
    }
    bin
}

/// The mount target in a `type=bind,source=...,target=...` string.
fn mount_target(mount: &str) -> Option<&str> {
    mount.split(',').find_map(|p| {
        p.strip_prefix("target=")
            .or_else(|| p.strip_prefix("dst="))
            .or_else(|| p.strip_prefix("destination="))
    })
}

/// Every file of `tests/devcontainer-corpus/` (written here, each in the
/// shape of a real project's file) resolved by sanddune and by the
/// reference CLI, against stand-ins of its images: they agree on the
/// user, the workspace folder and mount, the env, the lifecycle commands
/// and the build args. A file sanddune refuses on purpose
/// (`refused.json`) is refused naming the key instead.
fn docker_the_corpus_resolves_as_the_reference_cli_resolves_it() {
    require_engine("docker");
    let cli = reference_cli();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/devcontainer-corpus");
    let images: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("images.json")).unwrap())
            .unwrap();
    // What sanddune refuses on purpose: folder -> the key the error names.
    let refused: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("refused.json")).unwrap())
            .unwrap();
    for image in &images {
        let name = image["name"].as_str().unwrap();
        // A null user: the image has none but root.
        let add_user = image["user"]
            .as_str()
            .map(|user| format!("RUN useradd -m -s /bin/sh {user}\n"))
            .unwrap_or_default();
        let tail = format!(
            "USER root\n{add_user}USER {}\n",
            image["userInstruction"].as_str().unwrap()
        );
        labelled_image(
            "docker",
            name,
            &tail,
            image["metadata"].as_str().unwrap_or("[]"),
        );
    }
    let (mut compared, mut refusals) = (0, 0);
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let entry = entry.unwrap().path();
        if !entry.is_dir() {
            continue;
        }
        let repo = TestRepo::new();
        // `.devcontainer/`, or a root `.devcontainer.json`.
        let out = Command::new("cp")
            .arg("-r")
            .arg(entry.join("."))
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let ours = repo.sanddune(&["devcontainer", "resolve", "--json", "--trust"]);
        let _cleanup = scopeguard("docker", devcontainer_images("docker", repo.path()));
        let folder = entry.file_name().unwrap().to_string_lossy();
        if let Some(key) = refused.get(folder.as_ref()) {
            assert_eq!(ours.status.code(), Some(2), "{folder}: {}", stderr(&ours));
            let err = stderr(&ours);
            assert!(
                err.contains(&format!("`{key}`")) && err.contains("nothing was created"),
                "{folder}: {err}"
            );
            refusals += 1;
            continue;
        }
        assert!(
            ours.status.success(),
            "{}: {}",
            entry.display(),
            stderr(&ours)
        );
        let ours: serde_json::Value = serde_json::from_slice(&ours.stdout).unwrap();
        let theirs = Command::new(&cli)
            .args([
                "read-configuration",
                "--include-merged-configuration",
                "--workspace-folder",
            ])
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(
            theirs.status.success(),
            "{}: {}",
            entry.display(),
            stderr(&theirs)
        );
        let theirs: serde_json::Value = serde_json::from_slice(&theirs.stdout).unwrap();
        let merged = &theirs["mergedConfiguration"];
        let or_empty = |v: &serde_json::Value, empty: serde_json::Value| {
            if v.is_null() { empty } else { v.clone() }
        };
        let object = || serde_json::json!({});
        let fields = [
            (
                "remoteUser",
                merged["remoteUser"].clone(),
                ours["remoteUser"].clone(),
            ),
            (
                "containerUser",
                merged["containerUser"].clone(),
                ours["containerUser"].clone(),
            ),
            (
                "workspaceFolder",
                theirs["workspace"]["workspaceFolder"].clone(),
                ours["workspaceFolder"].clone(),
            ),
            (
                "workspaceMount",
                mount_target(
                    theirs["workspace"]["workspaceMount"]
                        .as_str()
                        .unwrap_or_default(),
                )
                .into(),
                ours["workspaceMount"].clone(),
            ),
            (
                "containerEnv",
                or_empty(&merged["containerEnv"], object()),
                ours["containerEnv"].clone(),
            ),
            (
                "remoteEnv",
                or_empty(&merged["remoteEnv"], object()),
                ours["remoteEnv"].clone(),
            ),
            (
                "onCreateCommands",
                merged["onCreateCommands"].clone(),
                ours["onCreateCommands"].clone(),
            ),
            (
                "updateContentCommands",
                merged["updateContentCommands"].clone(),
                ours["updateContentCommands"].clone(),
            ),
            (
                "postCreateCommands",
                merged["postCreateCommands"].clone(),
                ours["postCreateCommands"].clone(),
            ),
            (
                "postStartCommands",
                merged["postStartCommands"].clone(),
                ours["postStartCommands"].clone(),
            ),
            (
                "buildArgs",
                or_empty(&theirs["configuration"]["build"]["args"], object()),
                ours["buildArgs"].clone(),
            ),
        ];
        for (field, theirs, ours) in fields {
            assert_eq!(ours, theirs, "{}: {field}", entry.display());
        }
        compared += 1;
    }
    for image in &images {
        remove_images("docker", &[image["name"].as_str().unwrap().to_string()]);
    }
    assert_eq!((compared, refusals), (7, refused.len()));
}

/// Resolving builds the image and reads the environment as a run does, so
/// it needs the same workspace trust: without it nothing is built and the
/// refusal names what the file would make the host do.
fn resolve_asks_for_workspace_trust_before_it_builds() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".devcontainer")).unwrap();
    std::fs::write(
        repo.path().join(".devcontainer/devcontainer.json"),
        r#"{"build": {"dockerfile": "Dockerfile", "context": "../.."}, "containerEnv": {"K": "${localEnv:HOME}"}}"#,
    )
    .unwrap();
    std::fs::write(
        repo.path().join(".devcontainer/Dockerfile"),
        "FROM scratch\n",
    )
    .unwrap();
    let out = repo.sanddune(&["devcontainer", "resolve", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("build.context outside the repository"),
        "{err}"
    );
    assert!(err.contains("${localEnv:HOME}"), "{err}");
    assert!(err.contains("sanddune trust"), "{err}");
    assert!(!err.contains("building"), "{err}");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(
            docker_a_dev_container_gives_the_agent_its_image_env_user_and_hooks_and_is_built_once
        ),
        trial!(
            podman_a_dev_container_gives_the_agent_its_image_env_user_and_hooks_and_is_built_once
        ),
        trial!(docker_features_are_refused_by_name_before_anything_is_created),
        trial!(docker_the_images_metadata_label_names_the_user_and_a_changed_base_rebuilds),
        trial!(docker_a_local_env_build_arg_reaches_the_build_and_the_workspace_folder_holds_the_repository),
        trial!(docker_a_user_that_cannot_work_is_refused_before_initialize_command),
        trial!(docker_local_features_install_in_order_with_their_options_and_env),
        trial!(docker_a_local_feature_without_install_sh_or_outside_the_repository_is_refused),
        trial!(docker_the_corpus_resolves_as_the_reference_cli_resolves_it),
        trial!(resolve_asks_for_workspace_trust_before_it_builds),
        trial!(docker_the_option_names_or_ignores_the_dev_container),
        trial!(init_from_devcontainer_records_it_and_builds_nothing),
        trial!(docker_a_workflow_scaffolded_from_the_dev_container_runs_in_it),
        trial!(docker_a_failing_lifecycle_command_fails_the_setup_with_its_output),
        trial!(async docker_a_sandbox_on_an_existing_worktree_runs_the_initialize_and_lifecycle_commands),
    ])
}
