//! The run log: what a run tells its user, in one of two display modes.
//! File mode (the default) writes `.sanddune/logs/<name>-<time>.log` and
//! prints one `tail -f` line; terminal mode shows a spinner and styled
//! iteration summaries on stderr. The run's name prefixes every line, so
//! parallel runs in one log stream stay apart. The program's own
//! diagnostics go through `tracing`, not here.
//!
//! In file mode the parsed agent events (text, tool calls, each
//! iteration's usage) also go, one JSON object a line, to the events file
//! beside the log ([`events_path`]): what `sanddune logs --events` prints.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

use super::iteration::{IterationUsage, StreamEvent};
use super::timings::Timings;
use crate::error::{Error, Result};
use crate::own_dir::OwnDir;
use crate::terminal_text::{visible, visible_line};

/// How a run shows its progress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LogMode {
    /// Append to a log file under `.sanddune/logs/` (or this directory);
    /// print only where it is.
    #[default]
    File,
    /// A log file, and nothing on stderr: the caller shows the run (the
    /// workflow's live view; `sanddune logs` finds the file).
    FileQuiet,
    /// Spinner and styled summaries on stderr.
    Terminal,
}

/// Shared by everything one run reports. Cheap to clone.
#[derive(Clone)]
pub struct RunLog {
    inner: Arc<Inner>,
}

struct Inner {
    timings: Timings,
    prefix: String,
    file: Option<(PathBuf, Mutex<std::fs::File>)>,
    /// The events file, in file mode.
    events: Option<Mutex<std::fs::File>>,
    spinner: Option<ProgressBar>,
    styled: bool,
}

impl RunLog {
    /// Open the log of a run named `name` (the prefix of every line).
    pub fn open(mode: &LogMode, logs_dir: &Path, name: Option<&str>) -> Result<Self> {
        let prefix = name.map(|n| format!("[{n}] ")).unwrap_or_default();
        match mode {
            LogMode::File | LogMode::FileQuiet => {
                // `.sanddune/logs`: both sanddune's, and an agent's to write
                // under the head strategy.
                let dir = OwnDir::open(logs_dir, 2, true)?;
                let stem = sanitize(name.unwrap_or("run"));
                let (path, file, events) =
                    create_unique(&dir, &stem, &file_time(SystemTime::now()))?;
                if *mode == LogMode::File {
                    eprintln!(
                        "{prefix}sanddune: logging to {0}\n{prefix}  follow it with: tail -f {0}",
                        path.display()
                    );
                }
                Ok(Self {
                    inner: Arc::new(Inner {
                        timings: Timings::default(),
                        prefix,
                        file: Some((path, Mutex::new(file))),
                        events: Some(Mutex::new(events)),
                        spinner: None,
                        styled: false,
                    }),
                })
            }
            LogMode::Terminal => {
                let styled = std::io::stderr().is_terminal();
                let spinner = styled.then(|| {
                    let bar = ProgressBar::with_draw_target(
                        None,
                        ProgressDrawTarget::term_like(Box::new(EchoRoom::default())),
                    );
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {prefix}{msg} ({elapsed})")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_prefix(prefix.clone());
                    bar.enable_steady_tick(Duration::from_millis(100));
                    bar
                });
                Ok(Self {
                    inner: Arc::new(Inner {
                        timings: Timings::default(),
                        prefix,
                        file: None,
                        events: None,
                        spinner,
                        styled,
                    }),
                })
            }
        }
    }

    /// The run's phase timings.
    pub fn timings(&self) -> &Timings {
        &self.inner.timings
    }

    /// The log file, in file mode.
    pub fn path(&self) -> Option<&Path> {
        self.inner.file.as_ref().map(|(p, _)| p.as_path())
    }

    /// One plain line.
    pub fn line(&self, text: &str) {
        for line in text.lines() {
            self.write(line, false);
        }
    }

    /// A headline: bold in terminal mode.
    pub fn headline(&self, text: &str) {
        self.write(text, true);
    }

    /// What the run is doing now: the spinner's message in terminal mode, a
    /// line in the file.
    pub fn status(&self, text: &str) {
        match &self.inner.spinner {
            Some(bar) => bar.set_message(visible_line(text).into_owned()),
            None => self.write(text, false),
        }
    }

    /// An iteration's token usage, in the events file.
    pub fn usage(&self, iteration: u32, usage: &IterationUsage) {
        let mut line = serde_json::json!({
            "type": "usage",
            "iteration": iteration,
            "timestamp": super::iteration::now_ms(),
        });
        if let (Some(line), Ok(serde_json::Value::Object(usage))) =
            (line.as_object_mut(), serde_json::to_value(usage))
        {
            line.extend(usage);
        }
        self.write_event(&line);
    }

    fn write_event(&self, event: &serde_json::Value) {
        if let Some(file) = &self.inner.events {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            // As the log: a full disk must not stop the run.
            let _ = writeln!(file, "{event}");
        }
    }

