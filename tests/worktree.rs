//! The worktree manager on real git repositories: worktrees under
//! `.sanddune/worktrees/`, merge-to-head (fast-forward, merge commit,
//! conflicts, local changes), preserve-dirty / remove-clean on close,
//! concurrent creation from threads and processes, and copyToWorktree.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{TestRepo, git};
use sanddune::worktree::{DEFAULT_COPY_TIMEOUT, MergeOutcome, Repo};

fn commit_file(dir: &std::path::Path, file: &str, text: &str, msg: &str) -> String {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", file]);
    git(
        dir,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@a.invalid",
            "commit",
            "-q",
            "-m",
            msg,
        ],
    );
    git(dir, &["rev-parse", "HEAD"])
}

#[test]
fn a_worktree_is_created_under_sanddune_and_hidden_from_status() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-1", "sanddune/run-1", true).unwrap();
    assert_eq!(wt.path, repo.root().join(".sanddune/worktrees/run-1"));
    assert_eq!(
        git(&wt.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "sanddune/run-1"
    );
    assert_eq!(wt.base, t.git(&["rev-parse", "HEAD"]));
    assert_eq!(
        t.git(&["status", "--porcelain"]),
        "",
        ".sanddune/worktrees must not show in git status"
    );
    // A second worktree at the same place is refused with what to do.
    let err = repo
        .add_worktree("run-1", "sanddune/run-1b", true)
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
}

