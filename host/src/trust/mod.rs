//! Workspace trust (ADR 0026): the keys of a repository's own files that
//! make the host act (host hooks, sudo sandbox hooks, `cmd:`/`env:`
//! references and `file:` ones outside the repository, `mount=`, a dev
//! container's `initializeCommand`, `${localEnv:...}` and a build context
//! outside the repository, a workflow's mounts) are listed as items, and a
//! run goes ahead only when the user approved every one of them. An agent
//! can edit those files; it cannot write the approval record, which lives
//! in the user's state dir.
//!
//! The library never asks: [`require`] refuses with [`Error::Untrusted`]
//! naming what changed since the approved version, unless the policy is
//! [`TrustPolicy::Trusted`]. The CLI asks at a terminal, or takes
//! `--trust` / `sanddune trust`, and records the approval ([`approve`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{CONFIG_FILE, ProjectConfig};
use crate::dotenv::FILE as DOTENV_FILE;
use crate::error::{Error, Result};
use crate::plugin::PluginRef;

pub use crate::error::Untrusted;
pub(crate) use crate::repo_path::inside;

/// Overrides where sanddune keeps its per-user state (the approvals).
pub const STATE_DIR_VAR: &str = "SANDDUNE_STATE_DIR";

/// Whether the repository's host-effective config must be approved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrustPolicy {
    /// Go ahead only when the user's approval record covers every item;
    /// otherwise refuse with [`Error::Untrusted`] before anything is
    /// created.
    #[default]
    Recorded,
    /// The caller vouches for the repository's config as it is now (for
    /// this call only; nothing is recorded).
    Trusted,
}

/// One thing a repository file makes the host do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    /// The file, relative to the repository root.
    pub source: String,
    /// What runs or is read, exactly.
    pub what: String,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.source, self.what)
    }
}

/// Which of the repository's files a call reads.
pub enum Scope<'a> {
    /// A run, sandbox or interactive session: the config, the `.env`, and
    /// the dev container this provider and these options choose.
    Run {
        sandbox: &'a PluginRef,
        sandbox_config: &'a [(String, String)],
    },
    /// A workflow: as a run, plus what the workflow's file makes the host
    /// do, with every dev container any of its steps may choose.
    Workflow {
        workflow: &'a WorkflowEffects,
        sandbox_config: &'a [(String, String)],
    },
    /// Everything the repository holds (`sanddune trust`): every workflow
    /// (`workflow::every_host_effect`) and every dev container file named
    /// anywhere.
    Repository { workflows: &'a [WorkflowEffects] },
}

/// What a workflow file makes the host do (`Workflow::host_effects`): its
/// own items (its mounts), and the dev container files its options name.
#[derive(Clone, Debug, Default)]
pub struct WorkflowEffects {
    pub items: Vec<Item>,
    pub devcontainers: Vec<PathBuf>,
}

/// What the repository at `root` makes the host do, in `scope`; sorted,
/// without repeats. Reads the files only: nothing is resolved or run.
pub fn host_effects(root: &Path, scope: &Scope) -> Result<Vec<Item>> {
    let config = ProjectConfig::read(root)?;
    let mut items = BTreeSet::new();
    config_items(root, &config, &mut items);
    dotenv_items(root, &mut items)?;
    let mut devcontainers = BTreeSet::new();
    match scope {
        Scope::Run {
            sandbox,
            sandbox_config,
        } => {
            if let Some(file) = chosen_devcontainer(root, sandbox, sandbox_config) {
                devcontainers.insert(file);
            }
        }
        Scope::Workflow {
            workflow,
            sandbox_config,
        } => {
            items.extend(workflow.items.iter().cloned());
            devcontainers.extend(workflow.devcontainers.iter().cloned());
            named_devcontainers(root, sandbox_config, &mut devcontainers);
            devcontainers.extend(crate::devcontainer::find(root));
        }
        Scope::Repository { workflows } => {
            for workflow in *workflows {
                items.extend(workflow.items.iter().cloned());
                devcontainers.extend(workflow.devcontainers.iter().cloned());
            }
            let config_options: Vec<_> = config.sandbox_options(vec![]);
            named_devcontainers(root, &config_options, &mut devcontainers);
            devcontainers.extend(
                crate::devcontainer::FILES
                    .iter()
                    .map(|f| root.join(f))
                    .filter(|p| p.is_file()),
            );
        }
    }
    for file in devcontainers {
        let source = relative(root, &file);
        // A file that does not parse, or asks for what is refused, has
        // nothing to approve: the run that uses it refuses it before
        // anything is created.
        let Ok(effects) = crate::devcontainer::host_effects(root, &file) else {
            continue;
        };
        for what in effects {
            items.insert(Item {
                source: source.clone(),
                what,
            });
        }
    }
    Ok(items.into_iter().collect())
}

