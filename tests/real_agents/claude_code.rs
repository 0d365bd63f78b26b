//! claude-code with `@anthropic-ai/claude-code`, pointed at the mock by
//! ANTHROPIC_BASE_URL (it appends /v1/messages) and ANTHROPIC_API_KEY.

use crate::harness::{self, Agent};

fn agent() -> Option<Agent> {
    Agent::new("claude-code", |url| {
        vec![
            ("ANTHROPIC_BASE_URL", url.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-mock".to_string()),
        ]
    })
}

#[test]
fn claude_code_commits_reports_the_mocks_usage_and_resumes() {
    let Some(agent) = agent() else { return };
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

#[test]
fn claude_code_refused_credentials_fail_the_run_naming_the_key() {
    let Some(agent) = agent() else { return };
    harness::refused_credentials_fail_the_run(
        &agent,
        &[],
        &["Invalid API key", "ANTHROPIC_API_KEY"],
    );
}

#[test]
#[ignore = "claude prints api_retry on a 429, an error event; needs the host to let an iteration that recovers succeed (issue 21)"]
fn claude_code_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let Some(agent) = agent() else { return };
    harness::rides_out_a_429_and_a_cut_stream(&agent, &[], true);
}

#[test]
fn claude_code_without_the_signal_runs_to_max_iterations() {
    let Some(agent) = agent() else { return };
    harness::runs_to_max_iterations_without_the_signal(&agent, &[]);
}

#[test]
fn claude_code_an_unreachable_api_fails_the_run_within_a_minute() {
    let Some(mut agent) = agent() else { return };
    // claude alone retries for ~190 s; the host stops it after 30 s of
    // errors. claude never prints the URL.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "ANTHROPIC_BASE_URL",
        &[],
        std::time::Duration::from_secs(60),
        false,
    );
}
