//! The terminal as a person sees it: `sanddune run --log terminal` in a
//! real terminal (tmux), read off the screen.

mod common;

use std::time::Duration;

use common::tmux::{self, Tmux};
use common::trials::{self, trial};
use common::{TestRepo, plugin_file};

/// How long a screen may take: a run right after a build compiles every
/// component first (shared cache), on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(180);

/// A spinner row: a braille spinner glyph and the elapsed time.
fn spinner_row(screen: &str) -> Option<&str> {
    screen.lines().find(|l| {
        l.trim_start()
            .starts_with(|c: char| ('\u{2800}'..='\u{28ff}').contains(&c))
            && l.trim_end().ends_with(')')
    })
}

fn run_log_terminal_shows_a_spinner_then_the_events_and_a_clean_summary() {
    tmux::require();
    let repo = TestRepo::new();
    let line = repo.shell_line(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo FAKE:slow",
        "--log",
        "terminal",
    ]);
    let term = Tmux::start(&line, repo.path(), 100, 30);

    // While the agent works: its events so far, and under them the spinner
    // saying what runs now.
    let screen = term.wait_for("the spinner under the agent's events", PATIENCE, |s| {
        s.contains("[1] Let me look at the repository.")
            && spinner_row(s).is_some_and(|row| row.contains("iteration 1: `claude` is working"))
    });
    let events = screen.find("[1] Let me look").unwrap();
    let spinner = screen.find("iteration 1: `claude` is working").unwrap();
    assert!(
        events < spinner,
        "the spinner stays below the events:\n{screen}"
    );

    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 0, "{screen}");
    // The summary, and no spinner left behind.
    assert!(screen.contains("1 iteration"), "{screen}");
    assert!(screen.contains("1 commit on main"), "{screen}");
    assert!(screen.contains("Fix typo in README"), "{screen}");
    assert!(screen.contains("[1] > Bash"), "{screen}");
    assert_eq!(
        spinner_row(&screen),
        None,
        "the spinner was not cleared:\n{screen}"
    );
    assert!(!screen.contains("is working"), "a stale status:\n{screen}");
    // The iteration headline is bold on a terminal, and no escape codes
    // leak into the text.
    assert!(
        !screen.contains("\\x1b") && !screen.contains("[1m"),
        "{screen}"
    );
}

fn a_failed_run_on_the_terminal_clears_the_spinner_and_says_why() {
    tmux::require();
    let repo = TestRepo::new();
    let line = repo.shell_line(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "note this FAKE:is-error",
        "--log",
        "terminal",
    ]);
    let term = Tmux::start(&line, repo.path(), 100, 30);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 1, "{screen}");
    assert!(screen.contains("429 rate limit exceeded"), "{screen}");
    assert_eq!(
        spinner_row(&screen),
        None,
        "the spinner was not cleared:\n{screen}"
    );
}

fn ctrl_c_on_the_terminal_stops_the_run_and_restores_the_screen() {
    tmux::require();
    let repo = TestRepo::new();
    let line = repo.shell_line(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo FAKE:hang",
        "--log",
        "terminal",
    ]);
    let term = Tmux::start(&line, repo.path(), 100, 30);
    term.wait_for("the agent to be running", PATIENCE, |s| {
        spinner_row(s).is_some_and(|row| row.contains("is working"))
    });
    term.send_keys(&["C-c"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 130, "{screen}");
    assert_eq!(
        spinner_row(&screen),
        None,
        "the spinner was not cleared:\n{screen}"
    );
    assert!(screen.contains("aborted"), "{screen}");
}

fn interactive_without_a_sandbox_gives_the_agent_the_terminal() {
    tmux::require();
    let repo = TestRepo::new();
    let line = repo.shell_line(&[
        "interactive",
        "--sandbox",
        "no-sandbox",
        "--agent",
        "claude-code",
    ]);
    let term = Tmux::start(&line, repo.path(), 100, 30);
    // The agent's own UI, on a terminal of the window's size.
    term.wait_for("the agent's UI", PATIENCE, |s| {
        s.contains("fake claude UI 100x30")
    });
    term.resize(120, 40);
    term.wait_for("the resize to reach the agent", PATIENCE, |s| {
        s.contains("window 120x40")
    });
    term.send_keys(&["add a haiku", "Enter"]);
    term.wait_for("the agent to work on what was typed", PATIENCE, |s| {
        s.contains("done: add a haiku")
    });
    // Ctrl-C is the agent's: it warns, and sanddune stays.
    term.send_keys(&["C-c"]);
    term.wait_for("the agent's answer to Ctrl-C", PATIENCE, |s| {
        s.contains("Press Ctrl-C again to exit")
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(term.exit_status(), None, "{}", term.screen());
    term.send_keys(&["C-c"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 0, "{screen}");
    assert!(
        screen.contains("agent exited with code 0; 1 commit on main"),
        "{screen}"
    );
    // sanddune's spinner gave the terminal up before the UI started.
    assert_eq!(spinner_row(&screen), None, "{screen}");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "Add a note"
    );
}

/// A component file named on the command line at a terminal: sanddune asks
/// y/N, listing exactly what the file asks for; "n" refuses with exit 2
/// before anything exists, "y" runs it.
fn a_component_file_is_approved_or_refused_at_the_terminal_prompt() {
    tmux::require();
    let file = plugin_file("sanddune-test-plugin-v0-1-sandbox");
    let file = file.to_str().unwrap();
    let args = [
        "run",
        "--sandbox",
        file,
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--log",
        "terminal",
    ];
    let question = "asks for program=sh, worktree=read-write. Approve? [y/N]";

    let repo = TestRepo::new();
    let term = Tmux::start(&repo.shell_line(&args), repo.path(), 250, 30);
    term.wait_for("the approval question", PATIENCE, |s| s.contains(question));
    term.send_keys(&["n", "Enter"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 2, "{screen}");
    assert!(screen.contains("was not approved: nothing ran"), "{screen}");
    assert!(
        !repo.path().join(".sanddune").exists(),
        "a refusal leaves nothing behind"
    );
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]), "1");

    let repo = TestRepo::new();
    let term = Tmux::start(&repo.shell_line(&args), repo.path(), 250, 30);
    term.wait_for("the approval question", PATIENCE, |s| s.contains(question));
    term.send_keys(&["y", "Enter"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("1 commit on main"), "{screen}");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Fix typo in README"
    );
}

