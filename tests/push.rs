//! `--push` (issue 35, part 4): the host pushes the branch that holds a
//! run's commits with the user's own git credentials; the token never
//! enters the sandbox. Real git on both ends: a bare repository as the
//! remote, and, for the credential, `git http-backend` behind Basic auth
//! as a forge serves it, with the token in the host's credential store.

mod common;

use std::path::Path;

use common::engines::*;
use common::servers::{host_address, serve_git};
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};
use serde_json::Value;

/// A bare repository `name` beside the test repository's HOME, added as
/// remote `name`, holding what `main` holds.
fn remote(repo: &TestRepo, name: &str) -> std::path::PathBuf {
    let bare = repo.home.path().join(format!("{name}.git"));
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", name, bare.to_str().unwrap()]);
    repo.git(&["push", "-q", name, "main"]);
    bare
}

fn tip(git_dir: &Path, branch: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    stdout(&out).trim().to_string()
}

fn run(repo: &TestRepo, prompt: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--json",
        "--prompt",
        prompt,
    ];
    args.extend_from_slice(extra);
    repo.sanddune(&args)
}

fn branch_strategy_pushes_the_branch_from_the_host() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    let out = run(&repo, "add a note", &["--branch", "feat/note", "--push"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let local = repo.git(&["rev-parse", "feat/note"]);
    assert_eq!(tip(&origin, "feat/note"), local);
    assert_eq!(result["pushed"]["remote"], "origin");
    assert_eq!(result["pushed"]["branch"], "feat/note");
    assert_eq!(result["pushed"]["commit"], local.as_str());
    // Nor anything else.
    assert_eq!(
        repo.git(&[
            "--git-dir",
            origin.to_str().unwrap(),
            "branch",
            "--format=%(refname:short)"
        ]),
        "feat/note\nmain"
    );
}

/// merge-to-head lands the commits on the checked-out branch: that one goes
/// to its upstream's remote, not `origin`.
fn merge_to_head_pushes_the_checked_out_branch_to_its_upstream() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    let fork = remote(&repo, "fork");
    repo.git(&["branch", "-q", "--set-upstream-to", "fork/main"]);
    let out = run(
        &repo,
        "add a note",
        &["--strategy", "merge-to-head", "--push"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let main = repo.git(&["rev-parse", "main"]);
    assert_eq!(tip(&fork, "main"), main);
    assert_ne!(tip(&origin, "main"), main);
    // The temporary branch stays local.
    assert_eq!(
        repo.git(&[
            "--git-dir",
            fork.to_str().unwrap(),
            "branch",
            "--list",
            "sanddune/*"
        ]),
        ""
    );
}

/// Under merge-to-head the agent's commits land in your checkout. With
/// `core.hooksPath` pointing into the tree (as husky sets it), a pre-push
/// or reference-transaction hook the agent committed is one git would run
/// on the host at a push. The host's push runs none; your own would.
fn a_hook_the_agent_planted_never_runs_at_the_push() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    repo.git(&["config", "core.hooksPath", "hooks"]);
    let marker = repo.home.path().join("planted-hook-ran");
    let plant = format!(
        "FAKE:run:mkdir -p hooks && printf '#!/bin/sh\\ntouch {}\\n' >hooks/pre-push && chmod +x hooks/pre-push && cp -p hooks/pre-push hooks/reference-transaction && git add hooks && git commit -q -m hooks",
        marker.display()
    );
    let out = run(
        &repo,
        &format!("add a note\n{plant}"),
        &["--strategy", "merge-to-head", "--push"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let hook = repo.path().join("hooks/pre-push");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&hook).unwrap().permissions());
    assert!(
        mode & 0o111 != 0,
        "the planted hook is in the checkout, executable"
    );
    assert_eq!(tip(&origin, "main"), repo.git(&["rev-parse", "main"]));
    assert!(!marker.exists(), "the planted hook ran at the host's push");
    // The control: git's own push runs it.
    repo.git(&["push", "-q", "origin", "main:refs/heads/control"]);
    assert!(marker.exists(), "the planted hook is not one git runs");
}

fn an_unknown_remote_is_refused_before_anything_is_made() {
    let repo = TestRepo::new();
    remote(&repo, "origin");
    let out = run(
        &repo,
        "add a note",
        &["--branch", "feat/x", "--push=upstream"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no remote `upstream`") && err.contains("it has origin"),
        "{err}"
    );
    assert_eq!(repo.git(&["branch", "--list", "feat/x"]), "");
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

/// The remote's branch moved on: no force, the commits stay on the local
/// branch, and the error says how to push them.
fn a_rejected_push_keeps_the_commits_and_says_how_to_push_them() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    repo.git(&["branch", "-q", "feat/y"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "theirs"]);
    repo.git(&["push", "-q", "origin", "main:feat/y"]);
    let theirs = tip(&origin, "feat/y");
    repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let out = run(&repo, "add a note", &["--branch", "feat/y", "--push"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("the run's commits are on `feat/y`")
            && err.contains("not a fast-forward")
            && err.contains("git push origin feat/y"),
        "{err}"
    );
    assert_eq!(tip(&origin, "feat/y"), theirs);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "feat/y"]),
        "Add a note"
    );
}

