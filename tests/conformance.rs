//! The conformance kit through the real binary: every built-in provider
//! passes `sanddune plugin test` (vercel against the loopback mock of its
//! API), a misbehaving one fails the checks it
//! should, and the Python and JavaScript example providers pass and do a
//! real `sanddune run`.
//!
//! The examples are built outside cargo (componentize-py, componentize-js;
//! `.ci/run` does it) into `target/examples/`, or `$SANDDUNE_EXAMPLES_DIR`.
//! Their tests are counted as ignored, with the reason, when the files are
//! absent, and fail instead when `CI` is set.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::trials::{self, skip, trial};
use common::{TestRepo, plugin_file, stderr, stdout};

/// `sanddune plugin test ARGS` in a throwaway repository.
fn plugin_test(repo: &TestRepo, args: &[&str]) -> Output {
    // Component files are approved here; the refusal has a test of its own.
    let mut all = vec!["plugin", "test", "--yes"];
    all.extend_from_slice(args);
    repo.sanddune(&all)
}

/// The report's lines for `check`, e.g. "PASS stdin-intact (204800 bytes)".
fn check_line<'a>(out: &'a str, check: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().nth(1).map(|w| w.trim_end_matches(':')) == Some(check))
        .unwrap_or_else(|| panic!("no line for check {check}:\n{out}"))
}

/// The kit passed: exit 0, no FAIL line, and each of `checks` PASSed.
fn assert_passes(out: &Output, checks: &[&str]) {
    let text = stdout(out);
    assert!(
        out.status.success(),
        "plugin test failed:\n{text}\n{}",
        stderr(out)
    );
    assert!(!text.contains("\nFAIL "), "{text}");
    for check in checks {
        let line = check_line(&text, check);
        assert!(line.starts_with("PASS "), "{line}\n{text}");
    }
}

const SANDBOX_CHECKS: &[&str] = &[
    "create",
    "exec-output-and-exit-code",
    "exec-argv-not-shell",
    "exec-env",
    "exec-streams-lines",
    "stdin-intact",
    "stdin-empty",
    "exec-timeout",
    "cwd-inside",
    "cwd-outside-refused",
    "upload-traversal-refused",
    "mkdir",
    "write-read-file",
    "stat",
    "read-dir",
    "exists",
    "remove",
    "copy-file-round-trip",
    "copy-in",
    "attach",
    "close-idempotent",
    "find",
];

const AGENT_CHECKS: &[&str] = &[
    "describe",
    "prompt-delivered",
    "empty-prompt-refused",
    "unknown-option-refused",
    "parser-robust",
    "push-lines-matches-push-line",
    "finish-without-result-is-error",
    "session-helpers-robust",
];

fn test_isolated_passes_every_sandbox_check() {
    let repo = TestRepo::new();
    let out = plugin_test(&repo, &["test-isolated"]);
    assert_passes(&out, SANDBOX_CHECKS);
    // It keeps no snapshots: that check is skipped, saying so.
    let snapshot = check_line(&stdout(&out), "snapshot-keep-and-start").to_string();
    assert!(
        snapshot.starts_with("SKIP ") && snapshot.contains("keeps no snapshots"),
        "{snapshot}"
    );
    // The built-in, loaded as a file like a third-party plugin, too.
    let file = plugin_file("sanddune-plugin-test-isolated");
    assert_passes(
        &plugin_test(&repo, &[file.to_str().unwrap()]),
        SANDBOX_CHECKS,
    );
}

/// The bubblewrap built-in with the real `bwrap` (ADR 0036): every check but
/// `copy-in`, which a bind-mount provider skips.
fn bubblewrap_passes_every_sandbox_check() {
    let found = Command::new("bwrap").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        skip("no bubblewrap here (apt-get install bubblewrap)");
    }
    let repo = TestRepo::new();
    let checks: Vec<&str> = SANDBOX_CHECKS
        .iter()
        .copied()
        .filter(|c| *c != "copy-in")
        .collect();
    assert_passes(&plugin_test(&repo, &["bubblewrap"]), &checks);
}

