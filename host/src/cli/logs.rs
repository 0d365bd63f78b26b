//! `sanddune logs NAME|ID [-f] [--events]`: a live run's log from its start
//! and, with `-f`, what it adds until the run ends (its record is gone or
//! its process is). `--events`: the parsed agent events beside the log.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::capability::containers::owner_alive;
use crate::error::{Error, Result};
use crate::run::log::events_path;
use crate::run::registry;
use crate::worktree::Repo;

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
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

pub async fn logs(args: LogsArgs) -> Result<()> {
    let git_dir = Repo::discover(&args.cwd)?.git_dir();
    let found = registry::resolve(&git_dir, &args.run)?;
    let (name, id) = (&found.record.name, &found.record.run_id);
    let log = found.record.log_file.clone().ok_or_else(|| {
        Error::input(format!(
            "run `{name}` ({id}) shows its progress in its terminal (--log terminal): it has no log file"
        ))
    })?;
    let path = if args.events { events_path(&log) } else { log };
    let mut file = std::fs::File::open(&path)
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot read {}: {e}", path.display())))?;
    let copy = |file: &mut std::fs::File| -> Result<()> {
        let mut out = std::io::stdout().lock();
        std::io::copy(file, &mut out)
            .and_then(|_| out.flush())
            .map(|_| ())
            .map_err(|e| Error::Other(e.into()))
    };
    copy(&mut file)?;
    if !args.follow {
        return Ok(());
    }
    while found.path.exists() && owner_alive(&found.record.owner) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        copy(&mut file)?;
    }
    // What the run wrote as it ended.
    copy(&mut file)
}
