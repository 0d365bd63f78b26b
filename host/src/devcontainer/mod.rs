//! A repository's `.devcontainer/devcontainer.json` (or `.devcontainer.json`)
//! as the sandbox definition of the docker and podman providers (ADR 0023).
//! The host reads it and turns it into what a run already understands: an
//! image (built, with its local features, and given the host user's UID/GID,
//! here), the provider's `image`/`user`/`home` options, env for every
//! command, and hooks. The provider and the WIT contract never see it.
//!
//! Precedence: `--sandbox-opt devcontainer=PATH` names the file (relative
//! to the repository root), `devcontainer=none` ignores it; without either
//! the repository's file is used unless `image=` names an image. Explicit
//! `user=` and `home=` win over the file's (the UID/GID update is then
//! skipped); `--env` wins over `containerEnv`/`remoteEnv`.

mod features;
mod image;
mod jsonc;
mod merge;
mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bollard::Docker;
use serde::Serialize;

use crate::capability::containers::{self, Engine};
use crate::error::{Error, Result};
use crate::hooks::{Hooks, HostHook, NamedSandboxHook, SandboxHook};
use crate::plugin::sandbox::SandboxProvider;
use merge::Merged;
pub use spec::DevContainer;
use spec::{HostVars, Lifecycle, Local, Vars};

/// The sandbox option naming the file, or `none`.
pub const OPTION: &str = "devcontainer";

/// Where a repository's dev container is looked for, in order.
pub const FILES: [&str; 2] = [".devcontainer/devcontainer.json", ".devcontainer.json"];

/// A lifecycle command may install a toolchain: more than a hook's 60 s.
const LIFECYCLE_TIMEOUT_MS: u64 = 20 * 60 * 1000;

/// The repository's dev container file, if it has one.
pub fn find(root: &Path) -> Option<PathBuf> {
    FILES.iter().map(|f| root.join(f)).find(|p| p.is_file())
}

/// What the dev container at `path` makes the host do, for workspace
/// trust (`trust`): its `initializeCommand`, each `${localEnv:...}` it
/// reads, and a build context outside the repository at `root`.
pub fn host_effects(root: &Path, path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::input(format!("cannot read {}: {e}", path.display())))?;
    let dc = DevContainer::parse(&text, path)?;
    let mut effects = Vec::new();
    if let Some(command) = &dc.initialize_command {
        effects.push(format!(
            "initializeCommand runs on the host: {}",
            command.to_shell()
        ));
    }
    // `${env:...}` is the older spelling.
    for opening in ["${localEnv:", "${env:"] {
        for (at, _) in text.match_indices(opening) {
            if let Some(end) = text[at..].find('}') {
                effects.push(format!(
                    "reads your environment: {}",
                    &text[at..at + end + 1]
                ));
            }
        }
    }
    if dc.dockerfile().is_some() {
        let context = path.parent().unwrap_or(root).join(dc.context());
        if !crate::repo_path::inside(root, &context) {
            effects.push(format!(
                "build.context outside the repository: {}",
                dc.context()
            ));
        }
    }
    Ok(effects)
}

/// The engine a provider's sandboxes are containers of, as it declares
/// (since 0.6), when it may use the containers capability.
fn engine_of(provider: &SandboxProvider) -> Option<Engine> {
    provider
        .info()
        .container_engine
        .filter(|_| provider.capabilities().containers)
}

