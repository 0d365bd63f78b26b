//! Workspace trust (ADR 0026): what the repository's own files make the
//! host do runs only once the user approved it, and again only after it
//! changes and is approved again; a run without a terminal stops before
//! anything is created. Also: what root in a bind-mount sandbox leaves in
//! the worktree gives no host privileges.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::engines::{IMAGE, fake_mounts, require_engine};
use common::trials::{self, trial};
use common::{TestRepo, plugin_file, stderr, stdout};

/// `sanddune run --sandbox test-isolated --agent claude-code` plus `args`
/// (no terminal: stdin is not one).
fn run(repo: &TestRepo, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
    ];
    all.extend_from_slice(args);
    repo.sanddune(&all)
}

fn write(repo: &TestRepo, file: &str, text: &str) {
    let path = repo.path().join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A marker path outside the repository that a host command would create.
fn marker(repo: &TestRepo, name: &str) -> PathBuf {
    repo.home.path().join(name)
}

/// Nothing was created: no worktree, no log, no agent call.
fn nothing_created(repo: &TestRepo) {
    assert_eq!(
        repo.git(&["worktree", "list"]).lines().count(),
        1,
        "a worktree was created"
    );
    assert!(
        !repo.path().join(".sanddune/logs").exists(),
        "a run log was created"
    );
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

fn hook_config(command: &str) -> String {
    format!("[[hooks.host.onWorktreeReady]]\ncommand = \"{command}\"\n")
}

/// The run stopped at the trust gate (exit 2), listing `line` as new.
fn refused_with(out: &std::process::Output, line: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(line), "{}", stderr(out));
}

fn an_unapproved_host_hook_stops_the_run_and_runs_once_approved_until_it_changes() {
    let repo = TestRepo::new();
    let first = marker(&repo, "first-hook-ran");
    let hook = format!("touch {}", first.display());
    write(&repo, ".sanddune/config.toml", &hook_config(&hook));

    let out = run(&repo, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "+ .sanddune/config.toml: host hook onWorktreeReady runs on the host: {hook}"
        )),
        "{err}"
    );
    assert!(
        err.contains("sanddune trust") && err.contains("--trust"),
        "{err}"
    );
    assert!(!first.exists(), "the hook ran");
    nothing_created(&repo);

    let out = repo.sanddune(&["trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&hook), "{}", stdout(&out));
    let out = run(&repo, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(first.exists(), "the approved hook did not run");

    // The agent edits the config: the next run stops again, showing what
    // changed since the approved version.
    let second = marker(&repo, "second-hook-ran");
    let evil = format!("touch {}", second.display());
    write(
        &repo,
        ".sanddune/config.toml",
        &format!("{}{}", hook_config(&hook), hook_config(&evil)),
    );
    std::fs::remove_file(&first).unwrap();
    let out = run(&repo, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "+ .sanddune/config.toml: host hook onWorktreeReady runs on the host: {evil}"
        )),
        "{err}"
    );
    assert!(
        !err.contains(&format!(
            "+ .sanddune/config.toml: host hook onWorktreeReady runs on the host: {hook}\n"
        )),
        "an approved item is shown as new: {err}"
    );
    assert!(!first.exists() && !second.exists(), "a hook ran");
}