#[test]
fn merge_to_head_fast_forwards_and_the_clean_worktree_and_temp_branch_go() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-2", "sanddune/run-2", true).unwrap();
    let sha = commit_file(&wt.path, "a.txt", "a\n", "add a");
    assert_eq!(
        repo.commits_since(&wt.base, &wt.branch).unwrap(),
        vec![sha.clone()]
    );
    assert_eq!(
        repo.merge_into_head(&wt.branch).unwrap(),
        MergeOutcome::FastForward(sha.clone())
    );
    assert_eq!(t.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(
        std::fs::read_to_string(t.path().join("a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(repo.close_worktree(&wt, false).unwrap(), None);
    assert!(!wt.path.exists());
    assert_eq!(t.git(&["branch", "--list", "sanddune/*"]), "");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_host_branch_that_moved_during_the_run_still_merges() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-3", "sanddune/run-3", true).unwrap();
    let theirs = commit_file(&wt.path, "agent.txt", "agent\n", "agent work");
    let ours = commit_file(t.path(), "host.txt", "host\n", "host work");
    let MergeOutcome::MergeCommit(merge) = repo.merge_into_head(&wt.branch).unwrap() else {
        panic!("expected a merge commit")
    };
    assert_eq!(t.git(&["rev-parse", "HEAD"]), merge);
    assert_eq!(t.git(&["rev-parse", "HEAD^1"]), ours);
    assert_eq!(t.git(&["rev-parse", "HEAD^2"]), theirs);
    assert!(t.path().join("agent.txt").exists() && t.path().join("host.txt").exists());
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn merging_is_gated_on_ahead_of_target_not_on_commits_this_run() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-4", "sanddune/run-4", true).unwrap();
    // Nothing new: up to date, HEAD unchanged.
    assert_eq!(
        repo.merge_into_head(&wt.branch).unwrap(),
        MergeOutcome::UpToDate
    );
    // Commits made before this "run" (the branch is simply ahead) still merge.
    let sha = commit_file(&wt.path, "old.txt", "old\n", "from an earlier run");
    assert_eq!(
        repo.merge_into_head(&wt.branch).unwrap(),
        MergeOutcome::FastForward(sha)
    );
}

#[test]
fn a_conflict_fails_the_merge_and_keeps_everything() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-5", "sanddune/run-5", true).unwrap();
    commit_file(&wt.path, "README.md", "agent version\n", "agent");
    let ours = commit_file(t.path(), "README.md", "host version\n", "host");
    let err = repo.merge_into_head(&wt.branch).unwrap_err();
    assert!(err.to_string().contains("conflicts with `main`"), "{err}");
    assert!(
        err.to_string().contains("kept on `sanddune/run-5`"),
        "{err}"
    );
    assert_eq!(t.git(&["rev-parse", "HEAD"]), ours);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn local_changes_in_the_way_are_never_overwritten() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-6", "sanddune/run-6", true).unwrap();
    commit_file(&wt.path, "README.md", "agent version\n", "agent");
    std::fs::write(t.path().join("README.md"), "my unsaved edit\n").unwrap();
    let head = t.git(&["rev-parse", "HEAD"]);
    let err = repo.merge_into_head(&wt.branch).unwrap_err();
    assert!(
        err.to_string().contains("kept on `sanddune/run-6`"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join("README.md")).unwrap(),
        "my unsaved edit\n"
    );
    assert_eq!(t.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn a_dirty_worktree_is_preserved_on_close() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-7", "sanddune/run-7", true).unwrap();
    assert!(!repo.is_dirty(&wt).unwrap());
    std::fs::write(wt.path.join("wip.txt"), "unfinished").unwrap();
    assert!(repo.is_dirty(&wt).unwrap());
    assert_eq!(
        repo.close_worktree(&wt, false).unwrap(),
        Some(wt.path.clone())
    );
    assert!(wt.path.join("wip.txt").exists());
    assert_eq!(
        t.git(&["rev-parse", "--verify", "sanddune/run-7"]).len(),
        40,
        "its branch stays with it"
    );
}

#[test]
fn a_named_branch_is_kept_and_may_not_be_the_checked_out_one() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let err = repo.add_worktree("main", "main", false).unwrap_err();
    assert!(
        err.to_string()
            .contains("checked out in the host repository"),
        "{err}"
    );
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    commit_file(&wt.path, "f.txt", "f\n", "feature work");
    repo.close_worktree(&wt, false).unwrap();
    assert!(!wt.path.exists());
    assert_eq!(
        t.git(&["log", "-1", "--format=%s", "feature"]),
        "feature work"
    );
}

#[test]
fn a_directory_that_is_not_a_repository_or_has_no_commits_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = Repo::discover(dir.path()).err().unwrap();
    assert!(
        err.to_string().contains("not inside a git repository"),
        "{err}"
    );
    git(dir.path(), &["init", "-q"]);
    let err = Repo::discover(dir.path()).err().unwrap();
    assert!(err.to_string().contains("no commits yet"), "{err}");
}

/// One task's whole worktree life on a shared repository: create, commit,
/// merge into the host's branch, close (which deletes the temporary branch).
fn worktree_life(root: &Path, name: &str) {
    let repo = Repo::discover(root).unwrap();
    let wt = repo
        .add_worktree(name, &format!("sanddune/{name}"), true)
        .unwrap();
    commit_file(&wt.path, &format!("{name}.txt"), "x\n", name);
    repo.merge_into_head(&wt.branch).unwrap();
    assert_eq!(repo.close_worktree(&wt, false).unwrap(), None);
}

fn assert_all_merged_and_cleaned(t: &TestRepo, names: &[String]) {
    for name in names {
        assert!(t.path().join(format!("{name}.txt")).exists(), "{name}");
    }
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert_eq!(t.git(&["branch", "--list", "sanddune/*"]), "");
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn eight_threads_create_merge_and_close_worktrees_on_one_repo() {
    let t = TestRepo::new();
    // Packed refs make every branch deletion rewrite one shared file.
    t.git(&["pack-refs", "--all"]);
    let start = Arc::new(Barrier::new(8));
    let names: Vec<String> = (0..8).map(|i| format!("task-{i}")).collect();
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let (root, name, start) = (t.path().to_path_buf(), name.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                worktree_life(&root, &name);
            })
        })
        .collect();
    for task in tasks {
        task.join().unwrap();
    }
    assert_all_merged_and_cleaned(&t, &names);
}

const CHILD_REPO: &str = "SANDDUNE_TEST_WORKTREE_REPO";
const CHILD_NAME: &str = "SANDDUNE_TEST_WORKTREE_NAME";

/// The body of the child processes of the next test; does nothing alone.
#[test]
#[ignore = "run as a child process by two_processes_create_worktrees_on_one_repo_at_once"]
fn child_process_worktree_lives() {
    let (Ok(root), Ok(name)) = (std::env::var(CHILD_REPO), std::env::var(CHILD_NAME)) else {
        return;
    };
    for i in 0..4 {
        worktree_life(Path::new(&root), &format!("{name}-{i}"));
    }
}

