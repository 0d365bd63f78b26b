//! The orchestration core through the real binary: hooks, parallel prompt
//! expansion, run logs, session capture and resume, structured output,
//! `.sanddune/config.toml`, interactive sessions and the no-sandbox
//! provider. The sandbox is test-isolated; the agent the fake `claude`.

mod common;

use common::{TestRepo, stderr, stdout};
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "sanddune failed: {}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(out)))
}

/// `sanddune run --sandbox test-isolated --agent claude-code` plus `args`.
fn run(repo: &TestRepo, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
    ];
    all.extend_from_slice(args);
    repo.sanddune(&all)
}

fn no_worktree_left(repo: &TestRepo) {
    assert_eq!(
        repo.git(&["worktree", "list"]).lines().count(),
        1,
        "no worktree may be left"
    );
    // Nor the files of one, moved aside to be deleted after the result.
    let aside: Vec<_> = std::fs::read_dir(repo.path().join(".sanddune/worktrees"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".removed-"))
        .collect();
    assert!(aside.is_empty(), "{aside:?}");
}

// --- hooks -----------------------------------------------------------------

#[test]
fn hooks_run_in_order_and_shell_expressions_see_the_sandbox_hooks_work() {
    let repo = TestRepo::new();
    let trace = repo.home.path().join("trace");
    let t = trace.display();
    let prompt = repo.home.path().join("task.md");
    std::fs::write(&prompt, "Ready: !`cat .ready`\nfix the typo\n").unwrap();
    let out = run(
        &repo,
        &[
            "--prompt-file",
            prompt.to_str().unwrap(),
            "--hook-worktree-ready",
            &format!("echo worktree-1 >> {t}; test -f README.md"),
            "--hook-worktree-ready",
            &format!("echo worktree-2 >> {t}"),
            "--hook-host-sandbox-ready",
            &format!("echo host-ready >> {t}"),
            "--hook-sandbox-ready",
            &format!("echo sandbox-ready >> {t}; echo yes > .ready"),
            "--json",
        ],
    );
    let result = json(&out);
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    let trace = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = trace.lines().collect();
    assert_eq!(&lines[..2], ["worktree-1", "worktree-2"], "{trace}");
    let mut ready = lines[2..].to_vec();
    ready.sort();
    assert_eq!(ready, ["host-ready", "sandbox-ready"], "{trace}");
    let call = &repo.calls("claude")[0];
    assert!(
        call["prompt"].as_str().unwrap().starts_with("Ready: yes\n"),
        "{call}"
    );
}

#[test]
fn a_failing_hook_stops_the_setup_and_the_agent_never_starts() {
    let repo = TestRepo::new();
    for (flag, label) in [
        ("--hook-worktree-ready", "host.onWorktreeReady"),
        ("--hook-host-sandbox-ready", "host.onSandboxReady"),
        ("--hook-sandbox-ready", "sandbox.onSandboxReady"),
    ] {
        let out = run(
            &repo,
            &["--prompt", "fix the typo", flag, "echo no-npm >&2; exit 7"],
        );
        assert_eq!(out.status.code(), Some(1), "{flag}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(label) && err.contains("exited with code 7") && err.contains("no-npm"),
            "{flag}: {err}"
        );
        assert!(
            repo.calls("claude").is_empty(),
            "{flag}: the agent must not start"
        );
        no_worktree_left(&repo);
        assert_eq!(repo.git(&["branch", "--list", "sanddune/*"]), "");
    }
}

#[test]
fn hooks_of_a_kind_run_at_once() {
    // Each hook waits for the other's file: one after another, they would
    // time out.
    let repo = TestRepo::new();
    let dir = repo.home.path().display().to_string();
    let wait = |me: &str, other: &str| {
        format!(
            "touch {dir}/{me}; i=0; while [ ! -f {dir}/{other} ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done"
        )
    };
    let out = run(
        &repo,
        &[
            "--prompt",
            "fix the typo",
            "--hook-sandbox-ready",
            &wait("a", "b"),
            "--hook-sandbox-ready",
            &wait("b", "c"),
            "--hook-host-sandbox-ready",
            &wait("c", "a"),
            "--json",
        ],
    );
    json(&out);
}

