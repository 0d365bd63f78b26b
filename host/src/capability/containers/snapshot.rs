//! Prepared snapshots (ADR 0035): a container sandbox whose set-up (the
//! sandbox hooks) succeeded is committed as an image, keyed by what made
//! it; a later sandbox whose key matches starts from that image and skips
//! its set-up. The host takes the keys (`snapshot`, `snapshot.inputs`) out
//! of a container provider's options, as it takes the containment keys.
//!
//! The image holds the container's own files only: what the set-up wrote
//! in the bind-mounted worktree (`node_modules`) is copied into
//! [`STASH`] before the commit and back out after a start from it (the run
//! does both, by execs in the sandbox). The commit never holds the run's
//! env: a container that may be committed gets its env per exec, never in
//! its config, which the engine copies into the image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bollard::Docker;
use bollard::models::ContainerConfig;
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
};
use sha2::{Digest, Sha256};

/// `snapshot=auto|off`.
pub const KEY: &str = "snapshot";
/// `snapshot.inputs=PATH[,PATH...]`: files in the repository whose contents
/// the set-up depends on (lockfiles); repeatable.
pub const INPUTS_KEY: &str = "snapshot.inputs";
/// Where a snapshot keeps what the set-up wrote in the worktree.
pub const STASH: &str = "/var/lib/sanddune/snapshot/worktree";
/// The image repository snapshots are committed to; the tag is the key's
/// first 20 hex digits.
pub const REPOSITORY: &str = "sanddune-snapshot";
/// The label of a snapshot image: its key, the repository's git dir it was
/// made for, the image it was made from and whether it keeps worktree files
/// (see [`label_value`]).
pub const KEY_LABEL: &str = "sanddune.snapshot";

/// The snapshot options of a sandbox, when `snapshot=auto`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Repository paths whose contents are part of the key.
    pub inputs: Vec<String>,
}

impl SnapshotOptions {
    /// Whether `key` is one the host takes for snapshots.
    pub fn is_key(key: &str) -> bool {
        key == KEY || key == INPUTS_KEY
    }

    /// The snapshot options `config` asks for (None unless `snapshot=auto`);
    /// their keys are removed from it.
    pub fn take_from(config: &mut Vec<(String, String)>) -> Result<Option<Self>, String> {
        let mut on = false;
        let mut inputs = Vec::new();
        let mut rest = Vec::with_capacity(config.len());
        for (key, value) in config.drain(..) {
            if key == KEY {
                on = match value.as_str() {
                    "auto" => true,
                    "off" => false,
                    other => return Err(format!("snapshot must be auto or off, not `{other}`")),
                };
            } else if key == INPUTS_KEY {
                for path in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    check_input(path)?;
                    inputs.push(path.to_string());
                }
            } else {
                rest.push((key, value));
            }
        }
        *config = rest;
        if !on && !inputs.is_empty() {
            return Err(format!(
                "{INPUTS_KEY} names the inputs of a snapshot, but snapshot=auto is not set"
            ));
        }
        Ok(on.then_some(SnapshotOptions { inputs }))
    }
}

/// The sha256 of a regular file's contents; None for anything else. A
/// FIFO an earlier agent left in the worktree is opened without blocking
/// and read as missing.
fn digest_of(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0; 64 << 10];
    loop {
        match file.read(&mut buf).ok()? {
            0 => return Some(hex(&hasher.finalize())),
            n => hasher.update(&buf[..n]),
        }
    }
}

/// An input is a plain relative path inside the repository.
fn check_input(path: &str) -> Result<(), String> {
    if path.starts_with('/') || path.split('/').any(|p| p == ".." || p.is_empty()) {
        return Err(format!(
            "{INPUTS_KEY}: `{path}` is not a relative path inside the repository"
        ));
    }
    Ok(())
}

/// A sandbox's snapshot: what its key is made of, and what its first
/// container's create found. Shared by the sandbox's provider instances
/// and the run.
#[derive(Debug)]
pub struct Snapshot {
    /// The repository and the set-up commands, in order.
    material: String,
    /// The inputs' paths, and the worktree they are read from when the
    /// first create needs the key (not in a preflight, `find` or gc).
    inputs: Vec<String>,
    worktree: PathBuf,
    /// The repository's git dir, labelled on the image.
    repo: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The create's image, as the provider named it.
    base: Option<String>,
    /// The full key, once the create computed it.
    key: Option<String>,
    /// The snapshot the container started from, when one matched.
    restored: Option<Restored>,
    /// The container that may be committed, and the env its execs get.
    container: Option<(String, Vec<String>)>,
}

