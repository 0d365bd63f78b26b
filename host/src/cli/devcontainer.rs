//! `sanddune devcontainer resolve`: the dev container configuration a run
//! would use, resolved as a run resolves it (ADR 0023).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::capability::containers::Engine;
use crate::error::{Error, Result};
use crate::worktree::Repo;

#[derive(Subcommand)]
pub enum DevcontainerCommands {
    /// Print the configuration a run would use: the file with its
    /// variables substituted, merged with its image's devcontainer.metadata
    /// label (the image is built first when the file says `build` or names
    /// local features, as a run would build it).
    Resolve(ResolveArgs),
}

#[derive(Args)]
pub struct ResolveArgs {
    /// The file, relative to the repository root (default: the
    /// repository's .devcontainer/devcontainer.json or .devcontainer.json).
    #[arg(long)]
    file: Option<PathBuf>,
    /// The engine that has (or builds) the image: docker or podman.
    #[arg(long, default_value = "docker", value_parser = ["docker", "podman"])]
    engine: String,
    /// Print it as JSON.
    #[arg(long)]
    json: bool,
    /// The repository.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    /// Approve what the file makes the host do (a build context outside
    /// the repository, your environment read into it), as a run of it
    /// needs; recorded, like a yes at the prompt.
    #[arg(long)]
    trust: bool,
}

pub async fn devcontainer(command: DevcontainerCommands) -> Result<()> {
    let DevcontainerCommands::Resolve(args) = command;
    let repo = Repo::discover(&args.cwd)?;
    let root = repo.root();
    let path = match &args.file {
        Some(file) => root.join(file),
        None => crate::devcontainer::find(root).ok_or_else(|| {
            Error::input(format!(
                "{} has no {}",
                root.display(),
                crate::devcontainer::FILES.join(" or ")
            ))
        })?,
    };
    let engine = match args.engine.as_str() {
        "podman" => Engine::Podman,
        _ => Engine::Docker,
    };
    // Resolving builds the image and reads the environment as a run does,
    // so it asks for the same workspace trust (`sanddune trust`).
    let file = path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string();
    super::trust::gate(
        &args.cwd,
        |_| {
            Ok(super::trust::GateScope::Run {
                sandbox: crate::plugin::PluginRef::Builtin(args.engine.clone()),
                sandbox_config: vec![(crate::devcontainer::OPTION.to_string(), file)],
            })
        },
        args.trust,
    )?;
    let (resolved, _) = crate::devcontainer::resolve(engine, root, &path).await?;
    let json = serde_json::to_value(&resolved).map_err(|e| Error::Other(e.into()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json).expect("a value"));
        return Ok(());
    }
    // One `key: value` line each, nested values as compact JSON.
    if let serde_json::Value::Object(fields) = json {
        for (key, value) in fields {
            match value {
                serde_json::Value::String(s) => println!("{key}: {s}"),
                other => println!("{key}: {other}"),
            }
        }
    }
    Ok(())
}
