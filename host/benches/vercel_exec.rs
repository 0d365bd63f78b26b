//! Per-exec overhead of the vercel sandbox provider over the loopback mock
//! of the Vercel Sandbox API: `exec` of `true` through the component (host
//! -> wasm -> wasi:http -> mock, streamed ndjson back, lines to the sink)
//! against a bare HTTP client making the same call (`POST .../cmd` with
//! `wait`, reading the ndjson stream to its end).
//! Run: cargo bench -p sanddune --bench vercel_exec [-- ROUNDS]

mod common;

use sanddune_vercel_mock::{PROJECT, TEAM, TOKEN, VercelMock};

fn main() {
    let rounds = common::rounds(200);
    let mock = VercelMock::start();
    let repo = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider_times = rt.block_on(async {
        let (_runtime, mut sandbox) = common::sandbox(
            "vercel",
            repo.path(),
            &[
                ("VERCEL_TOKEN", TOKEN),
                ("VERCEL_TEAM_ID", TEAM),
                ("VERCEL_PROJECT_ID", PROJECT),
            ],
            &[("api-url", mock.url())],
        )
        .await;
        let times = common::exec_times(&mut sandbox, rounds).await;
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
    let bare_times = common::times(rounds, bare);
    common::report(
        "vercel exec of `true` over the mock",
        "bare HTTP client (ureq)",
        provider_times,
        bare_times,
    );
}