/// What any snapshot's key starts with: the repository `repo` and the
/// sandbox's set-up `setup` (its hooks, in order). Per repository: another
/// one's set-up output is never restored here.
pub(crate) fn setup_material(repo: &Path, setup: &[String]) -> String {
    let mut material = format!("sanddune snapshot 1\nrepository {repo:?}\n");
    for command in setup {
        material.push_str(&format!("setup {command:?}\n"));
    }
    material
}

impl Snapshot {
    /// A snapshot for a sandbox whose set-up is `setup` (the sandbox hooks,
    /// in order) in the worktree `worktree`, with `options`' inputs there.
    pub fn new(options: &SnapshotOptions, setup: &[String], worktree: &Path, repo: &Path) -> Self {
        Snapshot {
            material: setup_material(repo, setup),
            inputs: options.inputs.clone(),
            worktree: worktree.to_path_buf(),
            repo: repo.display().to_string(),
            state: Mutex::new(State::default()),
        }
    }

    /// What the key is made of besides the image: the set-up and the
    /// inputs' digests. An input that is missing, not a regular file or
    /// leaves the worktree counts as missing: the key still changes when
    /// it appears.
    pub(crate) fn material(&self) -> String {
        let mut material = self.material.clone();
        for input in &self.inputs {
            let path = self.worktree.join(input);
            let digest = crate::repo_path::inside(&self.worktree, &path)
                .then(|| digest_of(&path))
                .flatten()
                .unwrap_or_else(|| "missing".to_string());
            material.push_str(&format!("input {input:?} {digest}\n"));
        }
        material
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The snapshot the sandbox started from, if one matched.
    pub fn restored(&self) -> Option<Restored> {
        self.state().restored.clone()
    }

    /// Whether the sandbox may be kept as a new snapshot: its create found
    /// none to start from and made the one container that would be
    /// committed.
    pub fn may_keep(&self) -> bool {
        let state = self.state();
        state.restored.is_none() && state.container.is_some()
    }

    /// The env an exec in `container` gets before its own: the run's, when
    /// the container may be committed (its config holds none of it).
    pub(super) fn exec_env(&self, container: &str) -> Vec<(String, String)> {
        match &self.state().container {
            Some((id, env)) if id == container => env
                .iter()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            _ => vec![],
        }
    }

    /// For the sandbox's first create: the image to start from (a matching
    /// snapshot's, or `image`), and whether the container may be committed
    /// (then its env goes per exec). Later creates get `image` as it is.
    pub(super) async fn choose_image(
        &self,
        docker: &Docker,
        image: &str,
        user: Option<&str>,
    ) -> Result<(String, bool), String> {
        if self.state().key.is_some() {
            return Ok((image.to_string(), false));
        }
        let inspect = docker
            .inspect_image(image)
            .await
            .map_err(|e| format!("cannot inspect image `{image}`: {e}"))?;
        let id = inspect.id.unwrap_or_default();
        let material = format!(
            "{}image {id}\nuser {:?}\n",
            self.material(),
            user.unwrap_or("")
        );
        let key = hex(&Sha256::digest(material.as_bytes()));
        let found = newest(docker, &key).await?;
        let mut state = self.state();
        state.base = Some(image.to_string());
        state.key = Some(key);
        state.restored = found.map(|s| Restored {
            image: s.id,
            worktree_files: s.worktree_files,
        });
        Ok(match &state.restored {
            Some(snapshot) => (snapshot.image.clone(), false),
            None => (image.to_string(), true),
        })
    }

    /// Remember the container that may be committed and the env its execs
    /// get.
    pub(super) fn created(&self, container: &str, env: Vec<String>) {
        self.state().container = Some((container.to_string(), env));
    }

    /// Commit the container as this sandbox's snapshot, `worktree_files`
    /// saying whether it holds some in [`STASH`]. Without a pause: the
    /// set-up is over and the agent has not started, so nothing writes (a
    /// rootless engine on cgroup v1 could not pause it anyway).
    pub(super) async fn keep(&self, docker: &Docker, worktree_files: bool) -> Result<Kept, String> {
        let (container, key, base) = {
            let state = self.state();
            match (&state.container, &state.key, &state.base) {
                (Some((id, _)), Some(key), Some(base)) if state.restored.is_none() => {
                    (id.clone(), key.clone(), base.clone())
                }
                _ => return Err("this sandbox has no container to keep as a snapshot".into()),
            }
        };
        let image = docker
            .inspect_image(&base)
            .await
            .map_err(|e| format!("cannot inspect image `{base}`: {e}"))?
            .config
            .unwrap_or_default();
        // One label, of hex digits and dots: Podman's compatible API takes
        // labels only as a change (a Dockerfile `LABEL`), one per change,
        // and reads its value without unquoting.
        let label = format!(
            "{KEY_LABEL}={}",
            label_value(&key, &self.repo, &base, worktree_files)
        );
        // What the container changed besides its files goes back to the
        // image's (Docker; Podman keeps the container's, which every
        // create names anyway).
        let config = ContainerConfig {
            user: image.user,
            env: image.env,
            cmd: image.cmd,
            entrypoint: image.entrypoint,
            working_dir: image.working_dir,
            ..Default::default()
        };
        let tag = &key[..20];
        let options = CommitContainerOptionsBuilder::default()
            .container(&container)
            .repo(REPOSITORY)
            .tag(tag)
            .comment("sanddune: a prepared sandbox")
            .pause(false)
            .changes(&format!("LABEL {label}"))
            .build();
        let committed = docker
            .commit_container(options, config)
            .await
            .map_err(|e| format!("cannot commit container {container}: {e}"))?;
        let id = committed.id;
        let size = docker
            .inspect_image(&id)
            .await
            .ok()
            .and_then(|i| i.size)
            .unwrap_or(0);
        Ok(Kept {
            image: format!("{REPOSITORY}:{tag}"),
            id,
            size,
        })
    }
}

/// A snapshot just committed.
#[derive(Clone, Debug)]
pub struct Kept {
    /// `sanddune-snapshot:<tag>`.
    pub image: String,
    pub id: String,
    /// Bytes, the base image's included.
    pub size: i64,
}

/// The snapshot a sandbox started from.
#[derive(Clone, Debug)]
pub struct Restored {
    /// Its image id.
    pub image: String,
    /// Whether it keeps worktree files to copy back.
    pub worktree_files: bool,
}

/// A snapshot image in an engine.
#[derive(Clone, Debug)]
pub struct SnapshotImage {
    pub id: String,
    pub key: String,
    pub tags: Vec<String>,
    pub repo: String,
    pub base: String,
    pub worktree_files: bool,
    /// Seconds since the epoch.
    pub created: i64,
    pub size: i64,
}

/// The newest snapshot image with `key`.
async fn newest(docker: &Docker, key: &str) -> Result<Option<SnapshotImage>, String> {
    let found = list(docker).await?;
    Ok(found.into_iter().find(|s| s.key == key))
}

/// Every snapshot image in the engine, newest first.
pub async fn list(docker: &Docker) -> Result<Vec<SnapshotImage>, String> {
    let options = ListImagesOptionsBuilder::default()
        .filters(&HashMap::from([("label", vec![KEY_LABEL])]))
        .build();
    let images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| format!("cannot list snapshot images: {e}"))?;
    let mut found: Vec<SnapshotImage> = images
        .into_iter()
        .filter_map(|i| {
            let (key, repo, base, worktree_files) = parse_label(i.labels.get(KEY_LABEL)?)?;
            Some(SnapshotImage {
                repo,
                base,
                worktree_files,
                id: i.id,
                key,
                tags: i.repo_tags,
                created: i.created,
                size: i.size,
            })
        })
        .collect();
    found.sort_by_key(|s| std::cmp::Reverse(s.created));
    Ok(found)
}