/// Which file a run uses, with the `devcontainer` option taken out of
/// `config` (the provider never sees it).
fn choose(
    engine: Option<Engine>,
    root: &Path,
    config: &mut Vec<(String, String)>,
) -> Result<Option<PathBuf>> {
    let named = config
        .iter()
        .rev()
        .find(|(k, _)| k == OPTION)
        .map(|(_, v)| v.clone());
    config.retain(|(k, _)| k != OPTION);
    let has = |key: &str| config.iter().any(|(k, _)| k == key);
    match named.as_deref() {
        Some("none") => Ok(None),
        Some(path) => {
            if engine.is_none() {
                return Err(Error::input(format!(
                    "--sandbox-opt {OPTION}= is for the built-in docker and podman providers"
                )));
            }
            if has("image") {
                return Err(Error::input(format!(
                    "--sandbox-opt {OPTION}={path} and image= both name the sandbox's image: give one"
                )));
            }
            let file = root.join(path);
            if !file.is_file() {
                return Err(Error::input(format!(
                    "--sandbox-opt {OPTION}={path}: no file {}",
                    file.display()
                )));
            }
            Ok(Some(file))
        }
        None if engine.is_none() || has("image") => Ok(None),
        None => Ok(find(root)),
    }
}

/// The configuration a run uses, resolved: the file with the host's
/// variables substituted, its image (built when the file says `build`),
/// and that image's metadata merged in (see `merge`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    pub config_file: PathBuf,
    /// The image the sandbox runs, before any UID/GID update.
    pub image: String,
    /// The user the agent and the lifecycle commands run as: remoteUser,
    /// else containerUser, else the image's USER, else root.
    pub user: String,
    pub workspace_folder: String,
    /// Where the worktree is mounted in the container.
    pub workspace_mount: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initialize_command: Option<Lifecycle>,
    pub build_args: BTreeMap<String, String>,
    #[serde(flatten)]
    pub merged: Merged,
    #[serde(skip)]
    base: image::Image,
}

/// The dev container at `path` in the repository at `root`, resolved with
/// `engine` (its image built if need be). Refusals come before any build.
pub async fn resolve(engine: Engine, root: &Path, path: &Path) -> Result<(Resolved, Docker)> {
    let engine_name = containers::engine_name(engine);
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::input(format!("cannot read {}: {e}", path.display())))?;
    let local_folder = root.display().to_string();
    let local_env = |key: &str| std::env::var(key).ok();
    let dc = DevContainer::parse_substituted(
        &text,
        path,
        &Local {
            env: &local_env,
            workspace_folder: &local_folder,
        },
    )?;
    let folder = dc
        .workspace_folder
        .clone()
        .expect("parse_substituted sets it");
    let mount = workspace_mount(dc.workspace_mount.as_deref(), &local_folder, &folder)
        .map_err(|why| Error::input(format!("{}: {why}; nothing was created", path.display())))?;
    let features = features::read(root, path, &text, &dc.features)?;
    let docker = containers::connect_negotiated(engine).await.map_err(|e| {
        Error::input(format!(
            "{} needs a running {engine_name} engine ({e}); nothing was created",
            path.display()
        ))
    })?;
    let dir = path.parent().unwrap_or(root);
    let base = image::base(&docker, &dc, dir, &repo_name(root), engine_name).await?;
    // The image's own metadata reads nothing of the user's environment.
    let no_env = |_: &str| None;
    let image_vars = Vars {
        host: Some(HostVars {
            local_env: &no_env,
            local_workspace_folder: &local_folder,
            container_workspace_folder: &folder,
            devcontainer_id: Some(&spec::devcontainer_id(&local_folder, path)),
        }),
        container_env: None,
    };
    let merge_with = |image: &image::Image| {
        let mut entries = merge::image_entries(image.metadata.as_deref(), &image_vars)
            .map_err(|why| Error::input(format!("the image {}: {why}", image.name)))?;
        entries.push(merge::Entry::of_file(&dc));
        Ok::<_, Error>(merge::merge(entries))
    };
    // Features install for the users the base image and the file name;
    // their metadata joins the label of the image they make.
    let base = if features.is_empty() {
        base
    } else {
        let merged = merge_with(&base)?;
        let container = merged
            .container_user
            .clone()
            .unwrap_or_else(|| match base.user.as_str() {
                "" => "root".into(),
                user => user.into(),
            });
        let users = features::Users {
            remote: merged
                .remote_user
                .clone()
                .unwrap_or_else(|| container.clone()),
            container,
        };
        features::install(&docker, &base, &features, &users, &repo_name(root)).await?
    };
    let merged = merge_with(&base)?;
    let user = merged
        .remote_user
        .clone()
        .or_else(|| merged.container_user.clone())
        .unwrap_or_else(|| match base.user.as_str() {
            "" => "root".into(),
            user => user.into(),
        });
    let resolved = Resolved {
        config_file: path.to_path_buf(),
        image: base.name.clone(),
        user,
        workspace_folder: folder,
        workspace_mount: mount,
        initialize_command: dc.initialize_command.clone(),
        build_args: dc.build.map(|b| b.args).unwrap_or_default(),
        merged,
        base,
    };
    Ok((resolved, docker))
}