    /// An agent stream event.
    pub fn event(&self, event: &StreamEvent) {
        if let Ok(json) = serde_json::to_value(event) {
            self.write_event(&json);
        }
        match event {
            StreamEvent::Text {
                iteration, text, ..
            } => {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    self.write(&format!("[{iteration}] {line}"), false);
                }
            }
            StreamEvent::ToolCall {
                iteration,
                name,
                input,
                ..
            } => {
                let input: String = input.chars().take(160).collect();
                self.write(&format!("[{iteration}] > {name} {input}"), false);
            }
        }
    }

    /// Stop the spinner (terminal mode): at the end, and before an
    /// interactive agent's UI takes the terminal. Lines after it print
    /// plainly.
    pub fn finish(&self) {
        if let Some(bar) = &self.inner.spinner {
            bar.finish_and_clear();
        }
    }

    /// Agent text reaches the file (which `tail -f` shows) and the terminal
    /// with its control characters made visible.
    fn write(&self, text: &str, bold: bool) {
        let text = visible(text);
        let prefix = &self.inner.prefix;
        if let Some((_, file)) = &self.inner.file {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            // A full disk must not stop the run; the file just misses lines.
            let _ = writeln!(file, "{} {prefix}{text}", clock(SystemTime::now()));
            return;
        }
        let line = if bold && self.inner.styled {
            format!("{prefix}\x1b[1m{text}\x1b[0m")
        } else {
            format!("{prefix}{text}")
        };
        match &self.inner.spinner {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
    }
}

/// Stderr for the spinner, keeping two columns free at the end of its row.
/// indicatif pads its last row to the terminal's edge, so the `^C` a
/// terminal echoes when the user presses Ctrl-C would wrap onto a new row,
/// and every redraw after it would clear the wrong row and leave the
/// spinner behind. With room for the echo it stays on the spinner's row,
/// which the next redraw clears. Only the last filler before a flush is
/// shortened: earlier ones move the cursor to the next row.
#[derive(Debug)]
struct EchoRoom {
    term: console::Term,
    /// Spaces indicatif asked for last, not written yet.
    filler: Mutex<usize>,
}

impl Default for EchoRoom {
    fn default() -> Self {
        Self {
            term: console::Term::stderr(),
            filler: Mutex::new(0),
        }
    }
}

impl EchoRoom {
    fn take_filler(&self) -> usize {
        std::mem::take(&mut *self.filler.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn write_filler(&self, n: usize) -> std::io::Result<()> {
        self.term.write_str(&" ".repeat(n))
    }
}

impl TermLike for EchoRoom {
    fn width(&self) -> u16 {
        self.term.size().1
    }

    fn height(&self) -> u16 {
        self.term.size().0
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.move_cursor_up(n)
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.write_line(s)
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        let pending = self.take_filler();
        if !s.is_empty() && s.bytes().all(|b| b == b' ') {
            *self.filler.lock().unwrap_or_else(|e| e.into_inner()) = pending + s.len();
            return Ok(());
        }
        self.write_filler(pending)?;
        self.term.write_str(s)
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.write_filler(self.take_filler())?;
        self.term.clear_line()
    }

    fn flush(&self) -> std::io::Result<()> {
        let filler = self.take_filler();
        self.write_filler(filler.saturating_sub(2))?;
        self.term.flush()
    }
}

/// A name as a file-name stem.
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches(['-', '.'])
        .chars()
        .take(80)
        .collect::<String>()
}

/// The events file of the run log at `log`: `<name>-<time>.events.jsonl`.
pub fn events_path(log: &Path) -> PathBuf {
    log.with_extension("events.jsonl")
}

/// Creates `<stem>-<time>.log` and its events file, with a counter when
/// runs start in one second: each name is created only if nothing has it,
/// so two processes racing for one name never share a file, and nothing
/// is ever written through a link. A name another run took (a regular
/// file) is passed over; a link or anything else there is refused, naming
/// it: something other than sanddune put it there.
fn create_unique(
    dir: &OwnDir,
    stem: &str,
    time: &str,
) -> Result<(PathBuf, std::fs::File, std::fs::File)> {
    let stem = if stem.is_empty() { "run" } else { stem };
    let names = std::iter::once(format!("{stem}-{time}"))
        .chain((2..).map(|n| format!("{stem}-{time}-{n}")));
    for name in names {
        let (log, events) = (format!("{name}.log"), format!("{name}.events.jsonl"));
        let Some(log_file) = create_new(dir, &log)? else {
            continue;
        };
        match create_new(dir, &events) {
            Ok(Some(events_file)) => return Ok((dir.path().join(log), log_file, events_file)),
            Ok(None) => {
                // The events name is taken: this name is not free after all.
                let _ = dir.remove(&log);
            }
            Err(e) => {
                let _ = dir.remove(&log);
                return Err(e);
            }
        }
    }
    unreachable!("the counter is unbounded")
}

/// The new file `name`; None when a regular file has that name.
fn create_new(dir: &OwnDir, name: &str) -> Result<Option<std::fs::File>> {
    let path = || dir.path().join(name);
    match dir.create_new(name) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match dir.kind(name) {
            Some(rustix::fs::FileType::RegularFile) | None => Ok(None),
            Some(_) => Err(Error::input(format!(
                "{} is a symlink or not a regular file, where sanddune was to create this run's log: an agent may have planted it; remove it and run again",
                path().display()
            ))),
        },
        Err(e) => Err(Error::Other(anyhow::anyhow!(
            "create {}: {e}",
            path().display()
        ))),
    }
}

