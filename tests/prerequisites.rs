//! What a run needs from the host, through the real binary: every built-in
//! sandbox provider and agent provider with its credential or
//! prerequisite missing (an env cleared of the keys, no container engine,
//! no `sh`) is refused with exit 2 and a message naming what to set, and
//! the repository is left as it was: no `.sanddune/` (so no run log), no
//! worktree, no branch, the same `git status`. Providers whose credential
//! has alternatives or that need none go ahead.

mod common;

use std::path::Path;

use common::{TestRepo, stderr};

/// Every key a built-in provider reads as a credential or an alternative
/// to one; each run here starts with none of them.
const CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "CURSOR_API_KEY",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "VERCEL_TOKEN",
    "VERCEL_TEAM_ID",
    "VERCEL_PROJECT_ID",
    "VERCEL_OIDC_TOKEN",
    "DAYTONA_API_KEY",
    "DAYTONA_JWT_TOKEN",
    "DAYTONA_ORGANIZATION_ID",
    "DAYTONA_API_URL",
    "DAYTONA_TARGET",
];

/// What a run could change in the repository: the status (ignored files
/// too, so a `.sanddune/` would show), worktrees, every ref with its
/// commit, and the exclude file sanddune adds its directories to.
fn state(repo: &TestRepo) -> String {
    let exclude =
        std::fs::read_to_string(repo.path().join(".git/info/exclude")).unwrap_or_default();
    [
        repo.git(&["status", "--porcelain", "--ignored"]),
        repo.git(&["worktree", "list", "--porcelain"]),
        repo.git(&["for-each-ref"]),
        exclude,
    ]
    .join("\n--\n")
}

/// `sanddune ARGS` with none of the credentials, and `env` added.
fn sanddune(repo: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = repo.command(args);
    for key in CREDENTIALS {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().copied()).output().unwrap()
}

fn run_args<'a>(sandbox: &'a str, agent: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--sandbox",
        sandbox,
        "--agent",
        agent,
        "--prompt",
        "fix the typo",
    ]
}

/// Exit 2 with every needle in the message, and nothing changed.
fn refused(repo: &TestRepo, args: &[&str], env: &[(&str, &str)], needles: &[&str]) {
    let before = state(repo);
    let out = sanddune(repo, args, env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: {needle:?} not in: {err}");
    }
    assert!(
        !repo.path().join(".sanddune").exists(),
        "{args:?}: a run log or worktree dir was made"
    );
    assert_eq!(state(repo), before, "{args:?}: the repository changed");
    assert!(repo.calls("claude").is_empty(), "{args:?}: the agent ran");
}

#[test]
fn a_cloud_sandbox_provider_without_credentials_is_refused_naming_them() {
    let repo = TestRepo::new();
    let vercel = run_args("vercel", "demo");
    refused(
        &repo,
        &vercel,
        &[],
        &[
            "sandbox provider `vercel`",
            "VERCEL_TOKEN",
            "VERCEL_TEAM_ID",
            "VERCEL_PROJECT_ID",
            "VERCEL_OIDC_TOKEN",
            "--sandbox-env",
        ],
    );
    // A token without its team and project: the missing ones are named.
    refused(
        &repo,
        &vercel,
        &[("VERCEL_TOKEN", "t")],
        &["VERCEL_TEAM_ID and VERCEL_PROJECT_ID are not"],
    );
    let daytona = run_args("daytona", "demo");
    refused(
        &repo,
        &daytona,
        &[],
        &[
            "sandbox provider `daytona`",
            "DAYTONA_API_KEY",
            "DAYTONA_JWT_TOKEN",
            "--sandbox-env",
        ],
    );
    refused(
        &repo,
        &daytona,
        &[("DAYTONA_JWT_TOKEN", "j")],
        &["DAYTONA_ORGANIZATION_ID is not"],
    );
    // The provider's options are its own checks too, before anything.
    refused(
        &repo,
        &[&vercel[..], &["--sandbox-opt", "vcpus=lots"]].concat(),
        &[
            ("VERCEL_TOKEN", "t"),
            ("VERCEL_TEAM_ID", "team_1"),
            ("VERCEL_PROJECT_ID", "prj_1"),
        ],
        &["sandbox provider `vercel`", "vcpus"],
    );
}