/// The container path the worktree is mounted at: workspaceMount's target
/// (its source must be the repository: the sandbox mounts no other host
/// folder), else workspaceFolder.
fn workspace_mount(
    mount: Option<&str>,
    local_folder: &str,
    folder: &str,
) -> std::result::Result<String, String> {
    let Some(mount) = mount.filter(|m| !m.is_empty()) else {
        return Ok(folder.to_string());
    };
    let mut source = None;
    let mut target = None;
    for part in mount.split(',') {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        match key.trim() {
            "source" | "src" => source = Some(value.trim()),
            "target" | "dst" | "destination" => target = Some(value.trim()),
            "type" if value.trim() != "bind" => {
                return Err(format!(
                    "workspaceMount `{mount}` is not a bind mount: the worktree is bind-mounted"
                ));
            }
            _ => {}
        }
    }
    let same = |s: &str| Path::new(s.trim_end_matches('/')) == Path::new(local_folder);
    match (source, target) {
        (Some(s), Some(t)) if same(s) && t.starts_with('/') => Ok(t.to_string()),
        (Some(s), Some(_)) if !same(s) => Err(format!(
            "workspaceMount's source `{s}` is not the repository ({local_folder}): a sandbox mounts only its worktree there"
        )),
        _ => Err(format!(
            "workspaceMount `{mount}` needs source=${{localWorkspaceFolder}} and an absolute target"
        )),
    }
}

