//! Crash consistency with the test-isolated sandbox: `sanddune run`
//! (merge-to-head, the fake claude committing a file of its own) is killed
//! at seeded random points, and `sanddune gc` plus the next run must find
//! the repository sound: no lost commit, no leftover lock, no orphaned
//! worktree, the user's uncommitted work as it was. SIGTERM and Ctrl-C must
//! clean up by themselves.
//!
//! `SANDDUNE_CRASH_RUNS` (default 10) kills, from `SANDDUNE_CRASH_SEED`;
//! the long variant is `SANDDUNE_CRASH_RUNS=60 cargo test -p sanddune
//! --test crash -- --nocapture`.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::engines::*;
use common::trials::{self, trial};
use common::*;

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64, as the fuzz driver.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const README: &str = "# Project\n\nThis is teh readme.\nA local edit.\n";

/// A repository with the user's work in progress, and a TMPDIR of its own
/// so the sandboxes' scratch dirs can be counted.
struct Setup {
    repo: TestRepo,
    tmp: tempfile::TempDir,
    /// `--sandbox` and its options.
    sandbox: Vec<String>,
}

impl Setup {
    fn new() -> Setup {
        Setup::with_sandbox(|_| vec!["--sandbox".into(), "test-isolated".into()])
    }

    fn with_sandbox(sandbox: impl FnOnce(&TestRepo) -> Vec<String>) -> Setup {
        let repo = TestRepo::new();
        std::fs::write(repo.path().join("README.md"), README).unwrap();
        std::fs::write(repo.path().join("scratch.txt"), "mine\n").unwrap();
        Setup {
            sandbox: sandbox(&repo),
            repo,
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    /// Docker with the test image, the fakes mounted in.
    fn docker() -> Setup {
        Setup::with_sandbox(|repo| {
            let mut args = vec![
                "--sandbox".to_string(),
                "docker".into(),
                "--sandbox-opt".into(),
                format!("image={IMAGE}"),
            ];
            args.extend(fake_mounts(repo));
            args
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.repo.command(args);
        cmd.env("TMPDIR", self.tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&self, tag: &str, slow: bool) -> Child {
        let prompt = format!(
            "note {tag}\nFAKE:file:notes/{tag}.md{}",
            if slow { "\nFAKE:slow" } else { "" }
        );
        let mut args = vec!["run"];
        args.extend(self.sandbox.iter().map(String::as_str));
        args.extend([
            "--agent",
            "claude-code",
            "--strategy",
            "merge-to-head",
            "--prompt",
            &prompt,
        ]);
        self.command(&args).spawn().unwrap()
    }

    fn gc(&self) -> String {
        let out = self
            .command(&["gc"])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success(), "sanddune gc failed: {}", stderr(&out));
        stdout(&out)
    }

    /// The repository is sound and the user's work untouched.
    fn check_sound(&self, when: &str) {
        let repo = &self.repo;
        let fsck = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["fsck", "--full", "--strict", "--no-dangling"])
            .output()
            .unwrap();
        assert!(
            fsck.status.success() && stdout(&fsck).trim().is_empty(),
            "{when}: git fsck: {}{}",
            stdout(&fsck),
            stderr(&fsck)
        );
        assert_eq!(
            repo.git(&["status", "--porcelain"]),
            "M README.md\n?? scratch.txt",
            "{when}: the user's working tree changed"
        );
        assert_eq!(
            std::fs::read_to_string(repo.path().join("README.md")).unwrap(),
            README
        );
        let git_dir = repo.path().join(".git");
        for lock in [
            "index.lock",
            "HEAD.lock",
            "packed-refs.lock",
            "refs/heads/main.lock",
        ] {
            assert!(!git_dir.join(lock).exists(), "{when}: {lock} left behind");
        }
    }

    /// The names under .sanddune/worktrees that `keep` accepts.
    fn worktree_entries(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        std::fs::read_dir(self.repo.path().join(".sanddune/worktrees"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| keep(n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Worktree lock files.
    fn locks(&self) -> Vec<String> {
        self.worktree_entries(|n| n.ends_with(".lock"))
    }

    /// Removed worktrees' files still waiting to be deleted.
    fn removed_left(&self) -> Vec<String> {
        self.worktree_entries(|n| n.starts_with(".removed-"))
    }

    fn scratch_dirs(&self) -> usize {
        std::fs::read_dir(self.tmp.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("sanddune-")
            })
            .count()
    }

    /// Agent commits (by the fake's message) that no ref reaches: lost.
    fn lost_commits(&self) -> Vec<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.repo.path())
            .args(["fsck", "--unreachable", "--no-reflogs"])
            .output()
            .unwrap();
        stdout(&out)
            .lines()
            .filter_map(|l| l.strip_prefix("unreachable commit "))
            .map(|sha| {
                (
                    sha.to_owned(),
                    self.repo.git(&["log", "-1", "--format=%s", sha]),
                )
            })
            .filter(|(_, subject)| subject.starts_with("Add a note"))
            .map(|(sha, subject)| format!("{sha} {subject}"))
            .collect()
    }

    /// Agent commits that exist only in the repository of a sandbox whose
    /// sanddune died (`<TMPDIR>/sanddune-*/sbx-*/repo`): not on any branch.
    fn stranded_commits(&self) -> Vec<String> {
        let mut stranded = Vec::new();
        for scratch in std::fs::read_dir(self.tmp.path()).unwrap().flatten() {
            for sbx in std::fs::read_dir(scratch.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let repo = sbx.path().join("repo");
                if !repo.join(".git").exists() {
                    continue;
                }
                let out = Command::new("git")
                    .arg("-C")
                    .arg(&repo)
                    .args(["log", "--format=%H %s", "HEAD"])
                    .output()
                    .unwrap();
                for line in stdout(&out).lines() {
                    let (sha, subject) = line.split_once(' ').unwrap_or((line, ""));
                    let known = Command::new("git")
                        .arg("-C")
                        .arg(self.repo.path())
                        .args(["cat-file", "-e", &format!("{sha}^{{commit}}")])
                        .stderr(Stdio::null())
                        .status()
                        .unwrap()
                        .success();
                    if subject.starts_with("Add a note") && !known {
                        stranded.push(line.to_owned());
                    }
                }
            }
        }
        stranded
    }

    /// Branches, worktrees and their FETCH_HEADs, for a failure message.
    fn state(&self) -> String {
        let mut state = self.repo.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname:short) %(subject)",
        ]);
        state += "\n";
        state += &self.repo.git(&["worktree", "list"]);
        for wt in std::fs::read_dir(self.repo.path().join(".git/worktrees"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let fetch_head =
                std::fs::read_to_string(wt.path().join("FETCH_HEAD")).unwrap_or_default();
            state += &format!("\n{:?} FETCH_HEAD {fetch_head:?}", wt.file_name());
        }
        state
    }

    /// Every branch's note files: what the agents' commits hold.
    fn notes_on_branches(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .repo
            .git(&["log", "--all", "--format=", "--name-only", "--", "notes/"])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        notes.sort();
        notes.dedup();
        notes
    }
}

fn wait_with_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("sanddune did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the fake agent of this run has started.
fn wait_for_agent(repo: &TestRepo, tag: &str) {
    let start = Instant::now();
    while !repo.calls("claude").iter().any(|c| {
        c["prompt"]
            .as_str()
            .is_some_and(|p| p.contains(&format!("note {tag}\n")))
    }) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm_and_ctrl_c_clean_up_fully() {
    let setup = Setup::new();
    for (signal, name) in [(libc::SIGINT, "ctrl-c"), (libc::SIGTERM, "sigterm")] {
        let mut child = setup.run(name, true);
        wait_for_agent(&setup.repo, name);
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let status = wait_with_timeout(&mut child, Duration::from_secs(60));
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(130), "{name}: {err}");
        assert!(
            setup.locks().is_empty(),
            "{name} left a worktree lock: {:?}",
            setup.locks()
        );
        assert_eq!(setup.scratch_dirs(), 0, "{name} left a sandbox scratch dir");
        setup.check_sound(name);
        // Nothing for gc to do: the interrupted worktree was kept on purpose,
        // unlocked.
        let gc = setup.gc();
        assert!(!gc.contains("orphaned worktree"), "{name}: gc found {gc}");
    }
    let mut next = setup.run("after", false);
    assert!(wait_with_timeout(&mut next, Duration::from_secs(120)).success());
    assert!(
        setup
            .notes_on_branches()
            .contains(&"notes/after.md".to_owned())
    );
    setup.check_sound("after the signals");
    assert!(
        setup.lost_commits().is_empty(),
        "{:?}",
        setup.lost_commits()
    );
}

/// Killed after the agent committed in its sandbox, before sync out: gc
/// re-opens the dead run's sandbox, brings the commit onto the run's branch
/// and closes it (its scratch dir goes).
fn kill_9_mid_iteration_gc_brings_the_sandbox_commit_out() {
    let setup = Setup::new();
    let mut child = setup.run("stranded", true);
    let start = Instant::now();
    while setup.stranded_commits().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent never committed in its sandbox"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    child.wait().unwrap();
    assert_eq!(setup.scratch_dirs(), 1, "the killed run's sandbox is gone");
    let gc = setup.gc();
    assert!(
        gc.contains("sandbox onto `sanddune/run-"),
        "gc did not bring the commit out: {gc}"
    );
    assert!(setup.stranded_commits().is_empty(), "{gc}");
    assert_eq!(setup.scratch_dirs(), 0, "gc left the sandbox: {gc}");
    assert!(
        setup
            .notes_on_branches()
            .contains(&"notes/stranded.md".to_owned()),
        "{gc}\n{}",
        setup.state()
    );
    setup.check_sound("after gc");
    // A second gc has nothing left to do.
    let again = setup.gc();
    assert!(!again.contains("sandbox"), "{again}");
}

fn kill_9_at_seeded_points_loses_nothing() {
    kill_9_at_seeded_points(&Setup::new(), |_, _| {});
}

/// The same with docker, and no container of a killed run survives gc, nor
/// its agent git dir (whose last commits gc brings back: `lost_commits`
/// would not see commits only the agent git dir held).
fn kill_9_with_docker_loses_nothing_and_leaves_no_container() {
    require_engine("docker");
    kill_9_at_seeded_points(&Setup::docker(), |setup, pid| {
        let agent_git_dirs = setup.repo.path().join(".git/sanddune-agent");
        let left: Vec<_> = std::fs::read_dir(&agent_git_dirs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.is_empty(),
            "agent git dirs of killed runs survived gc: {left:?}"
        );
        let survivors = || {
            containers_with_format("docker", "{{.Label \"sanddune.owner\"}}")
                .into_iter()
                .filter(|o| o.starts_with(&format!("{pid}:")))
                .count()
        };
        if survivors() > 0 {
            // A create request in flight when the run died: the engine
            // finishes it after gc listed the containers. The next gc
            // removes it.
            std::thread::sleep(Duration::from_secs(2));
            setup.gc();
        }
        assert_eq!(
            survivors(),
            0,
            "a container of killed run {pid} survived gc"
        );
    });
}

/// Kill runs with SIGKILL at seeded points; after each, `gc` and the checks
/// (`after_gc` gets the killed process's pid), then one more run must land.
fn kill_9_at_seeded_points(setup: &Setup, after_gc: impl Fn(&Setup, u32)) {
    let kills = env_u64("SANDDUNE_CRASH_RUNS", 10) as usize;
    let seed = env_u64("SANDDUNE_CRASH_SEED", 0x5EED);

    // One run uninterrupted: how long a run takes here.
    let start = Instant::now();
    let mut first = setup.run("first", false);
    assert!(wait_with_timeout(&mut first, Duration::from_secs(120)).success());
    let span = start.elapsed();

    let mut rng = Rng(seed);
    let mut finished_before_kill = 0;
    let mut recovered = 0;
    for k in 0..kills {
        let tag = format!("kill-{k:03}");
        // Anywhere from start-up to just past the end of a run.
        let delay = Duration::from_millis(rng.next() % (span.as_millis() as u64 * 6 / 5 + 1));
        let mut child = setup.run(&tag, false);
        std::thread::sleep(delay);
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        let status = child.wait().unwrap();
        if status.success() {
            finished_before_kill += 1;
        }
        let when = format!("kill {k} after {delay:?} (seed {seed:#x})");
        let before_gc = setup.state();
        let gc = setup.gc();
        recovered += gc.matches("sandbox onto").count();
        after_gc(setup, child.id());
        assert!(
            setup.locks().is_empty(),
            "{when}: a lock survived gc: {:?}\n{gc}",
            setup.locks()
        );
        assert!(
            setup.removed_left().is_empty(),
            "{when}: a removed worktree's files survived gc: {:?}\n{gc}",
            setup.removed_left()
        );
        setup.check_sound(&when);
        assert!(
            setup.lost_commits().is_empty(),
            "{when}: lost {:?}\nbefore gc: {before_gc}\ngc: {gc}",
            setup.lost_commits()
        );
        // Every worktree left is one gc kept for its uncommitted work.
        for line in setup.repo.git(&["worktree", "list", "--porcelain"]).lines() {
            if let Some(path) = line.strip_prefix("worktree ")
                && Path::new(path) != setup.repo.path().canonicalize().unwrap()
                && Path::new(path) != setup.repo.path()
            {
                let status = git(Path::new(path), &["status", "--porcelain"]);
                assert!(
                    !status.is_empty(),
                    "{when}: a clean worktree {path} was left"
                );
            }
        }
    }
    let leftover_scratch = setup.scratch_dirs();
    let stranded = setup.stranded_commits();
    assert_eq!(leftover_scratch, 0, "sandboxes of killed runs survived gc");
    assert!(
        stranded.is_empty(),
        "commits stranded in sandboxes: {stranded:?}"
    );

    // The next run is not blocked by anything the kills left.
    let mut last = setup.run("last", false);
    assert!(wait_with_timeout(&mut last, Duration::from_secs(120)).success());
    setup.check_sound("the run after the kills");
    assert!(
        setup
            .notes_on_branches()
            .contains(&"notes/last.md".to_owned())
    );
    let landed = setup
        .repo
        .git(&["ls-tree", "-r", "--name-only", "main", "notes/"]);
    println!(
        "{kills} kill -9 at seeded points (seed {seed:#x}, a run takes {span:.2?}): {finished_before_kill} had finished, {} notes landed on main, {} branches kept, {recovered} sandboxes' commits brought out by gc",
        landed.lines().count(),
        setup
            .repo
            .git(&["for-each-ref", "--format=%(refname)", "refs/heads/sanddune"])
            .lines()
            .count(),
    );
}

/// Ctrl-C while a provider that ignores kills and timeouts (slow-loris
/// output, sleeping between lines) runs a command: the host gives up on the
/// provider a grace after the kill, and the run still ends as aborted
/// (130), its sandbox closed through a fresh instance, no record left.
fn ctrl_c_with_a_provider_that_ignores_kills_still_aborts() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let mut child = repo
        .command(&[
            "run",
            "--sandbox",
            hostile.to_str().unwrap(),
            "--yes",
            "--sandbox-opt",
            "attack=slow-loris",
            "--agent",
            "claude-code",
            "--prompt",
            "hi",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the run's sandbox is recorded: the provider is then trickling.
    let records = repo.path().join(".git/sanddune-sandboxes");
    let start = Instant::now();
    while std::fs::read_dir(&records).map_or(0, |d| d.count()) == 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "no sandbox");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = wait_with_timeout(&mut child, Duration::from_secs(120));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    let log = std::fs::read_dir(repo.path().join(".sanddune/logs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    let left: Vec<_> = std::fs::read_dir(&records)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        left.is_empty(),
        "the sandbox was not closed: {left:?}\n{err}\n{log}"
    );
    assert!(log.contains("sanddune gave up on it"), "{log}");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(sigterm_and_ctrl_c_clean_up_fully),
        trial!(kill_9_mid_iteration_gc_brings_the_sandbox_commit_out),
        trial!(kill_9_at_seeded_points_loses_nothing),
        trial!(kill_9_with_docker_loses_nothing_and_leaves_no_container),
        trial!(ctrl_c_with_a_provider_that_ignores_kills_still_aborts),
    ])
}