/// The vercel built-in against the loopback mock of the Vercel Sandbox API
/// (tests/vercel-mock), its `api-url` pointed there: every sandbox check,
/// the origin it reaches is the mock's, and a refused request is an error.
fn vercel_passes_every_sandbox_check_against_the_mock() {
    use sanddune_vercel_mock::{PROJECT, TEAM, TOKEN, VercelMock};
    let repo = TestRepo::new();
    let mock = VercelMock::start();
    let api = format!("api-url={}", mock.url());
    let credentials = [
        ("VERCEL_TOKEN", TOKEN),
        ("VERCEL_TEAM_ID", TEAM),
        ("VERCEL_PROJECT_ID", PROJECT),
    ];
    let out = repo.sanddune_with_env(
        &["plugin", "test", "vercel", "--sandbox-opt", &api],
        &credentials,
    );
    assert_passes(&out, SANDBOX_CHECKS);
    let text = stdout(&out);
    // It keeps snapshots (0.8): kept, started from, removed.
    let snapshot = check_line(&text, "snapshot-keep-and-start");
    assert!(
        snapshot.starts_with("PASS ") && snapshot.contains("kept snap_"),
        "{text}"
    );
    assert!(
        mock.snapshots().iter().all(|s| s.deleted),
        "{:?}",
        mock.snapshots()
    );
    let origins = check_line(&text, "http-origins");
    assert!(
        origins.starts_with("PASS ") && origins.contains(&format!("({})", mock.url())),
        "{origins}"
    );
    let refusal = check_line(&text, "http-refusal-survived");
    assert!(
        refusal.starts_with("PASS ") && refusal.contains("failed cleanly"),
        "{refusal}"
    );
    // It found the open sandbox by its tag, and not once it was closed.
    let find = check_line(&text, "find");
    assert!(!find.contains("finds nothing"), "{find}");
    let sandboxes = mock.sandboxes();
    assert!(!sandboxes.is_empty());
    assert!(
        sandboxes.iter().all(|s| s.deleted),
        "every sandbox the kit made is deleted: {sandboxes:?}"
    );
}

/// A real agent's stdout for the usage check: the fake `claude` prints
/// Claude Code's stream-json; the other built-ins ship sample transcripts.
fn transcript(repo: &TestRepo, agent: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sample = match agent {
        "claude-code" => {
            let mut child = Command::new(repo.bin().join("claude"))
                .args(["--print", "--output-format", "stream-json", "--verbose"])
                .current_dir(repo.path())
                .env("HOME", repo.home.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"fix the typo")
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "the fake claude failed");
            let file = repo.home.path().join("claude-transcript.jsonl");
            std::fs::write(&file, out.stdout).unwrap();
            return Some(file);
        }
        "codex" => "plugins/codex/testdata/fake-codex-sample.jsonl",
        "copilot" => "plugins/copilot/testdata/fake-copilot-run.jsonl",
        "gemini" => "plugins/gemini/testdata/real-0.61.0-commit.jsonl",
        "qwen-code" => "plugins/qwen-code/testdata/real-0.24.4-commit.jsonl",
        "cursor" => "plugins/cursor/testdata/fake-agent-run.jsonl",
        "opencode" => "plugins/opencode/src/testdata/fake-success.jsonl",
        "pi" => "plugins/pi/src/testdata/fake-success.jsonl",
        _ => return None,
    };
    Some(root.join(sample))
}

fn every_built_in_agent_provider_passes() {
    let repo = TestRepo::new();
    for agent in [
        "claude-code",
        "codex",
        "opencode",
        "pi",
        "cursor",
        "copilot",
        "gemini",
        "qwen-code",
        "demo",
    ] {
        let transcript = transcript(&repo, agent);
        let mut args = vec![agent];
        if let Some(file) = &transcript {
            args.extend(["--transcript", file.to_str().unwrap()]);
        }
        let out = plugin_test(&repo, &args);
        assert_passes(&out, AGENT_CHECKS);
        let usage = check_line(&stdout(&out), "usage-shape").to_string();
        if transcript.is_some() {
            assert!(usage.starts_with("PASS "), "{agent}: {usage}");
        } else {
            // demo reports no usage at all: nothing to check, said so.
            assert!(usage.starts_with("SKIP "), "{agent}: {usage}");
        }
    }
}

fn a_misbehaving_sandbox_provider_fails_the_checks_it_breaks() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let hostile = hostile.to_str().unwrap();

    // Runs commands in any host cwd and implements no file operation.
    let out = plugin_test(&repo, &[hostile]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    for check in ["cwd-outside-refused", "mkdir", "stat", "remove"] {
        let line = check_line(&text, check);
        assert!(line.starts_with("FAIL "), "{line}");
    }
    // It refuses attach, which the host tolerates (hooks run one by one).
    assert!(check_line(&text, "attach").starts_with("SKIP "), "{text}");
    assert!(
        check_line(&text, "cwd-outside-refused").contains("seed 001"),
        "{text}"
    );
    // A bind-mount provider is not asked for copy-in.
    assert!(check_line(&text, "copy-in").starts_with("SKIP "), "{text}");
    assert!(
        check_line(&text, "stdin-intact").starts_with("PASS "),
        "{text}"
    );
    assert!(
        stderr(&out).contains("failed 8 of 26 conformance checks"),
        "{}",
        stderr(&out)
    );

    // The same provider dropping stdin: the bug that hands an agent an
    // empty prompt.
    let out = plugin_test(&repo, &[hostile, "--sandbox-opt", "attack=drop-stdin"]);
    assert_eq!(out.status.code(), Some(1));
    let line = check_line(&stdout(&out), "stdin-intact").to_string();
    assert!(
        line.starts_with("FAIL ") && line.contains("the command read 0"),
        "{line}"
    );
}

