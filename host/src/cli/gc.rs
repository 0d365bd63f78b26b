//! `sanddune gc`: bring the commits out of isolated sandboxes a crashed
//! sanddune left behind and close them (see `run::reclaim`), remove its
//! containers and worktrees, and finish a merge-to-head it was in the
//! middle of, and clear the live-runs records of dead runs.
//!
//! Every container the `containers` capability creates carries the creating
//! process (`sanddune.owner` = pid:start-time), and every worktree a run
//! uses carries a lock naming its process. One whose process is gone is an
//! orphan; a live run's containers and worktrees are left alone, and an
//! orphaned worktree with uncommitted work is kept. The repository's
//! prepared snapshots past their age (`--snapshot-max-age`) go too, and
//! its warm sandboxes that ended or whose run died (`--drain-pool`: all of
//! them that wait).
//!
//! A warm container (ADR 0037) was created by a process that is gone by
//! the time a run claims it: its slot (`sanddune.pool`), not its creator,
//! says whether it is in use.

use std::collections::HashMap;

use bollard::query_parameters::ListContainersOptionsBuilder;
use clap::Args;

use crate::capability::containers::Engine;
use crate::capability::containers::{
    OWNER_LABEL, PLUGIN_LABEL, RUN_LABEL, connect_negotiated, engine_name, force_remove,
    owner_alive,
};
use crate::capability::pool::{self, POOL_LABEL, SlotState};
use crate::error::{Error, Result};
use crate::run::reclaim::{self, Reclaimed};
use crate::worktree::{Orphan, Repo, WORKTREES_DIR};

#[derive(Args)]
pub struct GcArgs {
    /// The repository whose worktrees and sandboxes to check (default: the
    /// current one; outside a repository only containers are checked).
    #[arg(long, default_value = ".")]
    cwd: std::path::PathBuf,
    /// Drop the record of a dead run's sandbox that cannot be reached (gone,
    /// or no credentials): the commits it made since its last sync are lost.
    #[arg(long)]
    forget_unreachable: bool,
    /// Remove this repository's prepared snapshots (`snapshot=auto`) older
    /// than this, and those of repositories that are gone: a number and s,
    /// m, h or d.
    #[arg(long, default_value = "7d", value_parser = crate::age::parse_age)]
    snapshot_max_age: std::time::Duration,
    /// Remove this repository's warm sandboxes that wait for a run
    /// (`pool=N`), not only those that ended.
    #[arg(long)]
    drain_pool: bool,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn gc(args: GcArgs) -> Result<()> {
    let repo = Repo::discover(&args.cwd).ok();
    // Isolated sandboxes first: their commits come out before anything of
    // theirs (a container of a custom provider) is removed.
    let mut unreachable = 0;
    if let Some(repo) = &repo {
        let runtime = args.approval.runtime()?;
        for done in reclaim::reclaim(repo, &runtime, args.forget_unreachable).await {
            match done {
                Reclaimed::Recovered {
                    provider,
                    run_id,
                    branch,
                    head,
                } => println!(
                    "brought the commits of run {run_id}'s {provider} sandbox onto `{branch}` (up to {}), and closed it",
                    &head[..head.len().min(12)]
                ),
                Reclaimed::Closed { provider, run_id } => {
                    println!("closed run {run_id}'s {provider} sandbox (no commits to bring out)")
                }
                Reclaimed::Found {
                    provider,
                    run_id,
                    count,
                } => println!(
                    "closed {count} {provider} sandbox(es) that run {run_id} was still creating when it died (the provider found them by the run's id)"
                ),
                Reclaimed::Cleared { provider, run_id } => println!(
                    "cleared run {run_id}'s {provider} sandbox record: nothing in it to bring out (a bind-mount sandbox, or one its run never finished creating)"
                ),
                Reclaimed::Failed {
                    provider,
                    run_id,
                    error,
                    forgotten: true,
                } => println!(
                    "forgot run {run_id}'s {provider} sandbox, which gc cannot reach: {error}"
                ),
                Reclaimed::Failed {
                    provider,
                    run_id,
                    error,
                    forgotten: false,
                } => {
                    unreachable += 1;
                    eprintln!(
                        "cannot reach run {run_id}'s {provider} sandbox: {error}\n  its commits since its last sync may be in it: fix that and run `sanddune gc` again, or `sanddune gc --forget-unreachable` to drop it"
                    );
                }
            }
        }
    }
    // Then containers: an orphaned one may still run an agent that is
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
            let in_use = match labels.get(POOL_LABEL) {
                // Waiting, being filled, or claimed by a run that lives;
                // the sweep below drains the waiting ones when asked.
                Some(slot) => !matches!(
                    pool::slot_state(std::path::Path::new(slot)),
                    SlotState::Dead(_)
                ),
                None => labels.get(OWNER_LABEL).is_some_and(|o| owner_alive(o)),
            };
            if in_use {
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
    let git_dir = repo.as_ref().map(Repo::git_dir);
    super::snapshot::remove_older_than(args.snapshot_max_age, git_dir.as_deref()).await;
    if let Some(repo) = &repo {
        let runtime = args.approval.runtime()?;
        super::snapshot::remove_kept_older_than(args.snapshot_max_age, repo, &runtime).await;
        for run in crate::run::registry::clear_dead(&repo.git_dir()) {
            println!(
                "cleared the record of dead run `{}` ({})",
                run.name, run.run_id
            );
        }
        // Before the agent git dirs: a warm sandbox's is parked.
        for line in crate::run::pool::sweep(repo, args.drain_pool).await {
            println!("{line}");
        }
        // Before the worktrees: a worktree whose agent committed after its
        // run's last take-back looks changed until the commits are back.
        for line in repo.recover_stale_agent_git_dirs() {
            println!("{line}");
        }
        if let Some(done) = repo.finish_interrupted_merge()? {
            println!(
                "finished merging `{}` into `{}` ({}), which a killed run had begun",
                done.branch,
                done.target.trim_start_matches("refs/heads/"),
                &done.commit[..12]
            );
        }
        let worktrees = repo.root().join(WORKTREES_DIR);
        let orphans = if crate::own_dir::linked(&worktrees, 2) {
            eprintln!(
                "warning: {} has a link in its path, which sanddune did not make: no worktree was collected; remove the link",
                worktrees.display()
            );
            vec![]
        } else {
            let deleted = repo.gc_removed_worktrees();
            if deleted > 0 {
                println!(
                    "deleted the files of {deleted} removed worktree{} that a killed run had not deleted yet",
                    if deleted == 1 { "" } else { "s" }
                );
            }
            repo.gc_worktrees()?
        };
        for orphan in orphans {
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
        // After the worktrees, which free the branches they held.
        for branch in repo.delete_spent_branches(crate::workflow::best_of::BRANCH_PREFIX)? {
            println!("deleted `{branch}`, which a killed best-of left with nothing of its own");
        }
    }
    if unreachable > 0 {
        return Err(Error::Plugin(format!(
            "{unreachable} sandbox{} of dead runs could not be reached (see above)",
            if unreachable == 1 { "" } else { "es" }
        )));
    }
    Ok(())
}
