//! pi with `@mariozechner/pi-coding-agent`: it ignores ANTHROPIC_BASE_URL,
//! so the provider writes the URL into ~/.pi/agent/models.json in the
//! sandbox; the key is ANTHROPIC_API_KEY.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

const MODEL: [&str; 2] = ["--model", "claude-sonnet-4-5"];

fn agent() -> Agent {
    Agent::new("pi", |url| {
        vec![
            ("ANTHROPIC_BASE_URL", url.to_string()),
            ("ANTHROPIC_API_KEY", "sk-ant-mock".to_string()),
        ]
    })
}

fn pi_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &MODEL, true);
}

fn pi_refused_credentials_fail_the_run_naming_the_key() {
    let agent = agent();
    // pi exits 0 here: the failure is sanddune's reading of its stream.
    harness::refused_credentials_fail_the_run(
        &agent,
        &MODEL,
        &["invalid x-api-key", "ANTHROPIC_API_KEY"],
    );
}

fn pi_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    harness::rides_out_a_429_and_a_cut_stream(&agent, &MODEL, true);
}

fn pi_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &MODEL);
}

fn pi_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url() {
    let mut agent = agent();
    // pi gives up after three retries (~22 s) and exits 0; it never
    // prints the URL: the parser names it.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "ANTHROPIC_BASE_URL",
        &MODEL,
        std::time::Duration::from_secs(60),
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(pi_commits_reports_the_mocks_usage_and_resumes),
        trial!(pi_refused_credentials_fail_the_run_naming_the_key),
        trial!(pi_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(pi_without_the_signal_runs_to_max_iterations),
        trial!(pi_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url),
    ]
}
