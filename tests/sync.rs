//! Sync for isolated sandboxes on real git and the real test-isolated
//! provider: what goes in grows with the tree at the base, not with the
//! history (a shallow repository whose base is the host's exact commit);
//! `history=N|full` gives more; a reused sandbox gets only what its branch
//! gained; a sandbox that cannot hold the repository fails the run with the
//! reason and leaves the host as it was.

mod common;

use std::path::Path;

use common::trials::{self, skip, trial};
use common::{TestRepo, stderr, stdout};
use serde_json::Value;

/// `n` commits each rewriting one file with `size` incompressible bytes:
/// a long, heavy history under a one-file tree.
fn heavy_history(repo: &TestRepo, n: usize, size: usize) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        let data: Vec<u8> = (0..size)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        std::fs::write(repo.path().join("blob.bin"), data).unwrap();
        repo.git(&["add", "blob.bin"]);
        repo.git(&["commit", "-q", "-m", &format!("history {i}")]);
    }
}

/// A sandbox hook that writes what the sandbox's repository holds to a
/// host file (test-isolated runs commands on the host, as the user).
fn inspect_hook(out: &Path) -> String {
    let out = out.display();
    format!(
        "{{ git rev-list --count HEAD; git rev-parse HEAD; cat .git/shallow 2>/dev/null || echo no-shallow; }} > '{out}'"
    )
}

fn run_json(repo: &TestRepo, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = repo.sanddune(&args);
    assert!(out.status.success(), "sanddune failed: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn phase_bytes(result: &Value, phase: &str) -> Vec<u64> {
    result["timings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["phase"] == phase)
        .map(|p| p["bytes"].as_u64().expect("a sync phase has its bytes"))
        .collect()
}

fn sync_in_sends_the_tree_at_the_base_not_the_history() {
    let repo = TestRepo::new();
    heavy_history(&repo, 40, 64 * 1024);
    let base = repo.git(&["rev-parse", "HEAD"]);
    let seen = repo.home.path().join("seen");
    let hook = inspect_hook(&seen);
    let result = run_json(&repo, &["--hook-sandbox-ready", &hook]);

    // The sandbox had one commit, the host's exact base, marked shallow.
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen.lines().collect::<Vec<_>>(), ["1", &base, &base]);
    // What went in is about one version of the file, not forty.
    let bundle = repo.home.path().join("all.bundle");
    repo.git(&["bundle", "create", "-q", bundle.to_str().unwrap(), "main"]);
    let history_bytes = std::fs::metadata(&bundle).unwrap().len();
    let sent = phase_bytes(&result, "sync in");
    assert_eq!(sent.len(), 1, "{result}");
    assert!(
        sent[0] < 2 * 64 * 1024 && history_bytes > 30 * 64 * 1024,
        "sync in sent {} bytes; the whole history is {history_bytes}",
        sent[0]
    );
    // The agent's commit came back whole, on the host's base, and is the
    // one the run reports; the out bundle's bytes are reported too.
    let commits = result["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1);
    let sha = commits[0]["sha"].as_str().unwrap();
    assert_eq!(repo.git(&["rev-parse", "main"]), sha);
    assert_eq!(repo.git(&["rev-parse", &format!("{sha}^")]), base);
    assert_eq!(repo.git(&["log", "-1", "--format=%s", sha]), "Add a note");
    repo.git(&["fsck", "--no-progress"]);
    assert!(phase_bytes(&result, "iteration 1 sync out")[0] > 0);
}

fn history_n_and_full_give_the_sandbox_that_much_history() {
    let repo = TestRepo::new();
    heavy_history(&repo, 6, 1024);
    let commits = || -> usize { repo.git(&["rev-list", "--count", "HEAD"]).parse().unwrap() };
    let total = commits();
    let seen = repo.home.path().join("seen");
    let hook = inspect_hook(&seen);
    // The second run's base has the first run's commit too.
    for (history, count, shallow) in [("3", 3, true), ("full", total + 1, false)] {
        let opt = format!("history={history}");
        run_json(
            &repo,
            &["--sandbox-opt", &opt, "--hook-sandbox-ready", &hook],
        );
        let seen = std::fs::read_to_string(&seen).unwrap();
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines[0], count.to_string(), "history={history}: {seen}");
        assert_eq!(
            lines[2] != "no-shallow",
            shallow,
            "history={history}: {seen}"
        );
    }
    // Both runs' commits landed on main, one on the other.
    assert_eq!(commits(), total + 2);
}

fn a_bad_history_is_refused_before_anything_is_created() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    for (sandbox, opt, says) in [
        ("test-isolated", "history=0", "`full`"),
        ("test-isolated", "history=all", "`full`"),
        ("docker", "history=5", "isolated sandbox providers"),
    ] {
        let out = repo.sanddune(&[
            "run",
            "--sandbox",
            sandbox,
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--sandbox-opt",
            opt,
        ]);
        assert_eq!(out.status.code(), Some(2), "{opt}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{opt}: {}", stderr(&out));
    }
    assert!(
        !repo.path().join(".sanddune").exists(),
        "no log, no worktree"
    );
    assert_eq!(repo.git(&["branch", "--format=%(refname:short)"]), "main");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
}