#[test]
fn shell_expressions_run_at_once() {
    let repo = TestRepo::new();
    let dir = repo.home.path().display().to_string();
    let prompt = repo.home.path().join("task.md");
    std::fs::write(
        &prompt,
        format!(
            "A: !`touch {dir}/x; i=0; while [ ! -f {dir}/y ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done; echo one`\nB: !`touch {dir}/y; i=0; while [ ! -f {dir}/x ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done; echo two`\nfix the typo\n"
        ),
    )
    .unwrap();
    let out = run(
        &repo,
        &["--prompt-file", prompt.to_str().unwrap(), "--json"],
    );
    json(&out);
    let prompt = repo.calls("claude")[0]["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.starts_with("A: one\nB: two\n"),
        "outputs in template order: {prompt}"
    );
}

#[test]
fn a_hook_timeout_from_the_config_file_fails_the_setup() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[[hooks.sandbox.onSandboxReady]]\ncommand = \"sleep 30\"\ntimeoutMs = 300\n",
    )
    .unwrap();
    let out = run(&repo, &["--prompt", "fix the typo"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("`sleep 30` timed out after 300 ms"), "{err}");
    assert!(repo.calls("claude").is_empty());
    no_worktree_left(&repo);
}

#[test]
fn a_bad_config_file_is_named_and_nothing_runs() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[hooks.host]\nonWorktreeRedy = []\n",
    )
    .unwrap();
    let out = run(&repo, &["--prompt", "fix the typo"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("config.toml") && err.contains("onWorktreeRedy"),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn config_env_reaches_the_agent_and_the_env_flag_wins() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[env]\nSANDDUNE_TEST_A = \"config\"\nSANDDUNE_TEST_B = \"config\"\n",
    )
    .unwrap();
    let out = run(
        &repo,
        &[
            "--prompt",
            "fix the typo",
            "--env",
            "SANDDUNE_TEST_B=flag",
            "--json",
        ],
    );
    json(&out);
    let env = &repo.calls("claude")[0]["env"];
    assert_eq!(env["SANDDUNE_TEST_A"], "config");
    assert_eq!(env["SANDDUNE_TEST_B"], "flag");
}

// --- logging ---------------------------------------------------------------

#[test]
fn file_mode_is_the_default_and_prints_a_tail_line() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        &["--prompt", "fix the typo", "--name", "issue-9", "--json"],
    );
    let result = json(&out);
    let path = result["logFilePath"]
        .as_str()
        .expect("logFilePath in file mode");
    assert!(
        path.contains("/.sanddune/logs/issue-9-") && path.ends_with(".log"),
        "{path}"
    );
    assert!(
        stderr(&out).contains(&format!("tail -f {path}")),
        "{}",
        stderr(&out)
    );
    let log = std::fs::read_to_string(path).unwrap();
    assert!(
        log.contains("[issue-9] [1] Let me look at the repository."),
        "{log}"
    );
    assert!(log.contains("[issue-9] [1] > Bash"), "{log}");
    assert!(
        log.lines().all(|l| l.contains(" [issue-9] ")),
        "every line is prefixed: {log}"
    );
    // Logs never show up as the user's untracked files.
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn terminal_mode_streams_to_stderr_and_has_no_log_file() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        &[
            "--prompt",
            "fix the typo",
            "--log",
            "terminal",
            "--name",
            "t1",
            "--json",
        ],
    );
    let result = json(&out);
    assert!(result.get("logFilePath").is_none(), "{result}");
    let err = stderr(&out);
    assert!(
        err.contains("[t1] [1] Let me look at the repository."),
        "{err}"
    );
    assert!(!repo.path().join(".sanddune/logs").exists());
}

// --- sessions --------------------------------------------------------------

fn claude_project_dir(repo: &TestRepo) -> std::path::PathBuf {
    let root = repo.path().canonicalize().unwrap();
    let enc: String = root
        .to_str()
        .unwrap()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    repo.home.path().join(".claude/projects").join(enc)
}

#[test]
fn the_session_is_captured_to_the_host_with_its_cwd_rewritten() {
    let repo = TestRepo::new();
    let result = json(&run(&repo, &["--prompt", "fix the typo", "--json"]));
    let it = &result["iterations"][0];
    let id = it["sessionId"].as_str().unwrap();
    let path = it["sessionFilePath"].as_str().expect("sessionFilePath");
    let expected = claude_project_dir(&repo).join(format!("{id}.jsonl"));
    assert_eq!(std::path::Path::new(path), expected);
    let root = repo.path().canonicalize().unwrap();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["cwd"],
            root.to_str().unwrap(),
            "cwd rewritten to the repo root"
        );
    }
    // The stream's total stays the iteration's usage.
    assert_eq!(it["usage"]["inputTokens"], 18);
}

