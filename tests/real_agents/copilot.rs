//! copilot with `@github/copilot`, pointed at the mock by its own endpoint
//! settings (BYOK: COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY,
//! COPILOT_MODEL; chat completions, its default wire API), with no GitHub
//! token at all. It prints no token counts: the usage comes from its
//! session file.

use sanddune_model_mock::{COMMIT_MESSAGE, COMPLETION_SIGNAL, Usage};

use crate::harness::{Agent, Fault, usage_of};

const KEY: &str = "sk-mock";

fn env(base_url: &str) -> [(&'static str, String); 3] {
    [
        ("COPILOT_PROVIDER_BASE_URL", format!("{base_url}/v1")),
        ("COPILOT_PROVIDER_API_KEY", KEY.to_string()),
        ("COPILOT_MODEL", "gpt-5".to_string()),
    ]
}

fn run(agent: &Agent, args: &[&str]) -> std::process::Output {
    let env = env(agent.mock.url());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    agent.run(args, &env)
}

#[test]
fn copilot_commits_reports_the_mocks_usage_and_resumes() {
    let Some(agent) = Agent::new("copilot") else {
        return;
    };
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    let it = &result["iterations"][0];
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(agent.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let exchanges = agent.mock.exchanges();
    assert!(
        exchanges.iter().all(|e| e.path == "/v1/chat/completions"
            && e.headers["authorization"] == format!("Bearer {KEY}")),
        "{:?}",
        exchanges.iter().map(|e| &e.path).collect::<Vec<_>>()
    );
    let first = agent.mock.usages();
    assert_eq!(first.len(), 2, "a tool call and the answer");
    assert_eq!(usage_of(it), Usage::total(&first), "{it}");
    let id = it["sessionId"].as_str().unwrap().to_string();
    assert!(!id.is_empty());
    assert!(
        it["sessionFilePath"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("session-state/{id}/events.jsonl"))),
        "{it}"
    );

    let result = agent.ok(&run(
        &agent,
        &["--prompt", "add another line", "--resume", &id],
    ));
    let it = &result["iterations"][0];
    assert_eq!(it["sessionId"], id.as_str(), "resumed, not a new session");
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(agent.git(&["rev-list", "--count", "HEAD"]), "3");
    // The resumed iteration's own usage, not the session's.
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
fn copilot_refused_credentials_fail_the_run_naming_the_key() {
    let Some(agent) = Agent::new("copilot") else {
        return;
    };
    agent.mock.inject(Fault::Unauthorized);
    let out = run(&agent, &["--prompt", "add a line"]);
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("HTTP 401"), "{err}");
    assert!(err.contains("COPILOT_PROVIDER_API_KEY"), "{err}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

#[test]
fn copilot_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let Some(agent) = Agent::new("copilot") else {
        return;
    };
    agent.mock.inject(Fault::RateLimited { retry_after: 1 });
    agent.mock.inject(Fault::ServerErrorMidStream);
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let statuses: Vec<u16> = agent.mock.exchanges().iter().map(|e| e.status).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    // The cut answer reported no usage; only the answers that did count.
    assert_eq!(
        usage_of(&result["iterations"][0]),
        Usage::total(&agent.mock.usages())
    );
}

#[test]
fn copilot_with_its_api_unreachable_fails_naming_the_url_and_the_variable() {
    let Some(agent) = Agent::new("copilot") else {
        return;
    };
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let env = env(&closed);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let started = std::time::Instant::now();
    let out = agent.run_within(120, &["--prompt", "add a line"], &env);
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{closed}/v1")), "{err}");
    assert!(err.contains("COPILOT_PROVIDER_BASE_URL"), "{err}");
    // copilot 1.0.102 retries silently for about 25 s before it says so.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn copilot_without_the_signal_runs_to_max_iterations() {
    let Some(agent) = Agent::new("copilot") else {
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