/// UTC civil date from days since the Unix epoch (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn split(t: SystemTime) -> (i64, u32, u32, u64) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil((secs / 86_400) as i64);
    (y, m, d, secs % 86_400)
}

/// `20261122T140501Z`, for file names.
fn file_time(t: SystemTime) -> String {
    let (y, m, d, s) = split(t);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// `2026-11-22T14:05:01Z`, for log lines.
fn clock(t: SystemTime) -> String {
    let (y, m, d, s) = split(t);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_starting_in_one_second_get_their_own_log_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = OwnDir::open(&root.path().join("logs"), 1, true).unwrap();
        let names: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| create_unique(&dir, "run", "20261123T203402Z").unwrap().0))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap()
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
        });
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 8, "{names:?}");
        assert!(names.contains(&"run-20261123T203402Z.log".to_string()));
    }

    /// What an agent could leave in `.sanddune/logs` for the next run: a
    /// link at the name of its log or of its events file.
    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let outside = tempfile::tempdir().unwrap();
        let marker = outside.path().join("bashrc");
        std::fs::write(&marker, "mine").unwrap();
        for planted in [
            "run-20261123T203402Z.log",
            "run-20261123T203402Z.events.jsonl",
        ] {
            let root = tempfile::tempdir().unwrap();
            let dir = OwnDir::open(&root.path().join("logs"), 1, true).unwrap();
            std::os::unix::fs::symlink(&marker, dir.path().join(planted)).unwrap();
            let err = create_unique(&dir, "run", "20261123T203402Z").unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("{planted} is a symlink or not a regular file")),
                "{err}"
            );
            assert_eq!(err.exit_code(), 2);
            assert_eq!(std::fs::read_to_string(&marker).unwrap(), "mine");
            // Nothing half made is left beside the link.
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
            assert_eq!(left.len(), 1, "{left:?}");
        }
    }

    #[test]
    fn a_taken_events_name_moves_the_log_to_the_next_name() {
        let root = tempfile::tempdir().unwrap();
        let dir = OwnDir::open(&root.path().join("logs"), 1, true).unwrap();
        let taken = dir.path().join("run-20261123T203402Z.events.jsonl");
        std::fs::write(&taken, "an old run's").unwrap();
        let (path, ..) = create_unique(&dir, "run", "20261123T203402Z").unwrap();
        assert_eq!(path, dir.path().join("run-20261123T203402Z-2.log"));
        assert!(!dir.path().join("run-20261123T203402Z.log").exists());
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "an old run's");
    }

    #[test]
    fn agent_text_reaches_the_log_with_its_escapes_visible() {
        let dir = tempfile::tempdir().unwrap();
        let log = RunLog::open(&LogMode::FileQuiet, &dir.path().join("logs"), None).unwrap();
        log.event(&StreamEvent::Text {
            iteration: 1,
            timestamp: 0,
            text: "copy \x1b]52;c;aGk=\x07 this".into(),
        });
        let text = std::fs::read_to_string(log.path().unwrap()).unwrap();
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(text.contains("copy \\e]52;c;aGk=\\a this"), "{text:?}");
    }

    #[test]
    fn times_are_utc_civil() {
        // 2026-11-22T14:05:01Z
        let t = UNIX_EPOCH + Duration::from_secs(1_795_356_301);
        assert_eq!(file_time(t), "20261122T140501Z");
        assert_eq!(clock(t), "2026-11-22T14:05:01Z");
        assert_eq!(
            clock(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn names_become_safe_file_stems() {
        assert_eq!(sanitize("fix/issue 12"), "fix-issue-12");
        assert_eq!(sanitize("../../etc"), "etc");
    }

    #[test]
    fn file_mode_prefixes_every_line_with_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let log = RunLog::open(&LogMode::File, dir.path(), Some("issue-7")).unwrap();
        log.line("one\ntwo");
        log.event(&StreamEvent::Text {
            iteration: 2,
            timestamp: 0,
            text: "hello".into(),
        });
        let path = log.path().unwrap().to_path_buf();
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("issue-7-")
        );
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines.iter().all(|l| l.contains(" [issue-7] ")), "{text}");
        assert!(lines[2].ends_with("[issue-7] [2] hello"), "{text}");
    }
}
