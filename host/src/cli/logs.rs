//! `sanddune logs NAME|ID [-f] [--events] [--raw]`: a live run's log from
//! its start and, with `-f`, what it adds until the run ends (its record is
//! gone or its process is). `--events`: the parsed agent events beside the
//! log.
//!
//! Only a file in this repository's `.sanddune/logs` is printed, opened
//! without following a link: whatever path a run record names. At a
//! terminal the control characters in it (the agent's) are shown as
//! escapes unless `--raw`; piped, its bytes go through as they are.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::capability::containers::owner_alive;
use crate::error::{Error, Result};
use crate::own_dir::OwnDir;
use crate::run::log::events_path;
use crate::run::registry;
use crate::terminal_text::visible;
use crate::worktree::Repo;

/// Where a repository's run logs are, under its root.
const LOGS_DIR: &str = ".sanddune/logs";

#[derive(Args)]
pub struct LogsArgs {
    /// The run's name or run id (`sanddune ps` shows both).
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::live_runs))]
    run: String,
    /// Keep printing what the run writes until it ends.
    #[arg(long, short)]
    follow: bool,
    /// The parsed agent events (text, tool calls, usage) as JSON lines,
    /// instead of the log.
    #[arg(long)]
    events: bool,
    /// Print the file's bytes as they are, even at a terminal (where
    /// control characters are otherwise shown as escapes: `\e`, `\a`).
    #[arg(long)]
    raw: bool,
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

pub async fn logs(args: LogsArgs) -> Result<()> {
    let repo = Repo::discover(&args.cwd)?;
    let found = registry::resolve(&repo.git_dir(), &args.run)?;
    let (name, id) = (&found.record.name, &found.record.run_id);
    let log = found.record.log_file.clone().ok_or_else(|| {
        Error::input(format!(
            "run `{name}` ({id}) shows its progress in its terminal (--log terminal): it has no log file"
        ))
    })?;
    let logs_dir = repo.root().join(LOGS_DIR);
    let path = if args.events { events_path(&log) } else { log };
    let file_name = log_name(&path, &logs_dir)?;
    let mut file = OwnDir::open(&logs_dir, 2, false)?.open_regular(file_name)?;
    let mut out = Printer {
        escape: !args.raw && std::io::stdout().is_terminal(),
        partial: Vec::new(),
    };
    out.copy(&mut file, !args.follow)?;
    if !args.follow {
        return Ok(());
    }
    while found.path.exists() && owner_alive(&found.record.owner) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        out.copy(&mut file, false)?;
    }
    // What the run wrote as it ended.
    out.copy(&mut file, true)
}

/// The file name of `path` if it is directly in `logs_dir`; a record naming
/// anything else (which only a forged one does) is refused.
fn log_name<'a>(path: &'a Path, logs_dir: &Path) -> Result<&'a str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .filter(|_| path.parent() == Some(logs_dir))
        .ok_or_else(|| {
            Error::input(format!(
                "the run's record names {} as its log, which is not in {}: sanddune prints only its own logs",
                path.display(),
                logs_dir.display()
            ))
        })
}

/// Copies what the file gained to stdout. Escaping works on whole lines:
/// a partial last line waits for the rest, or for the end.
struct Printer {
    escape: bool,
    partial: Vec<u8>,
}

impl Printer {
    fn copy(&mut self, file: &mut std::fs::File, last: bool) -> Result<()> {
        let io = |e: std::io::Error| Error::Other(e.into());
        let mut out = std::io::stdout().lock();
        if !self.escape {
            std::io::copy(file, &mut out).map_err(io)?;
            return out.flush().map_err(io);
        }
        let mut bytes = std::mem::take(&mut self.partial);
        file.read_to_end(&mut bytes).map_err(io)?;
        self.partial = bytes.split_off(whole_lines(&bytes, last));
        out.write_all(visible(&String::from_utf8_lossy(&bytes)).as_bytes())
            .and_then(|()| out.flush())
            .map_err(io)
    }
}

/// How many of `bytes` are whole lines (all of them at the end).
fn whole_lines(bytes: &[u8], last: bool) -> usize {
    if last {
        return bytes.len();
    }
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_directly_in_the_logs_dir_is_named() {
        let dir = Path::new("/repo/.sanddune/logs");
        assert_eq!(log_name(&dir.join("run-1.log"), dir).unwrap(), "run-1.log");
        for forged in [
            "/home/me/.ssh/id_ed25519",
            "/repo/.sanddune/logs/../../.git/config",
            "/repo/.sanddune/logs/sub/run.log",
            "/repo/.sanddune/logs",
        ] {
            let err = log_name(Path::new(forged), dir).unwrap_err();
            assert!(
                err.to_string()
                    .contains("sanddune prints only its own logs"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_partial_line_waits_for_its_end() {
        assert_eq!(whole_lines(b"one\ntwo", false), 4);
        assert_eq!(whole_lines(b"one\ntwo\n", false), 8);
        assert_eq!(whole_lines(b"par", false), 0);
        assert_eq!(whole_lines(b"par", true), 3);
    }
}
