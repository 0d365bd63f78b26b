//! The agent's commits and the user's git identity, through the real
//! binary: the fake `claude` commits with a plain `git commit` in a sandbox
//! whose HOME has no git config, so only what sanddune hands in applies.

mod common;

use common::{TestRepo, USER_EMAIL, USER_NAME, plugin_file, stderr, stdout};
use serde_json::Value;

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "sanddune failed: {}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(out)))
}

fn run(repo: &TestRepo, sandbox: &str, prompt: &str) -> std::process::Output {
    repo.sanddune(&[
        "run",
        "--sandbox",
        sandbox,
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--json",
        // Approves the hostile component file some tests use.
        "--yes",
    ])
}

/// `%an <%ae>|%cn <%ce>` of a commit: its author and committer.
fn people(repo: &TestRepo, rev: &str) -> String {
    repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>", rev])
}

fn user() -> String {
    format!("{USER_NAME} <{USER_EMAIL}>")
}

fn write_config(repo: &TestRepo, toml: &str) {
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(repo.path().join(".sanddune/config.toml"), toml).unwrap();
}

#[test]
fn a_plain_git_commit_in_an_isolated_sandbox_is_the_users() {
    let repo = TestRepo::new();
    let result = json(&run(&repo, "test-isolated", "fix the typo"));
    let sha = result["commits"][0]["sha"].as_str().unwrap().to_string();
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(people(&repo, &sha), format!("{0}|{0}", user()));
}

#[test]
fn a_plain_git_commit_in_a_bind_mount_sandbox_is_the_users() {
    let repo = TestRepo::new();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let result = json(&run(&repo, hostile.to_str().unwrap(), "fix the typo"));
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(people(&repo, sha), format!("{0}|{0}", user()));
}

#[test]
fn a_repository_without_an_identity_is_refused_before_the_sandbox_starts() {
    for (unset, named, not_named) in [
        (
            &["user.name", "user.email"][..],
            "no user.name and no user.email",
            "",
        ),
        (&["user.email"][..], "no user.email for", "no user.name"),
        (&["user.name"][..], "no user.name for", "no user.email"),
    ] {
        let repo = TestRepo::new();
        for key in unset {
            repo.git(&["config", "--unset", key]);
        }
        // Nowhere: not the repository, no global or system config (the
        // tests' environment), an empty HOME, no GIT_* identity env.
        let empty_home = tempfile::tempdir().unwrap();
        let out = run_with_env(
            &repo,
            "test-isolated",
            &[("HOME", empty_home.path().to_str().unwrap())],
            &[
                "GIT_AUTHOR_NAME",
                "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME",
                "GIT_COMMITTER_EMAIL",
                "EMAIL",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(named), "{err}");
        assert!(err.contains("GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL"), "{err}");
        assert!(
            !repo.path().join(".sanddune").exists(),
            "a run log was made"
        );
        assert!(not_named.is_empty() || !err.contains(not_named), "{err}");
        assert!(err.contains("git config --global user.name"), "{err}");
        // Nothing happened: no agent, no worktree, no branch, no commit.
        assert!(repo.calls("claude").is_empty());
        assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
        assert_eq!(repo.git(&["branch", "--list", "sanddune/*"]), "");
        assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]), "1");
    }
}

/// `run` with `env` over the test's environment, without `unset`.
fn run_with_env(
    repo: &TestRepo,
    sandbox: &str,
    env: &[(&str, &str)],
    unset: &[&str],
) -> std::process::Output {
    let mut cmd = repo.command(&[
        "run",
        "--sandbox",
        sandbox,
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--json",
        "--yes",
    ]);
    for key in unset {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

/// A repository whose own config has no identity.
fn repo_without_identity() -> TestRepo {
    let repo = TestRepo::new();
    repo.git(&["config", "--unset", "user.name"]);
    repo.git(&["config", "--unset", "user.email"]);
    repo
}

const ENV_IDENTITY: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "Env Author"),
    ("GIT_AUTHOR_EMAIL", "author@ci.invalid"),
    ("GIT_COMMITTER_NAME", "Env Committer"),
    ("GIT_COMMITTER_EMAIL", "committer@ci.invalid"),
];

