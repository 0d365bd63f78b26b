//! Per-exec overhead of the daytona sandbox provider over the loopback mock
//! of the Daytona API and toolbox: `exec` of `true` through the component
//! (host -> wasm -> wasi:http -> mock: the async session command, then its
//! state and log polled until the exit code) against a bare HTTP client
//! making the same calls in the same session (exec with `runAsync` of the
//! same command line the provider sends, then the command's state and log
//! until it has an exit code, every 5 ms).
//! Run: cargo bench -p sanddune --bench daytona_exec [-- ROUNDS]

use std::time::Duration;

mod common;

use sanddune_daytona_mock::{API_KEY, DaytonaMock};

fn main() {
    let rounds = common::rounds(200);
    let mock = DaytonaMock::start();
    let repo = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider_times = rt.block_on(async {
        let (_runtime, mut sandbox) = common::sandbox(
            "daytona",
            repo.path(),
            &[("DAYTONA_API_KEY", API_KEY)],
            &[
                ("api-url", &mock.api_url()),
                ("toolbox-url", &mock.toolbox_url()),
            ],
        )
        .await;
        let times = common::exec_times(&mut sandbox, rounds).await;
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
    let bare_times = common::times(rounds, bare);
    common::report(
        "daytona exec of `true` over the mock",
        "bare HTTP client (ureq)",
        provider_times,
        bare_times,
    );
}
