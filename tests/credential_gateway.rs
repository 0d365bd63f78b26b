//! The credential gateway (issue 35): the agent holds a placeholder, never
//! the model API key; the host swaps the key in on requests to the API.
//!
//! The fake claude runs in a real docker sandbox and does what a hostile
//! agent would: reads its env, every process's environ and cmdline, and
//! greps the whole filesystem for the key. The model mock stands for the
//! API and records the key it received.

mod common;

use std::process::Command;

use common::engines::*;
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};
use sanddune_model_mock::ModelMock;
use serde_json::Value;

/// A key no one else has, split so that the prompt (in the agent's argv)
/// never holds it whole: `PART1` + `PART2`.
fn secret() -> (String, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    ("sk-ant-real-".to_string(), format!("{nanos:x}"))
}

/// `sanddune run --sandbox docker` of the fake claude with the key and the
/// mock as the user would set them.
fn run(repo: &TestRepo, mock: &ModelMock, key: &str, prompt: &str, extra: &[&str]) -> Command {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    let mut cmd = docker_run(repo, prompt, &args);
    cmd.env("ANTHROPIC_API_KEY", key)
        .env("ANTHROPIC_BASE_URL", mock.url());
    cmd
}

/// A request to the API as the CLI would make it, with the key it holds
/// (or `key` when given), answered by its HTTP status.
fn api_call(key: Option<&str>) -> String {
    let key = key.map_or("$ANTHROPIC_API_KEY".to_string(), str::to_string);
    format!(
        "FAKE:run:curl -s -o /dev/null -w %{{http_code}} -H \"x-api-key: {key}\" -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '{{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}' \"$ANTHROPIC_BASE_URL/v1/messages\""
    )
}

fn docker_the_agent_holds_a_placeholder_and_the_api_gets_the_real_key() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mock = ModelMock::start();
    let (part1, part2) = secret();
    let key = format!("{part1}{part2}");
    // The hunt: every process's environ and cmdline, and every file the
    // agent can read (the worktree, HOME, /tmp, /run, /etc, ...).
    let hunt = format!("FAKE:run:echo found=$(hunt-secret {part1} {part2})");
    let prompt = format!(
        "add a note\nFAKE:run:echo base=$ANTHROPIC_BASE_URL\n{}\n{}\n{hunt}",
        api_call(None),
        api_call(Some(
            "sk-ant-sanddune-placeholder-00000000000000000000000000000000"
        )),
    );
    let branch = unique("gateway");
    let out = run(&repo, &mock, &key, &prompt, &["--branch", &branch])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains("base=http://127.0.0.1:3129 (exit 0)"),
        "{text}"
    );
    // The call with the placeholder the agent holds: through; with another
    // placeholder: refused at the gateway.
    assert!(text.contains(" 200 (exit 0) 401 (exit 0)"), "{text}");
    // Nothing inside holds the key.
    assert!(
        text.contains(" found=0 (exit 0)"),
        "the key is in the sandbox: {text}"
    );
    let exchanges = mock.exchanges();
    assert_eq!(exchanges.len(), 1, "the refused call reached the API");
    assert_eq!(exchanges[0].headers.get("x-api-key"), Some(&key));
    assert_eq!(
        exchanges[0].headers.get("host").map(String::as_str),
        mock.url().strip_prefix("http://")
    );
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(
        log.contains(&format!(
            "credential gateway: ANTHROPIC_API_KEY stays on the host; the sandbox gets a placeholder, which the gateway swaps for it on requests to {}",
            mock.url()
        )),
        "{log}"
    );
    assert!(!log.contains(&key) && !stdout(&out).contains(&key));
    assert_no_container_left("docker", "name", &branch);
}

/// Under `egress=deny-all` the agent reaches its API through the gateway
/// (loopback, beside the proxy), and nothing else.
fn docker_the_gateway_works_under_deny_all() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mock = ModelMock::start();
    let (part1, part2) = secret();
    let key = format!("{part1}{part2}");
    let prompt = format!("add a note\n{}", api_call(None));
    let out = run(
        &repo,
        &mock,
        &key,
        &prompt,
        &["--sandbox-opt", "egress=deny-all"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        result["stdout"].as_str().unwrap().contains(" 200 (exit 0)"),
        "{result}"
    );
    assert_eq!(mock.exchanges()[0].headers.get("x-api-key"), Some(&key));
    assert!(result.get("deniedEgress").is_none(), "{result}");
}

/// `--no-gateway`: the key goes in as it is, and the log says so.
fn docker_no_gateway_gives_the_sandbox_the_key_and_says_so() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mock = ModelMock::start();
    let key = "sk-ant-given-as-it-is";
    // The hunt that finds nothing with the gateway finds the key here.
    let prompt = "add a note\nFAKE:run:echo found=$(hunt-secret sk-ant-given- as-it-is | cut -d' ' -f1)\nFAKE:say-env:ANTHROPIC_API_KEY";
    let out = run(&repo, &mock, key, prompt, &["--no-gateway"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = result["stdout"].as_str().unwrap();
    assert!(text.contains(key), "{result}");
    assert!(
        !text.contains(" found=0 "),
        "the hunt missed the key: {text}"
    );
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("warning: ANTHROPIC_API_KEY goes into the sandbox as it is: the credential gateway is off"),
        "{log}"
    );
}

/// A warm container's forwarder is started with it, before any run
/// (ADR 0037); the gateway and the proxy behind it are served from the
/// claim on. The run that claims one reaches its API with the real key
/// swapped in, is refused elsewhere, and holds no key.
fn docker_a_claimed_warm_container_reaches_the_gateway_and_the_proxy() {
    require_engine("docker");
    let repo = TestRepo::new();
    let mock = ModelMock::start();
    let (part1, part2) = secret();
    let key = format!("{part1}{part2}");
    let pooled = [
        "--strategy",
        "merge-to-head",
        "--sandbox-opt",
        "pool=1",
        "--sandbox-opt",
        "egress=deny-all",
    ];
    let fill = run(&repo, &mock, &key, "fill", &pooled).output().unwrap();
    assert!(fill.status.success(), "{}", stderr(&fill));
    let prompt = format!(
        "add a note\n{}\nFAKE:run:curl -s -o /dev/null -w %{{http_code}} http://example.invalid/\nFAKE:run:echo found=$(hunt-secret {part1} {part2})",
        api_call(None)
    );
    let out = run(&repo, &mock, &key, &prompt, &pooled).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert!(log.contains("pool: took a warm container"), "{log}");
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains(" 200 (exit 0)") && text.contains(" 403 (exit 0)"),
        "{text}"
    );
    assert!(
        text.contains(" found=0 (exit 0)"),
        "the key is in the sandbox: {text}"
    );
    let exchanges = mock.exchanges();
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0].headers.get("x-api-key"), Some(&key));
    assert_eq!(
        result["deniedEgress"].as_array().unwrap().len(),
        1,
        "{result}"
    );
    let gc = repo.sanddune(&["gc", "--drain-pool"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(docker_the_agent_holds_a_placeholder_and_the_api_gets_the_real_key),
        trial!(docker_the_gateway_works_under_deny_all),
        trial!(docker_no_gateway_gives_the_sandbox_the_key_and_says_so),
        trial!(docker_a_claimed_warm_container_reaches_the_gateway_and_the_proxy),
    ])
}