fn the_trust_flag_approves_without_a_terminal_and_is_remembered() {
    let repo = TestRepo::new();
    let ran = marker(&repo, "hook-ran");
    write(
        &repo,
        ".sanddune/config.toml",
        &hook_config(&format!("touch {}", ran.display())),
    );
    let out = run(&repo, &["--trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ran.exists());
    std::fs::remove_file(&ran).unwrap();
    let out = run(&repo, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ran.exists(), "the approved hook did not run again");
}

/// `--trust` is for CI: a state dir that cannot be written does not stop
/// the run; the approval is only not remembered.
fn the_trust_flag_works_where_the_approval_cannot_be_recorded() {
    let repo = TestRepo::new();
    let ran = marker(&repo, "hook-ran");
    write(
        &repo,
        ".sanddune/config.toml",
        &hook_config(&format!("touch {}", ran.display())),
    );
    let not_a_dir = marker(&repo, "state-is-a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let state = [("SANDDUNE_STATE_DIR", not_a_dir.to_str().unwrap())];
    let args = [
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
    ];
    let out = repo.sanddune_with_env(&[args.as_slice(), &["--trust"]].concat(), &state);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ran.exists());
    assert!(
        stderr(&out).contains("trusted for this run only"),
        "{}",
        stderr(&out)
    );
    let out = repo.sanddune_with_env(&args, &state);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn an_unapproved_cmd_reference_is_not_run() {
    let repo = TestRepo::new();
    let ran = marker(&repo, "cmd-ran");
    write(
        &repo,
        ".sanddune/.env",
        &format!(
            "SANDDUNE_TEST_KEY=cmd:touch {}; echo value\n",
            ran.display()
        ),
    );
    refused_with(
        &run(&repo, &[]),
        &format!(
            "+ .sanddune/.env: SANDDUNE_TEST_KEY = cmd:touch {}; echo value (runs on the host)",
            ran.display()
        ),
    );
    assert!(!ran.exists(), "the command ran");
    nothing_created(&repo);
    // The same reference in config.toml's [env] is gated too (that file
    // is read, and its references resolved, by the CLI).
    std::fs::remove_file(repo.path().join(".sanddune/.env")).unwrap();
    write(
        &repo,
        ".sanddune/config.toml",
        &format!(
            "[env]\nSANDDUNE_TEST_KEY = \"cmd:touch {}\"\n",
            ran.display()
        ),
    );
    let out = run(&repo, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("+ .sanddune/config.toml: [env] SANDDUNE_TEST_KEY = cmd:"));
    assert!(!ran.exists(), "the command ran");
}

fn a_file_reference_stays_inside_the_repository_unless_approved() {
    let repo = TestRepo::new();
    // Inside: no approval needed.
    write(&repo, "token", "inside-value\n");
    write(&repo, ".sanddune/.env", "SANDDUNE_TEST_KEY=file:token\n");
    let out = run(&repo, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.calls("claude")[0]["env"]["SANDDUNE_TEST_KEY"],
        "inside-value"
    );

    // Outside (a home file, or a symlink in the repository pointing out):
    // refused until approved.
    let secret = marker(&repo, "secret");
    std::fs::write(&secret, "home-value\n").unwrap();
    std::os::unix::fs::symlink(&secret, repo.path().join("escape")).unwrap();
    for reference in ["file:~/secret", "file:escape"] {
        write(
            &repo,
            ".sanddune/.env",
            &format!("SANDDUNE_TEST_KEY={reference}\n"),
        );
        refused_with(
            &run(&repo, &[]),
            &format!(
                "+ .sanddune/.env: SANDDUNE_TEST_KEY = {reference} (reads a file outside the repository)"
            ),
        );
    }
    assert_eq!(repo.calls("claude").len(), 1, "the agent ran");
    let out = repo.sanddune(&["trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&repo, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.calls("claude")[1]["env"]["SANDDUNE_TEST_KEY"],
        "home-value"
    );
}

fn config_that_makes_the_host_do_nothing_needs_no_approval() {
    let repo = TestRepo::new();
    write(
        &repo,
        ".sanddune/config.toml",
        "copyToWorktree = [\"README.md\"]\n[env]\nSANDDUNE_TEST_A = \"plain\"\n\
         [[hooks.sandbox.onSandboxReady]]\ncommand = \"true\"\n\
         [sandboxOptions]\n",
    );
    write(
        &repo,
        ".sanddune/.env",
        "SANDDUNE_TEST_B=literal:cmd:not-run\n",
    );
    let out = run(&repo, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.calls("claude")[0]["env"]["SANDDUNE_TEST_B"],
        "cmd:not-run"
    );
    assert!(
        !repo
            .home
            .path()
            .join(".local/state/sanddune/trust")
            .exists(),
        "an approval was recorded for nothing"
    );
    let out = repo.sanddune(&["trust", "--show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing to approve"),
        "{}",
        stdout(&out)
    );
}

fn trust_show_approves_nothing_and_the_record_is_the_users_alone() {
    let repo = TestRepo::new();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    write(
        &repo,
        ".sanddune/config.toml",
        "[[hooks.sandbox.onSandboxReady]]\ncommand = \"chmod u+s /bin/sh\"\nsudo = true\n\
         [sandboxOptions]\nmount = \"~/.ssh:/keys:ro\"\n",
    );
    let env = [("SANDDUNE_STATE_DIR", state_dir)];
    let out = repo.sanddune_with_env(&["trust", "--show"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown.contains(".sanddune/config.toml: sandbox hook onSandboxReady runs as root in the sandbox: chmod u+s /bin/sh")
            && shown.contains(".sanddune/config.toml: [sandboxOptions] mount = ~/.ssh:/keys:ro")
            && shown.contains("not approved"),
        "{shown}"
    );
    assert!(
        !state.path().join("trust").exists(),
        "--show recorded an approval"
    );
    let out = repo.sanddune_with_env(&["trust"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Vec<PathBuf> = std::fs::read_dir(state.path().join("trust"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let mode = std::fs::metadata(&records[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = repo.sanddune_with_env(&["trust", "--show"], &env);
    assert!(stdout(&out).contains("(approved)"), "{}", stdout(&out));
    // Not the default place: a run that looks there is not approved.
    let out = run(&repo, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn a_workflows_mounts_and_an_interactive_session_pass_the_same_gate() {
    let repo = TestRepo::new();
    write(
        &repo,
        ".sanddune/workflows/w.toml",
        "[defaults]\nsandbox = \"test-isolated\"\nagent = \"claude-code\"\n\
         sandboxOptions = { mount = \"~:/home-of-the-user\" }\n\
         [[steps]]\nname = \"one\"\nprompt = \"fix the typo\"\n",
    );
    refused_with(
        &repo.sanddune(&["workflow", "run", "w"]),
        "+ .sanddune/workflows/w.toml: defaults sandboxOptions mount = ~:/home-of-the-user",
    );
    nothing_created(&repo);

    // The repository's hooks reach every item of a workflow: refused, then
    // approved for the whole workflow with --trust.
    let ran = marker(&repo, "hook-ran");
    write(
        &repo,
        ".sanddune/config.toml",
        &hook_config(&format!("touch {}", ran.display())),
    );
    write(
        &repo,
        ".sanddune/workflows/plain.toml",
        "[defaults]\nsandbox = \"test-isolated\"\nagent = \"claude-code\"\n\
         [[steps]]\nname = \"one\"\nprompt = \"fix the typo\"\n",
    );
    let out = repo.sanddune(&["workflow", "run", "plain"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("host hook onWorktreeReady"),
        "{}",
        stderr(&out)
    );
    assert!(!ran.exists(), "the hook ran");
    nothing_created(&repo);
    let out = repo.sanddune(&["workflow", "run", "plain", "--trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ran.exists(), "the approved hook did not run");
    std::fs::remove_file(&ran).unwrap();

    // A change since then stops an interactive session.
    write(
        &repo,
        ".sanddune/config.toml",
        &hook_config(&format!("touch {}; true", ran.display())),
    );
    let out = repo.sanddune(&[
        "interactive",
        "--sandbox",
        "no-sandbox",
        "--agent",
        "claude-code",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("host hook onWorktreeReady runs on the host: touch")
            && stderr(&out).contains("; true"),
        "{}",
        stderr(&out)
    );
    assert!(!ran.exists(), "the hook ran");
}

/// Root in a bind-mount sandbox (here a provider that runs the agent on
/// the host, as root in these tests) leaves a setuid shell and a device
/// node in the shared worktree: once the sandbox closes, neither gives
/// anything, and the log names them.
fn a_setuid_file_or_device_node_left_in_the_worktree_is_defused_at_close() {
    let repo = TestRepo::new();
    let provider = plugin_file("sanddune-test-plugin-v0-4-sandbox");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        provider.to_str().unwrap(),
        "--yes",
        "--agent",
        "claude-code",
        "--prompt",
        "note\nFAKE:run:cp /bin/sh rootsh && chmod 4755 rootsh && (mknod hostnull c 1 3 || true)",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shell = repo.path().join("rootsh");
    let mode = std::fs::metadata(&shell).unwrap().permissions().mode();
    assert_eq!(mode & 0o6000, 0, "the setuid bit survived: {mode:o}");
    assert!(
        std::fs::symlink_metadata(repo.path().join("hostnull")).is_err(),
        "the device node survived"
    );
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("warning: took the setuid bit off") && log.contains("rootsh"),
        "{log}"
    );
}

/// Root in a docker or podman sandbox (an approved sudo hook) copies a
/// shell into the shared worktree setuid-root and makes a device node
/// there: neither gives anything once the sandbox is closed, and the log
/// names them.
fn root_in_the_sandbox_leaves_no_privilege_in_the_worktree(engine: &str) {
    require_engine(engine);
    let repo = TestRepo::new();
    write(
        &repo,
        ".sanddune/config.toml",
        "[[hooks.sandbox.onSandboxReady]]\n\
         command = \"cp /bin/sh rootsh && chmod 4755 rootsh && (mknod hostnull c 1 3 || true)\"\n\
         sudo = true\n",
    );
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        "add a note\nFAKE:run:stat -c mode=%a rootsh",
        "--sandbox-opt",
        &image,
        "--json",
        "--trust",
    ];
    let mounts = fake_mounts(&repo);
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let shell = repo.path().join("rootsh");
    let mode = std::fs::metadata(&shell).unwrap().permissions().mode();
    assert_eq!(mode & 0o6000, 0, "the setuid bit survived: {mode:o}");
    assert!(
        std::fs::symlink_metadata(repo.path().join("hostnull")).is_err(),
        "the device node survived"
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Defused right after the setup's root hooks, before the agent started.
    let said = result["stdout"].as_str().unwrap();
    assert!(said.contains("mode=755 (exit 0)"), "{said}");
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("warning: took the setuid bit off") && log.contains("rootsh"),
        "{log}"
    );
}

fn docker_root_in_the_sandbox_leaves_no_privilege_in_the_worktree() {
    root_in_the_sandbox_leaves_no_privilege_in_the_worktree("docker");
}

fn podman_root_in_the_sandbox_leaves_no_privilege_in_the_worktree() {
    root_in_the_sandbox_leaves_no_privilege_in_the_worktree("podman");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(an_unapproved_host_hook_stops_the_run_and_runs_once_approved_until_it_changes),
        trial!(the_trust_flag_approves_without_a_terminal_and_is_remembered),
        trial!(the_trust_flag_works_where_the_approval_cannot_be_recorded),
        trial!(an_unapproved_cmd_reference_is_not_run),
        trial!(a_file_reference_stays_inside_the_repository_unless_approved),
        trial!(config_that_makes_the_host_do_nothing_needs_no_approval),
        trial!(trust_show_approves_nothing_and_the_record_is_the_users_alone),
        trial!(a_workflows_mounts_and_an_interactive_session_pass_the_same_gate),
        trial!(a_setuid_file_or_device_node_left_in_the_worktree_is_defused_at_close),
        trial!(docker_root_in_the_sandbox_leaves_no_privilege_in_the_worktree),
        trial!(podman_root_in_the_sandbox_leaves_no_privilege_in_the_worktree),
    ])
}
