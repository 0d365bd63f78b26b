//! codex with `@openai/codex`, set up as a user with only OPENAI_API_KEY and
//! OPENAI_BASE_URL would: codex 0.169 reads neither (it sends CODEX_API_KEY
//! and reads the config key `openai_base_url`), so the provider passes them
//! on. Codex tries a WebSocket upgrade first (the mock answers 426), then
//! streams the Responses API over HTTP, running its shell through the
//! freeform `exec` tool.

use crate::harness::{self, Agent};

fn agent() -> Option<Agent> {
    Agent::new("codex", |url| {
        vec![
            ("OPENAI_BASE_URL", format!("{url}/v1")),
            ("OPENAI_API_KEY", "sk-mock".to_string()),
        ]
    })
}

#[test]
fn codex_commits_reports_the_mocks_usage_and_resumes() {
    let Some(agent) = agent() else { return };
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

#[test]
fn codex_refused_credentials_fail_the_run_naming_the_key() {
    let Some(agent) = agent() else { return };
    harness::refused_credentials_fail_the_run(
        &agent,
        &[],
        &["401 Unauthorized", "OPENAI_API_KEY", "CODEX_API_KEY"],
    );
}

#[test]
fn codex_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let Some(agent) = agent() else { return };
    // The cut answer reported no usage; codex counts the completed ones.
    harness::rides_out_a_429_and_a_cut_stream(&agent, &[], false);
}

#[test]
fn codex_without_the_signal_runs_to_max_iterations() {
    let Some(agent) = agent() else { return };
    harness::runs_to_max_iterations_without_the_signal(&agent, &[]);
}

#[test]
fn codex_an_unreachable_api_fails_the_run_within_a_minute() {
    let Some(mut agent) = agent() else { return };
    // Codex retries forever and names no URL; its parser names it in every
    // retry, and the host stops it after 30 s of errors without progress.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "OPENAI_BASE_URL",
        &[],
        std::time::Duration::from_secs(60),
    );
}
