//! A terminal a person would use: a tmux session on a private server,
//! driven with send-keys and read with capture-pane.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// One tmux server and its single window; killed on drop.
pub struct Tmux {
    socket: String,
}

/// Skip the test unless tmux is installed (under CI a failure).
pub fn require() {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        super::trials::skip("tmux is not installed: apt-get install tmux");
    }
}

impl Tmux {
    /// Start `command` (a shell line) in a `cols`x`rows` window, in `cwd`.
    /// A shell around it prints `[exit N]` when it ends (tmux 3.3 can miss
    /// its child's exit and leave it a zombie, so the shell reaps it); the
    /// shell survives Ctrl-C with a trap, which the command does not
    /// inherit. The pane stays, so the last screen can be read.
    pub fn start(command: &str, cwd: &Path, cols: u16, rows: u16) -> Self {
        let command = format!("trap true INT; {command}; echo \"[exit $?]\"");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let tmux = Self {
            socket: format!("sanddune-test-{}-{nanos}", std::process::id()),
        };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "-c",
            cwd.to_str().unwrap(),
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "respawn-pane",
            "-k",
            &command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen, one string per row, trailing blanks trimmed.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    /// Type keys (tmux key names: "Enter", "C-c", or literal text).
    pub fn send_keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Resize the window, as a person dragging the terminal would.
    pub fn resize(&self, cols: u16, rows: u16) {
        self.run(&[
            "resize-window",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }

    /// The command's exit status, once the shell around it printed it.
    pub fn exit_status(&self) -> Option<i32> {
        self.screen().lines().rev().find_map(|line| {
            line.trim()
                .strip_prefix("[exit ")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
    }

    /// Wait until `check` holds for the screen; the last screen on timeout.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait for the command to end; its exit status and last screen.
    pub fn wait_exit(&self, timeout: Duration) -> (i32, String) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.exit_status() {
                return (status, self.screen());
            }
            assert!(
                start.elapsed() < timeout,
                "the command did not end; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `line` (a shell line running `sanddune interactive` with a sandbox),
/// followed by a report of whether the terminal is cooked again:
/// `terminal-cooked` on the screen when it is.
pub fn reporting_cooked(line: &str) -> String {
    format!("{line}; s=$?; stty -a | grep -q -- ' icanon' && echo terminal-cooked; (exit $s)")
}

/// A session with the fake claude's interactive UI in `place` (a
/// container, a pod) through the exec's TTY, as a person has it: the UI at
/// the window's size, a resize reaching it, a prompt typed and worked on,
/// Ctrl-C twice (the agent warns, then exits). The exit status and last
/// screen.
pub fn play_the_fake_ui(term: &Tmux, place: &str, patience: Duration) -> (i32, String) {
    // The exec's TTY gets the window's size right after it starts: a UI
    // that read its size first learns it from the SIGWINCH, as a real
    // one redraws then.
    term.wait_for(&format!("the agent's UI in the {place}"), patience, |s| {
        s.contains("fake claude UI 100x30")
            || (s.contains("fake claude UI") && s.contains("window 100x30"))
    });
    term.resize(120, 40);
    term.wait_for(
        &format!("the resize to reach the {place}'s TTY"),
        patience,
        |s| s.contains("window 120x40"),
    );
    term.send_keys(&["add a haiku", "Enter"]);
    term.wait_for("the agent to work on what was typed", patience, |s| {
        s.contains("done: add a haiku")
    });
    term.send_keys(&["C-c"]);
    term.wait_for("the agent's answer to Ctrl-C", patience, |s| {
        s.contains("Press Ctrl-C again to exit")
    });
    term.send_keys(&["C-c"]);
    term.wait_exit(patience)
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
