//! `sanddune docker|podman build-image|remove-image`: the sandbox image's
//! lifecycle, through the engine's API (no CLI needed).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bollard::query_parameters::{BuildImageOptionsBuilder, RemoveImageOptionsBuilder};
use clap::{Args, Subcommand};
use futures_util::StreamExt;

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

/// The build context as a tar, without what its `.dockerignore` excludes,
/// with the build file added under a name of its own so a file from anywhere
/// works with any context.
fn context_tar(dockerfile: &str, context: Option<&Path>) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    if let Some(dir) = context {
        let ignore = Ignore::read(dir);
        add_dir(&mut tar, dir, &mut Vec::new(), &ignore)?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, BUILD_FILE, dockerfile.as_bytes())?;
    tar.into_inner()
}

/// Add `dir`'s entries (at `rel` inside the context) that are not ignored.
fn add_dir(
    tar: &mut tar::Builder<Vec<u8>>,
    dir: &Path,
    rel: &mut Vec<String>,
    ignore: &Ignore,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        rel.push(entry.file_name().to_string_lossy().into_owned());
        let excluded = ignore.excluded(rel);
        let file_type = entry.file_type()?;
        let name = rel.join("/");
        if file_type.is_dir() {
            // An excluded directory is still walked when an exception
            // (`!pattern`) could bring something inside it back.
            if !excluded {
                tar.append_dir(&name, entry.path())?;
            }
            if !excluded || ignore.has_exceptions {
                add_dir(tar, &entry.path(), rel, ignore)?;
            }
        } else if !excluded {
            tar.append_path_with_name(entry.path(), &name)?;
        }
        rel.pop();
    }
    Ok(())
}

/// The context's `.dockerignore`, with Docker's rules: `*`, `?` and `**`
/// globs, `!` exceptions, the last matching line decides, and a pattern
/// matching a directory covers everything in it.
struct Ignore {
    /// (pattern components, is an exception)
    rules: Vec<(Vec<String>, bool)>,
    has_exceptions: bool,
}

impl Ignore {
    fn read(dir: &Path) -> Self {
        let text = std::fs::read_to_string(dir.join(".dockerignore")).unwrap_or_default();
        Self::parse(&text)
    }

    fn parse(text: &str) -> Self {
        let rules: Vec<(Vec<String>, bool)> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|line| {
                let (pattern, exception) = match line.strip_prefix('!') {
                    Some(p) => (p.trim(), true),
                    None => (line, false),
                };
                let parts = pattern
                    .split('/')
                    .filter(|c| !c.is_empty() && *c != ".")
                    .map(String::from)
                    .collect();
                (parts, exception)
            })
            .filter(|(parts, _): &(Vec<String>, bool)| !parts.is_empty())
            .collect();
        let has_exceptions = rules.iter().any(|(_, e)| *e);
        Ignore {
            rules,
            has_exceptions,
        }
    }

    fn excluded(&self, path: &[String]) -> bool {
        let mut excluded = false;
        for (pattern, exception) in &self.rules {
            if (1..=path.len()).any(|n| glob_path(pattern, &path[..n])) {
                excluded = !exception;
            }
        }
        excluded
    }
}

/// Path components against pattern components; `**` spans any number.
fn glob_path(pattern: &[String], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| glob_path(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((name, tail)) => glob(first.as_bytes(), name.as_bytes()) && glob_path(rest, tail),
            None => false,
        },
    }
}

/// One component: `*` any run of characters, `?` one character.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => (0..=name.len()).any(|skip| glob(rest, &name[skip..])),
        (Some((b'?', rest)), Some((_, tail))) => glob(rest, tail),
        (Some((p, rest)), Some((n, tail))) => p == n && glob(rest, tail),
        _ => false,
    }
}

const BUILD_FILE: &str = ".sanddune-build-file";

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
    let tar = tokio::task::spawn_blocking(move || context_tar(&dockerfile, context.as_deref()))
        .await
        .map_err(|e| Error::Other(e.into()))?
        .map_err(|e| Error::input(format!("cannot pack the build context: {e}")))?;
    let build_args = HashMap::from([
        ("AGENT_UID".to_string(), uid.to_string()),
        ("AGENT_GID".to_string(), gid.to_string()),
    ]);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile(BUILD_FILE)
        .t(&name)
        .rm(true)
        .buildargs(&build_args)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(tar.into())));
    let mut stderr = std::io::stderr();
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| Error::Agent(format!("building {name} failed: {e}")))?;
        if let Some(error) = info.error_detail.and_then(|d| d.message) {
            return Err(Error::Agent(format!("building {name} failed: {error}")));
        }
        // Progress as the engine streams it.
        if let Some(text) = info.stream {
            let _ = stderr.write_all(text.as_bytes());
        }
    }
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

#[cfg(test)]
mod tests {
    use super::Ignore;

    fn excluded(rules: &str, path: &str) -> bool {
        let parts: Vec<String> = path.split('/').map(String::from).collect();
        Ignore::parse(rules).excluded(&parts)
    }

    #[test]
    fn dockerignore_rules_follow_docker() {
        let rules = "# build output\ntarget\n*.log\n**/node_modules\n!keep.log\n/.git\n";
        assert!(excluded(rules, "target"));
        assert!(excluded(rules, "target/debug/sanddune"));
        assert!(excluded(rules, "app.log"));
        assert!(!excluded(rules, "keep.log"));
        assert!(!excluded(rules, "sub/app.log"), "* does not cross /");
        assert!(excluded(rules, "node_modules/x"));
        assert!(excluded(rules, "web/ui/node_modules/y"));
        assert!(excluded(rules, ".git/HEAD"));
        assert!(!excluded(rules, "src/main.rs"));
        assert!(!excluded(rules, "targets"));
        assert!(excluded("src/?.rs", "src/a.rs"));
        assert!(!excluded("src/?.rs", "src/ab.rs"));
    }
}