/// A third party's component (contract 0.6) gets the same up-front check
/// as a built-in: its own `preflight` refuses a missing or unusable
/// credential and a bad option with exit 2 in its own words, before
/// anything exists; with both right the run commits.
#[test]
fn a_third_party_sandbox_provider_is_checked_up_front_by_its_preflight() {
    let repo = TestRepo::new();
    let file = common::plugin_file("sanddune-test-plugin-third-party-preflight");
    let file = file.to_str().unwrap();
    let mut args = run_args(file, "demo");
    for item in ["program=sh", "worktree=read-write", "env=THIRD_PARTY_TOKEN"] {
        args.extend(["--grant", item]);
    }
    refused(
        &repo,
        &args,
        &[],
        &[
            "sandbox provider `third-party-preflight`: THIRD_PARTY_TOKEN is not set",
            "--sandbox-env",
            "nothing was created",
        ],
    );
    refused(
        &repo,
        &args,
        &[("THIRD_PARTY_TOKEN", "abc")],
        &["THIRD_PARTY_TOKEN is not a third-party token"],
    );
    let mars = [&args[..], &["--sandbox-opt", "region=mars"]].concat();
    let out = sanddune(&repo, &mars, &[("THIRD_PARTY_TOKEN", "tp_1")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("region must be eu or us, not `mars`"), "{err}");
    assert!(!err.contains("--sandbox-env"), "not a credential: {err}");
    // A key from `--sandbox-env` counts, as for a built-in.
    let keyed = [&args[..], &["--sandbox-env", "THIRD_PARTY_TOKEN=tp_1"]].concat();
    let out = sanddune(&repo, &[&keyed[..], &["--branch", "checked"]].concat(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.git(&["rev-list", "--count", "main..checked"]), "1");
}

#[test]
fn a_container_sandbox_provider_without_an_engine_is_refused_naming_its_socket() {
    let repo = TestRepo::new();
    let nowhere = repo.home.path().join("no-engine.sock");
    let socket = format!("unix://{}", nowhere.display());
    refused(
        &repo,
        &run_args("docker", "demo"),
        &[("DOCKER_HOST", &socket)],
        &["sandbox provider `docker`", &socket, "DOCKER_HOST"],
    );
    refused(
        &repo,
        &run_args("podman", "demo"),
        &[("CONTAINER_HOST", &socket)],
        &["sandbox provider `podman`", &socket, "CONTAINER_HOST"],
    );
}

#[test]
fn test_isolated_without_sh_is_refused_naming_it() {
    let repo = TestRepo::new();
    // A PATH with git (sanddune's own need) and nothing else.
    let bin = repo.home.path().join("git-only");
    std::fs::create_dir(&bin).unwrap();
    let git = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    std::os::unix::fs::symlink(git, bin.join("git")).unwrap();
    refused(
        &repo,
        &run_args("test-isolated", "demo"),
        &[("PATH", bin.to_str().unwrap())],
        &["sandbox provider `test-isolated` runs `sh`", "PATH"],
    );
}

#[test]
fn an_agent_provider_without_its_env_requirement_is_refused_naming_it() {
    let repo = TestRepo::new();
    for (agent, keys) in [
        (
            "claude-code",
            &["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"][..],
        ),
        ("codex", &["OPENAI_API_KEY", "CODEX_API_KEY"]),
        ("cursor", &["CURSOR_API_KEY"]),
        (
            "copilot",
            &["GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN"],
        ),
        ("gemini", &["GEMINI_API_KEY"]),
        ("qwen-code", &["OPENAI_API_KEY"]),
    ] {
        let needles: Vec<String> = [format!("agent provider `{agent}`"), "--agent-env".into()]
            .into_iter()
            .chain(keys.iter().map(|k| k.to_string()))
            .collect();
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        refused(&repo, &run_args("test-isolated", agent), &[], &needles);
        // A blank value is no key.
        refused(
            &repo,
            &run_args("test-isolated", agent),
            &[(keys[0], " ")],
            &needles,
        );
    }
}

/// Copilot's own model provider (BYOK) needs no GitHub token, but a model,
/// which copilot would ask for only after starting. The provider refuses
/// when it sees the run's env, which the host shows it before anything is
/// created.
#[test]
fn copilot_with_its_own_model_provider_needs_a_model_not_a_token() {
    let repo = TestRepo::new();
    let before = state(&repo);
    let url = ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:1/v1");
    let args = run_args("test-isolated", "copilot");
    let out = sanddune(&repo, &args, &[url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(state(&repo), before, "nothing was created");
    assert!(
        err.contains("COPILOT_MODEL") && err.contains("--model"),
        "{err}"
    );
    assert!(repo.calls("copilot").is_empty(), "copilot never started");
    let out = sanddune(&repo, &args, &[url, ("COPILOT_MODEL", "gpt-5")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.calls("copilot").len(), 1);
}

#[test]
fn a_key_from_any_env_layer_or_an_alternative_satisfies_the_agent() {
    // claude-code's alternatives: a subscription token given with
    // --agent-env, a Bedrock switch in .sanddune/.env.
    let repo = TestRepo::new();
    let mut args = run_args("test-isolated", "claude-code");
    args.extend(["--agent-env", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat-test"]);
    let out = sanddune(&repo, &args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(repo.calls("claude").len(), 1);

    let repo = TestRepo::new();
    std::fs::create_dir(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "CLAUDE_CODE_USE_BEDROCK=1\n",
    )
    .unwrap();
    let out = sanddune(&repo, &run_args("test-isolated", "claude-code"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn agents_without_an_env_requirement_go_ahead_as_before() {
    // opencode and pi take the key of whichever model provider they are
    // given (or their own login): no key is one they need. demo needs none.
    for (agent, program) in [("opencode", "opencode"), ("pi", "pi"), ("demo", "")] {
        let repo = TestRepo::new();
        let out = sanddune(&repo, &run_args("test-isolated", agent), &[]);
        assert!(out.status.success(), "{agent}: {}", stderr(&out));
        if !program.is_empty() {
            assert_eq!(repo.calls(program).len(), 1, "{agent}");
        }
    }
}

#[test]
fn an_interactive_session_is_refused_before_anything_too() {
    let repo = TestRepo::new();
    refused(
        &repo,
        &["interactive", "--sandbox", "vercel", "--agent", "demo"],
        &[],
        &["sandbox provider `vercel`", "VERCEL_TOKEN"],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_library_refuses_a_reusable_sandbox_before_its_worktree() {
    use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
    use sanddune::run::{LogMode, SandboxOptions, create_sandbox};
    let repo = TestRepo::new();
    let before = state(&repo);
    let mut o = SandboxOptions::new(PluginRef::Builtin("docker".into()));
    o.cwd = repo.path().to_path_buf();
    o.log = LogMode::Terminal;
    o.runtime = Some(
        PluginRuntime::new(RuntimeConfig {
            cache_dir: Some(common::cache_dir()),
            ..RuntimeConfig::default()
        })
        .unwrap(),
    );
    // An image nobody built, so the refusal holds with an engine running
    // too; without one the engine is what is named.
    o.sandbox_config = vec![("image".into(), "sanddune-no-such-image:none".into())];
    let err = match create_sandbox("feature", o).await {
        Ok(_) => panic!("a sandbox without its image was created"),
        Err(e) => e,
    };
    assert_eq!(err.exit_code(), 2, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("sanddune-no-such-image:none") || text.contains("engine"),
        "{text}"
    );
    assert!(!Path::new(&repo.path().join(".sanddune")).exists());
    assert_eq!(state(&repo), before);
}