/// A run whose check fails merges nothing, and pushes nothing; nor does a
/// run that made no commit.
fn nothing_is_pushed_after_a_failed_check_or_without_commits() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    let out = run(
        &repo,
        "add a note",
        &["--branch", "feat/z", "--push", "--check", "exit 3"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(tip(&origin, "feat/z"), "");
    let out = run(&repo, "FAKE:no-commit", &["--branch", "feat/w", "--push"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(result.get("pushed").is_none(), "{result}");
    assert_eq!(tip(&origin, "feat/w"), "");
}

/// `push` in a workflow step: each item's branch, once its runs (here a
/// run and its `then`) are done; a remote that is not there stops the
/// workflow before anything starts.
fn a_workflow_step_pushes_its_branch_after_its_runs() {
    let repo = TestRepo::new();
    let origin = remote(&repo, "origin");
    let dir = repo.path().join(".sanddune/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    let step = |push: &str| {
        format!(
            "[[steps]]\nname = \"work\"\nbranch = \"feat/wf\"\nprompt = \"add a note\"\npush = {push}\n  [[steps.then]]\n  name = \"more\"\n  prompt = \"add another note\"\n"
        )
    };
    let workflow = |args: &[&str]| {
        let mut all = vec![
            "workflow",
            "run",
            "w",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--json",
        ];
        all.extend_from_slice(args);
        repo.sanddune(&all)
    };
    std::fs::write(dir.join("w.toml"), step("\"nowhere\"")).unwrap();
    let out = workflow(&["--trust"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("step `work`: --push=nowhere: the repository has no remote `nowhere`"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty(), "the agent ran");

    std::fs::write(dir.join("w.toml"), step("true")).unwrap();
    let out = workflow(&["--trust"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let item = &result["steps"][0]["items"][0];
    let local = repo.git(&["rev-parse", "feat/wf"]);
    assert_eq!(item["pushed"]["commit"], local.as_str(), "{result}");
    assert_eq!(item["commits"].as_array().unwrap().len(), 2, "{result}");
    assert_eq!(tip(&origin, "feat/wf"), local);
}

/// A forge token the user hands the sandbox (for `gh` in a template's
/// prompt) goes in: the run log says so, and what to do instead.
fn a_forge_token_handed_to_the_sandbox_is_named_in_the_log() {
    let repo = TestRepo::new();
    let out = run(&repo, "add a note", &["--env", "GH_TOKEN=ghp_handed_in"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("warning: GH_TOKEN goes into the sandbox as it is")
            && log.contains("`--push` pushes from the host"),
        "{log}"
    );
}

/// The token of a forge that needs one lives in the host's credential
/// store. The agent, in a docker sandbox that reaches the forge, finds it
/// nowhere and cannot push; the host pushes with it after the run.
fn docker_the_git_token_stays_on_the_host_and_the_host_pushes() {
    require_engine("docker");
    let repo = TestRepo::new();
    let forge = tempfile::tempdir().unwrap();
    let bare = forge.path().join("project.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let (part1, part2) = ("ghp_sanddune", format!("{nanos:x}"));
    let token = format!("{part1}{part2}");
    let ip = host_address();
    let (port, seen) = serve_git(ip, forge.path(), "agent-user", &token);
    let url = format!("http://{ip}:{port}/project.git");
    repo.git(&["remote", "add", "origin", &url]);
    // The user's own set-up: a credential helper with the token, in a
    // file outside the HOME these tests mount into the sandbox for the
    // fakes.
    let store = tempfile::tempdir().unwrap();
    let credentials = store.path().join("git-credentials");
    std::fs::write(
        &credentials,
        format!("http://agent-user:{token}@{ip}:{port}\n"),
    )
    .unwrap();
    std::fs::write(
        repo.home.path().join(".gitconfig"),
        format!(
            "[credential]\n\thelper = store --file={}\n",
            credentials.display()
        ),
    )
    .unwrap();

    let hunt = format!("FAKE:run:echo found=$(hunt-secret {part1} {part2})");
    let push = format!(
        "FAKE:run:GIT_TERMINAL_PROMPT=0 git push {url} HEAD:refs/heads/stolen 2>&1 | tail -1"
    );
    let prompt = format!("add a note\n{hunt}\n{push}");
    let branch = unique("push");
    let out = docker_run(&repo, &prompt, &["--json", "--branch", &branch, "--push"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains(" found=0 (exit 0)"),
        "the token is in the sandbox: {text}"
    );
    assert!(
        text.contains("could not read Username") || text.contains("Authentication failed"),
        "the agent's push: {text}"
    );
    assert_eq!(tip(&bare, "stolen"), "");
    assert_eq!(tip(&bare, &branch), repo.git(&["rev-parse", &branch]));
    assert_eq!(result["pushed"]["remote"], "origin");
    let seen = seen.lock().unwrap();
    // The agent's tries were refused; the host's push went through.
    assert!(seen.iter().any(|(_, status)| *status == 401), "{seen:?}");
    assert!(
        seen.iter()
            .any(|(path, status)| path.ends_with("/git-receive-pack") && *status == 200),
        "{seen:?}"
    );
    assert_no_container_left("docker", "name", &branch);
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(branch_strategy_pushes_the_branch_from_the_host),
        trial!(merge_to_head_pushes_the_checked_out_branch_to_its_upstream),
        trial!(a_hook_the_agent_planted_never_runs_at_the_push),
        trial!(an_unknown_remote_is_refused_before_anything_is_made),
        trial!(a_rejected_push_keeps_the_commits_and_says_how_to_push_them),
        trial!(nothing_is_pushed_after_a_failed_check_or_without_commits),
        trial!(a_workflow_step_pushes_its_branch_after_its_runs),
        trial!(a_forge_token_handed_to_the_sandbox_is_named_in_the_log),
        trial!(docker_the_git_token_stays_on_the_host_and_the_host_pushes),
    ])
}
