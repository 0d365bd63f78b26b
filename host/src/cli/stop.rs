//! `sanddune stop NAME|ID`: abort one live run from another terminal, as
//! Ctrl-C on it would (agent killed, worktree kept, sandbox closed). The
//! run watches for the stop file this writes (ADR 0019), so a workflow's
//! item stops alone.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use crate::capability::containers::owner_alive;
use crate::error::{Error, Result};
use crate::run::registry;
use crate::worktree::Repo;

/// How long `stop` waits for the run to end before saying it has not.
const WAIT: Duration = Duration::from_secs(60);

#[derive(Args)]
pub struct StopArgs {
    /// The run's name or run id (`sanddune ps` shows both).
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::live_runs))]
    run: String,
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

pub async fn stop(args: StopArgs) -> Result<()> {
    let git_dir = Repo::discover(&args.cwd)?.git_dir();
    let found = registry::resolve(&git_dir, &args.run)?;
    let (name, id) = (&found.record.name, &found.record.run_id);
    if !found.alive {
        return Err(Error::input(format!(
            "run `{name}` ({id}) is dead: its process is gone; `sanddune gc` clears its record"
        )));
    }
    registry::request_stop(&found).map_err(|e| {
        Error::Other(anyhow::anyhow!(
            "cannot ask run `{name}` ({id}) to stop: {e}"
        ))
    })?;
    // Done when its record is gone (the run ended) or its process is.
    let start = Instant::now();
    while found.path.exists() && owner_alive(&found.record.owner) {
        if start.elapsed() > WAIT {
            return Err(Error::Other(anyhow::anyhow!(
                "run `{name}` ({id}) was asked to stop {} s ago and is still ending; see its log",
                WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("stopped run `{name}` ({id}); its worktree is kept");
    Ok(())
}
