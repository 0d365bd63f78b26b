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

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
