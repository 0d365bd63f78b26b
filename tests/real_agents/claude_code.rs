//! claude-code with `@anthropic-ai/claude-code`, pointed at the mock by
//! ANTHROPIC_BASE_URL (it appends /v1/messages) and ANTHROPIC_API_KEY.

use sanddune_model_mock::{COMMIT_MESSAGE, COMPLETION_SIGNAL, Usage};

use crate::harness::{Agent, Fault, usage_of};

const KEY: &str = "sk-ant-mock";

fn env(agent: &Agent) -> [(&'static str, String); 2] {
    [
        ("ANTHROPIC_BASE_URL", agent.mock.url().to_string()),
        ("ANTHROPIC_API_KEY", KEY.to_string()),
    ]
}

fn run(agent: &Agent, args: &[&str]) -> std::process::Output {
    let env = env(agent);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    agent.run(args, &env)
}

#[test]
fn claude_code_commits_reports_the_mocks_usage_and_resumes() {
    let Some(agent) = Agent::new("claude-code") else {
        return;
    };
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    let it = &result["iterations"][0];
    let sha = result["commits"][0]["sha"].as_str().unwrap();
    assert_eq!(agent.git(&["rev-parse", "HEAD"]), sha);
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let first = agent.mock.usages();
    assert_eq!(first.len(), 2, "a tool call and the answer");
    assert_eq!(usage_of(it), Usage::total(&first), "{it}");
    let id = it["sessionId"].as_str().unwrap().to_string();
    assert!(!id.is_empty());

    // The prompt reaches the model as given, with nothing before it.
    let exchanges = agent.mock.exchanges();
    let texts: Vec<&str> = exchanges[exchanges.iter().position(|e| e.usage.is_some()).unwrap()]
        .body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(texts.last(), Some(&"add a line"), "{texts:?}");

    let result = agent.ok(&run(&agent, &["--prompt", "add another line", "--resume", &id]));
    let it = &result["iterations"][0];
    assert_eq!(it["sessionId"], id.as_str(), "resumed, not a new session");
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(agent.git(&["rev-list", "--count", "HEAD"]), "3");
    let all = agent.mock.usages();
    assert_eq!(usage_of(it), Usage::total(&all[first.len()..]), "{it}");
    // The resumed request carries the first run's conversation.
    let last = agent.mock.exchanges().pop().unwrap();
    assert!(
        last.body.to_string().contains("add a line"),
        "the resumed conversation: {}",
        last.body
    );
}

#[test]
fn claude_code_refused_credentials_fail_the_run_naming_the_key() {
    let Some(agent) = Agent::new("claude-code") else {
        return;
    };
    agent.mock.inject(Fault::Unauthorized);
    let out = run(&agent, &["--prompt", "add a line"]);
    let err = crate::common::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Invalid API key"), "{err}");
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

#[test]
fn claude_code_rides_out_a_429_and_a_stream_cut_by_an_error() {
    let Some(agent) = Agent::new("claude-code") else {
        return;
    };
    agent.mock.inject(Fault::RateLimited { retry_after: 1 });
    agent.mock.inject(Fault::ServerErrorMidStream);
    let result = agent.ok(&run(&agent, &["--prompt", "add a line"]));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let statuses: Vec<u16> = agent.mock.exchanges().iter().map(|e| e.status).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    // claude counts the cut answer's message_start usage too.
    assert_eq!(
        usage_of(&result["iterations"][0]),
        Usage::total(&agent.mock.usages())
    );
}

#[test]
fn claude_code_without_the_signal_runs_to_max_iterations() {
    let Some(agent) = Agent::new("claude-code") else {
        return;
    };
    agent.mock.inject(Fault::NeverComplete);
    let result = agent.ok(&run(
        &agent,
        &["--prompt", "add a line", "--max-iterations", "2"],
    ));
    assert_eq!(result["iterations"].as_array().unwrap().len(), 2, "{result}");
    assert!(result["completionSignal"].is_null(), "{result}");
    assert_eq!(result["commits"].as_array().unwrap().len(), 2, "{result}");
}
