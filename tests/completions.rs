//! `sanddune completions SHELL`: the registration script, and what the
//! shell is offered when it calls sanddune back, through the real binary;
//! and bash itself completing a live run's name at Tab, in tmux.

mod common;

use std::process::Child;
use std::time::Duration;

use common::live::{hanging_run, wait_running};
use common::tmux::{self, Tmux};
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};

/// What bash is offered for the word at `index` of `words` (its
/// `COMP_WORDS`), as the registration script asks for it; flags left out.
fn offered(repo: &TestRepo, words: &[&str], index: usize) -> Vec<String> {
    let mut args = vec!["--"];
    args.extend_from_slice(words);
    let out = repo
        .command(&args)
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", index.to_string())
        .env("_CLAP_COMPLETE_COMP_TYPE", "9")
        .env("_CLAP_COMPLETE_SPACE", "true")
        .env("_CLAP_IFS", "\n")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .filter(|l| !l.starts_with('-'))
        .map(String::from)
        .collect()
}

/// A run that hangs until stopped, once it runs its agent.
fn running(repo: &TestRepo, name: &str) -> Child {
    let run = hanging_run(repo, name, &[]);
    wait_running(repo, 1);
    run
}

fn stop(repo: &TestRepo, name: &str, mut run: Child) {
    let out = repo.sanddune(&["stop", name]);
    assert!(out.status.success(), "stop: {}", stderr(&out));
    run.wait().unwrap();
}

fn the_registration_script_is_printed_for_each_shell_and_an_unknown_one_is_refused() {
    let repo = TestRepo::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = repo.sanddune(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        // It calls the binary back with COMPLETE set to the shell.
        assert!(script.contains("COMPLETE"), "{shell}: {script}");
        assert!(script.contains("sanddune"), "{shell}: {script}");
    }
    let out = repo.sanddune(&["completions", "nushell"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no completions for shell `nushell`: pick one of bash"),
        "{}",
        stderr(&out)
    );
}

fn commands_providers_and_workflows_are_offered() {
    let repo = TestRepo::new();
    let commands = offered(&repo, &["sanddune", "a"], 1);
    assert_eq!(commands, ["attach"], "{commands:?}");

    // Sandbox providers, not agents; a path-like word completes files.
    let sandboxes = offered(&repo, &["sanddune", "run", "--sandbox", ""], 3);
    for want in ["docker", "podman", "test-isolated", "vercel", "daytona"] {
        assert!(sandboxes.iter().any(|s| s == want), "{want}: {sandboxes:?}");
    }
    assert!(
        !sandboxes.iter().any(|s| s == "claude-code"),
        "{sandboxes:?}"
    );
    let agents = offered(&repo, &["sanddune", "run", "--agent", "c"], 3);
    assert_eq!(agents, ["claude-code", "codex", "cursor", "copilot"]);
    std::fs::write(repo.path().join("mine.wasm"), b"").unwrap();
    let files = offered(&repo, &["sanddune", "run", "--sandbox", "./m"], 3);
    assert_eq!(files, ["./mine.wasm"]);

    let dir = repo.path().join(".sanddune/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["nightly", "triage"] {
        std::fs::write(
            dir.join(format!("{name}.toml")),
            "[[steps]]\nname = \"run\"\nprompt = \"x\"\n",
        )
        .unwrap();
    }
    let workflows = offered(&repo, &["sanddune", "workflow", "run", ""], 3);
    assert_eq!(workflows, ["nightly", "triage"]);
}

fn live_run_names_are_offered_to_logs_stop_and_attach() {
    let repo = TestRepo::new();
    let run = running(&repo, "fix-login");
    for command in ["logs", "stop", "attach"] {
        let names = offered(&repo, &["sanddune", command, "fix"], 2);
        assert_eq!(names, ["fix-login"], "{command}");
    }
    stop(&repo, "fix-login", run);
    assert!(offered(&repo, &["sanddune", "stop", ""], 2).is_empty());
}

fn bash_completes_a_live_run_at_tab() {
    tmux::require();
    let repo = TestRepo::new();
    let run = running(&repo, "fix-login");
    // A person's bash: sanddune on PATH (as `cargo install` puts it), the
    // script sourced as the README says.
    let bin = std::path::Path::new(common::BIN).parent().unwrap();
    let mut shell = repo.command(&["--norc", "--noprofile"]);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    shell.env("PATH", path).env("PS1", "$ ");
    let line = common::shell_line(&shell).replace(&format!("'{}'", common::BIN), "bash");
    let term = Tmux::start(&line, repo.path(), 100, 20);
    term.send_keys(&["source <(sanddune completions bash)", "Enter"]);
    term.send_keys(&["sanddune logs fix", "Tab"]);
    term.wait_for("the completed name", Duration::from_secs(20), |s| {
        s.contains("sanddune logs fix-login")
    });
    term.send_keys(&["C-u", "exit", "Enter"]);
    stop(&repo, "fix-login", run);
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(the_registration_script_is_printed_for_each_shell_and_an_unknown_one_is_refused),
        trial!(commands_providers_and_workflows_are_offered),
        trial!(live_run_names_are_offered_to_logs_stop_and_attach),
        trial!(bash_completes_a_live_run_at_tab),
    ])
}
