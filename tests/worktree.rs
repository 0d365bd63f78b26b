//! The worktree manager on real git repositories: worktrees under
//! `.sanddune/worktrees/`, their locks, reuse, concurrent creation from
//! threads and processes, copyToWorktree, merge-to-head (fast-forward, merge
//! commit, conflicts, local changes), and preserve-dirty / remove-clean on
//! close.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::trials::{self, skip, trial};
use common::{TestRepo, git};
use sanddune::worktree::{DEFAULT_COPY_TIMEOUT, MergeOutcome, Repo, WorktreeOrigin, worktree_name};

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
    assert_eq!(wt.origin, WorktreeOrigin::Created);
    // The lock sits next to the worktree, not in it, and says who holds it.
    assert_eq!(
        wt.lock().path(),
        repo.root().join(".sanddune/worktrees/run-1.lock")
    );
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(wt.lock().path()).unwrap()).unwrap();
    assert_eq!(lock["pid"], std::process::id());
    assert_eq!(lock["branch"], "sanddune/run-1");
    assert!(lock["createdAt"].as_str().unwrap().ends_with('Z'), "{lock}");
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    assert_eq!(
        t.git(&["status", "--porcelain"]),
        "",
        ".sanddune/worktrees must not show in git status"
    );
}

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
    assert!(!wt.lock().path().exists(), "closing releases the lock");
    assert_eq!(t.git(&["branch", "--list", "sanddune/*"]), "");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

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

/// A commit on the host's checked-out branch.
fn commit_on_host(t: &TestRepo, file: &str) -> String {
    commit_file(t.path(), file, "host\n", &format!("host adds {file}"))
}

fn a_worktree_in_use_is_refused_naming_its_holder_until_closed() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let err = repo.add_worktree("feature", "feature", false).unwrap_err();
    let msg = err.to_string();
    for needle in [
        "worktree `feature` (branch `feature`) is in use by another task of this process",
        &std::process::id().to_string(),
        " since 20",
        "wait for it to close the worktree or use another branch",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in: {msg}");
    }
    assert_eq!(err.exit_code(), 2, "nothing was changed");
    repo.close_worktree(&wt, false).unwrap();
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Created);
}

fn a_lock_of_a_live_process_is_refused_and_of_a_dead_one_reclaimed() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let dir = t.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&dir).unwrap();
    let mut other = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let lock = dir.join("feature.lock");
    std::fs::write(
        &lock,
        format!(
            r#"{{"pid":{},"branch":"feature","createdAt":"2026-01-02T03:04:05Z"}}"#,
            other.id()
        ),
    )
    .unwrap();
    let err = repo
        .add_worktree("feature", "feature", false)
        .unwrap_err()
        .to_string();
    for needle in [
        &format!(
            "worktree `feature` (branch `feature`) is in use by process {} since 2026-01-02T03:04:05Z",
            other.id()
        ),
        "wait for that run to finish or use another branch",
        &format!("is not a sanddune run, remove {}", lock.display()),
    ] {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!dir.join("feature").exists(), "refused before any change");
    other.kill().unwrap();
    other.wait().unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(wt.lock().holder().pid, std::process::id());
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    assert_eq!(on_disk["pid"], std::process::id());
}

fn a_lock_file_sanddune_did_not_write_is_refused_with_what_to_do() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let dir = t.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("feature.lock"), "garbage").unwrap();
    let err = repo
        .add_worktree("feature", "feature", false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not one sanddune wrote"), "{err}");
    assert!(err.contains("remove the file"), "{err}");
}

