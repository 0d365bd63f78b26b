//! End to end through the real binary and the real components: the
//! test-isolated sandbox provider, the claude-code agent provider, and a
//! fake `claude` that prints Claude Code's stream-json and really commits.

mod common;

use common::{TestRepo, plugin_file, stderr, stdout};
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "sanddune failed: {}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(out)))
}

fn assert_clean_host(repo: &TestRepo) {
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "host tree must be clean"
    );
    assert_eq!(
        repo.git(&["branch", "--list", "sanddune/*"]),
        "",
        "temp branch must be gone"
    );
    assert_eq!(
        repo.git(&["worktree", "list"]).lines().count(),
        1,
        "no worktree may be left"
    );
}

#[test]
fn claude_code_in_test_isolated_merges_the_commit_to_head() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo in README",
        "--max-iterations",
        "3",
        "--json",
        "--timings",
    ]);
    let result = json(&out);

    // Every phase of the run, in order, timed; `--timings` printed them.
    let phases: Vec<&str> = result["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(p["ms"].as_f64().unwrap() >= 0.0, "{p}");
            p["phase"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        phases,
        [
            "process start",
            "plugin load",
            "worktree",
            "sandbox create",
            "sync in",
            "hooks",
            "status before",
            "iteration 1 exec",
            "iteration 1 sync out",
            "iteration 1 session capture",
            "status after",
            // The sandbox's close comes after the result (ADR 0034).
            "merge",
            "worktree release"
        ]
    );
    let table = stderr(&out);
    assert!(
        table.contains("iteration 1 exec") && table.lines().any(|l| l.starts_with("total")),
        "{table}"
    );

    // Stopped after one iteration: the completion signal fired.
    let iterations = result["iterations"].as_array().unwrap();
    assert_eq!(iterations.len(), 1, "{result}");
    assert_eq!(result["completionSignal"], "<promise>COMPLETE</promise>");
    let session = iterations[0]["sessionId"].as_str().unwrap();
    assert_eq!(session.len(), 36, "a uuid session id: {session}");
    let usage = &iterations[0]["usage"];
    assert_eq!(usage["inputTokens"], 18);
    assert_eq!(usage["cacheCreationInputTokens"], 14760);
    assert_eq!(usage["cacheReadInputTokens"], 169817);
    assert_eq!(usage["outputTokens"], 2577);
    assert!(
        result["stdout"]
            .as_str()
            .unwrap()
            .contains("Fixed the typo"),
        "{result}"
    );

    // The agent's commit is on HEAD of the host repository.
    let commits = result["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1);
    let sha = commits[0]["sha"].as_str().unwrap();
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), before);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Fix typo in README"
    );
    assert_eq!(result["branch"], "main");
    let readme = std::fs::read_to_string(repo.path().join("README.md")).unwrap();
    assert!(readme.contains("This is the readme."), "{readme}");
    assert_clean_host(&repo);

    // The prompt reached the agent on stdin, intact, with the print flags.
    let calls = repo.calls("claude");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["prompt"], "fix the typo in README");
    let argv: Vec<&str> = calls[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for flag in ["--print", "--verbose", "--dangerously-skip-permissions"] {
        assert!(argv.contains(&flag), "missing {flag}: {argv:?}");
    }
    // No positional prompt: the real CLI would put it before stdin's.
    assert!(!argv.contains(&"-"), "{argv:?}");
    // It ran in the sandbox's copy, not in the host repository.
    let cwd = calls[0]["cwd"].as_str().unwrap();
    assert!(
        !cwd.starts_with(repo.path().to_str().unwrap()),
        "ran in the host repo: {cwd}"
    );
}

#[test]
fn without_the_signal_every_iteration_runs_and_commits() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note FAKE:no-signal",
        "--max-iterations",
        "2",
        "--json",
    ]);
    let result = json(&out);
    assert_eq!(result["iterations"].as_array().unwrap().len(), 2);
    assert_eq!(result["completionSignal"], Value::Null);
    let commits = result["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2);
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"]),
        commits[1]["sha"].as_str().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("NOTES.md"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    assert_clean_host(&repo);
}

#[test]
fn a_custom_completion_signal_is_reported() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note",
        "--completion-signal",
        "NEVER",
        "--completion-signal",
        "Added a note",
        "--max-iterations",
        "3",
        "--json",
    ]);
    let result = json(&out);
    assert_eq!(result["completionSignal"], "Added a note");
    assert_eq!(result["iterations"].as_array().unwrap().len(), 1);
}

