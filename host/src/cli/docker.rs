//! `sanddune docker|podman build-image|remove-image`: the sandbox image's
//! lifecycle, through the engine's API (no CLI needed).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bollard::query_parameters::RemoveImageOptionsBuilder;
use clap::{Args, Subcommand};

use crate::capability::containers::Engine;
use crate::capability::containers::{connect_negotiated, engine_name};
use crate::error::{Error, Result};

/// The default image: git, curl, jq, gh, Node 22, the agent CLIs and a
/// non-root `agent` user with the builder's UID/GID.
pub const DEFAULT_DOCKERFILE: &str = include_str!("Dockerfile");

#[derive(Subcommand)]
pub enum DockerCommands {
    /// Build the sandbox image from .sanddune/Dockerfile, --dockerfile, or
    /// the built-in default, with your UID/GID for its agent user.
    BuildImage {
        #[command(flatten)]
        image: ImageArgs,
        /// Build from this file instead, with the current directory as context.
        #[arg(long)]
        dockerfile: Option<PathBuf>,
    },
    /// Remove the sandbox image.
    RemoveImage(ImageArgs),
}

#[derive(Subcommand)]
pub enum PodmanCommands {
    /// Build the sandbox image from .sanddune/Containerfile, --containerfile,
    /// or the built-in default, with your UID/GID for its agent user.
    BuildImage {
        #[command(flatten)]
        image: ImageArgs,
        /// Build from this file instead, with the current directory as context.
        #[arg(long)]
        containerfile: Option<PathBuf>,
    },
    /// Remove the sandbox image.
    RemoveImage(ImageArgs),
}

#[derive(Args)]
pub struct ImageArgs {
    /// Image name; default sanddune:<repo-dir-name>.
    #[arg(long)]
    pub(super) image_name: Option<String>,
    /// The repository.
    #[arg(long, default_value = ".")]
    pub(super) cwd: PathBuf,
}

pub async fn docker(command: DockerCommands) -> Result<()> {
    match command {
        DockerCommands::BuildImage { image, dockerfile } => {
            build_image(Engine::Docker, &image, dockerfile, "Dockerfile").await
        }
        DockerCommands::RemoveImage(image) => remove_image(Engine::Docker, &image).await,
    }
}

pub async fn podman(command: PodmanCommands) -> Result<()> {
    match command {
        PodmanCommands::BuildImage {
            image,
            containerfile,
        } => build_image(Engine::Podman, &image, containerfile, "Containerfile").await,
        PodmanCommands::RemoveImage(image) => remove_image(Engine::Podman, &image).await,
    }
}

/// `sanddune:<repo-dir-name>`, as the docker and podman providers default to.
fn image_name(args: &ImageArgs) -> Result<String> {
    if let Some(name) = &args.image_name {
        return Ok(name.clone());
    }
    // Named from the git dir, as the providers name it.
    Ok(crate::capability::containers::default_image(
        &repo_root(&args.cwd)?.join(".git"),
    ))
}

fn repo_root(cwd: &Path) -> Result<PathBuf> {
    let repo = git2::Repository::discover(cwd).map_err(|e| {
        Error::input(format!(
            "{} is not in a git repository: {}",
            cwd.display(),
            e.message()
        ))
    })?;
    // From inside a worktree, the main repository's directory names the image.
    let common = repo.commondir();
    let root = if common.ends_with(".git") {
        common.parent().unwrap_or(common)
    } else {
        repo.workdir().unwrap_or(common)
    };
    std::fs::canonicalize(root).map_err(|e| Error::Other(e.into()))
}

/// The build file and the context directory, by precedence: the flag (context
/// = current directory), the repository's `.sanddune/<file>` (context =
/// `.sanddune/`), the built-in default (no context).
fn sources(
    args: &ImageArgs,
    flag: Option<PathBuf>,
    file_name: &str,
) -> Result<(String, Option<PathBuf>, String)> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| Error::input(format!("cannot read {}: {e}", path.display())))
    };
    if let Some(path) = flag {
        let context = std::env::current_dir().map_err(|e| Error::Other(e.into()))?;
        return Ok((read(&path)?, Some(context), path.display().to_string()));
    }
    let scaffolded = repo_root(&args.cwd)?.join(".sanddune").join(file_name);
    if scaffolded.is_file() {
        let context = scaffolded.parent().map(Path::to_path_buf);
        return Ok((
            read(&scaffolded)?,
            context,
            scaffolded.display().to_string(),
        ));
    }
    Ok((
        DEFAULT_DOCKERFILE.to_string(),
        None,
        "the built-in default".into(),
    ))
}

pub(super) async fn build_image(
    engine: Engine,
    args: &ImageArgs,
    flag: Option<PathBuf>,
    file_name: &str,
) -> Result<()> {
    let name = image_name(args)?;
    let (dockerfile, context, from) = sources(args, flag, file_name)?;
    let docker = connect_negotiated(engine).await.map_err(Error::Plugin)?;
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    eprintln!(
        "building {name} with {} from {from} (agent user UID:GID {uid}:{gid})",
        engine_name(engine)
    );
    let tar = crate::image_build::pack(&dockerfile, context.as_deref()).await?;
    let build_args = HashMap::from([
        ("AGENT_UID".to_string(), uid.to_string()),
        ("AGENT_GID".to_string(), gid.to_string()),
    ]);
    let mut stderr = std::io::stderr();
    // Progress as the engine streams it.
    let mut progress = |text: &str| {
        let _ = stderr.write_all(text.as_bytes());
    };
    crate::image_build::build(&docker, &name, tar, &build_args, None, &mut progress).await?;
    println!("built {name}");
    Ok(())
}

async fn remove_image(engine: Engine, args: &ImageArgs) -> Result<()> {
    let name = image_name(args)?;
    let docker = connect_negotiated(engine).await.map_err(Error::Plugin)?;
    let options = RemoveImageOptionsBuilder::default().build();
    match docker.remove_image(&name, Some(options), None).await {
        Ok(_) => {
            println!("removed {name}");
            Ok(())
        }
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Err(Error::input(format!(
            "no image {name} in {}",
            engine_name(engine)
        ))),
        Err(e) => Err(Error::Plugin(format!("cannot remove {name}: {e}"))),
    }
}
