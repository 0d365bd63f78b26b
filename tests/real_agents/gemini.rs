//! gemini with `@google/gemini-cli`, pointed at the mock by
//! GOOGLE_GEMINI_BASE_URL with GEMINI_API_KEY (the Gemini API's streamed
//! `generateContent`). The provider writes ~/.gemini/settings.json choosing
//! API-key auth, without which the CLI refuses a base URL. It keeps no
//! session files the host can find, so there is no resume to check.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

/// A model named: without one the CLI first asks a router model.
const MODEL: [&str; 2] = ["--model", "gemini-2.5-pro"];

fn agent() -> Agent {
    Agent::new("gemini", |url| {
        vec![
            ("GOOGLE_GEMINI_BASE_URL", url.to_string()),
            ("GEMINI_API_KEY", "gm-mock-key".to_string()),
        ]
    })
}

fn gemini_commits_and_reports_the_mocks_usage() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &MODEL, false);
    for e in agent.mock.exchanges() {
        assert_eq!(
            e.path, "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
            "the only call with a model named"
        );
        assert_eq!(e.headers["x-goog-api-key"], "gm-mock-key");
    }
}

fn gemini_refused_credentials_fail_the_run_naming_the_key() {
    let agent = agent();
    // The CLI exits 145 (the 401 modulo 256); its error names no key.
    harness::refused_credentials_fail_the_run(
        &agent,
        &MODEL,
        &["API key not valid", "GEMINI_API_KEY"],
    );
}

fn gemini_rides_out_a_429() {
    let agent = agent();
    // The CLI backs off 5 s (with jitter) and tries again. The mock has
    // no record of how the Gemini API cuts a stream, so unlike the other
    // agents' this test injects no mid-stream error.
    agent
        .mock
        .inject(harness::Fault::RateLimited { retry_after: 1 });
    let mut args = vec!["--prompt", "add a line"];
    args.extend_from_slice(&MODEL);
    let result = agent.ok(&agent.run(&args));
    assert_eq!(
        result["completionSignal"],
        harness::COMPLETION_SIGNAL,
        "{result}"
    );
    let statuses: Vec<u16> = agent.mock.exchanges().iter().map(|e| e.status).collect();
    assert_eq!(statuses.first(), Some(&429), "{statuses:?}");
    assert_eq!(
        harness::usage_of(&result["iterations"][0]),
        harness::Usage::total(&harness::turn_usages(&agent.mock)),
        "{result}"
    );
}

fn gemini_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &MODEL);
}

fn gemini_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url() {
    let mut agent = agent();
    // The CLI's own default is 10 tries with back-off (about 3.5 minutes);
    // `max-attempts=1` is the agent option that caps it. It says only
    // "fetch failed": the parser names the URL and the variable.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "GOOGLE_GEMINI_BASE_URL",
        &["--model", "gemini-2.5-pro", "--agent-opt", "max-attempts=1"],
        std::time::Duration::from_secs(60),
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(gemini_commits_and_reports_the_mocks_usage),
        trial!(gemini_refused_credentials_fail_the_run_naming_the_key),
        trial!(gemini_rides_out_a_429),
        trial!(gemini_without_the_signal_runs_to_max_iterations),
        trial!(gemini_an_unreachable_api_fails_the_run_within_a_minute_naming_the_url),
    ]
}
