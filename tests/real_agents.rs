//! Every agent provider against its real CLI, pinned in tests/agent-clis:
//! `sanddune run --sandbox test-isolated --agent NAME` with the CLI pointed
//! at the scripted model mock (tests/model-mock) only by the env a user of
//! the provider sets. The model has the CLI's shell tool make a plain git
//! commit, then answers with the completion signal; the tests check the
//! commit on the branch, the session id, the usage the mock reported, and
//! how each CLI's failures (401, 429, a stream cut by an error, an
//! unreachable API, no completion signal) come out of sanddune.

mod common;

#[path = "real_agents/harness.rs"]
mod harness;

#[path = "real_agents/claude_code.rs"]
mod claude_code;

#[path = "real_agents/opencode.rs"]
mod opencode;

#[path = "real_agents/pi.rs"]
mod pi;

#[path = "real_agents/codex.rs"]
mod codex;

#[path = "real_agents/copilot.rs"]
mod copilot;

#[path = "real_agents/gemini.rs"]
mod gemini;

#[path = "real_agents/qwen_code.rs"]
mod qwen_code;

fn main() -> std::process::ExitCode {
    let agents = [
        claude_code::trials(),
        opencode::trials(),
        pi::trials(),
        codex::trials(),
        copilot::trials(),
        gemini::trials(),
        qwen_code::trials(),
    ];
    common::trials::run(agents.into_iter().flatten().collect())
}