#[test]
fn capture_can_be_turned_off() {
    let repo = TestRepo::new();
    let result = json(&run(
        &repo,
        &[
            "--prompt",
            "fix the typo",
            "--no-capture-sessions",
            "--json",
        ],
    ));
    assert!(result["iterations"][0].get("sessionFilePath").is_none());
    assert!(!repo.home.path().join(".claude").exists());
}

#[test]
fn a_failed_capture_warns_and_the_run_still_succeeds() {
    let repo = TestRepo::new();
    // Nowhere to write: ~/.claude is a file.
    std::fs::write(repo.home.path().join(".claude"), "not a dir").unwrap();
    let out = run(
        &repo,
        &["--prompt", "fix the typo", "--log", "terminal", "--json"],
    );
    let result = json(&out);
    assert!(
        result["iterations"][0].get("sessionFilePath").is_none(),
        "{result}"
    );
    assert_eq!(result["commits"].as_array().unwrap().len(), 1);
    assert!(
        stderr(&out).contains("could not capture the session"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_captured_session_resumes_in_a_fresh_sandbox() {
    let repo = TestRepo::new();
    let first = json(&run(&repo, &["--prompt", "fix the typo", "--json"]));
    let id = first["iterations"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run(
        &repo,
        &["--prompt", "add a note", "--resume", &id, "--json"],
    );
    json(&out);
    let calls = repo.calls("claude");
    let argv: Vec<&str> = calls[1]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = argv
        .iter()
        .position(|a| *a == "--resume")
        .expect("--resume passed");
    assert_eq!(argv[at + 1], id);
    assert!(
        calls[0]["argv"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a != "--resume")
    );
}

#[test]
fn resume_is_refused_before_anything_when_it_cannot_work() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        &["--prompt", "x", "--resume", "abc", "--max-iterations", "2"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("iteration 1 only"),
        "{}",
        stderr(&out)
    );
    let out = run(&repo, &["--prompt", "x", "--resume", "0000-missing"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no session `0000-missing` to resume") && err.contains(".claude/projects"),
        "{err}"
    );
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "cursor",
        "--prompt",
        "x",
        "--resume",
        "s1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("keeps no session files"),
        "{}",
        stderr(&out)
    );
    // cursor's CLI is `agent`.
    assert!(repo.calls("claude").is_empty() && repo.calls("agent").is_empty());
    no_worktree_left(&repo);
}

// --- structured output -----------------------------------------------------

/// A run asking for a `<verdict>` block that must be approve or reject.
fn run_with_schema(repo: &TestRepo, prompt: &str) -> std::process::Output {
    let path = repo.home.path().join("schema.json");
    std::fs::write(
        &path,
        r#"{"type":"object","required":["verdict"],"properties":{"verdict":{"enum":["approve","reject"]}}}"#,
    )
    .unwrap();
    let schema = path.display().to_string();
    let args = [
        "--prompt",
        prompt,
        "--output-tag",
        "verdict",
        "--output-schema",
        &schema,
        "--json",
    ];
    run(repo, &args)
}

#[test]
fn a_structured_result_is_parsed_and_validated() {
    let repo = TestRepo::new();
    // The fake turns a literal \n into a newline: a fenced block.
    let prompt = "review\nFAKE:say:<verdict>```json\\n{\"verdict\":\"approve\"}\\n```</verdict>";
    let out = run_with_schema(&repo, prompt);
    let result = json(&out);
    assert_eq!(result["output"], serde_json::json!({"verdict": "approve"}));
}

#[test]
fn a_result_that_misses_the_schema_fails_with_the_raw_text_and_the_commits() {
    let repo = TestRepo::new();
    let prompt = "review\nFAKE:say:<verdict>{\"verdict\":\"maybe\"}</verdict>";
    let out = run_with_schema(&repo, prompt);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(err["error"].as_str().unwrap().contains("/verdict"), "{err}");
    assert!(err["raw"].as_str().unwrap().contains("\"maybe\""), "{err}");
    assert_eq!(err["commits"].as_array().unwrap().len(), 1, "{err}");
    // A failed run merges nothing: its commits stay on the kept branch.
    assert!(!repo.path().join("NOTES.md").exists());
    let sha = err["commits"][0]["sha"].as_str().unwrap();
    let kept = repo.git(&[
        "branch",
        "--list",
        "sanddune/*",
        "--format=%(refname:short)",
    ]);
    assert_eq!(repo.git(&["rev-parse", &kept]), sha);
}

// --- strategies and entry points ------------------------------------------

#[test]
fn strategy_flags_are_checked_before_anything_happens() {
    let repo = TestRepo::new();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--strategy", "branch"],
            "--strategy branch needs --branch",
        ),
        (
            &["--strategy", "head", "--branch", "b"],
            "cannot be combined",
        ),
        (
            &["--strategy", "head"],
            "needs a bind-mount sandbox provider",
        ),
        (&["--output-tag", "x"], "--output-schema"),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["--prompt", "fix the typo"];
        args.extend_from_slice(flags);
        let out = run(&repo, &args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{flags:?}: {}",
            stderr(&out)
        );
    }
    assert!(repo.calls("claude").is_empty());
    no_worktree_left(&repo);
}

#[test]
fn the_no_sandbox_provider_is_refused_for_unattended_runs() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "no-sandbox",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interactive sessions only"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn interactive_without_a_sandbox_keeps_permission_prompts_and_works_on_head() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "interactive",
        "--sandbox",
        "no-sandbox",
        "--agent",
        "claude-code",
        "--prompt",
        "hello there",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let call = &repo.calls("claude")[0];
    let argv: Vec<&str> = call["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        !argv.contains(&"--print"),
        "the TUI, not print mode: {argv:?}"
    );
    assert!(
        !argv.contains(&"--dangerously-skip-permissions"),
        "{argv:?}"
    );
    assert_eq!(argv.last(), Some(&"hello there"));
    assert_eq!(
        call["cwd"],
        repo.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Add a note",
        "head: the commit is on main"
    );
    assert!(
        stdout(&out).contains("1 commit on main"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn interactive_in_an_isolated_sandbox_merges_to_head() {
    let repo = TestRepo::new();
    let prompt = repo.home.path().join("task.md");
    std::fs::write(&prompt, "work on {{ISSUE}}\n").unwrap();
    let out = repo.sanddune(&[
        "interactive",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt-file",
        prompt.to_str().unwrap(),
        "--prompt-arg",
        "ISSUE=12",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let call = &repo.calls("claude")[0];
    assert_eq!(call["prompt"], "work on 12\n");
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("NOTES.md")).unwrap(),
        "work on 12\n"
    );
    no_worktree_left(&repo);
    assert_eq!(repo.git(&["branch", "--list", "sanddune/*"]), "");
}

#[test]
fn interactive_asks_for_a_missing_prompt_argument_and_fails_without_one() {
    let repo = TestRepo::new();
    let prompt = repo.home.path().join("task.md");
    std::fs::write(&prompt, "work on {{ISSUE}}\n").unwrap();
    // stdin is empty: nobody answers.
    let out = repo.sanddune(&[
        "interactive",
        "--sandbox",
        "no-sandbox",
        "--agent",
        "claude-code",
        "--prompt-file",
        prompt.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("value for {{ISSUE}}:") && err.contains("--prompt-arg ISSUE="),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty());
}

// --- copyToWorktree -------------------------------------------------------

#[test]
fn copies_reach_the_worktree_before_its_hooks() {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("local.env"), "TOKEN=untracked\n").unwrap();
    let trace = repo.home.path().join("trace");
    let out = run(
        &repo,
        &[
            "--prompt",
            "fix the typo",
            "--copy",
            "local.env",
            "--hook-worktree-ready",
            &format!("cat local.env > {}", trace.display()),
            "--json",
        ],
    );
    json(&out);
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        "TOKEN=untracked\n"
    );
    // The user's file is still theirs.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("local.env")).unwrap(),
        "TOKEN=untracked\n"
    );
}

#[test]
fn a_copy_that_cannot_work_is_refused_before_the_agent() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        &["--prompt", "fix the typo", "--copy", "node_modules"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("node_modules") && err.contains("does not exist"),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty());
    no_worktree_left(&repo);
    // A bind-mount provider defaults to head, which has no worktree to copy into.
    std::fs::write(repo.path().join("local.env"), "x").unwrap();
    let hostile = common::plugin_file("sanddune-test-plugin-hostile");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        hostile.to_str().unwrap(),
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--copy",
        "local.env",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("copyToWorktree needs a worktree"),
        "{}",
        stderr(&out)
    );
}