#[test]
fn the_branch_strategy_keeps_a_named_branch_and_leaves_head_alone() {
    let repo = TestRepo::new();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--branch",
        "agent/typo",
        "--json",
    ]);
    let result = json(&out);
    assert_eq!(result["branch"], "agent/typo");
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(repo.git(&["rev-parse", "agent/typo"]), sha);
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head, "HEAD must not move");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn an_agent_reporting_is_error_fails_the_run_even_when_it_exits_0() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "note FAKE:is-error",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("429 rate limit"), "{err}");
    // The failed run's commit is kept on its branch, never merged.
    let branches = repo.git(&["branch", "--list", "sanddune/*"]);
    assert!(!branches.is_empty(), "the failed run's branch must be kept");
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

#[test]
fn a_provider_that_drops_stdin_gives_the_agent_an_empty_prompt_and_the_run_fails() {
    let repo = TestRepo::new();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        hostile.to_str().unwrap(),
        "--sandbox-opt",
        "attack=drop-stdin",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--json",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "must fail: {}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("Input must be provided"), "{err}");
    assert_eq!(repo.calls("claude")[0]["prompt"], "");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn a_bind_mount_provider_from_a_file_defaults_to_head() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        hostile.to_str().unwrap(),
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--json",
        "--grant",
        "program=sh",
    ]);
    let result = json(&out);
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(result["branch"], "main");
    assert_eq!(
        repo.calls("claude")[0]["cwd"],
        repo.path().canonicalize().unwrap().to_str().unwrap()
    );
}

#[test]
fn an_agent_provider_loads_from_a_file_too() {
    let repo = TestRepo::new();
    let agent = plugin_file("sanddune-plugin-claude-code");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        agent.to_str().unwrap(),
        "--prompt",
        "fix the typo",
        "--json",
    ]);
    assert_eq!(json(&out)["commits"].as_array().unwrap().len(), 1);
}

#[test]
fn the_terminal_log_streams_agent_events_and_the_summary_follows() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--log",
        "terminal",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[1] Let me look at the repository."),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("[1] > Bash"), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(summary.contains("1 commit on main"), "{summary}");
    assert!(summary.contains("Fix typo in README"), "{summary}");
}

#[test]
fn the_demo_runs_end_to_end_on_embedded_defaults() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&["demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("completion signal: <promise>COMPLETE</promise>"),
        "{text}"
    );
    assert!(text.contains("1 commit on main"), "{text}");
    assert!(text.contains("- Say hello in DEMO.md"), "{text}");
}

#[test]
fn plugin_inspect_shows_requests_and_imports() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&["plugin", "inspect", "test-isolated"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("sandbox provider `test-isolated`"), "{text}");
    assert!(
        text.contains("isolated (default branch strategy: merge-to-head)"),
        "{text}"
    );
    assert!(text.contains("programs:   sh"), "{text}");
    assert!(text.contains("sanddune:plugin/process@0.8.0"), "{text}");

    let out = repo.sanddune(&["plugin", "inspect", "claude-code"]);
    let text = stdout(&out);
    assert!(text.contains("agent provider `claude-code`"), "{text}");
    assert!(
        text.contains("effort [low|medium|high|xhigh|max]"),
        "{text}"
    );
    assert!(
        text.contains("ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"),
        "{text}"
    );
    assert!(
        !text.contains("sanddune:plugin/process"),
        "an agent provider imports no process capability: {text}"
    );
}

