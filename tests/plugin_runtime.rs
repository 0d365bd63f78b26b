//! The plugin runtime and the capability layer, through the library: hostile
//! components are stopped with a clear error while the host keeps working,
//! and a well-behaved sandbox provider streams, delivers stdin, times out,
//! confines its cwd and survives a kill.

mod common;

use std::path::PathBuf;

use sanddune::capability::Limits;
use sanddune::plugin::sandbox::{
    Command, ExecOutput, ExecRequest, Sandbox, SandboxProvider, SandboxSpec,
};
use sanddune::plugin::{FileApproval, PluginKind, PluginRef, PluginRuntime, RuntimeConfig};

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(common::cache_dir()),
        store_dir: None,
        limits: Limits {
            memory_bytes: 64 << 20,
            cpu_time_per_call: std::time::Duration::from_secs(2),
            http: Default::default(),
        },
        ..Default::default()
    })
    .unwrap()
}

fn spec(dir: &std::path::Path, config: &[(&str, &str)]) -> SandboxSpec {
    SandboxSpec {
        run_id: "test".into(),
        name: "test".into(),
        worktree: dir.to_path_buf(),
        git_dir: dir.join(".git"),
        branch: "main".into(),
        env: vec![],
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    }
}

async fn provider(rt: &PluginRuntime, crate_name: &str) -> SandboxProvider {
    let plugin = rt
        .load(
            &PluginRef::File(common::plugin_file(crate_name)),
            Some(PluginKind::Sandbox),
        )
        .unwrap();
    let mut provider = SandboxProvider::from_plugin(plugin).await.unwrap();
    provider.approve(&FileApproval::Yes).unwrap();
    provider
}

fn sh(script: &str) -> ExecRequest {
    ExecRequest {
        command: Command::Shell(script.into()),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: Some(60_000),
    }
}

async fn run(sandbox: &mut Sandbox, request: ExecRequest) -> ExecOutput {
    sandbox.exec(request, |_| {}).await.unwrap()
}

/// Proof the host still works: a fresh test-isolated sandbox runs a command.
async fn host_still_works(rt: &PluginRuntime) {
    let p = provider(rt, "sanddune-plugin-test-isolated").await;
    let dir = tempfile::tempdir().unwrap();
    let mut sandbox = p.create(&spec(dir.path(), &[])).await.unwrap();
    let out = run(&mut sandbox, sh("echo still working")).await;
    assert_eq!(out.stdout, "still working\n");
    sandbox.close().await.unwrap();
}

