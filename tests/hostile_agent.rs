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

use std::path::Path;

use common::engines::*;
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};

/// The attack, committed into the test repository so that every worktree
/// has it. `$1` is the marker directory. It plants, in every git dir the
/// sandbox can name: hooks, `core.fsmonitor`, `core.hooksPath`, a filter
/// and a textconv driver (with `info/attributes` and a tracked
/// `.gitattributes`), a pager, an ssh command and an include; it rewrites a
/// linked worktree's `.git` file; and it looks for the credential the
/// user keeps in the repository's config.
const ATTACK: &str = r#"m=$1
g=$(git rev-parse --absolute-git-dir)
c=$(cd "$(git rev-parse --git-common-dir)" && pwd)
for d in "$g" "$c"; do
  mkdir -p "$d/hooks" "$d/info"
  for h in post-index-change pre-commit post-commit post-checkout post-merge reference-transaction pre-auto-gc fsmonitor-watchman; do
    printf '#!/bin/sh\ntouch %s/hook-%s\n' "$m" "$h" > "$d/hooks/$h" && chmod +x "$d/hooks/$h"
  done
  git config --file "$d/config" core.fsmonitor "touch $m/fsmonitor; true"
  git config --file "$d/config" core.hooksPath "$d/hooks"
  git config --file "$d/config" filter.evil.clean "touch $m/filter; cat"
  git config --file "$d/config" filter.evil.smudge "touch $m/filter; cat"
  git config --file "$d/config" diff.evil.textconv "touch $m/textconv; cat"
  git config --file "$d/config" core.pager "touch $m/pager; cat"
  git config --file "$d/config" core.sshCommand "touch $m/ssh; ssh"
  printf '[core]\n\tfsmonitor = touch %s/include\n' "$m" > "$d/evil-include"
  git config --file "$d/config" include.path "$d/evil-include"
  echo '* filter=evil diff=evil' > "$d/info/attributes"
done
if [ -f .git ]; then printf 'gitdir: %s\n' "$PWD/evil" > .git 2>/dev/null && echo "rewrote .git"; fi
echo "seen credential: $(grep -rhs SECRET-TOKEN-42 "$g" "$c" | head -1)"
echo "attack done""#;

/// A repository with the attack committed, a credential in its config
/// (as `git config http.extraheader` keeps one), and the marker directory.
fn hostile_repo() -> (TestRepo, tempfile::TempDir) {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("attack.sh"), ATTACK).unwrap();
    std::fs::write(
        repo.path().join(".gitattributes"),
        "*.txt filter=evil diff=evil\n",
    )
    .unwrap();
    repo.git(&["add", "attack.sh", ".gitattributes"]);
    repo.git(&["commit", "-q", "-m", "the attack"]);
    repo.git(&[
        "config",
        "http.extraheader",
        "AUTHORIZATION: bearer SECRET-TOKEN-42",
    ]);
    let markers = tempfile::tempdir().unwrap();
    (repo, markers)
}

/// What of the git dir makes git run something: its config, hooks and
/// attributes (sanddune itself writes only `info/exclude`, objects and refs).
fn git_dir_state(repo: &TestRepo) -> Vec<(String, Vec<u8>)> {
    let git = repo.path().join(".git");
    let mut files = vec![];
    for part in ["config", "hooks", "info/attributes"] {
        collect(&git.join(part), &git, &mut files);
    }
    files.sort();
    files
}

fn collect(path: &Path, root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            collect(&entry.unwrap().path(), root, out);
        }
    } else if let Ok(bytes) = std::fs::read(path) {
        let name = path.strip_prefix(root).unwrap().display().to_string();
        out.push((name, bytes));
    }
}

fn markers_left(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The user's ordinary git commands after the run, each of which would run
/// a planted hook, fsmonitor, filter, textconv or include.
fn users_next_git_commands(repo: &TestRepo) {
    std::fs::write(repo.path().join("user.txt"), "the user's file\n").unwrap();
    repo.git(&["status"]);
    repo.git(&["add", "user.txt"]);
    repo.git(&["commit", "-q", "-m", "the user's commit"]);
    repo.git(&["diff", "HEAD~1", "--textconv"]);
    repo.git(&["log", "-p", "-1"]);
    repo.git(&["checkout", "-q", "-b", "after-the-run"]);
}

fn the_git_dir_stays_out_of_reach(engine: &str, strategy: &[&str]) {
    require_engine(engine);
    let (repo, markers) = hostile_repo();
    let before = git_dir_state(&repo);
    let prompt = format!(
        "add a note\nFAKE:run:sh attack.sh {}",
        markers.path().display()
    );
    let mut args = vec![
        "run",
        "--sandbox",
        engine,
        "--agent",
        "claude-code",
        "--prompt",
        &prompt,
        "--json",
    ];
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    args.extend(["--sandbox-opt", &image]);
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(strategy);
    let out = repo.sanddune(&args);
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

    users_next_git_commands(&repo);
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
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        &prompt,
        "--max-iterations",
        "2",
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
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
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        &prompt,
        "--sandbox-opt",
        &image,
    ];
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
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
        trial!(docker_an_agent_that_rewrites_landed_commits_fails_and_the_branch_keeps_them),
        trial!(docker_a_planted_submodule_git_dir_never_runs_on_the_host),
    ])
}