#[test]
fn env_layers_reach_the_agent_and_undeclared_keys_do_not() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "SANDDUNE_TEST_DOTENV=from-file\nSANDDUNE_TEST_OVERRIDDEN=file\n",
    )
    .unwrap();
    let out = repo.sanddune_with_env(
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "fix the typo",
            "--agent-env",
            "SANDDUNE_TEST_AGENT=agent",
            "--env",
            "SANDDUNE_TEST_OVERRIDDEN=call-site",
            "--json",
        ],
        &[("SANDDUNE_TEST_UNDECLARED", "must-not-leak")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let env = &repo.calls("claude")[0]["env"];
    assert_eq!(env["SANDDUNE_TEST_DOTENV"], "from-file");
    assert_eq!(env["SANDDUNE_TEST_AGENT"], "agent");
    assert_eq!(env["SANDDUNE_TEST_OVERRIDDEN"], "call-site");
    assert_eq!(env.get("SANDDUNE_TEST_UNDECLARED"), None, "{env}");
    assert!(
        !stdout(&out).contains("from-file") && !stderr(&out).contains("from-file"),
        "env values stay out of the output"
    );
}

#[test]
fn secrets_by_reference_reach_the_agent_and_are_masked_in_everything_sanddune_writes() {
    let repo = TestRepo::new();
    let vault = tempfile::tempdir().unwrap();
    let file = vault.path().join("token");
    std::fs::write(&file, "file-secret-4242\n").unwrap();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        format!(
            "SANDDUNE_TEST_FROM_FILE=file:{}\nSANDDUNE_TEST_FROM_CMD=cmd:printf 'cmd-secret-%s' 77\n\
             SANDDUNE_TEST_FROM_ENV=env:OUTER_SECRET\nSANDDUNE_TEST_LITERAL=literal:file:test.db\n",
            file.display()
        ),
    )
    .unwrap();
    let out = repo.sanddune_with_env(
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "note\nFAKE:say-env:SANDDUNE_TEST_FROM_FILE\nFAKE:say-env:SANDDUNE_TEST_FROM_CMD\nFAKE:say-env:SANDDUNE_TEST_FROM_ENV",
            "--json",
            // The references reach beyond the repository: approved here.
            "--trust",
        ],
        &[("OUTER_SECRET", "env-secret-9999")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The agent got the values.
    let env = &repo.calls("claude")[0]["env"];
    assert_eq!(env["SANDDUNE_TEST_FROM_FILE"], "file-secret-4242");
    assert_eq!(env["SANDDUNE_TEST_FROM_CMD"], "cmd-secret-77");
    assert_eq!(env["SANDDUNE_TEST_FROM_ENV"], "env-secret-9999");
    assert_eq!(env["SANDDUNE_TEST_LITERAL"], "file:test.db");
    // What it printed of them is masked in the result, the log and the
    // captured session.
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    let session =
        std::fs::read_to_string(result["iterations"][0]["sessionFilePath"].as_str().unwrap())
            .unwrap();
    let said = result["stdout"].as_str().unwrap();
    assert!(said.contains("Added a note. *** *** ***"), "{said}");
    for (what, text) in [
        ("result", stdout(&out)),
        ("stderr", stderr(&out)),
        ("log", log),
        ("session", session.clone()),
    ] {
        for secret in ["file-secret-4242", "cmd-secret-77", "env-secret-9999"] {
            assert!(!text.contains(secret), "{secret} in the {what}:\n{text}");
        }
    }
    assert!(session.contains("***"), "{session}");
}

#[test]
fn a_secret_reference_that_cannot_resolve_is_refused_before_anything_is_created() {
    let repo = TestRepo::new();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "ANTHROPIC_API_KEY=file:~/.config/nowhere/key\n",
    )
    .unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--trust",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("ANTHROPIC_API_KEY in")
            && err.contains("`file:~/.config/nowhere/key` cannot be read"),
        "{err}"
    );
    assert!(err.contains("literal:file:"), "{err}");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert!(!repo.path().join(".sanddune/logs").exists());
}

