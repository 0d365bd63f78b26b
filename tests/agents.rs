//! Every built-in agent provider end to end through the real binary: the
//! test-isolated sandbox provider runs a fake of the agent's CLI that prints
//! the agent's real stream shapes (docs/reference/protocols.md) and really commits.

mod common;

use common::{TestRepo, stderr, stdout};
use serde_json::Value;

/// (agent provider, the program its fake stands in for)
const AGENTS: &[(&str, &str)] = &[
    ("claude-code", "claude"),
    ("codex", "codex"),
    ("opencode", "opencode"),
    ("pi", "pi"),
    ("cursor", "agent"),
    ("copilot", "copilot"),
    ("gemini", "gemini"),
    ("qwen-code", "qwen"),
];

fn run(repo: &TestRepo, agent: &str, prompt: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        agent,
        "--prompt",
        prompt,
        "--json",
    ];
    args.extend_from_slice(extra);
    repo.sanddune(&args)
}

fn ok_json(agent: &str, out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{agent}: {}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap()
}

#[test]
fn each_agent_fixes_the_typo_and_its_commit_lands_on_head() {
    for (agent, program) in AGENTS {
        let repo = TestRepo::new();
        let out = run(
            &repo,
            agent,
            "fix the typo in README",
            &["--max-iterations", "3"],
        );
        let result = ok_json(agent, &out);
        assert_eq!(
            result["iterations"].as_array().unwrap().len(),
            1,
            "{agent}: {result}"
        );
        assert_eq!(
            result["completionSignal"], "<promise>COMPLETE</promise>",
            "{agent}"
        );
        let sha = result["commits"][0]["sha"].as_str().unwrap();
        assert_eq!(repo.git(&["rev-parse", "HEAD"]), sha, "{agent}");
        assert_eq!(
            repo.git(&["log", "-1", "--format=%s"]),
            "Fix typo in README",
            "{agent}"
        );
        assert_eq!(repo.git(&["status", "--porcelain"]), "", "{agent}");
        let calls = repo.calls(program);
        assert_eq!(calls.len(), 1, "{agent}");
        assert_eq!(
            calls[0]["prompt"], "fix the typo in README",
            "{agent}: the prompt must arrive intact"
        );
    }
}

#[test]
fn each_agent_runs_every_iteration_without_the_signal() {
    for (agent, _) in AGENTS {
        let repo = TestRepo::new();
        let out = run(
            &repo,
            agent,
            "add a note FAKE:no-signal",
            &["--max-iterations", "2"],
        );
        let result = ok_json(agent, &out);
        assert_eq!(result["iterations"].as_array().unwrap().len(), 2, "{agent}");
        assert_eq!(result["completionSignal"], Value::Null, "{agent}");
        assert_eq!(result["commits"].as_array().unwrap().len(), 2, "{agent}");
    }
}