#[test]
fn two_processes_create_worktrees_on_one_repo_at_once() {
    let t = TestRepo::new();
    t.git(&["pack-refs", "--all"]);
    let children: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_process_worktree_lives",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(CHILD_REPO, t.path())
                .env(CHILD_NAME, name)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let names: Vec<String> = ["one", "two"]
        .iter()
        .flat_map(|n| (0..4).map(move |i| format!("{n}-{i}")))
        .collect();
    assert_all_merged_and_cleaned(&t, &names);
}

/// A repository with what copyToWorktree is for: an untracked `.env`, a
/// `node_modules` with an executable and a symlink, a nested config file.
fn repo_with_untracked_files() -> TestRepo {
    let t = TestRepo::new();
    let root = t.path();
    std::fs::write(root.join(".env"), "KEY=value\n").unwrap();
    let pkg = root.join("node_modules/pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("cli.js"), "#!/usr/bin/env node\n").unwrap();
    std::fs::set_permissions(
        pkg.join("cli.js"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/cli.js", root.join("node_modules/.bin/pkg")).unwrap();
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/local.json"), "{}\n").unwrap();
    std::fs::write(
        root.join(".gitignore"),
        ".env\nnode_modules/\nconfig/local.json\n",
    )
    .unwrap();
    t
}

#[test]
fn copy_to_worktree_copies_files_directories_and_symlinks_from_the_repository_root() {
    let t = repo_with_untracked_files();
    std::fs::create_dir_all(t.path().join("sub")).unwrap();
    // Discovered from a subdirectory: paths still resolve against the root.
    let repo = Repo::discover(&t.path().join("sub")).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let absolute = t.path().join("config/local.json");
    repo.copy_to_worktree(
        &wt,
        &[
            PathBuf::from(".env"),
            PathBuf::from("node_modules"),
            absolute,
        ],
        DEFAULT_COPY_TIMEOUT,
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path.join(".env")).unwrap(),
        "KEY=value\n"
    );
    let cli = wt.path.join("node_modules/pkg/cli.js");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&cli).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o755, "the executable bit is kept");
    let link = wt.path.join("node_modules/.bin/pkg");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../pkg/cli.js")
    );
    assert_eq!(
        std::fs::read_to_string(wt.path.join("config/local.json")).unwrap(),
        "{}\n"
    );
    // A copy, not a link: the agent's edits stay in the worktree.
    std::fs::write(wt.path.join(".env"), "KEY=changed\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(t.path().join(".env")).unwrap(),
        "KEY=value\n"
    );
}

#[test]
fn copy_to_worktree_replaces_a_tracked_file_with_the_users_version() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    std::fs::write(t.path().join("README.md"), "my local edit\n").unwrap();
    repo.copy_to_worktree(&wt, &[PathBuf::from("README.md")], DEFAULT_COPY_TIMEOUT)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path.join("README.md")).unwrap(),
        "my local edit\n"
    );
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "M README.md");
}

#[test]
fn copy_to_worktree_checks_every_path_before_copying_any() {
    let t = repo_with_untracked_files();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let err = repo
        .copy_to_worktree(
            &wt,
            &[PathBuf::from(".env"), PathBuf::from("no-such-dir")],
            DEFAULT_COPY_TIMEOUT,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("`no-such-dir` does not exist"),
        "{err}"
    );
    assert!(err.to_string().contains("nothing was copied"), "{err}");
    assert!(!wt.path.join(".env").exists());
    let err = repo
        .copy_to_worktree(&wt, &[PathBuf::from("../elsewhere")], DEFAULT_COPY_TIMEOUT)
        .unwrap_err();
    assert!(
        err.to_string().contains("is outside the repository"),
        "{err}"
    );
}

#[test]
fn a_copy_cut_off_by_its_timeout_leaves_no_partial_item() {
    let t = repo_with_untracked_files();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    // A zero timeout expires after the first file of the directory.
    let err = repo
        .copy_to_worktree(&wt, &[PathBuf::from("node_modules")], Duration::ZERO)
        .unwrap_err()
        .to_string();
    for needle in [
        "copying `node_modules` did not finish within the 0 ms timeout",
        "its partial copy was removed from the worktree",
        "raise timeouts.copyToWorktreeMs",
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!wt.path.join("node_modules").exists());
}
