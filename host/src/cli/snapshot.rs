//! `sanddune snapshot ls|rm`: the prepared snapshots that runs with
//! `--sandbox-opt snapshot=auto` kept: in Docker and in Podman (ADR 0035),
//! and those a provider keeps itself, such as Vercel's (ADR 0038); and the
//! age past which `sanddune gc` removes them.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};

use crate::age::age;
use crate::capability::containers::snapshot::{self, SnapshotImage, short_id};
use crate::capability::containers::{Engine, connect_negotiated, engine_name};
use crate::error::{Error, Result};
use crate::plugin::PluginRuntime;
use crate::run::provider_snapshot;
use crate::worktree::Repo;

#[derive(Subcommand)]
pub enum SnapshotCommands {
    /// List the snapshots kept for this repository (--all: every
    /// repository's in Docker and Podman).
    Ls(LsArgs),
    /// Remove snapshots by id or tag (as `ls` prints them), or --all of this
    /// repository's.
    Rm(RmArgs),
}

#[derive(Args)]
pub struct LsArgs {
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    /// Every repository's snapshots in Docker and Podman (a provider's,
    /// such as Vercel's, are recorded per repository: this one's only).
    #[arg(long)]
    all: bool,
}

#[derive(Args)]
pub struct RmArgs {
    /// Image ids (a prefix of 12 or more hex digits) or tags; a provider's
    /// snapshot by its whole id.
    #[arg(required_unless_present = "all")]
    snapshots: Vec<String>,
    /// All of this repository's snapshots.
    #[arg(long, conflicts_with = "snapshots")]
    all: bool,
    /// The repository (default: the current one).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn snapshot(command: SnapshotCommands) -> Result<()> {
    match command {
        SnapshotCommands::Ls(args) => ls(args).await,
        SnapshotCommands::Rm(args) => rm(args).await,
    }
}

/// The repository's git dir as the snapshots label it.
fn repo_label(cwd: &Path) -> Result<String> {
    Ok(Repo::discover(cwd)?.git_dir().display().to_string())
}

/// Each engine that answers, with its snapshots (of `repo`, when given).
async fn engines(repo: Option<&str>) -> Vec<(Engine, bollard::Docker, Vec<SnapshotImage>)> {
    let mut found = Vec::new();
    for engine in [Engine::Docker, Engine::Podman] {
        let Ok(docker) = connect_negotiated(engine).await else {
            continue;
        };
        match snapshot::list(&docker).await {
            Ok(images) => {
                let images = images
                    .into_iter()
                    .filter(|s| repo.is_none_or(|r| s.repo == r))
                    .collect();
                found.push((engine, docker, images));
            }
            Err(e) => eprintln!("{}: {e}", engine_name(engine)),
        }
    }
    found
}

async fn ls(args: LsArgs) -> Result<()> {
    let repo = if args.all {
        None
    } else {
        Some(repo_label(&args.cwd)?)
    };
    let now = now();
    let mut any = false;
    for (engine, _, images) in engines(repo.as_deref()).await {
        for s in images {
            if !any {
                println!(
                    "ENGINE  ID            TAG                                    AGE       SIZE     FROM"
                );
                any = true;
            }
            let tag = s.tags.first().map_or("<none>", String::as_str);
            println!(
                "{:<7} {:<13} {:<38} {:<9} {:<8} {}{}",
                engine_name(engine),
                short_id(&s.id),
                tag,
                age(now - s.created),
                format!("{} MB", s.size / 1_000_000),
                s.base,
                if args.all {
                    format!("  ({})", s.repo)
                } else {
                    String::new()
                }
            );
        }
    }
    // A provider's are recorded in the repository: this one's only.
    if let Ok(repo) = Repo::discover(&args.cwd) {
        for (_, k) in provider_snapshot::list(&repo.git_dir()) {
            if !any {
                println!(
                    "ENGINE  ID            TAG                                    AGE       SIZE     FROM"
                );
                any = true;
            }
            println!(
                "{:<7} {:<13} {:<38} {:<9} {:<8} {}",
                k.provider_name,
                k.id,
                "-",
                age(now - k.created as i64),
                "-",
                k.provider
            );
        }
    }
    if !any {
        println!(
            "no snapshots (a run with --sandbox-opt snapshot=auto keeps one after its set-up)"
        );
    }
    Ok(())
}

