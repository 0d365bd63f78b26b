//! `sanddune attach NAME|ID`: a shell on this terminal inside a live run's
//! sandbox, in its worktree, as the agent's user (see `run::attach`).
//! Leaving the shell leaves the run as it was.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, Result};
use crate::run::registry;
use crate::worktree::Repo;

#[derive(Args)]
pub struct AttachArgs {
    /// The run's name or run id (`sanddune ps` shows both).
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::live_runs))]
    run: String,
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn attach(args: AttachArgs) -> Result<()> {
    let repo = Repo::discover(&args.cwd)?;
    let found = registry::resolve(&repo.git_dir(), &args.run)?;
    let (name, id) = (&found.record.name, &found.record.run_id);
    if !found.alive {
        return Err(Error::input(format!(
            "run `{name}` ({id}) is dead: its process is gone; `sanddune gc` brings out its commits and clears it"
        )));
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::input(
            "attach needs a terminal: run it in one, not with its input redirected",
        ));
    }
    eprintln!(
        "attached to run `{name}` ({id}) in its {} sandbox; leave the shell (exit) to detach, the run goes on",
        found.record.sandbox
    );
    let code = crate::run::attach(&repo, &args.approval.runtime()?, id, name).await?;
    eprintln!("detached from run `{name}`");
    if code != 0 {
        // The shell's own status, as a shell would pass it on.
        std::process::exit(code);
    }
    Ok(())
}
