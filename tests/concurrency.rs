//! Many runs at once on one repository: `SANDDUNE_CONCURRENT_RUNS` (default
//! 64) `sanddune run` processes, started together, each in the test-isolated
//! sandbox with the fake claude committing a file of its own, merge-to-head.
//! Every run must land its commit on the user's branch, `git fsck` must stay
//! clean, the user's uncommitted work must be as it was, and nothing may be
//! left behind (worktree, lock, temporary branch, git lock file). Wall time
//! and peak memory per run are printed (`--nocapture`).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn runs() -> usize {
    std::env::var("SANDDUNE_CONCURRENT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

/// One finished `sanddune run` process.
struct Finished {
    index: usize,
    code: Option<i32>,
    signal: Option<i32>,
    wall: Duration,
    /// ru_maxrss of the process (the largest of it and the processes it
    /// waited for, which in practice is sanddune itself), KiB.
    peak_kib: i64,
    stdout: String,
    stderr: String,
}

/// Spawn `cmd` with stdout and stderr in files of `dir` and wait for it
/// with wait4, for its peak memory.
fn run_measured(index: usize, mut cmd: Command, dir: &Path) -> Finished {
    let out_path = dir.join(format!("{index}.out"));
    let err_path = dir.join(format!("{index}.err"));
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn sanddune");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills it for our own child,
    // which std no longer waits for (we never call child.wait()).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4: {}", std::io::Error::last_os_error());
    let wall = start.elapsed();
    std::mem::forget(child);
    let status = std::process::ExitStatus::from_raw(status);
    Finished {
        index,
        code: status.code(),
        signal: status.signal(),
        wall,
        peak_kib: usage.ru_maxrss,
        stdout: std::fs::read_to_string(out_path).unwrap(),
        stderr: std::fs::read_to_string(err_path).unwrap(),
    }
}

fn run_command(repo: &TestRepo, index: usize) -> Command {
    let prompt = format!("note from run {index}\nFAKE:file:notes/run-{index:03}.md");
    repo.command(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--strategy",
        "merge-to-head",
        "--name",
        &format!("run-{index:03}"),
        "--prompt",
        &prompt,
        "--json",
    ])
}

fn stats(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

#[test]
fn many_runs_at_once_all_land_and_leave_nothing_behind() {
    let n = runs();
    let repo = TestRepo::new();
    let out_dir = tempfile::tempdir().unwrap();

    // One run alone first: compiles the components into the shared cache
    // (as a user's first run does) and gives the single-run figures.
    let alone = run_measured(n, run_command(&repo, n), out_dir.path());
    assert_eq!(
        alone.code,
        Some(0),
        "the first run failed: {}",
        alone.stderr
    );

    // The user's own work in progress, which no run may touch.
    let readme = repo.path().join("README.md");
    std::fs::write(&readme, "# Project\n\nThis is teh readme.\nA local edit.\n").unwrap();
    std::fs::write(repo.path().join("scratch.txt"), "mine\n").unwrap();
    let status_before = repo.git(&["status", "--porcelain"]);
    assert_eq!(status_before, "M README.md\n?? scratch.txt");

    let started = Instant::now();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let cmd = run_command(&repo, i);
            let dir = out_dir.path().to_path_buf();
            std::thread::spawn(move || run_measured(i, cmd, &dir))
        })
        .collect();
    let finished: Vec<Finished> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let total = started.elapsed();

    let mut walls: Vec<f64> = finished.iter().map(|f| f.wall.as_secs_f64()).collect();
    let mut peaks: Vec<f64> = finished
        .iter()
        .map(|f| f.peak_kib as f64 / 1024.0)
        .collect();
    let (w_min, w_med, w_max) = stats(&mut walls);
    let (m_min, m_med, m_max) = stats(&mut peaks);
    println!(
        "1 run alone: {:.2} s, peak {:.1} MiB",
        alone.wall.as_secs_f64(),
        alone.peak_kib as f64 / 1024.0
    );
    println!(
        "{n} runs at once: {:.1} s in all ({:.0} runs/minute); per run wall {w_min:.2} / {w_med:.2} / {w_max:.2} s, peak memory {m_min:.1} / {m_med:.1} / {m_max:.1} MiB (min / median / max)",
        total.as_secs_f64(),
        n as f64 * 60.0 / total.as_secs_f64()
    );

    // Every run succeeded and reports exactly its own commit.
    let mut shas = Vec::new();
    for f in &finished {
        assert!(
            f.code == Some(0),
            "run {} ended with {:?} (signal {:?}):\n{}\n{}",
            f.index,
            f.code,
            f.signal,
            f.stderr,
            f.stdout
        );
        let result: serde_json::Value = serde_json::from_str(&f.stdout)
            .unwrap_or_else(|e| panic!("run {}: not JSON ({e}): {}", f.index, f.stdout));
        let commits = result["commits"].as_array().expect("commits");
        assert_eq!(commits.len(), 1, "run {}: {result}", f.index);
        shas.push(commits[0]["sha"].as_str().unwrap().to_owned());
    }
    shas.sort();
    shas.dedup();
    assert_eq!(shas.len(), n, "two runs reported the same commit");

    // All landed: each commit is in the user's branch, and so is each file.
    for sha in &shas {
        let is_ancestor = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["merge-base", "--is-ancestor", sha, "main"])
            .status()
            .unwrap();
        assert!(is_ancestor.success(), "commit {sha} did not land on main");
    }
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "main", "notes/"]);
    for i in (0..n).chain([n]) {
        let path = format!("notes/run-{i:03}.md");
        assert!(tree.lines().any(|l| l == path), "{path} is not on main");
        let content = repo.git(&["show", &format!("main:{path}")]);
        assert_eq!(content, format!("note from run {i}"));
    }

    // The repository is sound.
    let fsck = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["fsck", "--full", "--strict"])
        .output()
        .unwrap();
    let fsck_text = format!("{}{}", stdout(&fsck), stderr(&fsck));
    assert!(fsck.status.success(), "git fsck failed:\n{fsck_text}");
    for line in fsck_text.lines() {
        assert!(
            !line.starts_with("error")
                && !line.starts_with("missing")
                && !line.starts_with("broken")
                && !line.contains("warning"),
            "git fsck: {line}"
        );
    }

    // The user's work is as it was; the working tree has every landed file.
    assert_eq!(repo.git(&["status", "--porcelain"]), status_before);
    assert_eq!(
        std::fs::read_to_string(&readme).unwrap(),
        "# Project\n\nThis is teh readme.\nA local edit.\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("scratch.txt")).unwrap(),
        "mine\n"
    );
    assert!(
        repo.path()
            .join(format!("notes/run-{:03}.md", n - 1))
            .is_file()
    );

    // Nothing left behind.
    let worktrees_dir = repo.path().join(".sanddune/worktrees");
    let left: Vec<String> = std::fs::read_dir(&worktrees_dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left in .sanddune/worktrees: {left:?}");
    assert_eq!(
        repo.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)", "refs/heads"]),
        "refs/heads/main"
    );
    let git_dir = repo.path().join(".git");
    for lock in [
        "index.lock",
        "HEAD.lock",
        "packed-refs.lock",
        "refs/heads/main.lock",
        "config.lock",
    ] {
        assert!(!git_dir.join(lock).exists(), "{lock} was left behind");
    }
}