#[test]
fn an_agent_error_fails_the_run_even_when_the_cli_exits_0() {
    for (agent, _) in AGENTS {
        let repo = TestRepo::new();
        let out = run(&repo, agent, "add a note FAKE:is-error", &[]);
        assert_eq!(out.status.code(), Some(1), "{agent}: {}", stdout(&out));
        assert!(
            stderr(&out).contains(&format!("agent `{agent}` failed")),
            "{agent}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn codex_usage_is_fresh_input_and_cache_reads_summed_over_turns() {
    let repo = TestRepo::new();
    let result = ok_json("codex", &run(&repo, "codex", "fix the typo", &[]));
    let it = &result["iterations"][0];
    assert!(
        it["sessionId"].as_str().is_some_and(|s| !s.is_empty()),
        "{result}"
    );
    let usage = &it["usage"];
    assert_eq!(usage["inputTokens"], 79281 - 60416, "{usage}");
    assert_eq!(usage["cacheReadInputTokens"], 60416);
    assert_eq!(usage["outputTokens"], 301);
    // The prompt went on stdin, which was closed: codex blocks otherwise.
    let argv = &repo.calls("codex")[0]["argv"];
    assert_eq!(argv.as_array().unwrap().last().unwrap(), "-", "{argv}");
}

#[test]
fn argv_prompt_agents_refuse_a_prompt_too_large_for_argv() {
    for agent in ["opencode", "cursor", "copilot", "gemini", "qwen-code"] {
        let repo = TestRepo::new();
        let file = repo.home.path().join("big-prompt.md");
        std::fs::write(&file, "x".repeat(200 * 1024)).unwrap();
        let file = file.to_str().unwrap();
        let out = repo.sanddune(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            agent,
            "--prompt-file",
            file,
        ]);
        assert_eq!(out.status.code(), Some(2), "{agent}: {}", stderr(&out));
        assert_eq!(
            repo.git(&["worktree", "list"]).lines().count(),
            1,
            "{agent}: refused before any worktree"
        );
    }
}

#[test]
fn gemini_gets_api_key_auth_yolo_and_its_usage_with_cache_reads() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        "gemini",
        "fix the typo",
        &["--model", "gemini-2.5-pro", "--agent-opt", "max-attempts=2"],
    );
    let result = ok_json("gemini", &out);
    let it = &result["iterations"][0];
    assert!(
        it["sessionId"].as_str().is_some_and(|s| !s.is_empty()),
        "{result}"
    );
    let usage = &it["usage"];
    assert_eq!(usage["inputTokens"], 8200 - 4096, "{usage}");
    assert_eq!(usage["cacheReadInputTokens"], 4096, "{usage}");
    assert_eq!(usage["outputTokens"], 310, "{usage}");
    let call = &repo.calls("gemini")[0];
    let argv: Vec<&str> = call["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for flag in ["--skip-trust", "--yolo", "--prompt=fix the typo"] {
        assert!(argv.contains(&flag), "{flag}: {argv:?}");
    }
    assert_eq!(
        call["settings"]["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    assert_eq!(call["settings"]["general"]["maxAttempts"], 2);
}

#[test]
fn gemini_refuses_a_resume_before_anything_is_created() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        "gemini",
        "fix the typo",
        &["--resume", "c5247799-3071-42b5-b01f-40e546a3efe4"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("agent provider `gemini` keeps no session files"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("gemini").is_empty(), "gemini never started");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn qwen_code_gets_openai_auth_yolo_memory_off_and_its_usage_summed_over_calls() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        "qwen-code",
        "fix the typo",
        &[
            "--model",
            "qwen3-coder-plus",
            "--agent-opt",
            "max-retries=0",
        ],
    );
    let result = ok_json("qwen-code", &out);
    let it = &result["iterations"][0];
    // Two calls: fresh input is the prompt tokens less the cached ones.
    let usage = &it["usage"];
    assert_eq!(
        usage["inputTokens"],
        (8000 - 4000) + (8300 - 8000),
        "{usage}"
    );
    assert_eq!(usage["cacheReadInputTokens"], 4000 + 8000, "{usage}");
    assert_eq!(usage["outputTokens"], 200 + 110, "{usage}");
    let call = &repo.calls("qwen")[0];
    let argv: Vec<&str> = call["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for flag in [
        "openai",
        "--yolo",
        "--prompt=fix the typo",
        "qwen3-coder-plus",
    ] {
        assert!(argv.contains(&flag), "{flag}: {argv:?}");
    }
    assert_eq!(call["settings"]["memory"]["enableManagedAutoMemory"], false);
    assert_eq!(
        call["settings"]["model"]["generationConfig"]["maxRetries"],
        0
    );
}

#[test]
fn codex_effort_is_validated_and_mapped() {
    let repo = TestRepo::new();
    let out = run(
        &repo,
        "codex",
        "fix the typo",
        &["--agent-opt", "effort=max"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("low, medium, high, xhigh"),
        "{}",
        stderr(&out)
    );
    let out = run(
        &repo,
        "codex",
        "fix the typo",
        &["--agent-opt", "effort=xhigh"],
    );
    ok_json("codex", &out);
    let argv = repo.calls("codex")[0]["argv"].to_string();
    assert!(argv.contains("model_reasoning_effort"), "{argv}");
}

/// Agents with resumable session files: (agent provider, program, the
/// argument that precedes the session id when resuming).
const RESUMABLE: &[(&str, &str, &str)] = &[
    ("claude-code", "claude", "--resume"),
    ("codex", "codex", "resume"),
    ("pi", "pi", "--session"),
    ("copilot", "copilot", "--resume"),
    ("opencode", "opencode", "--session"),
    ("qwen-code", "qwen", "--resume"),
];

#[test]
fn each_resumable_agent_round_trips_its_session_through_the_host() {
    for (agent, program, flag) in RESUMABLE {
        let repo = TestRepo::new();
        let first = ok_json(agent, &run(&repo, agent, "fix the typo in README", &[]));
        let it = &first["iterations"][0];
        let id = it["sessionId"].as_str().unwrap().to_string();
        let path = it["sessionFilePath"]
            .as_str()
            .unwrap_or_else(|| panic!("{agent}: no sessionFilePath in {first}"));
        assert!(
            // opencode's is its export: one JSON document.
            path.starts_with(repo.home.path().to_str().unwrap())
                && (path.ends_with(".jsonl") || path.ends_with(".json")),
            "{agent}: captured under the user's HOME: {path}"
        );
        // Every working directory in it is the host repository now.
        let root = repo.path().canonicalize().unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains(root.to_str().unwrap()), "{agent}: {text}");
        assert!(
            !text.contains("/sbx-"),
            "{agent}: a sandbox path is left: {text}"
        );

        // Resumed into a fresh sandbox: the agent finds the session there.
        let out = run(&repo, agent, "add a note", &["--resume", &id]);
        ok_json(agent, &out);
        let calls = repo.calls(program);
        let argv: Vec<&str> = calls.last().unwrap()["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // `--resume ID` or `--resume=ID`.
        let given = argv
            .iter()
            .position(|a| a == flag)
            .map(|at| argv[at + 1].to_string())
            .or_else(|| {
                argv.iter()
                    .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(String::from))
            })
            .unwrap_or_else(|| panic!("{agent}: no {flag} in {argv:?}"));
        assert!(
            given.starts_with(&id[..8]) || given == id,
            "{agent}: {argv:?}"
        );
    }
}
