//! codex with `@openai/codex`, set up as a user with only OPENAI_API_KEY and
//! OPENAI_BASE_URL would: codex 0.169 reads neither (it sends CODEX_API_KEY
//! and reads the config key `openai_base_url`), so the provider passes them
//! on. Codex tries a WebSocket upgrade first (the mock answers 426), then
//! streams the Responses API over HTTP, running its shell through the
//! freeform `exec` tool.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

fn agent() -> Agent {
    Agent::new("codex", |url| {
        vec![
            ("OPENAI_BASE_URL", format!("{url}/v1")),
            ("OPENAI_API_KEY", "sk-mock".to_string()),
        ]
    })
}

fn codex_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    // After a resume codex prints the session's running total; the
    // iteration's usage must still be the resumed turn's own.
    harness::commits_and_reports_usage(&agent, &[], true);
    let exchanges = agent.mock.exchanges();
    // The upgrade first, then HTTP; every request with the user's key.
    assert_eq!(
        (exchanges[0].method.as_str(), exchanges[0].status),
        ("GET", 426)
    );
    for e in &exchanges {
        assert_eq!(e.path, "/v1/responses");
        assert_eq!(
            e.headers.get("authorization").map(String::as_str),
            Some("Bearer sk-mock"),
            "{} {}",
            e.method,
            e.path
        );
    }
}

fn codex_refused_credentials_fail_the_run_naming_the_key() {
    let agent = agent();
    harness::refused_credentials_fail_the_run(
        &agent,
        &[],
        &["401 Unauthorized", "OPENAI_API_KEY", "CODEX_API_KEY"],
    );
}

fn codex_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    // The cut answer reported no usage; codex counts the completed ones.
    harness::rides_out_a_429_and_a_cut_stream(&agent, &[], false);
}

fn codex_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &[]);
}

fn codex_an_unreachable_api_fails_the_run_within_a_minute() {
    let mut agent = agent();
    // Codex retries forever and names no URL; its parser names it in every
    // retry, and the host stops it after 30 s of errors without progress.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "OPENAI_BASE_URL",
        &[],
        std::time::Duration::from_secs(60),
    );
}

/// The real CLI in a warm container (ADR 0037): the first run fills a pool
/// of one, the resumed run claims the container, and codex (its static
/// build bound in, with the code-mode host beside it; the image has no
/// node) commits and resumes there, through the credential gateway to the
/// mock on the host.
fn codex_commits_and_resumes_in_a_claimed_warm_docker_container() {
    let agent = agent();
    let build = agent
        .modules()
        .join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl");
    let agent = agent.in_docker_pool(&build);
    harness::commits_and_reports_usage(&agent, &[], true);
    let logs = agent.logs();
    assert_eq!(logs.len(), 2);
    assert!(
        logs[1].contains("pool: took a warm container"),
        "the resumed run claimed the warm container:\n{}",
        logs[1]
    );
    assert!(
        logs[0].contains("credential gateway: OPENAI_API_KEY stays on the host"),
        "{}",
        logs[0]
    );
    // The container the claim refilled goes with the pool.
    let out = agent.sanddune(&["gc", "--drain-pool"]);
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(codex_commits_reports_the_mocks_usage_and_resumes),
        trial!(codex_refused_credentials_fail_the_run_naming_the_key),
        trial!(codex_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(codex_without_the_signal_runs_to_max_iterations),
        trial!(codex_an_unreachable_api_fails_the_run_within_a_minute),
        trial!(codex_commits_and_resumes_in_a_claimed_warm_docker_container),
    ]
}