async fn attack(rt: &PluginRuntime, name: &str) -> String {
    let hostile = provider(rt, "sanddune-test-plugin-hostile").await;
    let dir = tempfile::tempdir().unwrap();
    match hostile.create(&spec(dir.path(), &[("attack", name)])).await {
        Ok(_) => panic!("attack `{name}` was not stopped"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn spawning_a_program_not_granted_is_refused() {
    let rt = runtime();
    let err = attack(&rt, "spawn").await;
    assert!(
        err.contains("may not run `cat`: it was granted sh"),
        "{err}"
    );
    assert!(err.contains("`hostile`"), "{err}");
    host_still_works(&rt).await;
}

#[tokio::test]
async fn reading_a_file_outside_the_preopens_is_refused() {
    let rt = runtime();
    let err = attack(&rt, "read-file").await;
    assert!(err.contains("read refused"), "{err}");
    assert!(!err.contains("LEAKED"), "{err}");
    host_still_works(&rt).await;
}

/// The hostile provider's worktree is `<tmp>/wt`, granted to it; beside it,
/// `<tmp>/secret.txt` is not. Returns what `create` said.
async fn attack_from_worktree(rt: &PluginRuntime, name: &str) -> String {
    let hostile = provider(rt, "sanddune-test-plugin-hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join("inside.txt"), "in the grant").unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "outside the grant").unwrap();
    // A repository may hold a symlink to anywhere.
    std::os::unix::fs::symlink(&secret, wt.join("escape")).unwrap();
    match hostile.create(&spec(&wt, &[("attack", name)])).await {
        Ok(_) => panic!("attack `{name}` was not stopped"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_symlink_out_of_the_granted_worktree_is_not_followed() {
    let rt = runtime();
    let err = attack_from_worktree(&rt, "symlink").await;
    assert!(err.contains("read refused"), "{err}");
    assert!(!err.contains("outside the grant"), "{err}");
    host_still_works(&rt).await;
}

#[tokio::test]
async fn dot_dot_out_of_the_granted_worktree_is_refused() {
    let rt = runtime();
    let err = attack_from_worktree(&rt, "traversal").await;
    assert!(err.contains("read refused"), "{err}");
    assert!(!err.contains("outside the grant"), "{err}");
    host_still_works(&rt).await;
}

#[tokio::test]
async fn an_undeclared_env_var_is_invisible() {
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("SANDDUNE_TEST_SECRET", "hunter2") };
    let rt = runtime();
    let err = attack(&rt, "env").await;
    assert!(err.contains("SANDDUNE_TEST_SECRET is not visible"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    host_still_works(&rt).await;
}

#[tokio::test]
async fn a_plugin_that_loops_forever_is_stopped_by_its_cpu_budget() {
    let rt = runtime();
    let err = attack(&rt, "loop").await;
    assert!(
        err.contains("exceeded its CPU time budget of 2000 ms"),
        "{err}"
    );
    host_still_works(&rt).await;
}

#[tokio::test]
async fn a_plugin_that_allocates_without_end_is_stopped_by_its_memory_limit() {
    let rt = runtime();
    let err = attack(&rt, "alloc").await;
    assert!(err.contains("exceeded its memory limit of 64 MiB"), "{err}");
    host_still_works(&rt).await;
}

/// A sandbox of the hostile provider attacking with `attack`, and its dir.
async fn hostile_sandbox(rt: &PluginRuntime, attack: &str) -> (Sandbox, tempfile::TempDir) {
    let hostile = provider(rt, "sanddune-test-plugin-hostile").await;
    let dir = tempfile::tempdir().unwrap();
    let sandbox = hostile
        .create(&spec(dir.path(), &[("attack", attack)]))
        .await
        .unwrap();
    (sandbox, dir)
}

#[tokio::test]
async fn a_plugin_flooding_output_is_bounded() {
    let rt = runtime();
    let (mut sandbox, _dir) = hostile_sandbox(&rt, "flood").await;
    let mut streamed = 0usize;
    let out = sandbox.exec(sh("true"), |_| streamed += 1).await.unwrap();
    // Every line reaches the consumer; only the accumulated copy is capped.
    assert_eq!(streamed, 20_000);
    assert!(
        out.stdout.len() <= sanddune::plugin::sandbox::MAX_CAPTURED_BYTES + 64,
        "{}",
        out.stdout.len()
    );
    assert!(out.stdout.ends_with("[output truncated]\n"));
    sandbox.close().await.unwrap();
    host_still_works(&rt).await;
}

async fn test_isolated() -> (PluginRuntime, Sandbox, tempfile::TempDir) {
    let rt = runtime();
    let p = provider(&rt, "sanddune-plugin-test-isolated").await;
    let dir = tempfile::tempdir().unwrap();
    let sandbox = p.create(&spec(dir.path(), &[])).await.unwrap();
    (rt, sandbox, dir)
}

#[tokio::test]
async fn exec_reports_stdout_stderr_and_the_exit_code() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let out = run(&mut sandbox, sh("echo out; echo err >&2; exit 3")).await;
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
        ("out\n", "err\n", 3)
    );
    let argv = ExecRequest {
        command: Command::Argv(vec![
            "printf".into(),
            "%s|".into(),
            "a b".into(),
            "it's".into(),
        ]),
        ..sh("")
    };
    assert_eq!(run(&mut sandbox, argv).await.stdout, "a b|it's|\n");
    sandbox.close().await.unwrap();
}

#[tokio::test]
async fn exec_streams_each_line_before_the_command_ends() {
    let (_rt, mut sandbox, dir) = test_isolated().await;
    // The command waits for a file that only the first line's consumer
    // creates: it can end only if that line arrived while it was running.
    let flag = dir.path().join("seen-first-line");
    let script = format!(
        "echo first; while [ ! -e '{}' ]; do sleep 0.05; done; echo second",
        flag.display()
    );
    let request = ExecRequest {
        timeout_ms: Some(20_000),
        ..sh(&script)
    };
    let out = sandbox
        .exec(request, |line| {
            if line.text == "first" {
                std::fs::write(&flag, "").unwrap();
            }
        })
        .await
        .unwrap();
    assert!(
        !out.timed_out,
        "the first line was not streamed while the command ran"
    );
    assert_eq!(out.stdout, "first\nsecond\n");
    sandbox.close().await.unwrap();
}

#[tokio::test]
async fn stdin_is_delivered_intact() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let input: String = (0..20_000)
        .map(|i| format!("line {i} ünïcode ✓\n"))
        .collect();
    let request = ExecRequest {
        stdin: Some(input.clone().into_bytes()),
        ..sh("cat")
    };
    let out = run(&mut sandbox, request).await;
    assert_eq!(out.stdout, input);
    // No stdin: the command sees end-of-file at once instead of hanging.
    assert_eq!(run(&mut sandbox, sh("wc -c")).await.stdout.trim(), "0");
    sandbox.close().await.unwrap();
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_is_reported() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let out = run(
        &mut sandbox,
        ExecRequest {
            timeout_ms: Some(200),
            ..sh("sleep 30")
        },
    )
    .await;
    assert!(out.timed_out);
    assert_ne!(out.exit_code, 0);
    sandbox.close().await.unwrap();
}

#[tokio::test]
async fn a_cwd_outside_the_sandbox_is_refused() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    for cwd in ["/tmp", "../.."] {
        let err = sandbox
            .exec(
                ExecRequest {
                    cwd: Some(cwd.into()),
                    ..sh("pwd")
                },
                |_| {},
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("path confinement violation"),
            "{err}"
        );
    }
    let inside = run(
        &mut sandbox,
        ExecRequest {
            cwd: Some(".".into()),
            ..sh("pwd")
        },
    )
    .await;
    assert_eq!(inside.stdout.trim(), sandbox.worktree_path());
    sandbox.close().await.unwrap();
}

#[tokio::test]
async fn killing_brokered_processes_ends_the_call_and_the_sandbox_stays_usable() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let canceller = sandbox.canceller();
    let out = sandbox
        .exec(sh("echo started; sleep 30; echo never"), move |line| {
            if line.text == "started" {
                canceller.kill_all();
            }
        })
        .await
        .unwrap();
    assert_eq!(out.stdout, "started\n");
    assert_ne!(out.exit_code, 0);
    assert_eq!(run(&mut sandbox, sh("echo again")).await.stdout, "again\n");
    sandbox.close().await.unwrap();
    sandbox.close().await.unwrap(); // idempotent
}

#[tokio::test]
async fn close_removes_the_sandbox_directory() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let path = PathBuf::from(sandbox.worktree_path());
    assert!(path.exists());
    sandbox.close().await.unwrap();
    assert!(!path.exists());
}

/// Slow-loris: a provider that ignores the command's timeout and every
/// kill, sending a line now and then and sleeping in between (no CPU budget
/// runs out). The host gives up on its instance a grace after the timeout,
/// and closes the sandbox through a fresh instance.
#[tokio::test]
async fn a_provider_that_never_ends_a_command_is_given_up_after_its_timeout() {
    let rt = runtime();
    let (mut sandbox, _dir) = hostile_sandbox(&rt, "slow-loris").await;
    let mut request = sh("true");
    request.timeout_ms = Some(200);
    let mut lines = 0usize;
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        sandbox.exec(request, |_| lines += 1),
    )
    .await
    .expect("the host waited on the provider for ever")
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("`hostile` did not end a command") && err.contains("timeout"),
        "{err}"
    );
    assert!(lines > 0, "the trickle never arrived");
    // The instance takes no more calls; the sandbox still closes.
    let again = sandbox.exec(sh("true"), |_| {}).await.unwrap_err();
    assert!(again.to_string().contains("gave up"), "{again}");
    sandbox.close().await.unwrap();
    host_still_works(&rt).await;
}

