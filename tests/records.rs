//! Host actions never trust a path or record an agent can write (issue 33,
//! part 2), through the real binary. Under the head branch strategy the
//! agent's worktree is the repository root, so `.sanddune/` (logs,
//! worktree locks) is the agent's to write; the hostile bind-mount
//! provider runs it there on the host, as docker mounts it (and one test
//! runs it in docker itself, skipped without the engine). What the agent
//! could plant is planted, then sanddune runs, and a marker outside the
//! repository must be exactly as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::engines::{IMAGE, fake_mounts, require_engine};
use common::live::{dead_pid, forge_run_record};
use common::trials::{self, trial};
use common::{TestRepo, plugin_file, stderr, stdout};

const MARKER: &str = "the user's file\n";

/// A file of the user's outside the repository, which nothing may change.
fn marker(dir: &Path) -> PathBuf {
    let marker = dir.join("bashrc");
    std::fs::write(&marker, MARKER).unwrap();
    marker
}

/// A run under head (the agent works in the repository root), its agent
/// doing `prompt`.
fn head_run(repo: &TestRepo, prompt: &str) -> std::process::Output {
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    repo.sanddune(&[
        "run",
        "--sandbox",
        hostile.to_str().unwrap(),
        "--grant",
        "program=sh",
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
    ])
}

/// `sanddune` with `args`, killed (and the test failed) if it is not done
/// within 60 s: a FIFO read would block it for ever.
fn sanddune_within(repo: &TestRepo, args: &[&str]) -> std::process::Output {
    let mut child = repo
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("sanddune {args:?} still ran after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// What the agent does for the next run: link every name the next two
/// minutes of runs would give their events file (with the counter of runs
/// starting in one second) to `target`.
fn plant_next_events_logs(target: &Path) -> String {
    format!(
        "add a note\nFAKE:run:now=$(date +%s); for k in $(seq 0 120); do for n in '' -2 -3; do ln -s {} .sanddune/logs/run-$(date -u -d @$((now+k)) +%Y%m%dT%H%M%SZ)$n.events.jsonl; done; done",
        target.display()
    )
}

/// After the agent planted its links: they are there, the next run fails
/// naming one, and the user's file is as it was.
fn assert_the_next_run_refuses_the_links(repo: &TestRepo, marker: &Path) {
    let planted = std::fs::read_dir(repo.path().join(".sanddune/logs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_symlink())
        .count();
    // All but the name of the run's own events file, if it started then.
    assert!(planted >= 3 * 121 - 1, "the agent's links: {planted}");

    let out = head_run(repo, "add a note");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(".events.jsonl is a symlink or not a regular file"),
        "{err}"
    );
    assert!(err.contains(".sanddune/logs/run-"), "{err}");
    assert_eq!(std::fs::read_to_string(marker).unwrap(), MARKER);
}

fn a_link_the_agent_left_for_the_next_runs_events_log_fails_that_run_and_its_target_is_untouched() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = marker(outside.path());
    let out = head_run(&repo, &plant_next_events_logs(&marker));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_the_next_run_refuses_the_links(&repo, &marker);
}

/// The same, the agent in a docker container under head (the default for
/// a bind-mount provider): there `.sanddune/logs` is an empty read-only
/// directory (ADR 0025), so no link is planted at all, and the next run
/// goes ahead with the user's file as it was.
fn a_docker_agent_cannot_plant_the_next_runs_events_log() {
    require_engine("docker");
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = marker(outside.path());
    let image = format!("image={IMAGE}");
    let prompt = plant_next_events_logs(&marker);
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--sandbox-opt",
        &image,
        "--agent",
        "claude-code",
        "--prompt",
        &prompt,
    ];
    let mounts = fake_mounts(&repo);
    args.extend(mounts.iter().map(String::as_str));
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let planted = std::fs::read_dir(repo.path().join(".sanddune/logs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_symlink())
        .count();
    assert_eq!(planted, 0, "the agent planted links in the logs");
    let out = head_run(&repo, "add a note");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER);
}

fn a_linked_sanddune_dir_fails_the_run_naming_it_and_nothing_is_written_through_it() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join(".sanddune")).unwrap();

    let out = head_run(&repo, "add a note");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(".sanddune is a symlink or not a directory"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(repo.calls("claude").is_empty(), "the agent must not start");
}

fn a_worktree_lock_that_is_a_link_fails_the_run_naming_it() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = marker(outside.path());
    let worktrees = repo.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&worktrees).unwrap();
    std::os::unix::fs::symlink(&marker, worktrees.join("feat.lock")).unwrap();

    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--branch",
        "feat",
        "--prompt",
        "add a note",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("feat.lock is a symlink"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER);
}

