//! The worktree manager on real git repositories: worktrees under
//! `.sanddune/worktrees/`, merge-to-head (fast-forward, merge commit,
//! conflicts, local changes), and preserve-dirty / remove-clean on close.

mod common;

use common::{TestRepo, git};
use sanddune::worktree::{MergeOutcome, Repo};

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
