//! A repository's `.devcontainer/devcontainer.json` (or `.devcontainer.json`)
//! as the sandbox definition of the docker and podman providers (ADR 0023).
//! The host reads it and turns it into what a run already understands: an
//! image (built, and given the host user's UID/GID, here), the provider's
//! `image`/`user`/`home` options, env for every command, and hooks. The
//! provider and the WIT contract never see it.
//!
//! Precedence: `--sandbox-opt devcontainer=PATH` names the file (relative
//! to the repository root), `devcontainer=none` ignores it; without either
//! the repository's file is used unless `image=` names an image. Explicit
//! `user=` and `home=` win over the file's (the UID/GID update is then
//! skipped); `--env` wins over `containerEnv`/`remoteEnv`.

mod image;
mod jsonc;
mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::capability::containers::{self, Engine};
use crate::error::{Error, Result};
use crate::plugin::approval::Approval;
use crate::plugin::sandbox::SandboxProvider;
use crate::run::hooks::{Hooks, HostHook, NamedSandboxHook, SandboxHook};
pub use spec::DevContainer;
use spec::{Lifecycle, Vars, quote};

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
        if !crate::trust::inside(root, &context) {
            effects.push(format!(
                "build.context outside the repository: {}",
                dc.context()
            ));
        }
    }
    Ok(effects)
}

/// The engine of a built-in docker or podman provider.
fn engine_of(provider: &SandboxProvider) -> Option<Engine> {
    if provider.plugin().approval != Approval::BuiltIn {
        return None;
    }
    match provider.name() {
        "docker" => Some(Engine::Docker),
        "podman" => Some(Engine::Podman),
        _ => None,
    }
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

/// Turn the repository's dev container, if the run uses one, into
/// `config`, `env` and `hooks` (see the module doc). Refusals come before
/// any image is built; the image is built before anything else is
/// created. Returns `initializeCommand`, for the caller to run on the host
/// in the worktree before the sandbox is created: as the first
/// host.onWorktreeReady hook when the worktree is yet to be made, at once
/// when it exists.
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
    let engine_name = containers::engine_name(engine);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::input(format!("cannot read {}: {e}", path.display())))?;
    let dc = DevContainer::parse(&text, &path)?;
    let docker = containers::connect_negotiated(engine).await.map_err(|e| {
        Error::input(format!(
            "{} needs a running {engine_name} engine ({e}); nothing was created",
            path.display()
        ))
    })?;
    let repo = root
        .file_name()
        .map_or("repo".into(), |n| n.to_string_lossy().into_owned());
    let dir = path.parent().unwrap_or(root);
    let base = image::base(&docker, &dc, dir, &repo, engine_name).await?;
    let has = |key: &str| config.iter().any(|(k, _)| k == key);
    let image = if has("user") {
        base
    } else {
        let user = dc
            .user()
            .map(String::from)
            .unwrap_or_else(|| match base.user.as_str() {
                "" => "root".into(),
                user => user.into(),
            });
        let account = image::account(&docker, &base.name, &user).await?;
        // SAFETY: getuid/getgid cannot fail.
        let host = unsafe { (libc::getuid(), libc::getgid()) };
        if let Some(home) = account.as_ref().map(|a| a.home.clone())
            && !has("home")
        {
            config.push(("home".into(), home));
        }
        config.push(("user".into(), user.clone()));
        // Root's ids are never changed; a mismatch is the provider's error.
        match account {
            Some(a)
                if dc.update_remote_user_uid != Some(false)
                    && a.uid != 0
                    && (a.uid, a.gid) != host =>
            {
                image::with_ids(&docker, &base, &user, host.0, host.1, &repo).await?
            }
            _ => base,
        }
    };
    config.push(("image".into(), image.name.clone()));

    let local_folder = root.display().to_string();
    let local_env = |key: &str| std::env::var(key).ok();
    let no_env = BTreeMap::new();
    let local = Vars {
        local_env: &local_env,
        container_env: &no_env,
        local_workspace_folder: &local_folder,
        container_workspace_folder: "",
    };
    let folder = match &dc.workspace_folder {
        Some(folder) => local.substitute(folder),
        None => format!("/workspaces/{repo}"),
    };
    let mut container_env = image.env.clone();
    let vars = Vars {
        container_workspace_folder: &folder,
        ..local
    };
    let mut added: Vec<(String, String)> = Vec::new();
    for (key, value) in &dc.container_env {
        let value = vars.substitute(value);
        container_env.insert(key.clone(), value.clone());
        added.push((key.clone(), value));
    }
    let vars = Vars {
        container_env: &container_env,
        ..vars
    };
    for (key, value) in &dc.remote_env {
        if let Some(value) = value {
            added.push((key.clone(), vars.substitute(value)));
        }
    }
    // Before the call site's env, which wins.
    env.splice(0..0, added);

    let initialize = dc.initialize_command.as_ref().map(|command| HostHook {
        command: substituted(command, &vars).to_shell(),
        timeout_ms: Some(LIFECYCLE_TIMEOUT_MS),
    });
    let mut in_order = vec![NamedSandboxHook {
        name: "workspaceFolder".into(),
        hook: SandboxHook {
            command: link_script(&folder),
            sudo: true,
            timeout_ms: None,
        },
    }];
    for (key, command) in dc.in_sandbox() {
        in_order.push(NamedSandboxHook {
            name: key.into(),
            hook: SandboxHook {
                command: substituted(command, &vars).to_shell(),
                sudo: false,
                timeout_ms: Some(LIFECYCLE_TIMEOUT_MS),
            },
        });
    }
    hooks.devcontainer = in_order;
    Ok(initialize)
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

/// Make `folder` a symlink to the worktree (the hook's working directory),
/// which stays mounted at its host path for git's sake. An empty directory
/// the image made there gives way; a non-empty one is an error.
fn link_script(folder: &str) -> String {
    format!(
        r#"wf={}; if [ "$wf" != "$PWD" ]; then if [ -d "$wf" ] && [ ! -L "$wf" ]; then rmdir "$wf" 2>/dev/null || {{ echo "workspaceFolder $wf is a directory in the image that is not empty" >&2; exit 1; }}; fi; mkdir -p "$(dirname "$wf")" && ln -sfn "$PWD" "$wf"; fi"#,
        quote(folder)
    )
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

    #[test]
    fn the_link_replaces_an_empty_directory_and_keeps_a_full_one() {
        let dir = tempfile::tempdir().unwrap();
        let worktree = dir.path().join("wt");
        std::fs::create_dir(&worktree).unwrap();
        let run = |folder: &Path| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(link_script(&folder.display().to_string()))
                .current_dir(&worktree)
                .output()
                .unwrap()
        };
        let empty = dir.path().join("ws/empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(run(&empty).status.success());
        assert_eq!(std::fs::read_link(&empty).unwrap(), worktree);
        let new = dir.path().join("a/b/new");
        assert!(run(&new).status.success());
        assert_eq!(std::fs::read_link(&new).unwrap(), worktree);
        let full = dir.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("f"), "").unwrap();
        let out = run(&full);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    }
}