fn logs_prints_only_the_repositorys_own_log_files_whatever_a_record_names() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let marker = marker(outside.path());
    let logs = repo.path().join(".sanddune/logs");
    std::fs::create_dir_all(&logs).unwrap();

    // A file outside the logs dir.
    forge_run_record(&repo, "outside", &marker);
    let out = sanddune_within(&repo, &["logs", "outside"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sanddune prints only its own logs"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");

    // A link in the logs dir to it, and a FIFO (which would block a read).
    std::os::unix::fs::symlink(&marker, logs.join("link.log")).unwrap();
    forge_run_record(&repo, "link", &logs.join("link.log"));
    let out = sanddune_within(&repo, &["logs", "link"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("link.log is a symlink"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    let fifo = logs.join("fifo.log");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    forge_run_record(&repo, "fifo", &fifo);
    let out = sanddune_within(&repo, &["logs", "fifo"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fifo.log is not a regular file"),
        "{}",
        stderr(&out)
    );

    // Its own log still prints, bytes as they are when piped.
    std::fs::write(logs.join("mine.log"), "line \x1b[1mone\n").unwrap();
    forge_run_record(&repo, "mine", &logs.join("mine.log"));
    let out = sanddune_within(&repo, &["logs", "mine"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "line \x1b[1mone\n");
}

fn gc_passes_over_lock_files_that_are_links_or_fifos_warning_about_them() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    // A lock holder gc would act on, if it followed the link to it.
    let holder = outside.path().join("holder.json");
    let forged = serde_json::json!({"pid": dead_pid(), "branch": "main", "createdAt": "2026-01-01T00:00:00Z"});
    std::fs::write(&holder, forged.to_string()).unwrap();
    let worktrees = repo.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&worktrees).unwrap();
    std::os::unix::fs::symlink(&holder, worktrees.join("linked.lock")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(worktrees.join("fifo.lock"))
            .status()
            .unwrap()
            .success()
    );

    let out = sanddune_within(&repo, &["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("linked.lock is a symlink"), "{err}");
    assert!(err.contains("fifo.lock is not a regular file"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&holder).unwrap(),
        forged.to_string()
    );
    assert_eq!(repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]), "main");
}

fn gc_removes_an_orphaned_worktree_only_where_sanddune_made_it() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("project");
    std::fs::create_dir(&victim).unwrap();
    let kept = marker(&victim);
    // A worktree as a crashed run leaves it: its lock names a dead process.
    let worktree = repo.path().join(".sanddune/worktrees/wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "wt",
        worktree.to_str().unwrap(),
    ]);
    let lock =
        serde_json::json!({"pid": dead_pid(), "branch": "wt", "createdAt": "2026-01-01T00:00:00Z"});
    std::fs::write(
        repo.path().join(".sanddune/worktrees/wt.lock"),
        lock.to_string(),
    )
    .unwrap();
    // What a sandbox that could write the git dir would do: point git's
    // record of the worktree at a file in another directory of the user's
    // (libgit2's prune deletes the directory of the file named there).
    std::fs::write(
        repo.path().join(".git/worktrees/wt/gitdir"),
        format!("{}\n", kept.display()),
    )
    .unwrap();

    let out = sanddune_within(&repo, &["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("removed orphaned worktree `wt`"),
        "{}",
        stdout(&out)
    );
    assert!(!worktree.exists());
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), MARKER);
}

fn gc_neither_deletes_nor_kills_in_a_directory_a_forged_sandbox_record_names() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("work");
    std::fs::create_dir(&victim).unwrap();
    let kept = marker(&victim);
    let mut working = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(&victim)
        .spawn()
        .unwrap();
    let records = repo.path().join(".git/sanddune-sandboxes");
    std::fs::create_dir_all(&records).unwrap();
    let record = serde_json::json!({
        "owner": format!("{}:1", dead_pid()),
        "provider": "test-isolated", "providerName": "test-isolated",
        "runId": "1-abcd", "name": "forged", "worktree": repo.path(),
        "branch": "main", "config": [], "tmpDir": outside.path(),
        "state": "sbx", "scratch": victim, "base": "HEAD",
    });
    std::fs::write(records.join("forged.json"), record.to_string()).unwrap();

    let out = sanddune_within(&repo, &["gc"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("as its scratch dir, which sanddune did not make"),
        "{}",
        stderr(&out)
    );
    // Dropping the record leaves the directory too.
    let out = sanddune_within(&repo, &["gc", "--forget-unreachable"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!records.join("forged.json").exists());

    assert_eq!(std::fs::read_to_string(&kept).unwrap(), MARKER);
    assert!(
        working.try_wait().unwrap().is_none(),
        "the process working there was killed"
    );
    working.kill().unwrap();
    working.wait().unwrap();
}

/// A snapshot record planted in the git dir (ADR 0038) names a component
/// file as the provider that keeps it: neither `gc` nor `snapshot rm`
/// loads it without the user's approval (`--yes`, `--grant`), each says
/// so, and the record stays for a later try.
fn gc_loads_no_component_a_forged_snapshot_record_names() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let records = repo.path().join(".git/sanddune-snapshots");
    std::fs::create_dir_all(&records).unwrap();
    let planted = records.join(format!("{}.json", "ab".repeat(20)));
    let record = serde_json::json!({
        "key": "ab".repeat(20), "id": "snap_planted",
        "provider": hostile, "providerName": "vercel",
        "config": [], "created": 1, "runId": "1-abcd",
        "worktree": repo.path(), "branch": "main",
    });
    std::fs::write(&planted, record.to_string()).unwrap();

    let out = sanddune_within(&repo, &["gc", "--snapshot-max-age", "1s"]);
    let said = stderr(&out);
    assert!(
        said.contains("snapshot snap_planted") && said.contains("--yes"),
        "{said}"
    );
    assert!(planted.exists(), "the record went without its snapshot");
    let out = sanddune_within(&repo, &["snapshot", "rm", "snap_planted"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert!(planted.exists());

    // One whose id would rewrite the terminal is not read, so not printed.
    let mut record = record;
    record["id"] = "snap\u{1b}]0;owned\u{7}".into();
    std::fs::write(
        records.join(format!("{}.json", "cd".repeat(20))),
        record.to_string(),
    )
    .unwrap();
    for args in [&["snapshot", "ls"][..], &["gc", "--snapshot-max-age", "1s"]] {
        let out = sanddune_within(&repo, args);
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains("snap_planted"), "{all}");
        assert!(!all.contains('\u{1b}') && !all.contains("owned"), "{all:?}");
    }
}

fn gc_collects_no_worktree_through_a_linked_worktrees_dir() {
    let repo = TestRepo::new();
    let outside = tempfile::tempdir().unwrap();
    // An orphan as gc knows them, but in a directory of the user's.
    let victim = outside.path().join("run-1");
    std::fs::create_dir(&victim).unwrap();
    let kept = marker(&victim);
    let lock = serde_json::json!({"pid": dead_pid(), "branch": "sanddune/run-1", "createdAt": "2026-01-01T00:00:00Z"});
    std::fs::write(outside.path().join("run-1.lock"), lock.to_string()).unwrap();
    std::fs::create_dir(repo.path().join(".sanddune")).unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join(".sanddune/worktrees")).unwrap();

    let out = sanddune_within(&repo, &["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has a link in its path, which sanddune did not make"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), MARKER);
    assert!(outside.path().join("run-1.lock").exists());
}

