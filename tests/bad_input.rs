//! Bad input: each is refused with one actionable line on stderr, a non-zero
//! exit code (2), and nothing changed in the repository.

mod common;

use common::{TestRepo, plugin_file, stderr};

/// Run, expect exit 2 with one line containing every `needles`, and no trace
/// left in the repository.
fn refused(repo: &TestRepo, args: &[&str], needles: &[&str]) {
    let head = repo.git(&["rev-parse", "HEAD"]);
    let out = repo.sanddune(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("error: "), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.git(&["branch", "--list", "sanddune/*"]), "");
    assert!(
        !repo.path().join(".sanddune/worktrees").exists()
            || std::fs::read_dir(repo.path().join(".sanddune/worktrees"))
                .unwrap()
                .next()
                .is_none()
    );
    assert!(
        repo.calls("claude").is_empty(),
        "the agent must not have run"
    );
}

fn run_with_sandbox(sandbox: &str) -> Vec<String> {
    [
        "run",
        "--sandbox",
        sandbox,
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
    ]
    .map(String::from)
    .to_vec()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_file_that_is_not_wasm() {
    let repo = TestRepo::new();
    let file = repo.home.path().join("notes.wasm");
    std::fs::write(&file, "hello").unwrap();
    refused(
        &repo,
        &args(&run_with_sandbox(file.to_str().unwrap())),
        &["not a WebAssembly component", "notes.wasm"],
    );
}

#[test]
fn a_core_module_is_not_a_component() {
    let repo = TestRepo::new();
    let file = repo.home.path().join("core.wasm");
    std::fs::write(&file, b"\0asm\x01\0\0\0").unwrap();
    refused(
        &repo,
        &args(&run_with_sandbox(file.to_str().unwrap())),
        &["core WebAssembly module", "wasm32-wasip2"],
    );
}

#[test]
fn a_component_of_another_world() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-not-a-plugin");
    refused(
        &repo,
        &args(&run_with_sandbox(file.to_str().unwrap())),
        &["not a sanddune plugin", "example:greeter/greet"],
    );
}

#[test]
fn an_agent_provider_where_a_sandbox_provider_belongs() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-plugin-claude-code");
    refused(
        &repo,
        &args(&run_with_sandbox(file.to_str().unwrap())),
        &["is an agent provider, not a sandbox provider"],
    );
}

#[test]
fn a_component_built_against_an_incompatible_api_version() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-future-api");
    let a = [
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        file.to_str().unwrap(),
        "--prompt",
        "x",
    ];
    refused(
        &repo,
        &a,
        &[
            "built against sanddune:plugin@0.9.0",
            "this sanddune speaks sanddune:plugin 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8",
            "rebuild the plugin against sanddune:plugin@0.8.0",
        ],
    );
}

/// A component that imports an interface its world does not declare is
/// refused at load, naming the import, before anything is created.
#[test]
fn a_component_importing_an_undeclared_interface() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-undeclared-import");
    let a = [
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        file.to_str().unwrap(),
        "--prompt",
        "x",
        "--yes",
    ];
    refused(
        &repo,
        &a,
        &[
            "does not fit the sanddune agent provider world of sanddune:plugin@0.8",
            "test:undeclared/backdoor",
        ],
    );
}

#[test]
fn a_missing_plugin_name() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &args(&run_with_sandbox("nosuch")),
        &["no plugin named `nosuch`", "test-isolated"],
    );
}

#[test]
fn a_missing_plugin_file() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &args(&run_with_sandbox("./missing.wasm")),
        &["cannot read plugin file ./missing.wasm"],
    );
}

#[test]
fn an_empty_prompt() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "  \n",
        ],
        &["prompt is empty"],
    );
}

#[test]
fn an_empty_prompt_file() {
    let repo = TestRepo::new();
    let file = repo.home.path().join("prompt.md");
    std::fs::write(&file, "\n").unwrap();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt-file",
            file.to_str().unwrap(),
        ],
        &["prompt is empty"],
    );
}

#[test]
fn an_invalid_agent_option_names_the_allowed_values() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--agent-opt",
            "effort=huge",
        ],
        &["huge", "low, medium, high, xhigh, max"],
    );
}

#[test]
fn head_on_an_isolated_provider() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--strategy",
            "head",
        ],
        &["head branch strategy", "`test-isolated` is isolated"],
    );
}

#[test]
fn not_a_git_repository() {
    let repo = TestRepo::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
        "--cwd",
        elsewhere.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not inside a git repository"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn zero_iterations() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--max-iterations",
            "0",
        ],
        &["at least 1"],
    );
}

fn template(repo: &TestRepo, text: &str) -> String {
    let file = repo.home.path().join("template.md");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

#[test]
fn a_template_placeholder_without_a_value() {
    let repo = TestRepo::new();
    let file = template(&repo, "Fix issue {{ISSUE_NUBMER}}");
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt-file",
            &file,
            "--prompt-arg",
            "ISSUE_NUMBER=1",
        ],
        &["{{ISSUE_NUBMER}}", "--prompt-arg ISSUE_NUBMER="],
    );
}

#[test]
fn a_prompt_argument_with_an_inline_prompt() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "x {{A}}",
            "--prompt-arg",
            "A=1",
        ],
        &["prompt arguments need a prompt template"],
    );
}

#[test]
fn overriding_a_built_in_prompt_argument() {
    let repo = TestRepo::new();
    let file = template(&repo, "diff against {{TARGET_BRANCH}}");
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt-file",
            &file,
            "--prompt-arg",
            "TARGET_BRANCH=dev",
        ],
        &["TARGET_BRANCH is a built-in prompt argument"],
    );
}

#[test]
fn a_component_file_that_asks_for_more_than_granted_is_refused_naming_it() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-v0-1-sandbox");
    let mut a = run_with_sandbox(file.to_str().unwrap());
    // Without approval: what it asks for and the flags that approve it.
    refused(
        &repo,
        &args(&a),
        &[
            "asks for program=sh, worktree=read-write",
            "pass --yes",
            "--grant ITEM",
        ],
    );
    // A grant of something it does not ask for.
    a.extend(["--grant".into(), "program=git".into()]);
    refused(&repo, &args(&a), &["does not ask for program=git"]);
    assert!(!repo.path().join(".sanddune").exists(), "no log file");
}

#[test]
fn an_unknown_grant_item_is_refused_naming_the_syntax() {
    let repo = TestRepo::new();
    let mut a = run_with_sandbox("test-isolated");
    a.extend(["--grant".into(), "gpu=all".into()]);
    refused(
        &repo,
        &args(&a),
        &["unknown capability `gpu`", "http=https://HOST[:PORT]"],
    );
}

/// A provider whose `describe` carries terminal escapes (they would erase
/// the lines above its description in `plugin inspect` or an approval
/// prompt) is refused at load, naming the field, before anything exists.
#[test]
fn a_provider_whose_describe_lies_to_the_terminal() {
    let repo = TestRepo::new();
    let file = plugin_file("sanddune-test-plugin-liar");
    let file = file.to_str().unwrap();
    let expected = [
        "is refused: its description holds the control character '\\u{1b}'",
        "could rewrite the terminal",
    ];
    refused(
        &repo,
        &[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            file,
            "--prompt",
            "x",
            "--yes",
        ],
        &expected,
    );
    refused(&repo, &["plugin", "inspect", file], &expected);
}