async fn rm(args: RmArgs) -> Result<()> {
    let repo = repo_label(&args.cwd)?;
    let mut wanted: Vec<&str> = args.snapshots.iter().map(String::as_str).collect();
    let mut failed = 0;
    for (engine, docker, images) in engines(if args.all { Some(&repo) } else { None }).await {
        for s in images {
            let named = wanted
                .iter()
                .position(|w| names(&s, w))
                .map(|i| wanted.remove(i));
            if !args.all && named.is_none() {
                continue;
            }
            match snapshot::remove(&docker, &s.id).await {
                Ok(()) => println!(
                    "removed {} snapshot {}",
                    engine_name(engine),
                    short_id(&s.id)
                ),
                Err(e) => {
                    failed += 1;
                    eprintln!("{}: {e}", engine_name(engine));
                }
            }
        }
    }
    if let Ok(repo) = Repo::discover(&args.cwd) {
        let kept = provider_snapshot::list(&repo.git_dir());
        let kept: Vec<_> = kept
            .into_iter()
            .filter(|(_, k)| args.all || wanted.contains(&k.id.as_str()))
            .collect();
        if !kept.is_empty() {
            let runtime = args.approval.runtime()?;
            for (record, k) in kept {
                wanted.retain(|w| *w != k.id);
                match provider_snapshot::remove(&repo, &runtime, &record, &k).await {
                    Ok(()) => println!("removed {} snapshot {}", k.provider_name, k.id),
                    Err(e) => {
                        failed += 1;
                        eprintln!("{}: {e}", k.provider_name);
                    }
                }
            }
        }
    }
    if !wanted.is_empty() {
        return Err(Error::input(format!(
            "no snapshot is {}: `sanddune snapshot ls --all` lists them",
            wanted.join(", ")
        )));
    }
    if failed > 0 {
        return Err(Error::Plugin(format!(
            "{failed} snapshot(s) could not be removed (see above)"
        )));
    }
    Ok(())
}

/// Whether `name` (an id prefix of 12 or more, or a tag) names `s`.
fn names(s: &SnapshotImage, name: &str) -> bool {
    let id = s.id.trim_start_matches("sha256:");
    let name_id = name.trim_start_matches("sha256:");
    (name_id.len() >= 12 && id.starts_with(name_id))
        || s.tags.iter().any(|t| {
            // Podman names a bare repository as Docker Hub's or localhost's.
            let bare = t
                .trim_start_matches("localhost/")
                .trim_start_matches("docker.io/library/");
            t == name || bare == name
        })
}

/// Remove the snapshots older than `max_age` of the repository whose git
/// dir is `repo` (of every repository outside one), and of repositories
/// that are gone, in each engine that answers; a line for each. What
/// `sanddune gc` does with them.
pub async fn remove_older_than(max_age: Duration, repo: Option<&Path>) -> usize {
    let now = now();
    let mut removed = 0;
    for (engine, docker, images) in engines(None).await {
        for s in images {
            let ours = repo.is_none_or(|r| Path::new(&s.repo) == r || !Path::new(&s.repo).exists());
            if !ours || (now - s.created) as u64 <= max_age.as_secs() {
                continue;
            }
            match snapshot::remove(&docker, &s.id).await {
                Ok(()) => {
                    removed += 1;
                    println!(
                        "removed {} snapshot {} ({} old)",
                        engine_name(engine),
                        short_id(&s.id),
                        age(now - s.created)
                    );
                }
                Err(e) => eprintln!("{}: {e}", engine_name(engine)),
            }
        }
    }
    removed
}

/// Remove the snapshots providers keep for `repo` (ADR 0038) that are
/// older than `max_age`, through each provider; a line for each. What
/// `sanddune gc` does with them.
pub async fn remove_kept_older_than(max_age: Duration, repo: &Repo, runtime: &PluginRuntime) {
    let now = now();
    for (record, k) in provider_snapshot::list(&repo.git_dir()) {
        let old = now - k.created as i64;
        if old as u64 <= max_age.as_secs() {
            continue;
        }
        match provider_snapshot::remove(repo, runtime, &record, &k).await {
            Ok(()) => println!(
                "removed {} snapshot {} ({} old)",
                k.provider_name,
                k.id,
                age(old)
            ),
            Err(e) => eprintln!("{}: snapshot {}: {e}", k.provider_name, k.id),
        }
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