fn a_stale_lock_is_reclaimed_by_exactly_one_of_many_tasks() {
    let t = TestRepo::new();
    let dir = t.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&dir).unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    std::fs::write(
        dir.join("feature.lock"),
        format!(r#"{{"pid":{pid},"branch":"feature","createdAt":"2026-01-02T03:04:05Z"}}"#),
    )
    .unwrap();
    let start = Arc::new(Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (root, start) = (t.path().to_path_buf(), start.clone());
            std::thread::spawn(move || {
                let repo = Repo::discover(&root).unwrap();
                start.wait();
                // Winners keep their worktree (and lock) until every task is done.
                repo.add_worktree("feature", "feature", false)
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    let results: Vec<_> = tasks.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    for err in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            err.contains("is in use by another task of this process"),
            "{err}"
        );
    }
}

fn dropping_a_worktree_releases_its_lock_and_keeps_it_for_reuse() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let (lock, path) = (wt.lock().path().to_path_buf(), wt.path.clone());
    drop(wt);
    assert!(!lock.exists());
    assert!(path.exists(), "only close removes a worktree");
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Reused);
    assert_eq!(again.path, path);
}

fn a_kept_worktree_with_partial_work_is_reused_as_it_is() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let mine = commit_file(&wt.path, "f.txt", "f\n", "agent work");
    std::fs::write(wt.path.join("wip.txt"), "unfinished").unwrap();
    assert_eq!(
        repo.close_worktree(&wt, false).unwrap(),
        Some(wt.path.clone())
    );
    drop(wt);
    commit_on_host(&t, "host.txt");
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Reused);
    assert_eq!(
        std::fs::read_to_string(again.path.join("wip.txt")).unwrap(),
        "unfinished"
    );
    assert_eq!(git(&again.path, &["rev-parse", "HEAD"]), mine);
    assert_eq!(again.base, mine);
}

fn a_clean_reused_worktree_behind_the_target_is_fast_forwarded() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let old = wt.base.clone();
    drop(wt);
    let host = commit_on_host(&t, "host.txt");
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::FastForwarded { from: old });
    assert_eq!(again.base, host);
    assert_eq!(git(&again.path, &["rev-parse", "HEAD"]), host);
    assert_eq!(t.git(&["rev-parse", "feature"]), host);
    assert!(again.path.join("host.txt").exists());
    assert_eq!(git(&again.path, &["status", "--porcelain"]), "");
}

fn a_dirty_reused_worktree_behind_the_target_is_not_fast_forwarded() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let old = wt.base.clone();
    std::fs::write(wt.path.join("README.md"), "my edit\n").unwrap();
    drop(wt);
    commit_on_host(&t, "host.txt");
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Reused);
    assert_eq!(git(&again.path, &["rev-parse", "HEAD"]), old);
    assert_eq!(
        std::fs::read_to_string(again.path.join("README.md")).unwrap(),
        "my edit\n"
    );
}

fn a_reused_worktree_diverged_from_the_target_is_left_alone() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let mine = commit_file(&wt.path, "f.txt", "f\n", "agent work");
    drop(wt);
    commit_on_host(&t, "host.txt");
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Reused);
    assert_eq!(git(&again.path, &["rev-parse", "HEAD"]), mine);
    assert!(!again.path.join("host.txt").exists());
}

fn what_stands_in_a_worktrees_place_is_refused_with_what_to_do() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    // A plain directory.
    let stray = t.path().join(".sanddune/worktrees/stray");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("notes.txt"), "mine").unwrap();
    let err = repo.add_worktree("stray", "stray", false).unwrap_err();
    assert!(
        err.to_string()
            .contains("exists but is not a git worktree of this repository: move it away"),
        "{err}"
    );
    assert!(stray.join("notes.txt").exists());
    assert_eq!(
        t.git(&["branch", "--list", "stray"]),
        "",
        "no branch created"
    );
    // A worktree of another branch under the same name: `a/b` and `a-b`.
    assert_eq!(worktree_name("a/b"), worktree_name("a-b"));
    drop(
        repo.add_worktree(&worktree_name("a/b"), "a/b", false)
            .unwrap(),
    );
    let err = repo
        .add_worktree(&worktree_name("a-b"), "a-b", false)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("has branch `a/b` checked out, not `a-b`"),
        "{err}"
    );
    // The branch checked out in a worktree of the user's own.
    let elsewhere = tempfile::tempdir().unwrap();
    let theirs = elsewhere.path().join("theirs");
    t.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "theirs",
        theirs.to_str().unwrap(),
    ]);
    let err = repo.add_worktree("theirs", "theirs", false).unwrap_err();
    assert!(
        err.to_string()
            .contains("branch `theirs` is checked out in the worktree"),
        "{err}"
    );
}