/// `.sanddune/config.toml`: host hooks, sudo sandbox hooks, references in
/// `[env]`, mounts in `[sandboxOptions]`.
fn config_items(root: &Path, config: &ProjectConfig, items: &mut BTreeSet<Item>) {
    let mut add = |what: String| {
        items.insert(Item {
            source: CONFIG_FILE.into(),
            what,
        });
    };
    for hook in &config.hooks.host.on_worktree_ready {
        add(format!(
            "host hook onWorktreeReady runs on the host: {}",
            hook.command
        ));
    }
    for hook in &config.hooks.host.on_sandbox_ready {
        add(format!(
            "host hook onSandboxReady runs on the host: {}",
            hook.command
        ));
    }
    for hook in config
        .hooks
        .sandbox
        .on_sandbox_ready
        .iter()
        .filter(|h| h.sudo)
    {
        add(format!(
            "sandbox hook onSandboxReady runs as root in the sandbox: {}",
            hook.command
        ));
    }
    for (key, value) in &config.env {
        if let Some(what) = reference_item(root, key, value) {
            add(format!("[env] {what}"));
        }
    }
    for (key, value) in &config.sandbox_options {
        if key == "mount" {
            add(format!("[sandboxOptions] mount = {value}"));
        }
    }
}

/// `.sanddune/.env`: its references.
fn dotenv_items(root: &Path, items: &mut BTreeSet<Item>) -> Result<()> {
    let path = root.join(DOTENV_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::input(format!("cannot read {}: {e}", path.display()))),
    };
    for (key, value) in crate::dotenv::parse(&text, &path.display().to_string())? {
        if let Some(what) = reference_item(root, &key, &value) {
            items.insert(Item {
                source: DOTENV_FILE.into(),
                what,
            });
        }
    }
    Ok(())
}

/// A secret reference that reaches beyond the repository: `cmd:` runs on
/// the host, `env:` reads the host's environment, `file:` outside the
/// repository reads a host file. A `file:` inside it needs no approval.
fn reference_item(root: &Path, key: &str, value: &str) -> Option<String> {
    if value.starts_with("cmd:") {
        return Some(format!("{key} = {value} (runs on the host)"));
    }
    if value.starts_with("env:") {
        return Some(format!("{key} = {value} (reads your environment)"));
    }
    let path = value.strip_prefix("file:")?;
    let outside = path.starts_with("~/") || !inside(root, &root.join(path));
    outside.then(|| format!("{key} = {value} (reads a file outside the repository)"))
}

/// The dev container files `devcontainer=PATH` options name.
pub fn named_devcontainers(
    root: &Path,
    options: &[(String, String)],
    devcontainers: &mut BTreeSet<PathBuf>,
) {
    devcontainers.extend(
        options
            .iter()
            .filter(|(k, v)| k == crate::devcontainer::OPTION && v != "none")
            .map(|(_, v)| root.join(v))
            .filter(|p| p.is_file()),
    );
}

/// The dev container a run with this provider and these options reads, as
/// `devcontainer::apply` chooses it. A component file may be byte-identical
/// to docker, so only another built-in is known not to read one.
fn chosen_devcontainer(
    root: &Path,
    sandbox: &PluginRef,
    config: &[(String, String)],
) -> Option<PathBuf> {
    if matches!(sandbox, PluginRef::Builtin(name) if name != "docker" && name != "podman") {
        return None;
    }
    let named = config
        .iter()
        .rev()
        .find(|(k, _)| k == crate::devcontainer::OPTION);
    match named {
        Some((_, v)) if v == "none" => None,
        Some((_, v)) => Some(root.join(v)).filter(|p| p.is_file()),
        None if config.iter().any(|(k, _)| k == "image") => None,
        None => crate::devcontainer::find(root),
    }
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The approval record of one repository.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    repo: PathBuf,
    approved: Vec<String>,
}

/// `$SANDDUNE_STATE_DIR`, else `$XDG_STATE_HOME/sanddune`, else
/// `~/.local/state/sanddune`: the user's, where no sandbox writes.
pub fn state_dir() -> Result<PathBuf> {
    let set = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
    set(STATE_DIR_VAR)
        .map(PathBuf::from)
        .or_else(|| set("XDG_STATE_HOME").map(|d| PathBuf::from(d).join("sanddune")))
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".local/state/sanddune")))
        .ok_or_else(|| {
            Error::input(format!(
                "no place for sanddune's approvals: set HOME or {STATE_DIR_VAR}"
            ))
        })
}

/// The record's file: named by the repository's canonical path.
fn record_path(root: &Path) -> Result<(PathBuf, PathBuf)> {
    use sha2::Digest;
    let repo = std::fs::canonicalize(root)
        .map_err(|e| Error::input(format!("cannot resolve {}: {e}", root.display())))?;
    let digest = sha2::Sha256::digest(repo.as_os_str().as_encoded_bytes());
    let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    Ok((
        repo,
        state_dir()?.join("trust").join(format!("{name}.json")),
    ))
}