/// Remove a snapshot image (and its tag). One a container still runs from
/// stays: the engine refuses, and that is the error.
pub async fn remove(docker: &Docker, id: &str) -> Result<(), String> {
    let options = RemoveImageOptionsBuilder::default().force(true).build();
    match docker.remove_image(id, Some(options), None).await {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(format!("cannot remove snapshot image {id}: {e}")),
    }
}

/// `KEY.REPO.BASE.W`, the repository and base in hex (nothing to quote),
/// `W` `w` when it keeps worktree files, else `-`.
fn label_value(key: &str, repo: &str, base: &str, worktree_files: bool) -> String {
    let w = if worktree_files { "w" } else { "-" };
    format!(
        "{key}.{}.{}.{w}",
        hex(repo.as_bytes()),
        hex(base.as_bytes())
    )
}

/// The key, repository, base image and worktree files a snapshot's label
/// names.
fn parse_label(value: &str) -> Option<(String, String, String, bool)> {
    let mut parts = value.split('.');
    let (key, repo, base) = (parts.next()?, parts.next()?, parts.next()?);
    let worktree_files = match parts.next()? {
        "w" => true,
        "-" => false,
        _ => return None,
    };
    let text = |h: &str| String::from_utf8(unhex(h)?).ok();
    let full = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
    (full && parts.next().is_none()).then_some((
        key.to_string(),
        text(repo)?,
        text(base)?,
        worktree_files,
    ))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    text.len().is_multiple_of(2).then_some(())?;
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// An image id as people read it: 12 hex digits, no `sha256:`.
pub fn short_id(id: &str) -> &str {
    let id = id.trim_start_matches("sha256:");
    &id[..id.len().min(12)]
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(pairs: &[(&str, &str)]) -> (Result<Option<SnapshotOptions>, String>, Vec<String>) {
        let mut config: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let r = SnapshotOptions::take_from(&mut config);
        (r, config.into_iter().map(|(k, _)| k).collect())
    }

    #[test]
    fn the_snapshot_keys_leave_the_providers_options() {
        let (r, rest) = take(&[
            ("image", "x"),
            ("snapshot", "auto"),
            ("snapshot.inputs", "package-lock.json, sub/Cargo.lock"),
            ("snapshot.inputs", "go.sum"),
        ]);
        assert_eq!(rest, ["image"]);
        assert_eq!(
            r.unwrap().unwrap().inputs,
            ["package-lock.json", "sub/Cargo.lock", "go.sum"]
        );
        assert_eq!(take(&[("snapshot", "off")]).0.unwrap(), None);
        assert_eq!(take(&[]).0.unwrap(), None);
    }

    #[test]
    fn bad_snapshot_options_are_refused_by_name() {
        let err = |pairs: &[(&str, &str)]| take(pairs).0.unwrap_err();
        assert!(err(&[("snapshot", "on")]).contains("auto or off"));
        for bad in ["/etc/passwd", "../x", "a//b", "a/../../b"] {
            let e = err(&[("snapshot", "auto"), ("snapshot.inputs", bad)]);
            assert!(e.contains("relative path inside"), "{bad}: {e}");
        }
        let e = err(&[("snapshot.inputs", "package-lock.json")]);
        assert!(e.contains("snapshot=auto is not set"), "{e}");
    }

    #[test]
    fn the_label_names_key_repository_and_base_whatever_their_characters() {
        let key = "ab".repeat(32);
        let repo = "/src/my \"repo\"/.git";
        for files in [true, false] {
            let value = label_value(&key, repo, "sanddune:x y", files);
            let plain = |b: u8| b.is_ascii_hexdigit() || b"-.w".contains(&b);
            assert!(value.bytes().all(plain), "{value}");
            assert_eq!(
                parse_label(&value),
                Some((key.clone(), repo.into(), "sanddune:x y".into(), files))
            );
        }
        assert_eq!(parse_label(""), None);
        assert_eq!(parse_label(&format!("{key}.zz.00.w")), None);
        assert_eq!(parse_label(&format!("{key}.00.00")), None);
        assert_eq!(parse_label(&format!("{key}.00.00.x")), None);
        assert_eq!(parse_label("short.00.00.w"), None);
    }

    #[test]
    fn the_key_follows_the_set_up_and_the_inputs_contents() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path();
        std::fs::write(wt.join("lock"), "a").unwrap();
        let options = SnapshotOptions {
            inputs: vec!["lock".into()],
        };
        let material = |setup: &[&str]| {
            let setup: Vec<String> = setup.iter().map(|s| s.to_string()).collect();
            Snapshot::new(&options, &setup, wt, wt).material()
        };
        let first = material(&["npm ci"]);
        assert_eq!(first, material(&["npm ci"]));
        assert_ne!(first, material(&["npm install"]));
        std::fs::write(wt.join("lock"), "b").unwrap();
        assert_ne!(first, material(&["npm ci"]));
        // A link out of the worktree is read as missing, never followed.
        std::fs::remove_file(wt.join("lock")).unwrap();
        let missing = material(&["npm ci"]);
        std::os::unix::fs::symlink("/etc/hostname", wt.join("lock")).unwrap();
        assert_eq!(missing, material(&["npm ci"]));
        // A FIFO is neither waited on nor read.
        std::fs::remove_file(wt.join("lock")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(wt.join("lock"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(missing, material(&["npm ci"]));
    }
}
