//! opencode with `opencode-ai`: the provider turns ANTHROPIC_BASE_URL into
//! opencode's own provider config (it would append /messages to the
//! variable itself, where Claude Code appends /v1/messages); the key is
//! ANTHROPIC_API_KEY.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

const MODEL: [&str; 2] = ["--model", "anthropic/claude-sonnet-4-5"];

fn agent() -> Agent {
    Agent::new("opencode", |url| {
        vec![
            ("ANTHROPIC_BASE_URL", url.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-mock".to_string()),
        ]
    })
}

fn opencode_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &MODEL, true);
}

fn opencode_refused_credentials_fail_the_run_naming_the_url() {
    let agent = agent();
    let url = format!("{}/v1/messages", agent.mock.url());
    harness::refused_credentials_fail_the_run(
        &agent,
        &MODEL,
        &["invalid x-api-key", &url, "ANTHROPIC_API_KEY"],
    );
}

fn opencode_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    // opencode retries both silently and leaves the cut answer's usage out.
    harness::rides_out_a_429_and_a_cut_stream(&agent, &MODEL, false);
}

fn opencode_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &MODEL);
}

fn opencode_an_unreachable_api_fails_the_run_naming_the_url() {
    let mut agent = agent();
    // opencode retries silently for ~85 s (no line to count as an error),
    // then prints one error with the URL it tried and exits 1.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "ANTHROPIC_BASE_URL",
        &MODEL,
        std::time::Duration::from_secs(180),
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(opencode_commits_reports_the_mocks_usage_and_resumes),
        trial!(opencode_refused_credentials_fail_the_run_naming_the_url),
        trial!(opencode_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(opencode_without_the_signal_runs_to_max_iterations),
        trial!(opencode_an_unreachable_api_fails_the_run_naming_the_url),
    ]
}