fn read_record(path: &Path) -> Result<Record> {
    match std::fs::read_to_string(path) {
        // A record that does not parse approves nothing.
        Ok(text) => Ok(serde_json::from_str(&text).unwrap_or_default()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
        Err(e) => Err(Error::input(format!("cannot read {}: {e}", path.display()))),
    }
}

/// What of `items` the user has not approved for the repository at
/// `root`; None when all of it is (or there is nothing to approve).
pub fn unapproved(root: &Path, items: &[Item]) -> Result<Option<Untrusted>> {
    if items.is_empty() {
        return Ok(None);
    }
    let (repo, path) = record_path(root)?;
    let record = read_record(&path)?;
    let now: BTreeSet<String> = items.iter().map(Item::to_string).collect();
    let approved: BTreeSet<String> = record.approved.into_iter().collect();
    let added: Vec<String> = now.difference(&approved).cloned().collect();
    if added.is_empty() {
        return Ok(None);
    }
    Ok(Some(Untrusted {
        repo,
        added,
        removed: approved.difference(&now).cloned().collect(),
    }))
}

/// The library's gate: Ok when `policy` trusts the repository or every
/// item is approved; else [`Error::Untrusted`].
pub fn require(root: &Path, scope: &Scope, policy: TrustPolicy) -> Result<()> {
    if policy == TrustPolicy::Trusted {
        return Ok(());
    }
    match unapproved(root, &host_effects(root, scope)?)? {
        None => Ok(()),
        Some(untrusted) => Err(Error::Untrusted(Box::new(untrusted))),
    }
}

/// Record `items` as the approved version for the repository at `root`
/// (replacing the last one): 0600, written whole or not at all. Returns
/// the record's path.
pub fn approve(root: &Path, items: &[Item]) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::DirBuilderExt;
    let (repo, path) = record_path(root)?;
    let dir = path.parent().expect("the record is in a directory");
    let failed = |e: std::io::Error| {
        Error::Other(anyhow::anyhow!(
            "cannot record the approval in {}: {e}",
            dir.display()
        ))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed)?;
    let record = Record {
        repo,
        approved: items.iter().map(Item::to_string).collect(),
    };
    let text = serde_json::to_string_pretty(&record).map_err(|e| Error::Other(e.into()))?;
    // tempfile creates it 0600; the rename makes it whole or absent.
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.as_file().sync_all().map_err(failed)?;
    file.persist(&path).map_err(|e| failed(e.error))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(what: &str) -> Item {
        Item {
            source: CONFIG_FILE.into(),
            what: what.into(),
        }
    }

    #[test]
    fn references_beyond_the_repository_are_items_and_files_inside_are_not() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::write(root.join("token"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("escape")).unwrap();
        assert_eq!(reference_item(root, "K", "file:token"), None);
        assert_eq!(reference_item(root, "K", "file:missing/inside"), None);
        assert_eq!(reference_item(root, "K", "plain"), None);
        assert_eq!(reference_item(root, "K", "literal:cmd:x"), None);
        for outside in [
            "file:~/.ssh/id_ed25519",
            "file:/etc/passwd",
            "file:../elsewhere",
            "file:sub/../../elsewhere",
            "file:escape",
        ] {
            let what = reference_item(root, "K", outside).unwrap();
            assert!(what.contains("outside the repository"), "{outside}: {what}");
        }
        assert!(
            reference_item(root, "K", "cmd:op read x")
                .unwrap()
                .contains("runs on the host")
        );
        assert!(
            reference_item(root, "K", "env:HOME")
                .unwrap()
                .contains("reads your environment")
        );
    }

    #[test]
    fn an_approval_covers_what_it_listed_and_nothing_added_after() {
        let state = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        // SAFETY: this is the only test in the crate that sets it.
        unsafe { std::env::set_var(STATE_DIR_VAR, state.path()) };
        let a = item("host hook onWorktreeReady runs on the host: make");
        let b = item("host hook onSandboxReady runs on the host: evil");
        assert_eq!(unapproved(repo.path(), &[]).unwrap(), None);
        let first = unapproved(repo.path(), std::slice::from_ref(&a))
            .unwrap()
            .unwrap();
        assert_eq!(first.added, vec![a.to_string()]);
        let path = approve(repo.path(), std::slice::from_ref(&a)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            unapproved(repo.path(), std::slice::from_ref(&a)).unwrap(),
            None
        );
        // Less than was approved needs nothing; something new does.
        assert_eq!(unapproved(repo.path(), &[]).unwrap(), None);
        let changed = unapproved(repo.path(), std::slice::from_ref(&b))
            .unwrap()
            .unwrap();
        assert_eq!(changed.added, vec![b.to_string()]);
        assert_eq!(changed.removed, vec![a.to_string()]);
        assert!(
            changed
                .diff()
                .starts_with("+ .sanddune/config.toml: host hook onSandboxReady")
        );
        assert!(changed.to_string().contains("sanddune trust"));
    }
}