/// Turn the repository's dev container, if the run uses one, into
/// `config`, `env` and `hooks` (see the module doc). Refusals, and the
/// check that the user's ids can be the host user's, come before any image
/// is built or anything is created. Returns `initializeCommand`, for the
/// caller to run on the host in the worktree before the sandbox is
/// created: as the first host.onWorktreeReady hook when the worktree is
/// yet to be made, at once when it exists.
pub async fn apply(
    provider: &SandboxProvider,
    root: &Path,
    config: &mut Vec<(String, String)>,
    env: &mut Vec<(String, String)>,
    hooks: &mut Hooks,
) -> Result<Option<HostHook>> {
    let engine = engine_of(provider);
    let Some(path) = choose(engine, root, config)? else {
        return Ok(None);
    };
    let engine = engine.expect("choose returns a file only for an engine");
    let (resolved, docker) = resolve(engine, root, &path).await?;
    if !resolved.merged.not_applied.is_empty() {
        eprintln!(
            "sanddune: the image {}'s devcontainer.metadata asks for what the containers capability never grants; left out: {}",
            resolved.image,
            resolved.merged.not_applied.join(", ")
        );
    }
    let base = resolved.base;
    let has = |key: &str| config.iter().any(|(k, _)| k == key);
    let image = if has("user") {
        base
    } else {
        let user = resolved.user.clone();
        let account = image::account(&docker, &base.name, &user).await?;
        let who = user.split(':').next().unwrap_or(&user);
        if account.is_none() && !who.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::input(format!(
                "{}: the dev container's user `{who}` is not in the image {}'s /etc/passwd; nothing was created",
                path.display(),
                base.name
            )));
        }
        // SAFETY: getuid/getgid cannot fail.
        let host = unsafe { (libc::getuid(), libc::getgid()) };
        if let Some(home) = account.as_ref().map(|a| a.home.clone())
            && !has("home")
        {
            config.push(("home".into(), home));
        }
        config.push(("user".into(), user.clone()));
        let update = resolved.merged.update_remote_user_uid != Some(false);
        match account {
            // Root's ids are never changed.
            Some(a) if update && a.uid != 0 && (a.uid, a.gid) != host => {
                image::with_ids(&docker, &base, &user, host.0, host.1, &repo_name(root)).await?
            }
            // The provider would refuse it once the sandbox exists: say so
            // before anything (initializeCommand too) happens.
            Some(a) if (a.uid, a.gid) != host => {
                let why = if update {
                    "root's ids are never changed: name a user of the image in remoteUser"
                } else {
                    "updateRemoteUserUID is false: remove it to give the user your ids"
                };
                return Err(Error::input(format!(
                    "{}: the container user `{who}` of image `{}` is UID:GID {}:{}, but you are {}:{} on the host, so files the agent writes in the worktree would belong to another user; {why}, or choose one with --sandbox-opt user=...; nothing was created",
                    path.display(),
                    base.name,
                    a.uid,
                    a.gid,
                    host.0,
                    host.1
                )));
            }
            _ => base,
        }
    };
    config.push(("image".into(), image.name.clone()));
    config.push((WORKSPACE_MOUNT.into(), resolved.workspace_mount.clone()));

    // `${containerEnv:...}`: the image's env in containerEnv, that and
    // containerEnv in remoteEnv and the commands.
    let mut container_env = image.env.clone();
    let mut added: Vec<(String, String)> = Vec::new();
    let vars = Vars {
        host: None,
        container_env: Some(&image.env),
    };
    for (key, value) in &resolved.merged.container_env {
        let value = vars.substitute(value);
        container_env.insert(key.clone(), value.clone());
        added.push((key.clone(), value));
    }
    let vars = Vars {
        host: None,
        container_env: Some(&container_env),
    };
    for (key, value) in &resolved.merged.remote_env {
        if let Some(value) = value {
            added.push((key.clone(), vars.substitute(value)));
        }
    }
    // Before the call site's env, which wins.
    env.splice(0..0, added);

    let initialize = resolved
        .initialize_command
        .as_ref()
        .map(|command| HostHook {
            command: command.to_shell(),
            timeout_ms: Some(LIFECYCLE_TIMEOUT_MS),
        });
    hooks.devcontainer = resolved
        .merged
        .in_sandbox()
        .into_iter()
        .map(|(name, command)| NamedSandboxHook {
            name,
            hook: SandboxHook {
                command: substituted(command, &vars).to_shell(),
                sudo: false,
                timeout_ms: Some(LIFECYCLE_TIMEOUT_MS),
            },
        })
        .collect();
    Ok(initialize)
}

/// The host-side sandbox option saying where the worktree is mounted a
/// second time (the dev container's workspace folder); taken out before
/// the provider sees its options.
pub const WORKSPACE_MOUNT: &str = "workspace-mount";

/// `config` with [`WORKSPACE_MOUNT`] turned into a `mount` of `worktree`
/// at its target, unless that is where the worktree is already.
pub fn mount_workspace(config: Vec<(String, String)>, worktree: &Path) -> Vec<(String, String)> {
    config
        .into_iter()
        .filter_map(|(k, v)| {
            if k != WORKSPACE_MOUNT {
                return Some((k, v));
            }
            (Path::new(&v) != worktree)
                .then(|| ("mount".into(), format!("{}:{v}", worktree.display())))
        })
        .collect()
}

fn repo_name(root: &Path) -> String {
    root.file_name()
        .map_or("repo".into(), |n| n.to_string_lossy().into_owned())
}