// --- abort, locks, parallel runs -------------------------------------------

/// Wait (bounded) for `path` to exist; tests never assert on time.
fn wait_for(path: &std::path::Path) {
    for _ in 0..400 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never appeared", path.display());
}

/// `sanddune run ... --branch BRANCH` with a hanging agent, in the background.
fn hanging_run(repo: &TestRepo, branch: &str) -> std::process::Child {
    hanging_run_with(repo, &["--branch", branch])
}

fn hanging_run_with(repo: &TestRepo, args: &[&str]) -> std::process::Child {
    let mut all = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "FAKE:hang",
        "--log",
        "terminal",
    ];
    all.extend(args);
    let child = repo
        .command(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&repo.home.path().join("fake-claude-calls.jsonl"));
    child
}

#[test]
fn ctrl_c_aborts_with_130_and_keeps_the_worktree() {
    let repo = TestRepo::new();
    let child = hanging_run(&repo, "feat/slow");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted (Ctrl-C)"),
        "{}",
        stderr(&out)
    );
    assert!(
        repo.path().join(".sanddune/worktrees/feat-slow").is_dir(),
        "the worktree is kept"
    );
    assert!(
        !repo
            .path()
            .join(".sanddune/worktrees/feat-slow.lock")
            .exists(),
        "and unlocked"
    );
}