fn a_provider_that_asks_for_http_gets_the_http_checks() {
    let repo = TestRepo::new();
    let provider = plugin_file("sanddune-test-plugin-hostile-http");
    let out = plugin_test(&repo, &[provider.to_str().unwrap()]);
    let text = stdout(&out);
    let origins = check_line(&text, "http-origins");
    assert!(
        origins.starts_with("PASS ") && origins.contains("http://127.77.0.1:8080"),
        "{text}"
    );
    let refusal = check_line(&text, "http-refusal-survived");
    assert!(refusal.starts_with("PASS "), "{text}");
    // A provider that asks for none skips them.
    let out = plugin_test(&repo, &["test-isolated"]);
    assert!(check_line(&stdout(&out), "http-origins").starts_with("SKIP "));
}

fn a_plugin_that_is_not_a_provider_is_refused_before_any_check() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-not-a-plugin");
    let out = plugin_test(&repo, &[file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a sanddune plugin"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("PASS"), "{}", stdout(&out));
}

/// A built example component; the test is skipped on a laptop that has
/// not built it.
fn example(file: &str) -> PathBuf {
    let dir = std::env::var_os("SANDDUNE_EXAMPLES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/examples"));
    let path = dir.join(file);
    if path.is_file() {
        return path;
    }
    skip(format!(
        "{} is not built: run `bash .ci/run` (or the example's build.sh) first",
        path.display()
    ))
}

fn the_python_sandbox_provider_passes_and_runs_claude_code() {
    let wasm = example("python-sandbox.wasm");
    let wasm = wasm.to_str().unwrap();
    let repo = TestRepo::new();
    assert_passes(&plugin_test(&repo, &[wasm]), SANDBOX_CHECKS);

    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        wasm,
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo in README",
        "--json",
        "--grant",
        "program=sh",
        "--grant",
        "scratch-dir",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["completionSignal"], "<promise>COMPLETE</promise>");
    assert_eq!(result["branch"], "main");
    // The commit made inside the Python provider's sandbox was synced out
    // and merged to HEAD.
    let readme = std::fs::read_to_string(repo.path().join("README.md")).unwrap();
    assert!(readme.contains("This is the readme."), "{readme}");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.calls("claude")[0]["prompt"], "fix the typo in README");
}

fn the_js_agent_provider_passes_and_runs_in_test_isolated() {
    let wasm = example("js-agent.wasm");
    let wasm = wasm.to_str().unwrap();
    let repo = TestRepo::new();
    // What its script prints, for the usage check.
    let transcript = repo.home.path().join("js-agent.jsonl");
    std::fs::write(
        &transcript,
        concat!(
            "{\"type\":\"say\",\"text\":\"Writing the prompt to JS_AGENT.md\"}\n",
            "{\"type\":\"usage\",\"input\":42,\"output\":0}\n",
            "{\"type\":\"tool\",\"name\":\"Bash\",\"input\":{\"command\":\"git commit\"}}\n",
            "{\"type\":\"usage\",\"input\":0,\"output\":12}\n",
            "{\"type\":\"done\",\"text\":\"Committed. <promise>COMPLETE</promise>\"}\n",
        ),
    )
    .unwrap();
    let out = plugin_test(&repo, &[wasm, "--transcript", transcript.to_str().unwrap()]);
    assert_passes(&out, AGENT_CHECKS);
    assert!(
        check_line(&stdout(&out), "usage-shape").contains("total [42, 0, 0, 12]"),
        "{}",
        stdout(&out)
    );

    let prompt = "Write this down.\nSecond line: \"quotes\", $(not run) and ✓";
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        wasm,
        "--prompt",
        prompt,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["completionSignal"], "<promise>COMPLETE</promise>");
    let usage = &result["iterations"][0]["usage"];
    assert_eq!(usage["inputTokens"], prompt.len());
    assert_eq!(usage["outputTokens"], 12);
    // The prompt went through the JS provider's command, stdin and the
    // sandbox byte for byte, and its commit came back to HEAD.
    let written = std::fs::read_to_string(repo.path().join("JS_AGENT.md")).unwrap();
    assert_eq!(written, prompt);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "js-agent: the prompt"
    );
}

fn a_component_file_is_tested_only_when_approved() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let out = repo.sanddune(&["plugin", "test", hostile.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("asks for program=sh"), "{err}");
    assert!(err.contains("pass --yes"), "{err}");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(test_isolated_passes_every_sandbox_check),
        trial!(bubblewrap_passes_every_sandbox_check),
        trial!(vercel_passes_every_sandbox_check_against_the_mock),
        trial!(every_built_in_agent_provider_passes),
        trial!(a_misbehaving_sandbox_provider_fails_the_checks_it_breaks),
        trial!(a_provider_that_asks_for_http_gets_the_http_checks),
        trial!(a_plugin_that_is_not_a_provider_is_refused_before_any_check),
        trial!(the_python_sandbox_provider_passes_and_runs_claude_code),
        trial!(the_js_agent_provider_passes_and_runs_in_test_isolated),
        trial!(a_component_file_is_tested_only_when_approved),
    ])
}