#[test]
fn an_identity_from_the_env_only_is_the_agents_author_and_committer() {
    // As in CI: no config anywhere (an empty HOME, no system config), only
    // GIT_AUTHOR_* and GIT_COMMITTER_* in the environment.
    let empty_home = tempfile::tempdir().unwrap();
    for sandbox in [
        "test-isolated".to_string(),
        plugin_file("sanddune-test-plugin-hostile")
            .display()
            .to_string(),
    ] {
        let repo = repo_without_identity();
        let mut env = ENV_IDENTITY.to_vec();
        env.push(("HOME", empty_home.path().to_str().unwrap()));
        let result = json(&run_with_env(&repo, &sandbox, &env, &[]));
        let sha = result["commits"][0]["sha"].as_str().unwrap().to_string();
        assert_eq!(
            people(&repo, &sha),
            "Env Author <author@ci.invalid>|Env Committer <committer@ci.invalid>",
            "{sandbox}"
        );
    }
}

#[test]
fn an_identity_from_the_system_or_global_config_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gitconfig");
    std::fs::write(
        &file,
        "[user]\n\tname = Config User\n\temail = config.user@sanddune.invalid\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    for (key, unset) in [
        ("GIT_CONFIG_SYSTEM", &["GIT_CONFIG_NOSYSTEM"][..]),
        ("GIT_CONFIG_GLOBAL", &[][..]),
    ] {
        let repo = repo_without_identity();
        let result = json(&run_with_env(&repo, "test-isolated", &[(key, file)], unset));
        let sha = result["commits"][0]["sha"].as_str().unwrap().to_string();
        assert_eq!(
            people(&repo, &sha),
            "Config User <config.user@sanddune.invalid>|Config User <config.user@sanddune.invalid>",
            "{key}"
        );
    }
}

#[test]
fn an_identity_the_env_layers_give_the_sandbox_is_accepted() {
    // The host has none; .sanddune/.env gives the sandbox a whole one.
    let repo = repo_without_identity();
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    let dotenv: String = ENV_IDENTITY
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    std::fs::write(repo.path().join(".sanddune/.env"), dotenv).unwrap();
    let result = json(&run(&repo, "test-isolated", "fix the typo"));
    let sha = result["commits"][0]["sha"].as_str().unwrap().to_string();
    assert_eq!(
        people(&repo, &sha),
        "Env Author <author@ci.invalid>|Env Committer <committer@ci.invalid>"
    );
}

