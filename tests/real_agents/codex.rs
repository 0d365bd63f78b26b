//! codex with `@openai/codex`, set up as a user with only OPENAI_API_KEY and
//! OPENAI_BASE_URL would: codex 0.169 reads neither (it sends CODEX_API_KEY
//! and reads the config key `openai_base_url`), so the provider must pass
//! them on. Codex tries a WebSocket upgrade first (the mock answers 426),
//! then streams the Responses API over HTTP, running its shell through the
//! freeform `exec` tool.

use sanddune_model_mock::{COMMIT_MESSAGE, COMPLETION_SIGNAL, Usage};

use crate::harness::{Agent, Fault, usage_of};

const KEY: &str = "sk-mock";

fn env(base_url: &str) -> [(&'static str, String); 2] {
    [
        ("OPENAI_BASE_URL", format!("{base_url}/v1")),
        ("OPENAI_API_KEY", KEY.to_string()),
    ]
}

fn run(agent: &Agent, args: &[&str]) -> std::process::Output {
    let env = env(agent.mock.url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    agent.run(args, &env)
}

#[test]
fn codex_commits_reports_the_mocks_usage_and_resumes() {
    let Some(agent) = Agent::new("codex") else {
        return;
    };
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    let it = &result["iterations"][0];
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(agent.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
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
    let first = agent.mock.usages();
    assert_eq!(first.len(), 2, "a tool call and the answer");
    assert_eq!(usage_of(it), Usage::total(&first), "{it}");
    let id = it["sessionId"].as_str().unwrap().to_string();
    assert!(!id.is_empty());

    let result = agent.ok(&run(
        &agent,
        &["--prompt", "add another line", "--resume", &id],
    ));
    let it = &result["iterations"][0];
    assert_eq!(it["sessionId"], id.as_str(), "resumed, not a new session");
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(agent.git(&["rev-list", "--count", "HEAD"]), "3");
    // The resumed iteration's own usage: codex prints the session's total.
    let all = agent.mock.usages();
    assert_eq!(usage_of(it), Usage::total(&all[first.len()..]), "{it}");
    let last = agent.mock.exchanges().pop().unwrap();
    assert!(
        last.body.to_string().contains("add a line"),
        "the resumed conversation: {}",
        last.body
    );
}

#[test]
fn codex_refused_credentials_fail_the_run_naming_the_key() {
    let Some(agent) = Agent::new("codex") else {
        return;
    };
    agent.mock.inject(Fault::Unauthorized);
    let out = run(&agent, &["--prompt", "add a line"]);
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("401 Unauthorized"), "{err}");
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

#[test]
fn codex_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let Some(agent) = Agent::new("codex") else {
        return;
    };
    agent.mock.inject(Fault::RateLimited { retry_after: 1 });
    agent.mock.inject(Fault::ServerErrorMidStream);
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let statuses: Vec<u16> = agent.mock.exchanges().iter().map(|e| e.status).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    // The cut answer reported no usage; codex counts the completed ones.
    assert_eq!(
        usage_of(&result["iterations"][0]),
        Usage::total(&agent.mock.usages())
    );
}

#[test]
fn codex_with_its_api_unreachable_fails_in_seconds_naming_the_url() {
    let Some(agent) = Agent::new("codex") else {
        return;
    };
    // A port nothing listens on. Codex itself retries forever.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let env = env(&closed);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let started = std::time::Instant::now();
    let out = agent.run_within(90, &["--prompt", "add a line"], &env);
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{closed}/v1")), "{err}");
    assert!(err.contains("OPENAI_BASE_URL"), "{err}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn codex_without_the_signal_runs_to_max_iterations() {
    let Some(agent) = Agent::new("codex") else {
        return;
    };
    agent.mock.inject(Fault::NeverComplete);
    let result = agent.ok(&run(
        &agent,
        &["--prompt", "add a line", "--max-iterations", "2"],
    ));
    assert_eq!(
        result["iterations"].as_array().unwrap().len(),
        2,
        "{result}"
    );
    assert!(result["completionSignal"].is_null(), "{result}");
    assert_eq!(result["commits"].as_array().unwrap().len(), 2, "{result}");
}