fn a_worktree_directory_deleted_by_hand_is_pruned_and_created_again() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let path = wt.path.clone();
    drop(wt);
    std::fs::remove_dir_all(&path).unwrap();
    let again = repo.add_worktree("feature", "feature", false).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Created);
    assert_eq!(
        git(&again.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "feature"
    );
}

fn a_reused_worktree_with_commits_from_an_earlier_run_still_merges() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo.add_worktree("run-8", "sanddune/run-8", true).unwrap();
    let earlier = commit_file(&wt.path, "a.txt", "a\n", "from a failed run");
    drop(wt);
    let again = repo.add_worktree("run-8", "sanddune/run-8", true).unwrap();
    assert_eq!(again.origin, WorktreeOrigin::Reused, "ahead is left as is");
    assert!(
        repo.commits_since(&again.base, &again.branch)
            .unwrap()
            .is_empty(),
        "no commit this run"
    );
    assert_eq!(
        repo.merge_into_head(&again.branch).unwrap(),
        MergeOutcome::FastForward(earlier.clone())
    );
    assert_eq!(t.git(&["rev-parse", "HEAD"]), earlier);
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
/// Listed as ignored: two_processes_create_worktrees_on_one_repo_at_once
/// runs it with `--ignored`.
fn child_process_worktree_lives() {
    let (Ok(root), Ok(name)) = (std::env::var(CHILD_REPO), std::env::var(CHILD_NAME)) else {
        return;
    };
    for i in 0..4 {
        worktree_life(Path::new(&root), &format!("{name}-{i}"));
    }
}

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

/// A small tmpfs, unmounted on drop: a disk that fills up. Needs root
/// (CI runs as root); elsewhere the test is ignored.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => SmallDisk { dir },
            other => skip(format!("cannot mount a tmpfs (needs root): {other:?}")),
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// The disk fills up while files are copied into a new worktree: a clear
/// error naming the file and the cause, and the user's file as it was.
fn copy_to_worktree_on_a_full_disk_is_a_clear_error_and_keeps_the_source() {
    let disk = SmallDisk::mount("2m");
    let root = disk.dir.path().join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "# small\n").unwrap();
    git(&root, &["add", "."]);
    git(
        &root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t.invalid",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    // More than half the disk: it cannot exist twice.
    let big: Vec<u8> = (0..1_200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("big.bin"), &big).unwrap();

    let repo = Repo::discover(&root).unwrap();
    let wt = repo.add_worktree("feature", "feature", false).unwrap();
    let err = repo
        .copy_to_worktree(&wt, &[PathBuf::from("big.bin")], DEFAULT_COPY_TIMEOUT)
        .unwrap_err()
        .to_string();
    assert!(err.contains("big.bin"), "names the file: {err}");
    assert!(err.contains("No space left on device"), "says why: {err}");
    assert_eq!(std::fs::read(root.join("big.bin")).unwrap(), big);
    assert_eq!(git(&root, &["status", "--porcelain"]), "?? big.bin");
}