#[test]
fn the_agents_optional_env_passes_from_the_shell_without_env_flags() {
    // A user behind a gateway of their own: ANTHROPIC_BASE_URL is set in the
    // shell only. (sanddune's credential gateway would stand in for it.)
    let repo = TestRepo::new();
    let out = repo.sanddune_with_env(
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "fix the typo",
            "--no-gateway",
        ],
        &[
            ("ANTHROPIC_BASE_URL", "https://gateway.example.invalid"),
            ("SANDDUNE_TEST_UNDECLARED", "must-not-leak"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let env = &repo.calls("claude")[0]["env"];
    assert_eq!(env["ANTHROPIC_BASE_URL"], "https://gateway.example.invalid");
    assert_eq!(env.get("ANTHROPIC_MODEL"), None, "unset stays unset: {env}");
    assert_eq!(env.get("SANDDUNE_TEST_UNDECLARED"), None, "{env}");
    // plugin inspect lists what passes.
    let inspect = stdout(&repo.sanddune(&["plugin", "inspect", "claude-code"]));
    assert!(
        inspect.contains("optional env: ANTHROPIC_BASE_URL"),
        "{inspect}"
    );
    // And which hosts an egress policy lets through for it.
    assert!(
        inspect.contains("egress hosts: api.anthropic.com, the host of each http(s) URL"),
        "{inspect}"
    );
}

#[test]
fn overlapping_provider_env_is_refused_before_anything_happens() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--agent-env",
        "TOKEN=a",
        "--sandbox-env",
        "TOKEN=b",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`TOKEN` is set by both"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty());
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn a_prompt_template_gets_arguments_built_ins_and_shell_expressions_expanded_in_the_sandbox() {
    let repo = TestRepo::new();
    let file = repo.home.path().join("task.md");
    std::fs::write(
        &file,
        "Fix the typo for issue {{ISSUE}}.\nTarget: {{TARGET_BRANCH}}\nSource: {{SOURCE_BRANCH}}\nLast commit: !`git log -1 --format=%s`\nTitle: {{TITLE}}\n",
    )
    .unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt-file",
        file.to_str().unwrap(),
        "--prompt-arg",
        "ISSUE=42",
        "--prompt-arg",
        "TITLE=!`touch /tmp/sanddune-pwned`",
        "--prompt-arg",
        "UNUSED=1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("prompt argument `UNUSED` is not used"),
        "{}",
        stderr(&out)
    );
    let prompt = repo.calls("claude")[0]["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<&str> = prompt.lines().collect();
    assert_eq!(lines[0], "Fix the typo for issue 42.");
    assert_eq!(lines[1], "Target: main");
    assert!(lines[2].starts_with("Source: sanddune/run-"), "{prompt}");
    assert_eq!(
        lines[3], "Last commit: initial",
        "the shell expression ran in the sandbox's copy"
    );
    assert_eq!(
        lines[4], "Title: !`touch /tmp/sanddune-pwned`",
        "argument values stay inert"
    );
}

#[test]
fn a_failing_shell_expression_fails_the_run_before_the_agent_starts() {
    let repo = TestRepo::new();
    let file = repo.home.path().join("task.md");
    std::fs::write(&file, "Context: !`echo broken >&2; exit 3`\nfix the typo\n").unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("exited with code 3") && err.contains("broken"),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty(), "the agent must not start");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert_eq!(
        repo.git(&["branch", "--list", "sanddune/*"]),
        "",
        "a branch without commits is not kept"
    );
}

#[test]
fn a_silent_agent_is_stopped_by_the_idle_timeout() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "FAKE:hang",
        "--idle-timeout",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("made no progress for 1 s") && err.contains("idle timeout"),
        "{err}"
    );
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

/// A git command of the user's holds the index (a `git commit` waiting on
/// its editor) when the run merges: the run fails with exit 1 naming the
/// lock, the user's tree is not touched, and the agent's commit is kept on
/// the run's branch for a later merge.
#[test]
fn merge_to_head_with_the_index_locked_keeps_the_commit_and_touches_nothing() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let lock = repo.path().join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo in README",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("index.lock") && err.contains("nothing changed"),
        "{err}"
    );
    assert!(lock.exists(), "the user's lock is theirs");
    std::fs::remove_file(&lock).unwrap();

    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    let kept = repo.git(&[
        "branch",
        "--list",
        "--format=%(refname:short)",
        "sanddune/*",
    ]);
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert!(
        err.contains(&format!("`{kept}`")),
        "names the branch: {err}"
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", &kept]),
        "Fix typo in README"
    );
}
