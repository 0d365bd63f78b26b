//! A hostile agent in a container sandbox (docker, podman) tries to reach
//! the host through the repository's git dir (issue: the agent is hostile;
//! ADR 0025). The fake claude runs the attack as its Bash tool would
//! (`FAKE:run:`), after making its usual commit; every payload it plants
//! would touch a file in a marker directory that no sandbox mounts. After
//! the run, and after the user's own ordinary git commands, the marker
//! directory must be empty, the repository's git dir unchanged, and the
//! agent's commit on the branch.
//!
//! Needs a running engine and the test image (`tests/images/build.sh`),
//! as `tests/containers.rs`.

mod common;

use common::engines::*;
use common::hostile::*;
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};

/// `sanddune run` of the fake claude with `prompt` in `engine`'s test
/// image, its calls logged on the host, then `extra`.
fn run_agent(engine: &str, repo: &TestRepo, prompt: &str, extra: &[&str]) -> std::process::Output {
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(repo);
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(extra);
    repo.sanddune(&args)
}

fn the_git_dir_stays_out_of_reach(engine: &str, strategy: &[&str]) {
    require_engine(engine);
    let (repo, markers) = hostile_repo();
    let before = git_dir_state(&repo);
    let prompt = format!(
        "add a note\nFAKE:run:sh attack.sh {}",
        markers.path().display()
    );
    let out = run_agent(engine, &repo, &prompt, &[&["--json"], strategy].concat());
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{err}\n{text}");
    assert!(text.contains("attack done"), "the attack ran: {text}");
    assert!(
        !text.contains("SECRET-TOKEN-42"),
        "the credential leaked: {text}"
    );
    assert!(!err.contains("SECRET-TOKEN-42"));

    // The agent's commit landed where the strategy says.
    let branch = match strategy {
        ["--branch", name] => *name,
        _ => "main",
    };
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", branch]),
        "Add a note"
    );
    assert_eq!(git_dir_state(&repo), before, "the git dir changed");
    assert_eq!(
        markers_left(markers.path()),
        Vec::<String>::new(),
        "ran on the host during the run"
    );

    users_next_git_commands(&repo, &|args| repo.git(args));
    assert_eq!(
        markers_left(markers.path()),
        Vec::<String>::new(),
        "ran on the host afterwards"
    );
    // A linked worktree's `.git` file kept pointing at its own git dir.
    if let ["--branch", name] = strategy {
        let dot_git = repo
            .path()
            .join(".sanddune/worktrees")
            .join(name)
            .join(".git");
        if let Ok(text) = std::fs::read_to_string(dot_git) {
            assert!(!text.contains("evil"), "{text}");
        }
    }
    assert!(
        !repo.path().join(".git/sanddune-agent").exists()
            || std::fs::read_dir(repo.path().join(".git/sanddune-agent"))
                .unwrap()
                .next()
                .is_none(),
        "the agent git dir is removed"
    );
}

fn docker_head_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("docker", &[]);
}

fn docker_merge_to_head_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("docker", &["--strategy", "merge-to-head"]);
}

fn docker_branch_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("docker", &["--branch", "hostile"]);
}

fn podman_head_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("podman", &[]);
}

fn podman_merge_to_head_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("podman", &["--strategy", "merge-to-head"]);
}

fn podman_branch_a_planted_hook_filter_or_config_never_runs_on_the_host() {
    the_git_dir_stays_out_of_reach("podman", &["--branch", "hostile"]);
}

/// An agent that rewrites a commit already brought back (a reset below it,
/// then a new commit) fails the run, naming what it did; the branch keeps
/// what landed.
fn docker_an_agent_that_rewrites_landed_commits_fails_and_the_branch_keeps_them() {
    require_engine("docker");
    let repo = TestRepo::new();
    let root = repo.git(&["rev-parse", "HEAD"]);
    let prompt = format!(
        "add a note\nFAKE:no-signal\nFAKE:run:git reset -q --hard {root} && git commit -q --allow-empty -m \"rewritten $(date +%N)\""
    );
    let out = run_agent("docker", &repo, &prompt, &["--max-iterations", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("rewrote commits"), "{}", stderr(&out));
    // Iteration 1's commit (a descendant of the base) landed; iteration 2's
    // rewrite did not.
    assert!(
        repo.git(&["log", "-1", "--format=%s", "main"])
            .starts_with("rewritten ")
    );
    assert_eq!(repo.git(&["rev-list", "--count", "main"]), "2");
}

/// An agent that commits a submodule whose git dir it made (its config
/// runs `core.fsmonitor`) fails the run: its commits do not land, so the
/// user's next `git status` never enters that git dir.
fn docker_a_planted_submodule_git_dir_never_runs_on_the_host() {
    require_engine("docker");
    let repo = TestRepo::new();
    let markers = tempfile::tempdir().unwrap();
    let m = markers.path().display();
    let prompt = format!(
        "add a note\nFAKE:run:git init -q sub && git -C sub config core.fsmonitor 'touch {m}/submodule; true' && git -C sub -c user.name=a -c user.email=a@a commit -q --allow-empty -m s && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules && git add .gitmodules && git commit -q -m submodule && echo planted"
    );
    let out = run_agent("docker", &repo, &prompt, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("added a submodule at `sub`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), "initial");
    repo.git(&["status"]);
    repo.git(&["diff"]);
    assert_eq!(markers_left(markers.path()), Vec::<String>::new());
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(docker_head_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(docker_merge_to_head_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(docker_branch_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(podman_head_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(podman_merge_to_head_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(podman_branch_a_planted_hook_filter_or_config_never_runs_on_the_host),
        trial!(docker_an_agent_that_rewrites_landed_commits_fails_and_the_branch_keeps_them),
        trial!(docker_a_planted_submodule_git_dir_never_runs_on_the_host),
    ])
}
