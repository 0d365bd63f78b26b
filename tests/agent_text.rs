//! Nothing the agent produced reaches a terminal raw (issue 33, part 4):
//! a fake agent commits with a subject holding an OSC 52 sequence (a
//! clipboard write) and prints escapes; the real binary's summary, its
//! `--log terminal` lines and its log file show them as `\e`, `\a`.

mod common;

use common::live::forge_run_record;
use common::{TestRepo, stderr, stdout};

/// The agent's work: a commit whose subject writes the clipboard, and
/// text that writes it, clears the screen and backs up to overwrite what
/// is shown.
const HOSTILE_PROMPT: &str = "add a note\n\
    FAKE:run:git commit -q --allow-empty -m \"$(printf 'subject \\033]52;c;aGk=\\007 end')\"\n\
    FAKE:tell:said \x1b]52;c;aGk=\x07 \x1b[2J\x08over";

fn assert_no_raw_controls(what: &str, text: &str) {
    assert!(
        !text.contains(['\x1b', '\x07', '\x08']),
        "{what} holds a raw control character: {text:?}"
    );
}

#[test]
fn the_summary_and_the_terminal_log_show_the_agents_escapes_not_obey_them() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        HOSTILE_PROMPT,
        "--log",
        "terminal",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (summary, log) = (stdout(&out), stderr(&out));
    assert_no_raw_controls("the summary", &summary);
    assert_no_raw_controls("the terminal log", &log);
    assert!(summary.contains(r"subject \e]52;c;aGk=\a end"), "{summary}");
    assert!(log.contains(r"said \e]52;c;aGk=\a \e[2J\x08over"), "{log}");
    // The commit itself keeps what the agent wrote.
    assert!(
        repo.git(&["log", "--format=%s"])
            .contains("subject \x1b]52;c;aGk=\x07 end")
    );
}

#[test]
fn the_log_file_shows_the_agents_escapes_as_tail_would_print_them() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        HOSTILE_PROMPT,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let log = std::fs::read_to_string(result["logFilePath"].as_str().unwrap()).unwrap();
    assert_no_raw_controls("the log file", &log);
    assert!(log.contains(r"said \e]52;c;aGk=\a"), "{log}");
}

/// `sanddune ARGS` with its stdout a terminal (a pty `script` makes), as a
/// person runs it; what it printed there.
fn at_a_terminal(repo: &TestRepo, args: &[&str]) -> String {
    let out = std::process::Command::new("script")
        .args(["-qec", &repo.shell_line(args), "/dev/null"])
        .current_dir(repo.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn logs_at_a_terminal_shows_the_agents_escapes_and_raw_passes_them() {
    let repo = TestRepo::new();
    let logs = repo.path().join(".sanddune/logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(
        logs.join("mine.log"),
        "said \x1b]52;c;aGk=\x07 \x1b[31mred\n",
    )
    .unwrap();
    forge_run_record(&repo, "mine", &logs.join("mine.log"));

    let shown = at_a_terminal(&repo, &["logs", "mine"]);
    assert_no_raw_controls("logs at a terminal", &shown);
    assert!(
        shown.contains(r"said \e]52;c;aGk=\a \e[31mred"),
        "{shown:?}"
    );
    let raw = at_a_terminal(&repo, &["logs", "mine", "--raw"]);
    assert!(
        raw.contains("said \x1b]52;c;aGk=\x07 \x1b[31mred"),
        "{raw:?}"
    );
}
