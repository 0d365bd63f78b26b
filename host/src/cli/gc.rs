//! `sanddune gc`: remove containers and worktrees a crashed sanddune left
//! behind, and finish a merge-to-head it was in the middle of.
//!
//! Every container the `containers` capability creates carries the creating
//! process (`sanddune.owner` = pid:start-time), and every worktree a run
//! uses carries a lock naming its process. One whose process is gone is an
//! orphan; a live run's containers and worktrees are left alone, and an
//! orphaned worktree with uncommitted work is kept.

use std::collections::HashMap;

use bollard::query_parameters::ListContainersOptionsBuilder;
use clap::Args;

use crate::capability::containers::Engine;
use crate::capability::containers::{
    OWNER_LABEL, PLUGIN_LABEL, RUN_LABEL, connect_negotiated, engine_name, force_remove,
    process_start,
};
use crate::error::{Error, Result};
use crate::worktree::{Orphan, Repo};

#[derive(Args)]
pub struct GcArgs {
    /// The repository whose worktrees to check (default: the current one;
    /// outside a repository only containers are checked).
    #[arg(long, default_value = ".")]
    cwd: std::path::PathBuf,
}

/// Whether the process named by an owner label (`pid:start`) still runs.
fn owner_alive(owner: &str) -> bool {
    let Some((pid, start)) = owner.split_once(':') else {
        return false;
    };
    match (pid.parse::<u32>(), start.parse::<u64>()) {
        (Ok(pid), Ok(start)) => process_start(pid) == Some(start),
        _ => false,
    }
}

pub async fn gc(args: GcArgs) -> Result<()> {
    // Containers first: an orphaned one may still run an agent that is
    // changing its worktree.
    let mut removed = 0;
    for engine in [Engine::Docker, Engine::Podman] {
        let name = engine_name(engine);
        let docker = match connect_negotiated(engine).await {
            Ok(docker) => docker,
            Err(e) => {
                eprintln!("{name}: skipped ({e})");
                continue;
            }
        };
        let filters = HashMap::from([("label".to_string(), vec![OWNER_LABEL.to_string()])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let found = docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::Plugin(format!("{name}: cannot list containers: {e}")))?;
        for container in found {
            let (Some(id), Some(labels)) = (container.id, container.labels) else {
                continue;
            };
            if labels.get(OWNER_LABEL).is_some_and(|o| owner_alive(o)) {
                continue;
            }
            force_remove(&docker, &id).await.map_err(Error::Plugin)?;
            removed += 1;
            let label = |key| labels.get(key).map_or("?", String::as_str);
            println!(
                "removed {name} container {} (run {}, provider {})",
                &id[..id.len().min(12)],
                label(RUN_LABEL),
                label(PLUGIN_LABEL)
            );
        }
    }
    println!(
        "{removed} orphaned container{} removed",
        if removed == 1 { "" } else { "s" }
    );
    if let Ok(repo) = Repo::discover(&args.cwd) {
        if let Some(done) = repo.finish_interrupted_merge()? {
            println!(
                "finished merging `{}` into `{}` ({}), which a killed run had begun",
                done.branch,
                done.target.trim_start_matches("refs/heads/"),
                &done.commit[..12]
            );
        }
        for orphan in repo.gc_worktrees()? {
            match orphan {
                Orphan::Removed { name, branch } => {
                    println!("removed orphaned worktree `{name}` (branch `{branch}`)")
                }
                Orphan::Kept { path, branch } => println!(
                    "kept orphaned worktree {} (branch `{branch}`): it has uncommitted changes; its stale lock is gone",
                    path.display()
                ),
            }
        }
    }
    Ok(())
}
