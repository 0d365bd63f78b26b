//! The provider's own per-exec cost, natively (no wasm, no host): `exec` of
//! `true` through `VercelSandbox` over the loopback mock against the bare
//! `POST .../cmd` call with the same client. The difference is the
//! provider's logic (the stdin wrapper's extra `sh`, ndjson parsing, line
//! assembly). The component through the host: `cargo bench -p sanddune
//! --bench vercel_exec`.
//! Run: cargo run --release -p sanddune-plugin-vercel --example native_exec_overhead

use std::time::{Duration, Instant};

use sanddune_plugin_vercel::api::Api;
use sanddune_plugin_vercel::config::Credentials;
use sanddune_plugin_vercel::native::NativeHttp;
use sanddune_plugin_vercel::provider::{Command, ExecSpec, VercelSandbox};
use sanddune_plugin_vercel::transport::BaseUrl;
use sanddune_vercel_mock::{PROJECT, TEAM, TOKEN, VercelMock};
use serde_json::json;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let rounds = 200;
    let mock = VercelMock::start();
    let creds = |k: &str| match k {
        "VERCEL_TOKEN" => Some(TOKEN.to_string()),
        "VERCEL_TEAM_ID" => Some(TEAM.to_string()),
        "VERCEL_PROJECT_ID" => Some(PROJECT.to_string()),
        _ => None,
    };
    let config = vec![("api-url".to_string(), mock.url().to_string())];
    let sb = VercelSandbox::create(
        NativeHttp,
        &creds,
        &config,
        ("bench", "bench"),
        vec![],
        None,
    )
    .unwrap();
    let spec = || ExecSpec {
        command: Command::Argv(vec!["true".into()]),
        cwd: None,
        env: vec![],
        stdin: None,
        sudo: false,
        timeout_ms: None,
    };
    let mut provider = vec![];
    for i in 0..rounds + 10 {
        let t = Instant::now();
        sb.exec(spec(), &mut |_, _| {}).unwrap();
        if i >= 10 {
            provider.push(t.elapsed());
        }
    }
    let api = Api::new(
        BaseUrl::parse(mock.url()).unwrap(),
        Credentials {
            token: TOKEN.into(),
            team_id: TEAM.into(),
            project_id: PROJECT.into(),
        },
        NativeHttp,
    );
    let body = json!({"command": "true", "args": [], "env": {}, "sudo": false});
    let mut bare = vec![];
    for i in 0..rounds + 10 {
        let t = Instant::now();
        let mut s = api.start_command(&sb.state.session, &body).unwrap();
        while s.next_event().unwrap().is_some() {}
        if i >= 10 {
            bare.push(t.elapsed());
        }
    }
    sb.close().unwrap();
    let (p, b) = (median(provider), median(bare));
    println!(
        "native, {rounds} execs of `true` over the mock, medians: provider {p:.2} ms, bare call {b:.2} ms, overhead {:.2} ms",
        p - b
    );
}
