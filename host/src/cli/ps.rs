//! `sanddune ps`: the runs alive now, from the live-runs registry
//! (`run::registry`). Reading it never blocks a run.

use std::path::PathBuf;

use clap::Args;

use crate::error::{Error, Result};
use crate::run::registry::{self, Found};
use crate::worktree::Repo;

#[derive(Args)]
pub struct PsArgs {
    /// Every repository on this machine with live runs, not only this one.
    #[arg(long)]
    all: bool,
    /// Print the runs as a JSON array on stdout.
    #[arg(long)]
    json: bool,
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

pub fn ps(args: PsArgs) -> Result<()> {
    let git_dirs = if args.all {
        registry::listed_repositories()
    } else {
        vec![Repo::discover(&args.cwd)?.git_dir()]
    };
    let runs: Vec<Found> = git_dirs.iter().flat_map(|d| registry::list(d)).collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&runs).map_err(|e| Error::Other(e.into()))?
        );
        return Ok(());
    }
    if runs.is_empty() {
        println!("no live runs");
        return Ok(());
    }
    print!("{}", table(&runs, args.all));
    let dead: Vec<&Found> = runs.iter().filter(|f| !f.alive).collect();
    let mut repos: Vec<_> = dead.iter().map(|f| &f.record.repo).collect();
    repos.dedup();
    for repo in repos {
        println!(
            "dead: its process is gone; clear its record with `sanddune gc --cwd {}`",
            repo.display()
        );
    }
    Ok(())
}

/// One line per run, columns aligned. A CONTAINMENT column (limits and
/// egress policy) joins when some run has one.
fn table(runs: &[Found], with_repo: bool) -> String {
    let contained = runs.iter().any(|f| f.record.containment.is_some());
    let mut header = [
        "NAME",
        "RUN ID",
        "WORKFLOW/ITEM",
        "SANDBOX",
        "AGENT",
        "BRANCH",
        "ITER",
        "STATE",
        "ELAPSED",
        "TOKENS",
    ]
    .map(String::from)
    .to_vec();
    if contained {
        header.push("CONTAINMENT".into());
    }
    header.push("LOG".into());
    let mut rows = vec![header];
    for f in runs {
        let r = &f.record;
        let log = r
            .log_file
            .as_ref()
            .map(|p| p.strip_prefix(&r.repo).unwrap_or(p).display().to_string())
            .unwrap_or_else(|| "-".into());
        let mut row = vec![
            r.name.clone(),
            r.run_id.clone(),
            match (&r.workflow, &r.item) {
                (Some(w), Some(i)) => format!("{w}/{i}"),
                _ => "-".into(),
            },
            r.sandbox.clone(),
            r.agent.clone(),
            r.branch.clone(),
            format!("{}/{}", r.iteration, r.max_iterations),
            if f.alive { r.state.label() } else { "dead" }.to_string(),
            super::table::elapsed(f.elapsed),
            r.tokens.to_string(),
        ];
        if contained {
            row.push(r.containment.clone().unwrap_or_else(|| "-".into()));
        }
        row.push(if with_repo {
            r.repo.join(&log).display().to_string()
        } else {
            log
        });
        rows.push(row);
    }
    super::table::columns(&rows)
        .into_iter()
        .map(|line| line + "\n")
        .collect()
}
