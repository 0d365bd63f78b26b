//! The library's layered entry points on real git and real components:
//! `create_sandbox` (a reusable sandbox on one branch), `create_worktree`
//! (a worktree with its own lifecycle), abort of hooks and of a run on a
//! reusable sandbox, and the drop safety net. The fake `claude` is reached
//! through PATH in the call-site env.

mod common;

use std::path::Path;
use std::time::Duration;

use common::TestRepo;
use sanddune::Error;
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use sanddune::run::{
    AgentOptions, LogMode, Prompt, SandboxHook, SandboxOptions, TrustPolicy, WorktreeStrategy,
    create_sandbox, create_worktree,
};

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(common::cache_dir()),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn sandbox_options(repo: &TestRepo) -> SandboxOptions {
    let mut o = SandboxOptions::new(PluginRef::Builtin("test-isolated".into()));
    o.cwd = repo.path().to_path_buf();
    o.runtime = Some(runtime());
    o.log = LogMode::Terminal;
    let path = format!(
        "{}:{}",
        repo.bin().display(),
        std::env::var("PATH").unwrap()
    );
    o.env = vec![("PATH".into(), path)];
    o
}

fn agent(prompt: Prompt) -> AgentOptions {
    let mut o = AgentOptions::new(PluginRef::Builtin("claude-code".into()), prompt);
    // Capture writes to the user's HOME; these tests share the process's.
    o.capture_sessions = false;
    // What a user of claude-code has (its env requirement); the fake
    // ignores it.
    o.agent_env = vec![("ANTHROPIC_API_KEY".into(), "sk-ant-sanddune-test".into())];
    o
}

fn hook(command: &str) -> SandboxHook {
    SandboxHook {
        command: command.into(),
        sudo: false,
        timeout_ms: None,
    }
}

