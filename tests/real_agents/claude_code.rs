//! claude-code with `@anthropic-ai/claude-code`, pointed at the mock by
//! ANTHROPIC_BASE_URL (it appends /v1/messages) and ANTHROPIC_API_KEY.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

fn agent() -> Agent {
    Agent::new("claude-code", |url| {
        vec![
            ("ANTHROPIC_BASE_URL", url.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-mock".to_string()),
        ]
    })
}

fn claude_code_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &[], true);
    // The prompt reaches the model as given, with nothing before it (the
    // provider once sent `-p -`, which claude took as prompt text).
    let first = &agent
        .mock
        .exchanges()
        .into_iter()
        .find(|e| e.usage.is_some())
        .unwrap();
    let texts: Vec<&str> = first.body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(texts.last(), Some(&"add a line"), "{texts:?}");
}

/// The real CLI in a bubblewrap jail (ADR 0036): it commits through the
/// agent's own git dir, its session comes back and resumes, and the key
/// stays with the gateway.
fn claude_code_commits_and_resumes_in_a_bubblewrap_jail() {
    let agent = agent().in_jail();
    harness::commits_and_reports_usage(&agent, &[], true);
}

fn claude_code_refused_credentials_fail_the_run_naming_the_key() {
    let agent = agent();
    harness::refused_credentials_fail_the_run(
        &agent,
        &[],
        &["Invalid API key", "ANTHROPIC_API_KEY"],
    );
}

fn claude_code_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    harness::rides_out_a_429_and_a_cut_stream(&agent, &[], true);
}

fn claude_code_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &[]);
}

fn claude_code_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url() {
    let mut agent = agent();
    // claude alone retries for ~190 s; the host stops it after 30 s of
    // errors. claude never prints the URL: the parser names it.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "ANTHROPIC_BASE_URL",
        &[],
        std::time::Duration::from_secs(60),
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(claude_code_commits_reports_the_mocks_usage_and_resumes),
        trial!(claude_code_commits_and_resumes_in_a_bubblewrap_jail),
        trial!(claude_code_refused_credentials_fail_the_run_naming_the_key),
        trial!(claude_code_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(claude_code_without_the_signal_runs_to_max_iterations),
        trial!(claude_code_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url),
    ]
}
