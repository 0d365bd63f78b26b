//! Per-exec overhead of the vercel sandbox provider over the loopback mock
//! of the Vercel Sandbox API: `exec` of `true` through the component (host
//! -> wasm -> wasi:http -> mock, streamed ndjson back, lines to the sink)
//! against a bare HTTP client making the same call (`POST .../cmd` with
//! `wait`, reading the ndjson stream to its end).
//! Run: cargo bench -p sanddune --bench vercel_exec [-- ROUNDS]

use std::time::{Duration, Instant};

use sanddune::plugin::sandbox::{Command, ExecRequest, SandboxProvider, SandboxSpec};
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use sanddune_vercel_mock::{PROJECT, TEAM, TOKEN, VercelMock};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let mock = VercelMock::start();
    let repo = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider_times = rt.block_on(async {
        let runtime = PluginRuntime::new(RuntimeConfig::default()).unwrap();
        let provider = SandboxProvider::load(&runtime, &PluginRef::Builtin("vercel".into()))
            .await
            .unwrap();
        let spec = SandboxSpec {
            run_id: "bench".into(),
            name: "bench".into(),
            worktree: repo.path().to_path_buf(),
            git_dir: repo.path().join(".git"),
            branch: "main".into(),
            env: vec![
                ("VERCEL_TOKEN".into(), TOKEN.into()),
                ("VERCEL_TEAM_ID".into(), TEAM.into()),
                ("VERCEL_PROJECT_ID".into(), PROJECT.into()),
            ],
            config: vec![("api-url".into(), mock.url().into())],
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

    // The bare client: its own sandbox, the same call, nothing else.
    let agent = ureq::Agent::new_with_defaults();
    let created: serde_json::Value = serde_json::from_str(
        &agent
            .post(format!("{}/v3/sandboxes?teamId={TEAM}", mock.url()))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .send(format!(r#"{{"projectId":"{PROJECT}","ports":[]}}"#))
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    let session = created["session"]["id"].as_str().unwrap().to_string();
    let url = format!(
        "{}/v2/sandboxes/sessions/{session}/cmd?teamId={TEAM}",
        mock.url()
    );
    let body = r#"{"command":"true","args":[],"env":{},"sudo":false,"wait":true,"logs":true}"#;
    let bare = || {
        let text = agent
            .post(&url)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .send(body)
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        assert!(text.contains(r#""exitCode":0"#), "{text}");
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
    println!("vercel exec of `true` over the mock, {rounds} rounds, medians:");
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