async fn a_reused_sandbox_gets_only_what_its_branch_gained_on_the_host() {
    use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
    use sanddune::run::{AgentOptions, LogMode, Prompt, SandboxOptions, create_sandbox};

    let repo = TestRepo::new();
    heavy_history(&repo, 1, 256 * 1024);
    let mut so = SandboxOptions::new(PluginRef::Builtin("test-isolated".into()));
    so.cwd = repo.path().to_path_buf();
    so.runtime = Some(
        PluginRuntime::new(RuntimeConfig {
            cache_dir: Some(common::cache_dir()),
            ..RuntimeConfig::default()
        })
        .unwrap(),
    );
    so.log = LogMode::Terminal;
    let path = format!(
        "{}:{}",
        repo.bin().display(),
        std::env::var("PATH").unwrap()
    );
    so.env = vec![("PATH".into(), path)];
    let agent = || {
        let mut o = AgentOptions::new(
            PluginRef::Builtin("claude-code".into()),
            Prompt::Inline("add a note".into()),
        );
        o.capture_sessions = false;
        // claude-code's requirement (the fake reads no key).
        o.agent_env = vec![("ANTHROPIC_API_KEY".into(), "sk-ant-sanddune-test".into())];
        o
    };
    let mut sandbox = create_sandbox("feature", so).await.unwrap();
    let first = sandbox.run(agent()).await.unwrap();
    let initial = phase_bytes(&serde_json::to_value(&first).unwrap(), "sync in");
    assert_eq!(initial.len(), 1);
    assert!(initial[0] > 200 * 1024, "the first sync sends the tree");

    // Someone commits on the branch on the host between two runs.
    let wt = sandbox.worktree_path().to_path_buf();
    std::fs::write(wt.join("HOST.md"), "from the host\n").unwrap();
    common::git(&wt, &["add", "HOST.md"]);
    common::git(&wt, &["commit", "-q", "-m", "host commit"]);
    let host_commit = common::git(&wt, &["rev-parse", "HEAD"]);

    let second = sandbox.run(agent()).await.unwrap();
    let sent = phase_bytes(&serde_json::to_value(&second).unwrap(), "sync in");
    assert_eq!(sent.len(), 2, "the second run synced in once more");
    assert!(
        sent[1] < 4096,
        "only the new commit went in: {} bytes",
        sent[1]
    );
    let sha = second.commits[0].sha.clone();
    assert_eq!(
        common::git(&wt, &["rev-parse", &format!("{sha}^")]),
        host_commit,
        "the agent worked on top of the host's commit"
    );
    sandbox.close().await.unwrap();
    assert_eq!(
        repo.git(&["log", "--format=%s", "main..feature"]),
        "Add a note\nhost commit\nAdd a note"
    );
}

/// A tmpfs of `size` for TMPDIR, where the run's sandboxes go: only root
/// can mount one. Unmounted on drop.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Self(dir))
    }
}

impl SmallDisk {
    /// A tmpfs; the test is skipped when it cannot mount (not root).
    fn mount_or_skip(size: &str) -> Self {
        Self::mount(size).unwrap_or_else(|| skip("mounting a tmpfs needs root"))
    }