/// `command` with the variables substituted in each of its strings.
fn substituted(command: &Lifecycle, vars: &Vars) -> Lifecycle {
    match command {
        Lifecycle::Line(line) => Lifecycle::Line(vars.substitute(line)),
        Lifecycle::Argv(argv) => Lifecycle::Argv(argv.iter().map(|a| vars.substitute(a)).collect()),
        Lifecycle::Parallel(named) => Lifecycle::Parallel(
            named
                .iter()
                .map(|(k, c)| (k.clone(), substituted(c, vars)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn what_makes_the_host_act_is_listed_for_approval() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::create_dir(root.join(".devcontainer")).unwrap();
        let file = root.join(".devcontainer/devcontainer.json");
        std::fs::write(
            &file,
            r#"{ "build": { "dockerfile": "Dockerfile", "context": "../.." },
                 "containerEnv": { "T": "${localEnv:GITHUB_TOKEN}" },
                 "initializeCommand": ["sh", "-c", "curl x | sh"] }"#,
        )
        .unwrap();
        assert_eq!(
            host_effects(root, &file).unwrap(),
            vec![
                "initializeCommand runs on the host: 'sh' '-c' 'curl x | sh'".to_string(),
                "reads your environment: ${localEnv:GITHUB_TOKEN}".into(),
                "build.context outside the repository: ../..".into(),
            ]
        );
        // An image, lifecycle commands in the sandbox and a context inside
        // the repository: nothing for the host.
        std::fs::write(
            &file,
            r#"{ "build": { "dockerfile": "Dockerfile", "context": ".." },
                 "postCreateCommand": "npm ci" }"#,
        )
        .unwrap();
        assert_eq!(host_effects(root, &file).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn the_option_decides_and_is_taken_out() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        let docker = Some(Engine::Docker);
        // No file: nothing.
        let mut config = opts(&[("network", "n")]);
        assert_eq!(choose(docker, root, &mut config).unwrap(), None);
        std::fs::write(root.join(".devcontainer.json"), "{}").unwrap();
        assert_eq!(
            choose(docker, root, &mut config).unwrap(),
            Some(root.join(".devcontainer.json"))
        );
        std::fs::create_dir(root.join(".devcontainer")).unwrap();
        std::fs::write(root.join(".devcontainer/devcontainer.json"), "{}").unwrap();
        assert_eq!(
            choose(docker, root, &mut config).unwrap(),
            Some(root.join(".devcontainer/devcontainer.json")),
            "the folder's file comes first"
        );
        // image= names the image: the file is not used.
        assert_eq!(
            choose(docker, root, &mut opts(&[("image", "i")])).unwrap(),
            None
        );
        // none: ignored, and the provider never sees the key.
        let mut config = opts(&[(OPTION, "none"), ("network", "n")]);
        assert_eq!(choose(docker, root, &mut config).unwrap(), None);
        assert_eq!(config, opts(&[("network", "n")]));
        let mut config = opts(&[(OPTION, ".devcontainer.json")]);
        assert_eq!(
            choose(docker, root, &mut config).unwrap(),
            Some(root.join(".devcontainer.json"))
        );
        assert!(config.is_empty());
        // Mistakes are input errors.
        for (config, expected) in [
            (opts(&[(OPTION, "nope.json")]), "no file"),
            (
                opts(&[(OPTION, ".devcontainer.json"), ("image", "i")]),
                "give one",
            ),
        ] {
            let e = choose(docker, root, &mut config.clone()).unwrap_err();
            assert!(
                e.to_string().contains(expected) && e.exit_code() == 2,
                "{e}"
            );
        }
        let e = choose(None, root, &mut opts(&[(OPTION, "x")])).unwrap_err();
        assert!(e.to_string().contains("docker and podman"), "{e}");
        assert_eq!(choose(None, root, &mut vec![]).unwrap(), None);
    }
}
