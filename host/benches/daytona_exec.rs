//! Per-exec overhead of the daytona sandbox provider over the loopback mock
//! of the Daytona API and toolbox: `exec` of `true` through the component
//! (host -> wasm -> wasi:http -> mock: the async session command, then its
//! state and log polled until the exit code) against a bare HTTP client
//! making the same calls in the same session (exec with `runAsync` of the
//! same command line the provider sends, then the command's state and log
//! until it has an exit code, every 5 ms).
//! Run: cargo bench -p sanddune --bench daytona_exec [-- ROUNDS]

use std::time::{Duration, Instant};

use sanddune::plugin::sandbox::{Command, ExecRequest, SandboxProvider, SandboxSpec};
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use sanddune_daytona_mock::{API_KEY, DaytonaMock};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let mock = DaytonaMock::start();
    let repo = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider_times = rt.block_on(async {
        let runtime = PluginRuntime::new(RuntimeConfig::default()).unwrap();
        let provider = SandboxProvider::load(&runtime, &PluginRef::Builtin("daytona".into()))
            .await
            .unwrap();
        let spec = SandboxSpec {
            run_id: "bench".into(),
            name: "bench".into(),
            worktree: repo.path().to_path_buf(),
            git_dir: repo.path().join(".git"),
            branch: "main".into(),
            env: vec![("DAYTONA_API_KEY".into(), API_KEY.into())],
            config: vec![
                ("api-url".into(), mock.api_url()),
                ("toolbox-url".into(), mock.toolbox_url()),
            ],
            side_by_side: 1,
        };
        let mut sandbox = provider.create(&spec).await.unwrap();
        let request = || ExecRequest {
            command: Command::Argv(vec!["true".into()]),
            cwd: None,
            env: vec![],
            stdin: None,
            sudo: false,
            timeout_ms: None,
        };
        for _ in 0..10 {
            sandbox.exec(request(), |_| {}).await.unwrap();
        }
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let out = sandbox.exec(request(), |_| {}).await.unwrap();
            times.push(t.elapsed());
            assert_eq!(out.exit_code, 0);
        }
        sandbox.close().await.unwrap();
        times
    });

    // The bare client: its own sandbox and session, the same calls.
    let agent = ureq::Agent::new_with_defaults();
    let auth = format!("Bearer {API_KEY}");
    let post = |url: String, body: &str| -> String {
        agent
            .post(url)
            .header("authorization", &auth)
            .header("x-daytona-sdk-version", "0.190.0")
            .header("content-type", "application/json")
            .send(body)
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    };
    let get = |url: String| -> String {
        agent
            .get(url)
            .header("authorization", &auth)
            .header("x-daytona-sdk-version", "0.190.0")
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    };
    let created: serde_json::Value =
        serde_json::from_str(&post(format!("{}/sandbox", mock.api_url()), "{}")).unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let toolbox = format!("{}/{id}", mock.toolbox_url());
    loop {
        let s: serde_json::Value =
            serde_json::from_str(&get(format!("{}/sandbox/{id}", mock.api_url()))).unwrap();
        if s["state"] == "started" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    post(
        format!("{toolbox}/process/session"),
        r#"{"sessionId":"bench"}"#,
    );
    let home: serde_json::Value =
        serde_json::from_str(&get(format!("{toolbox}/user-home-dir"))).unwrap();
    let line = sanddune_plugin_daytona::command::line(
        &["true".to_string()],
        home["dir"].as_str().unwrap(),
        "/dev/null",
        &[],
    );
    let exec_body = serde_json::json!({ "command": line, "runAsync": true }).to_string();
    let bare = || {
        let started: serde_json::Value = serde_json::from_str(&post(
            format!("{toolbox}/process/session/bench/exec"),
            &exec_body,
        ))
        .unwrap();
        let cmd = started["cmdId"].as_str().unwrap();
        loop {
            let state: serde_json::Value = serde_json::from_str(&get(format!(
                "{toolbox}/process/session/bench/command/{cmd}"
            )))
            .unwrap();
            get(format!(
                "{toolbox}/process/session/bench/command/{cmd}/logs"
            ));
            if state["exitCode"] == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for _ in 0..10 {
        bare();
    }
    let mut bare_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        bare();
        bare_times.push(t.elapsed());
    }

    let (p, b) = (median(provider_times), median(bare_times));
    println!("daytona exec of `true` over the mock, {rounds} rounds, medians:");
    println!(
        "  provider (component, wasi:http): {:>8.2} ms",
        p.as_secs_f64() * 1e3
    );
    println!(
        "  bare HTTP client (ureq):         {:>8.2} ms",
        b.as_secs_f64() * 1e3
    );
    println!(
        "  overhead per exec:               {:>8.2} ms ({:.2}x)",
        (p.as_secs_f64() - b.as_secs_f64()) * 1e3,
        p.as_secs_f64() / b.as_secs_f64()
    );
}