/// Workspace trust at a terminal: the question shows exactly what the
/// repository's config would run on the host; "n" refuses with exit 2 and
/// runs nothing, "y" runs it and is remembered.
fn the_repositorys_host_hook_is_approved_or_refused_at_the_terminal_prompt() {
    tmux::require();
    let repo = TestRepo::new();
    let ran = repo.home.path().join("hook-ran");
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        format!(
            "[[hooks.host.onWorktreeReady]]\ncommand = \"touch {}\"\n",
            ran.display()
        ),
    )
    .unwrap();
    let mut command = repo.command(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--log",
        "terminal",
    ]);
    // Under CI an unapproved change stops instead of asking.
    command.env_remove("CI");
    let line = common::shell_line(&command);
    let item = format!(
        "+ .sanddune/config.toml: host hook onWorktreeReady runs on the host: touch {}",
        ran.display()
    );
    let question = "Run it, and trust it until it changes? [y/N]";

    let term = Tmux::start(&line, repo.path(), 250, 30);
    let screen = term.wait_for("the trust question", PATIENCE, |s| s.contains(question));
    assert!(screen.contains(&item), "{screen}");
    term.send_keys(&["n", "Enter"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 2, "{screen}");
    assert!(
        screen.contains("not approved: nothing was started"),
        "{screen}"
    );
    assert!(!ran.exists(), "the refused hook ran");
    assert!(!repo.path().join(".sanddune/logs").exists());

    let term = Tmux::start(&line, repo.path(), 250, 30);
    term.wait_for("the trust question", PATIENCE, |s| s.contains(question));
    term.send_keys(&["y", "Enter"]);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 0, "{screen}");
    assert!(ran.exists(), "the approved hook did not run");

    // Approved: the next run asks nothing.
    let term = Tmux::start(&line, repo.path(), 250, 30);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 0, "{screen}");
    assert!(!screen.contains(question), "{screen}");

    // Changed, under CI: no question, a refusal with the diff.
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        format!(
            "[[hooks.host.onWorktreeReady]]\ncommand = \"touch {}.ci\"\n",
            ran.display()
        ),
    )
    .unwrap();
    command.env("CI", "true");
    let term = Tmux::start(&common::shell_line(&command), repo.path(), 250, 30);
    let (status, screen) = term.wait_exit(PATIENCE);
    assert_eq!(status, 2, "{screen}");
    assert!(!screen.contains(question), "{screen}");
    assert!(screen.contains(&format!("{item}.ci")), "{screen}");
}

/// This suite's first test where tmux is missing: counted as ignored with
/// the reason, and a failure under CI (tests/common/trials.rs).
fn a_test_without_tmux_is_ignored_with_the_reason_and_fails_under_ci() {
    let no_tools = tempfile::tempdir().unwrap();
    let run = |ci: bool| {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "run_log_terminal_shows_a_spinner_then_the_events_and_a_clean_summary",
            ])
            .env("PATH", no_tools.path())
            .env_remove("CI");
        if ci {
            child.env("CI", "1");
        }
        child.output().unwrap()
    };
    let here = run(false);
    let text = common::stdout(&here);
    assert!(here.status.success(), "{text}");
    assert!(
        text.contains("ignored (tmux is not installed")
            && text.contains("0 passed; 0 failed; 1 ignored"),
        "{text}"
    );
    let ci = run(true);
    let text = common::stdout(&ci);
    assert!(!ci.status.success(), "{text}");
    assert!(
        text.contains("CI must run every test, but: tmux is not installed")
            && text.contains("0 passed; 1 failed; 0 ignored"),
        "{text}"
    );
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(run_log_terminal_shows_a_spinner_then_the_events_and_a_clean_summary),
        trial!(a_failed_run_on_the_terminal_clears_the_spinner_and_says_why),
        trial!(ctrl_c_on_the_terminal_stops_the_run_and_restores_the_screen),
        trial!(interactive_without_a_sandbox_gives_the_agent_the_terminal),
        trial!(a_component_file_is_approved_or_refused_at_the_terminal_prompt),
        trial!(the_repositorys_host_hook_is_approved_or_refused_at_the_terminal_prompt),
        trial!(a_test_without_tmux_is_ignored_with_the_reason_and_fails_under_ci),
    ])
}
