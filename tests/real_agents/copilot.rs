//! copilot with `@github/copilot`, pointed at the mock by its own endpoint
//! settings (BYOK: COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY,
//! COPILOT_MODEL; chat completions, its default wire API), with no GitHub
//! token at all. It prints no token counts: the usage comes from its
//! session file.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

fn agent() -> Agent {
    Agent::new("copilot", |url| {
        vec![
            ("COPILOT_PROVIDER_BASE_URL", format!("{url}/v1")),
            ("COPILOT_PROVIDER_API_KEY", "sk-mock".to_string()),
            ("COPILOT_MODEL", "gpt-5".to_string()),
        ]
    })
}

fn copilot_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &[], true);
    for e in agent.mock.exchanges() {
        assert_eq!(e.path, "/v1/chat/completions");
        assert_eq!(e.headers["authorization"], "Bearer sk-mock");
    }
}

fn copilot_refused_credentials_fail_the_run_naming_the_key() {
    let agent = agent();
    harness::refused_credentials_fail_the_run(
        &agent,
        &[],
        &["HTTP 401", "COPILOT_PROVIDER_API_KEY"],
    );
}

fn copilot_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    harness::rides_out_a_429_and_a_cut_stream(&agent, &[], false);
}

fn copilot_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &[]);
}

fn copilot_an_unreachable_api_fails_the_run_within_a_minute() {
    let mut agent = agent();
    // copilot 1.0.102 retries silently for about 25 s, then names the URL;
    // its parser adds the variable.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "COPILOT_PROVIDER_BASE_URL",
        &[],
        std::time::Duration::from_secs(60),
    );
}

/// The Responses wire API works too.
fn copilot_over_the_responses_api_commits_and_reports_usage() {
    let mut agent = agent();
    agent
        .env
        .push(("COPILOT_PROVIDER_WIRE_API", "responses".to_string()));
    harness::commits_and_reports_usage(&agent, &[], false);
    assert!(
        agent
            .mock
            .exchanges()
            .iter()
            .all(|e| e.path == "/v1/responses")
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(copilot_commits_reports_the_mocks_usage_and_resumes),
        trial!(copilot_refused_credentials_fail_the_run_naming_the_key),
        trial!(copilot_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(copilot_without_the_signal_runs_to_max_iterations),
        trial!(copilot_an_unreachable_api_fails_the_run_within_a_minute),
        trial!(copilot_over_the_responses_api_commits_and_reports_usage),
    ]
}