/// Wait (bounded) until `check` holds; the tests never assert on time.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..400 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reusable_sandbox_runs_its_hooks_once_and_keeps_what_they_installed() {
    let repo = TestRepo::new();
    let mut so = sandbox_options(&repo);
    so.hooks.sandbox_on_sandbox_ready = vec![hook("echo installed >> \"$HOME/deps\"")];
    let mut sandbox = create_sandbox("feature", so).await.unwrap();
    let template = repo.home.path().join("task.md");
    std::fs::write(&template, "deps: !`wc -l < \"$HOME/deps\"`\nadd a note\n").unwrap();
    for _ in 0..2 {
        let result = sandbox
            .run(agent(Prompt::File(template.clone())))
            .await
            .unwrap();
        assert_eq!(result.branch, "feature");
        assert_eq!(result.commits.len(), 1);
    }
    let prompts: Vec<String> = repo
        .calls("claude")
        .iter()
        .map(|c| c["prompt"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        prompts,
        ["deps: 1\nadd a note\n", "deps: 1\nadd a note\n"],
        "the hook ran once"
    );
    let worktree = sandbox.worktree_path().to_path_buf();
    let closed = sandbox.close().await.unwrap();
    assert_eq!(closed.preserved_worktree_path, None);
    assert!(!worktree.exists(), "a clean worktree is removed");
    // The branch keeps both commits; the host's branch is untouched.
    assert_eq!(repo.git(&["rev-list", "--count", "main..feature"]), "2");
    assert_eq!(repo.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worktree_outlives_its_sandboxes_and_merges_on_close() {
    let repo = TestRepo::new();
    let mut wo = sandbox_options(&repo);
    wo.name = Some("wt".into());
    let wt = create_worktree(WorktreeStrategy::MergeToHead, wo)
        .await
        .unwrap();
    let path = wt.path().to_path_buf();
    assert!(path.starts_with(repo.path().join(".sanddune/worktrees")));
    let result = wt
        .run(
            sandbox_options(&repo),
            agent(Prompt::Inline("fix the typo".into())),
        )
        .await
        .unwrap();
    assert_eq!(result.commits.len(), 1);
    assert!(path.exists(), "the sandbox went, the worktree stays");
    // A second sandbox on the same worktree sees the first one's commit.
    let mut sandbox = wt.create_sandbox(sandbox_options(&repo)).await.unwrap();
    let second = sandbox
        .run(agent(Prompt::Inline("add a note".into())))
        .await
        .unwrap();
    assert_eq!(second.commits.len(), 1);
    sandbox.close().await.unwrap();
    assert!(path.exists());
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "initial",
        "nothing merged yet"
    );
    let closed = wt.close().await.unwrap();
    assert_eq!(closed.preserved_worktree_path, None);
    assert!(!path.exists());
    assert_eq!(
        repo.git(&["rev-list", "--count", "HEAD"]),
        "3",
        "both commits merged into main"
    );
    assert_eq!(repo.git(&["branch", "--list", "sanddune/*"]), "");
}

/// The library never asks: a repository config that makes the host act
/// and is not in the user's approvals is refused with `Error::Untrusted`
/// naming it, before anything exists; `TrustPolicy::Trusted` is the
/// embedder vouching for it.
#[tokio::test(flavor = "multi_thread")]
async fn unapproved_host_effective_config_is_refused_unless_the_caller_trusts_it() {
    let repo = TestRepo::new();
    let ran = repo.home.path().join("cmd-ran");
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        format!("SANDDUNE_TEST_KEY=cmd:touch {} && echo v\n", ran.display()),
    )
    .unwrap();
    let err = create_sandbox("feature", sandbox_options(&repo))
        .await
        .err()
        .expect("refused");
    match &err {
        Error::Untrusted(u) => assert!(
            u.added
                .iter()
                .any(|i| i.starts_with(".sanddune/.env: SANDDUNE_TEST_KEY = cmd:touch")),
            "{err}"
        ),
        other => panic!("not a trust refusal: {other}"),
    }
    assert_eq!(err.exit_code(), 2);
    assert!(!ran.exists(), "the command ran");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);

    let mut so = sandbox_options(&repo);
    so.trust = TrustPolicy::Trusted;
    let sandbox = create_sandbox("feature", so).await.unwrap();
    assert!(ran.exists(), "the trusted command did not run");
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_kills_a_hook_in_flight_and_rejects_with_the_reason() {
    let repo = TestRepo::new();
    let pidfile = repo.home.path().join("hook.pid");
    let mut so = sandbox_options(&repo);
    so.hooks.sandbox_on_sandbox_ready =
        vec![hook(&format!("echo $$ > {}; sleep 60", pidfile.display()))];
    let abort = so.abort.clone();
    let watch = pidfile.clone();
    tokio::spawn(async move {
        eventually("the hook started", || watch.exists()).await;
        abort.abort("stop the install");
    });
    let err = create_sandbox("feature", so).await.err().expect("aborted");
    assert!(
        matches!(&err, Error::Aborted(reason) if reason == "stop the install"),
        "{err}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 only checks that the process exists.
    eventually(
        "the hook's shell is gone",
        || unsafe { libc::kill(pid, 0) } != 0,
    )
    .await;
    assert!(repo.calls("claude").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_aborted_run_leaves_the_reusable_sandbox_usable() {
    let repo = TestRepo::new();
    let mut sandbox = create_sandbox("feature", sandbox_options(&repo))
        .await
        .unwrap();
    let hang = agent(Prompt::Inline("FAKE:hang".into()));
    let abort = hang.abort.clone();
    let home = repo.home.path().to_path_buf();
    tokio::spawn(async move {
        eventually("the agent started", || {
            home.join("fake-claude-calls.jsonl").exists()
        })
        .await;
        abort.abort("reviewer changed its mind");
    });
    let err = sandbox.run(hang).await.unwrap_err();
    assert!(
        matches!(&err, Error::Aborted(r) if r == "reviewer changed its mind"),
        "{err}"
    );
    let result = sandbox
        .run(agent(Prompt::Inline("add a note".into())))
        .await
        .unwrap();
    assert_eq!(result.commits.len(), 1, "the same sandbox runs again");
    sandbox.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_sandbox_is_still_torn_down() {
    let repo = TestRepo::new();
    let sandbox = create_sandbox("feature", sandbox_options(&repo))
        .await
        .unwrap();
    let worktree = sandbox.worktree_path().to_path_buf();
    assert!(worktree.exists());
    drop(sandbox);
    eventually("the clean worktree is removed", || {
        !Path::new(&worktree).exists()
    })
    .await;
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_stream_event_callback_never_kills_the_run() {
    let repo = TestRepo::new();
    let mut sandbox = create_sandbox("feature", sandbox_options(&repo))
        .await
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut options = agent(Prompt::Inline("fix the typo".into()));
    let counter = seen.clone();
    options.on_event = Some(std::sync::Arc::new(move |event| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let sanddune::run::StreamEvent::Text { iteration, .. } = event {
            assert_eq!(*iteration, 1);
        }
        panic!("a broken forwarder");
    }));
    let result = sandbox.run(options).await.unwrap();
    assert_eq!(result.commits.len(), 1);
    assert!(
        seen.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "text and tool-call events arrived"
    );
    sandbox.close().await.unwrap();
}

/// A run's result comes before its sandbox's close and its worktree's
/// deletion: the sandbox is still recorded (for `sanddune gc`, were the
/// process killed now), the worktree's files wait beside the worktrees,
/// and the run shows as `closing`; `finish` does both and the records go.
#[tokio::test(flavor = "multi_thread")]
async fn the_result_comes_before_the_sandbox_close_which_finish_does() {
    let repo = TestRepo::new();
    let options = sanddune::run::RunOptions {
        sandbox: sandbox_options(&repo),
        agent: agent(Prompt::Inline("fix the typo".into())),
        strategy: Some(sanddune::run::BranchStrategy::MergeToHead),
        resume_session: None,
        check: None,
        push: None,
    };
    let (result, closing) = sanddune::run::plan(options)
        .await
        .unwrap()
        .run_to_result()
        .await
        .unwrap();
    assert_eq!(result.branch, "main");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "Fix typo in README"
    );
    let git_dir = repo.path().join(".git");
    let sandboxes = || {
        std::fs::read_dir(git_dir.join("sanddune-sandboxes"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(sandboxes(), 1, "the sandbox is recorded until it is closed");
    // The worktree is gone for git, its files moved aside to be deleted.
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    let worktrees = repo.path().join(".sanddune/worktrees");
    let entries = || -> Vec<String> {
        std::fs::read_dir(&worktrees)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let aside = entries();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].starts_with(".removed-run-"), "{aside:?}");
    let live = sanddune::run::registry::list(&git_dir);
    assert_eq!(live.len(), 1);
    assert_eq!(
        live[0].record.state,
        sanddune::run::registry::State::Closing
    );
    assert!(!closing.is_done());
    closing.finish().await.unwrap();
    assert_eq!(sandboxes(), 0);
    assert_eq!(entries(), Vec::<String>::new(), "the files are deleted");
    assert!(sanddune::run::registry::list(&git_dir).is_empty());
}