    /// `sanddune run` of test-isolated and claude-code with `prompt`, its
    /// sandboxes on this disk.
    fn run(&self, repo: &TestRepo, prompt: &str) -> std::process::Output {
        repo.sanddune_with_env(
            &[
                "run",
                "--sandbox",
                "test-isolated",
                "--agent",
                "claude-code",
                "--prompt",
                prompt,
            ],
            &[("TMPDIR", self.0.path().to_str().unwrap())],
        )
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

fn a_sandbox_too_small_for_the_repository_fails_the_run_and_loses_nothing() {
    let disk = SmallDisk::mount_or_skip("3m");
    let repo = TestRepo::new();
    heavy_history(&repo, 1, 2 * 1024 * 1024);
    let before = repo.git(&["rev-parse", "HEAD"]);
    let out = disk.run(&repo, "add a note");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // In git's words: the checkout's ("Out of diskspace") or the kernel's.
    assert!(
        stderr(&out).contains("No space left on device")
            || stderr(&out).contains("Out of diskspace"),
        "the reason is named: {}",
        stderr(&out)
    );
    // The host is as it was: its branch, its tree, no run branch or
    // worktree, no sync files in the git dir.
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.git(&["branch", "--format=%(refname:short)"]), "main");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    let git_dir = repo.path().join(".git");
    let leftovers: Vec<_> = std::fs::read_dir(&git_dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("sanddune-sync-")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn a_sandbox_too_small_for_the_agents_commits_fails_the_run_and_loses_nothing() {
    let disk = SmallDisk::mount_or_skip("3m");
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    // The commit fits (file and object: 2.4 MB); its bundle for sync out
    // does not.
    let out = disk.run(&repo, "add a note\nFAKE:big:1200000");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("git bundle create")
            && (err.contains("Out of diskspace") || err.contains("No space left on device")),
        "the reason is named: {err}"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

/// What a sandbox hook saw of the run's host worktree (test-isolated runs
/// hooks on the host): its entries, sorted.
fn host_worktree_hook(repo: &TestRepo, out: &Path) -> String {
    format!(
        "ls -A '{}'/.sanddune/worktrees/run-*/ | sort > '{}'",
        repo.path().display(),
        out.display()
    )
}

fn an_isolated_run_writes_no_files_on_the_host_until_someone_needs_them() {
    let repo = TestRepo::new();
    let seen = repo.home.path().join("seen");
    let hook = host_worktree_hook(&repo, &seen);
    let result = run_json(&repo, &["--hook-sandbox-ready", &hook]);
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), ".git\n");
    assert_eq!(result["commits"].as_array().unwrap().len(), 1);
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");

    // A host hook runs in the worktree, so it gets its files.
    let listed = repo.home.path().join("listed");
    let host_hook = format!("ls -A | sort > '{}'", listed.display());
    run_json(&repo, &["--hook-host-sandbox-ready", &host_hook]);
    let listed = std::fs::read_to_string(&listed).unwrap();
    assert!(
        listed.contains("README.md\n") && listed.contains("NOTES.md\n"),
        "{listed}"
    );

    // An interrupted run keeps its worktree, with the files, for a person.
    let child = repo
        .command(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "add a note FAKE:hang",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while repo.calls("claude").len() < 3 {
        assert!(start.elapsed().as_secs() < 60, "the agent never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let kept: Vec<_> = std::fs::read_dir(repo.path().join(".sanddune/worktrees"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(kept[0].join("README.md")).unwrap(),
        "# Project\n\nThis is teh readme.\n"
    );
    assert_eq!(common::git(&kept[0], &["status", "--porcelain"]), "");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(sync_in_sends_the_tree_at_the_base_not_the_history),
        trial!(history_n_and_full_give_the_sandbox_that_much_history),
        trial!(a_bad_history_is_refused_before_anything_is_created),
        trial!(async a_reused_sandbox_gets_only_what_its_branch_gained_on_the_host),
        trial!(a_sandbox_too_small_for_the_repository_fails_the_run_and_loses_nothing),
        trial!(a_sandbox_too_small_for_the_agents_commits_fails_the_run_and_loses_nothing),
        trial!(an_isolated_run_writes_no_files_on_the_host_until_someone_needs_them),
    ])
}