#[test]
fn a_second_run_on_a_locked_worktree_fails_fast_naming_the_holder() {
    let repo = TestRepo::new();
    let mut first = hanging_run(&repo, "feat/a");
    let out = run(&repo, &["--prompt", "fix the typo", "--branch", "feat/a"]);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("is in use by process") && err.contains(&first.id().to_string()),
        "{err}"
    );
    assert_eq!(
        repo.calls("claude").len(),
        1,
        "the second agent never started"
    );
}

#[test]
fn parallel_runs_on_one_repository_all_land() {
    let repo = TestRepo::new();
    let outs: Vec<std::process::Output> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let repo = &repo;
                s.spawn(move || {
                    let branch = format!("task/{i}");
                    run(
                        repo,
                        &[
                            "--prompt",
                            &format!("note {i}"),
                            "--branch",
                            &branch,
                            "--json",
                        ],
                    )
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for out in &outs {
        json(out);
    }
    for i in 0..4 {
        assert_eq!(
            repo.git(&["rev-list", "--count", &format!("main..task/{i}")]),
            "1"
        );
    }
    no_worktree_left(&repo);
}

/// A run killed inside a git write (libgit2 deleting its temporary branch,
/// writing its worktree's index) leaves git's lock files: gc clears them and
/// finishes its work, where it used to fail on the branch (found by kill -9
/// at seeded points). A lock older than the run is another git command's:
/// gc names it, touches nothing, and the next gc, once it is gone, finishes.
#[test]
fn gc_clears_the_git_lock_files_a_killed_run_left_and_names_an_older_one() {
    let repo = TestRepo::new();
    let killed_run = || {
        let mut run = hanging_run_with(&repo, &["--strategy", "merge-to-head"]);
        run.kill().unwrap();
        run.wait().unwrap();
        std::fs::remove_file(repo.home.path().join("fake-claude-calls.jsonl")).unwrap();
        let branch = repo.git(&[
            "branch",
            "--list",
            "--format=%(refname:short)",
            "sanddune/run-*",
        ]);
        assert_eq!(branch.lines().count(), 1, "{branch}");
        branch
    };
    let git = repo.path().join(".git");
    let branch = killed_run();
    let name = branch.trim_start_matches("sanddune/");
    let left = [
        git.join(format!("refs/heads/{branch}.lock")),
        git.join(format!("logs/refs/heads/{branch}.lock")),
        git.join(format!("worktrees/{name}/index.lock")),
    ];
    for lock in &left {
        std::fs::write(lock, "").unwrap();
    }
    let out = repo.sanddune(&["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("removed orphaned worktree `{name}`")),
        "{}",
        stdout(&out)
    );
    assert_eq!(repo.git(&["branch", "--list", &branch]), "");
    assert!(left.iter().all(|l| !l.exists()), "{left:?}");

    // Another git command's lock, older than the run.
    let branch = killed_run();
    let theirs = git.join(format!("refs/heads/{branch}.lock"));
    let file = std::fs::File::create(&theirs).unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(600))
        .unwrap();
    let out = repo.sanddune(&["gc"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("another git command holds") && err.contains(&format!("{branch}.lock")),
        "{err}"
    );
    assert!(theirs.exists());
    assert_eq!(
        repo.git(&["branch", "--list", "--format=%(refname:short)", &branch]),
        branch
    );
    std::fs::remove_file(&theirs).unwrap();
    let out = repo.sanddune(&["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.git(&["branch", "--list", &branch]), "");
    no_worktree_left(&repo);
}

#[test]
fn gc_removes_a_crashed_runs_clean_worktree_and_keeps_a_dirty_one() {
    let repo = TestRepo::new();
    for (branch, dirty) in [
        ("crash/clean", false),
        ("crash/dirty", true),
        ("crash/creating", false),
    ] {
        let mut run = hanging_run(&repo, branch);
        // A crash: no teardown, the lock stays behind with a dead pid.
        run.kill().unwrap();
        run.wait().unwrap();
        std::fs::remove_file(repo.home.path().join("fake-claude-calls.jsonl")).unwrap();
        let wt = repo
            .path()
            .join(".sanddune/worktrees")
            .join(branch.replace('/', "-"));
        if dirty {
            std::fs::write(wt.join("work.txt"), "unsaved").unwrap();
        }
        if branch == "crash/creating" {
            // Killed while git wrote the worktree's `.git` file.
            std::fs::write(wt.join(".git"), "").unwrap();
        }
    }
    let live = hanging_run(&repo, "still/running");
    let out = repo.sanddune(&["gc"]);
    let mut live = live;
    let _ = live.kill();
    let _ = live.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(
        report.contains("removed orphaned worktree `crash-clean`"),
        "{report}"
    );
    assert!(
        report.contains("kept orphaned worktree") && report.contains("crash-dirty"),
        "{report}"
    );
    assert!(
        report.contains("removed orphaned worktree `crash-creating`"),
        "{report}"
    );
    let dir = repo.path().join(".sanddune/worktrees");
    assert!(!dir.join("crash-clean").exists());
    assert!(!dir.join("crash-creating").exists());
    assert!(!repo.path().join(".git/worktrees/crash-creating").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("crash-dirty/work.txt")).unwrap(),
        "unsaved"
    );
    assert!(!dir.join("crash-dirty.lock").exists());
    assert!(
        dir.join("still-running.lock").exists(),
        "a live run is not touched"
    );
    assert!(!report.contains("still-running"), "{report}");
    // The named branches are the user's: gc keeps them.
    assert_eq!(
        repo.git(&["branch", "--list", "crash/clean"]),
        "crash/clean"
    );
}

/// A run killed between moving its removed worktree aside and deleting it
/// (its result was out: ADR 0034) leaves the files beside the worktrees.
/// `gc` deletes those of a dead process, through no link, and leaves a
/// live process's, which is still deleting them.
#[test]
fn gc_deletes_the_files_of_a_removed_worktree_whose_run_is_gone() {
    let repo = TestRepo::new();
    let worktrees = repo.path().join(".sanddune/worktrees");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let left = worktrees.join(format!(".removed-run-1.0.{dead}"));
    let live = worktrees.join(format!(".removed-run-2.0.{}", std::process::id()));
    let outside = repo.home.path().join("keep-me");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("file"), "mine").unwrap();
    for dir in [&left, &live] {
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/main.rs"), "fn main() {}").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
    }
    let out = repo.sanddune(&["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("deleted the files of 1 removed worktree"),
        "{}",
        stdout(&out)
    );
    assert!(!left.exists());
    assert!(live.join("src/main.rs").exists(), "a live run's files stay");
    assert_eq!(
        std::fs::read_to_string(outside.join("file")).unwrap(),
        "mine"
    );
}
