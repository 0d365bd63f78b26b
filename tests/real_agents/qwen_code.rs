//! qwen-code with `@qwen-code/qwen-code`, pointed at the mock's chat
//! completions by OPENAI_BASE_URL with OPENAI_API_KEY. The provider writes
//! ~/.qwen/settings.json turning the CLI's memory-extraction call off, so
//! every request the mock sees is one of the agent's turns.

use crate::common::trials::{Trial, trial};
use crate::harness::{self, Agent};

const MODEL: [&str; 2] = ["--model", "qwen3-coder-plus"];

/// The CLI's own retries cost a minute and more (a rate limit waits 60 s
/// first); `max-retries=0` leaves only its inner back-off of ~1.5 s.
const FEW_RETRIES: [&str; 4] = [
    "--model",
    "qwen3-coder-plus",
    "--agent-opt",
    "max-retries=0",
];

fn agent() -> Agent {
    Agent::new("qwen-code", |url| {
        vec![
            ("OPENAI_BASE_URL", format!("{url}/v1")),
            ("OPENAI_API_KEY", "sk-qwen-mock".to_string()),
        ]
    })
}

fn qwen_code_commits_reports_the_mocks_usage_and_resumes() {
    let agent = agent();
    harness::commits_and_reports_usage(&agent, &MODEL, true);
    for e in agent.mock.exchanges() {
        assert_eq!(e.path, "/v1/chat/completions");
        assert_eq!(e.headers["authorization"], "Bearer sk-qwen-mock");
        assert_eq!(e.body["model"], "qwen3-coder-plus");
    }
}

fn qwen_code_refused_credentials_fail_the_run_naming_the_key_and_url() {
    let agent = agent();
    let url = format!("{}/v1", agent.mock.url());
    harness::refused_credentials_fail_the_run(
        &agent,
        &MODEL,
        &["API Error: 401", "OPENAI_API_KEY", &url],
    );
}

fn qwen_code_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let agent = agent();
    // The cut answer sends no usage chunk, so none is counted.
    harness::rides_out_a_429_and_a_cut_stream(&agent, &FEW_RETRIES, false);
}

fn qwen_code_without_the_signal_runs_to_max_iterations() {
    let agent = agent();
    harness::runs_to_max_iterations_without_the_signal(&agent, &MODEL);
}

fn qwen_code_an_unreachable_api_fails_the_run_naming_the_url() {
    let mut agent = agent();
    // Even with max-retries=0 the CLI tries 7 times with back-off (~76 s)
    // and then says "Connection error": the parser names the URL and the
    // variable.
    harness::an_unreachable_api_fails_the_run(
        &mut agent,
        "OPENAI_BASE_URL",
        &FEW_RETRIES,
        std::time::Duration::from_secs(150),
    );
}

pub fn trials() -> Vec<Trial> {
    vec![
        trial!(qwen_code_commits_reports_the_mocks_usage_and_resumes),
        trial!(qwen_code_refused_credentials_fail_the_run_naming_the_key_and_url),
        trial!(qwen_code_rides_out_a_429_and_a_stream_cut_by_an_error),
        trial!(qwen_code_without_the_signal_runs_to_max_iterations),
        trial!(qwen_code_an_unreachable_api_fails_the_run_naming_the_url),
    ]
}