/// For an isolated sandbox's run: the worktree has its branch and index but
/// no files, reads clean to git and to sanddune, takes the sandbox's
/// commits, writes its files when asked, and is removed like any clean one.
fn a_worktree_without_files_is_clean_takes_commits_and_writes_its_files_on_demand() {
    let t = TestRepo::new();
    let repo = Repo::discover(t.path()).unwrap();
    let wt = repo
        .add_worktree_without_files("run-nf", "sanddune/run-nf", true)
        .unwrap();
    assert!(!wt.path.join("README.md").exists(), "no file was written");
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    assert!(!repo.is_dirty(&wt).unwrap());

    // A sandbox's commit comes back as a bundle and fast-forwards the branch.
    let sandbox = tempfile::tempdir().unwrap();
    git(
        sandbox.path(),
        &["clone", "-q", t.path().to_str().unwrap(), "."],
    );
    let head = commit_file(sandbox.path(), "NEW.md", "new\n", "agent commit");
    let bundle = sandbox.path().join("out.bundle");
    git(
        sandbox.path(),
        &[
            "bundle",
            "create",
            "-q",
            bundle.to_str().unwrap(),
            "origin/main..HEAD",
        ],
    );
    assert!(wt.fast_forward_from_bundle(&bundle, &head).unwrap());
    assert_eq!(repo.branch_head("sanddune/run-nf").unwrap(), head);
    assert!(!repo.is_dirty(&wt).unwrap(), "still clean after the merge");
    assert!(!wt.path.join("README.md").exists());

    wt.write_files().unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path.join("README.md")).unwrap(),
        "# Project\n\nThis is teh readme.\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.path.join("NEW.md")).unwrap(),
        "new\n"
    );
    assert_eq!(git(&wt.path, &["ls-files", "-t"]), "H NEW.md\nH README.md");
    assert!(!repo.is_dirty(&wt).unwrap());
    assert_eq!(repo.close_worktree(&wt, true).unwrap(), None);
    assert!(!wt.path.exists(), "a clean worktree is removed");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(a_worktree_is_created_under_sanddune_and_hidden_from_status),
        trial!(merge_to_head_fast_forwards_and_the_clean_worktree_and_temp_branch_go),
        trial!(a_host_branch_that_moved_during_the_run_still_merges),
        trial!(merging_is_gated_on_ahead_of_target_not_on_commits_this_run),
        trial!(a_conflict_fails_the_merge_and_keeps_everything),
        trial!(local_changes_in_the_way_are_never_overwritten),
        trial!(a_dirty_worktree_is_preserved_on_close),
        trial!(a_named_branch_is_kept_and_may_not_be_the_checked_out_one),
        trial!(a_directory_that_is_not_a_repository_or_has_no_commits_is_refused),
        trial!(a_worktree_in_use_is_refused_naming_its_holder_until_closed),
        trial!(a_lock_of_a_live_process_is_refused_and_of_a_dead_one_reclaimed),
        trial!(a_lock_file_sanddune_did_not_write_is_refused_with_what_to_do),
        trial!(a_stale_lock_is_reclaimed_by_exactly_one_of_many_tasks),
        trial!(dropping_a_worktree_releases_its_lock_and_keeps_it_for_reuse),
        trial!(a_kept_worktree_with_partial_work_is_reused_as_it_is),
        trial!(a_clean_reused_worktree_behind_the_target_is_fast_forwarded),
        trial!(a_dirty_reused_worktree_behind_the_target_is_not_fast_forwarded),
        trial!(a_reused_worktree_diverged_from_the_target_is_left_alone),
        trial!(what_stands_in_a_worktrees_place_is_refused_with_what_to_do),
        trial!(a_worktree_directory_deleted_by_hand_is_pruned_and_created_again),
        trial!(a_reused_worktree_with_commits_from_an_earlier_run_still_merges),
        trial!(eight_threads_create_merge_and_close_worktrees_on_one_repo),
        trial!(child_process_worktree_lives).with_ignored_flag(true),
        trial!(two_processes_create_worktrees_on_one_repo_at_once),
        trial!(copy_to_worktree_copies_files_directories_and_symlinks_from_the_repository_root),
        trial!(copy_to_worktree_replaces_a_tracked_file_with_the_users_version),
        trial!(copy_to_worktree_checks_every_path_before_copying_any),
        trial!(a_copy_cut_off_by_its_timeout_leaves_no_partial_item),
        trial!(copy_to_worktree_on_a_full_disk_is_a_clear_error_and_keeps_the_source),
        trial!(a_worktree_without_files_is_clean_takes_commits_and_writes_its_files_on_demand),
    ])
}