fn gc_moves_no_branch_a_forged_lock_and_pending_sync_name() {
    let repo = TestRepo::new();
    // A commit the user has, ahead of main but not merged.
    repo.git(&["checkout", "-q", "-b", "unmerged"]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "not for main"]);
    let unmerged = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&["checkout", "-q", "main"]);
    let main = repo.git(&["rev-parse", "main"]);
    let worktrees = repo.path().join(".sanddune/worktrees");
    std::fs::create_dir_all(&worktrees).unwrap();
    let lock = |branch: &str| {
        serde_json::json!({"pid": dead_pid(), "branch": branch, "createdAt": "2026-01-01T00:00:00Z"})
            .to_string()
    };
    // A lock for the checked-out branch, and one whose name does not fit
    // its branch, each with a pending sync naming the unmerged commit.
    std::fs::write(worktrees.join("main.lock"), lock("main")).unwrap();
    std::fs::write(worktrees.join("main.sync"), &unmerged).unwrap();
    std::fs::write(worktrees.join("other.lock"), lock("unmerged")).unwrap();
    std::fs::write(worktrees.join("other.sync"), &unmerged).unwrap();
    // A lock on a warm sandbox's worktree naming another branch than the
    // one git's own record of that worktree has (a claimed one's may name
    // the run's branch; this one's holds its temporary branch).
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "sanddune/run-3",
        ".sanddune/worktrees/run-3",
    ]);
    std::fs::write(worktrees.join("run-3.lock"), lock("unmerged")).unwrap();
    std::fs::write(worktrees.join("run-3.sync"), &main).unwrap();
    // And a pending sync that is a FIFO, which would block gc's read.
    std::fs::write(worktrees.join("run-1.lock"), lock("sanddune/run-1")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(worktrees.join("run-1.sync"))
            .status()
            .unwrap()
            .success()
    );

    let out = sanddune_within(&repo, &["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("which worktree `other` never holds"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("which worktree `run-3` never holds"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("run-1.sync is not a regular file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), main);
    assert_eq!(repo.git(&["rev-parse", "unmerged"]), unmerged);
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(a_link_the_agent_left_for_the_next_runs_events_log_fails_that_run_and_its_target_is_untouched),
        trial!(a_docker_agent_cannot_plant_the_next_runs_events_log),
        trial!(a_linked_sanddune_dir_fails_the_run_naming_it_and_nothing_is_written_through_it),
        trial!(a_worktree_lock_that_is_a_link_fails_the_run_naming_it),
        trial!(logs_prints_only_the_repositorys_own_log_files_whatever_a_record_names),
        trial!(gc_passes_over_lock_files_that_are_links_or_fifos_warning_about_them),
        trial!(gc_removes_an_orphaned_worktree_only_where_sanddune_made_it),
        trial!(gc_neither_deletes_nor_kills_in_a_directory_a_forged_sandbox_record_names),
        trial!(gc_loads_no_component_a_forged_snapshot_record_names),
        trial!(gc_collects_no_worktree_through_a_linked_worktrees_dir),
        trial!(gc_moves_no_branch_a_forged_lock_and_pending_sync_name),
    ])
}