/// The same provider under a kill (abort, the idle timeout): given up a
/// grace after the kill, even with no timeout on the command.
#[tokio::test]
async fn a_provider_that_ignores_a_kill_is_given_up() {
    let rt = runtime();
    let (mut sandbox, _dir) = hostile_sandbox(&rt, "slow-loris").await;
    let canceller = sandbox.canceller();
    let mut killed = false;
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        sandbox.exec(sh("true"), move |_| {
            if !killed {
                killed = true;
                canceller.kill_all();
            }
        }),
    )
    .await
    .expect("the host waited on the provider for ever")
    .unwrap_err()
    .to_string();
    assert!(err.contains("after it was killed"), "{err}");
    sandbox.close().await.unwrap();
}

/// Time a provider spends waiting in the host (here for the lines of a
/// command that prints one every 20 ms for 6 s, 300 waits) is not wasm
/// execution: the CPU budget (2 s a call) must not stop it.
#[tokio::test]
async fn waiting_on_a_slow_command_is_not_charged_to_the_cpu_budget() {
    let (_rt, mut sandbox, _dir) = test_isolated().await;
    let out = sandbox
        .exec(
            sh("i=0; while [ $i -lt 300 ]; do echo $i; sleep 0.02; i=$((i+1)); done"),
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 300);
    sandbox.close().await.unwrap();
}