#[test]
fn an_author_without_a_committer_is_refused_naming_the_committer() {
    let repo = repo_without_identity();
    let out = run_with_env(&repo, "test-isolated", &ENV_IDENTITY[..2], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no committer name (GIT_COMMITTER_NAME")
            && err.contains("no committer email (GIT_COMMITTER_EMAIL"),
        "{err}"
    );
    assert!(!err.contains("author name"), "{err}");
    assert!(!repo.path().join(".sanddune").exists());
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn an_interactive_session_without_an_identity_is_refused_too() {
    let repo = TestRepo::new();
    repo.git(&["config", "--unset", "user.email"]);
    let out = repo.sanddune(&[
        "interactive",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no user.email"), "{}", stderr(&out));
    assert!(repo.calls("claude").is_empty());
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[test]
fn the_project_config_sets_an_agent_author_and_a_co_author_trailer() {
    let repo = TestRepo::new();
    write_config(
        &repo,
        "[git]\nagentName = \"Fake Agent\"\nagentEmail = \"agent@sanddune.invalid\"\ncoAuthoredBy = \"user\"\n",
    );
    let result = json(&run(&repo, "test-isolated", "fix the typo"));
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    // The agent wrote it; the user committed it and is credited.
    assert_eq!(
        people(&repo, sha),
        format!("Fake Agent <agent@sanddune.invalid>|{}", user())
    );
    let message = repo.git(&["log", "-1", "--format=%B", sha]);
    assert_eq!(
        message,
        format!("Fix typo in README\n\nCo-authored-by: {}", user())
    );
}

#[test]
fn the_trailer_hook_runs_the_repositorys_own_hooks_too() {
    let repo = TestRepo::new();
    write_config(
        &repo,
        "[git]\ncoAuthoredBy = \"Claude <noreply@anthropic.com>\"\n",
    );
    // The repository's own commit-msg hook, which must still run.
    let hook = repo.path().join(".git/hooks/commit-msg");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'Reviewed-by: the repo hook' >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let result = json(&run(&repo, hostile.to_str().unwrap(), "fix the typo"));
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(people(&repo, sha), format!("{0}|{0}", user()));
    let message = repo.git(&["log", "-1", "--format=%B", sha]);
    assert!(
        message.contains("Co-authored-by: Claude <noreply@anthropic.com>")
            && message.contains("Reviewed-by: the repo hook"),
        "{message}"
    );
}

#[test]
fn a_bad_git_table_is_refused_naming_the_file() {
    let repo = TestRepo::new();
    write_config(&repo, "[git]\ncoAuthoredBy = \"just an email@x\"\n");
    let out = run(&repo, "test-isolated", "fix the typo");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(".sanddune/config.toml") && err.contains("coAuthoredBy"),
        "{err}"
    );
    assert!(repo.calls("claude").is_empty());
}

#[test]
fn an_agent_that_says_done_without_committing_keeps_its_work_isolated() {
    let repo = TestRepo::new();
    let out = run(&repo, "test-isolated", "fix the typo FAKE:no-commit");
    let result = json(&out);
    assert_eq!(result["completionSignal"], "<promise>COMPLETE</promise>");
    assert_eq!(result["commits"].as_array().unwrap().len(), 0);
    assert_eq!(
        result["uncommittedChanges"],
        serde_json::json!([" M README.md"])
    );
    // The change came out of the sandbox into the kept worktree.
    let kept = result["preservedWorktreePath"].as_str().unwrap();
    let readme = std::fs::read_to_string(std::path::Path::new(kept).join("README.md")).unwrap();
    assert!(readme.contains("This is the readme."), "{readme}");
    // The user's own tree is untouched.
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn an_agent_that_says_done_without_committing_is_reported_on_the_terminal() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note FAKE:no-commit",
        "--log",
        "terminal",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(
        summary.contains("the agent said it was done, but left these changes uncommitted")
            && summary.contains("?? NOTES.md")
            && summary.contains("worktree kept (uncommitted changes): "),
        "{summary}"
    );
    assert!(
        stderr(&out).contains("said it was done but left uncommitted changes"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn under_head_only_what_the_agent_left_is_reported() {
    let repo = TestRepo::new();
    // The user's own change before the run is not the agent's.
    std::fs::write(repo.path().join("mine.txt"), "mine\n").unwrap();
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let result = json(&run(
        &repo,
        hostile.to_str().unwrap(),
        "fix the typo FAKE:no-commit",
    ));
    assert_eq!(
        result["uncommittedChanges"],
        serde_json::json!([" M README.md"])
    );
    assert_eq!(result["commits"].as_array().unwrap().len(), 0);
}

#[test]
fn a_new_file_left_uncommitted_is_reported_whatever_the_users_untracked_setting() {
    let repo = TestRepo::new();
    // A bind-mount sandbox's status is read on the host, where this
    // repository setting would otherwise hide new files.
    repo.git(&["config", "status.showUntrackedFiles", "no"]);
    let hostile = plugin_file("sanddune-test-plugin-hostile");
    let result = json(&run(
        &repo,
        hostile.to_str().unwrap(),
        "add a note FAKE:no-commit",
    ));
    assert_eq!(
        result["uncommittedChanges"],
        serde_json::json!(["?? NOTES.md"])
    );
}
