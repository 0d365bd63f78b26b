//! Snapshots a sandbox provider keeps itself (contract 0.8, ADR 0038): a
//! cloud sandbox whose set-up succeeded is kept through the provider's
//! API; a later run whose key matches starts from it and skips the set-up.
//! The host keeps one record per key in the repository's git dir
//! (`sanddune-snapshots/*.json`): the provider's id of the snapshot and
//! what `snapshot rm` and gc need to reach the provider again. No env
//! values: the provider's credentials come from the remover's env.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::log::RunLog;
use super::reclaim::load_provider;
use crate::capability::containers::snapshot::{SnapshotOptions, hex, setup_material};
use crate::error::{Error, Result};
use crate::plugin::PluginRuntime;
use crate::plugin::sandbox::{Sandbox, SandboxProvider, SandboxSpec};
use crate::worktree::{Repo, git};

/// The records' directory in the repository's common git dir.
const DIR: &str = "sanddune-snapshots";

/// One kept snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptSnapshot {
    /// What made it (see [`key`]), in hex.
    pub key: String,
    /// The provider's id of it.
    pub id: String,
    /// How the run named the provider (an absolute path for a file).
    pub provider: String,
    /// The name it describes itself by.
    pub provider_name: String,
    /// The provider's options of the run that kept it.
    pub config: Vec<(String, String)>,
    /// Seconds since the Unix epoch.
    pub created: u64,
    pub run_id: String,
    pub worktree: PathBuf,
    pub branch: String,
}

/// The snapshot a run of `spec` may start from or keep.
pub(super) struct Wanted {
    key: String,
    path: PathBuf,
    /// The record of a snapshot with this key, when one was kept.
    found: Option<KeptSnapshot>,
}

/// The key of a snapshot `provider` keeps for a run of `spec`: what a
/// container snapshot's key is made of (the repository, the set-up; ADR
/// 0035), the inputs as the run's branch has them committed, the provider
/// and its options. An option changed (another image, another runtime)
/// makes another snapshot.
fn key(provider: &SandboxProvider, options: &SnapshotOptions, spec: &SandboxSpec) -> String {
    let mut material = setup_material(&spec.git_dir, &spec.setup);
    // An isolated sandbox gets committed work only, and its worktree on
    // the host may hold no files: the inputs are read from the commit.
    // Git's object id of one is a hash of its contents.
    for input in &options.inputs {
        let object = git(
            &spec.worktree,
            &["rev-parse", "-q", "--verify", &format!("HEAD:{input}")],
        )
        .unwrap_or_else(|_| "missing".to_string());
        material.push_str(&format!("input {input:?} {object}\n"));
    }
    material.push_str(&format!("provider {:?}\n", provider.name()));
    let mut config: Vec<&(String, String)> = spec
        .config
        .iter()
        .filter(|(k, _)| !SnapshotOptions::is_key(k))
        .collect();
    config.sort();
    for (k, v) in config {
        material.push_str(&format!("option {k:?} {v:?}\n"));
    }
    hex(&Sha256::digest(material.as_bytes()))
}

/// The snapshot a run of `spec` may start from or keep: when its provider
/// keeps its own, `config` asks for them (`snapshot=auto`) and there is a
/// set-up to keep; with the record of one kept, if any.
pub(super) fn wanted(
    provider: &SandboxProvider,
    config: &[(String, String)],
    spec: &SandboxSpec,
    log: &RunLog,
) -> Result<Option<Wanted>> {
    let Some(options) = provider.own_snapshots(config)? else {
        return Ok(None);
    };
    if spec.setup.is_empty() {
        log.line(super::snapshot::NOTHING_TO_KEEP);
        return Ok(None);
    }
    let key = key(provider, &options, spec);
    let path = spec.git_dir.join(DIR).join(format!("{}.json", &key[..40]));
    let found = read(&path).filter(|r| r.key == key && r.provider_name == provider.name());
    Ok(Some(Wanted { key, path, found }))
}

/// Create the sandbox of `spec`, from `spec.snapshot` when set. A create
/// from a snapshot that fails (the snapshot is gone: Vercel expires them)
/// is said in the log and tried again without it; the snapshot is
/// forgotten, and the run keeps a new one after its set-up.
pub(super) async fn create(
    provider: &SandboxProvider,
    spec: &mut SandboxSpec,
    wanted: Option<&mut Wanted>,
    log: &RunLog,
) -> Result<Sandbox> {
    let timings = log.timings();
    let created = timings.time("sandbox create", provider.create(spec)).await;
    let Err(e) = &created else {
        return created;
    };
    let Some(id) = spec.snapshot.take() else {
        return created;
    };
    log.line(&format!(
        "warning: snapshot: the sandbox did not start from snapshot {id} ({e}); starting it without, and running the set-up"
    ));
    if let Some(w) = wanted {
        w.forget();
    }
    timings.time("sandbox create", provider.create(spec)).await
}

/// A record, unless its words could rewrite a terminal: `snapshot ls`,
/// gc and the run's log print them, and only the host should have written
/// it.
fn read(path: &Path) -> Option<KeptSnapshot> {
    let kept: KeptSnapshot = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let printable = |s: &str| !s.chars().any(char::is_control);
    (plain_id(&kept.id) && plain_id(&kept.provider_name) && printable(&kept.provider))
        .then_some(kept)
}

impl Wanted {
    /// The provider's id of the snapshot kept with this key, if any.
    pub(super) fn found_id(&self) -> Option<String> {
        self.found.as_ref().map(|k| k.id.clone())
    }

    /// The name the provider gives a snapshot of this key.
    pub(super) fn name(&self) -> String {
        format!("sanddune-{}", &self.key[..20])
    }

    /// The snapshot is gone on the provider's side: forget it.
    fn forget(&mut self) {
        self.found = None;
        let _ = std::fs::remove_file(&self.path);
    }

    /// Record that the run of `spec` kept this snapshot as `id`; the
    /// record of an older one with the same key is replaced, and that one
    /// is returned for the caller to remove.
    pub(super) fn record(
        &mut self,
        id: String,
        provider: &SandboxProvider,
        source: &str,
        spec: &SandboxSpec,
    ) -> Result<Option<KeptSnapshot>> {
        let kept = KeptSnapshot {
            key: self.key.clone(),
            id,
            provider: source.to_string(),
            provider_name: provider.name().to_string(),
            config: spec.config.clone(),
            created: now(),
            run_id: spec.run_id.clone(),
            worktree: spec.worktree.clone(),
            branch: spec.branch.clone(),
        };
        let io = |e: std::io::Error| Error::Other(anyhow::anyhow!("record the snapshot: {e}"));
        let dir = self.path.parent().expect("a record is in the records dir");
        std::fs::create_dir_all(dir).map_err(io)?;
        // Complete or absent: a reader never sees half a record.
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        file.write_all(&serde_json::to_vec_pretty(&kept).expect("a record serializes"))
            .map_err(io)?;
        file.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(self.found.replace(kept))
    }
}

/// Keep the sandbox, its set-up done, as the snapshot `wanted` names, and
/// record it; the one it replaces is removed. Failing to keep one is a
/// warning, never the run's; only a sandbox the provider could not give
/// back usable (its state unknown) fails the run.
pub(super) async fn keep(
    sandbox: &mut Sandbox,
    wanted: &mut Wanted,
    provider: &SandboxProvider,
    source: &str,
    spec: &SandboxSpec,
    log: &RunLog,
) -> Result<()> {
    // Runs that missed together (a fan-out's first items) each get here;
    // once one has kept a snapshot the others need not.
    if let Some(other) = read(&wanted.path).filter(|r| r.key == wanted.key) {
        log.line(&format!(
            "snapshot: another run kept this set-up as snapshot {} meanwhile; this sandbox is not kept",
            other.id
        ));
        return Ok(());
    }
    let kept = sandbox.keep(&wanted.name()).await;
    // Its state may have changed whatever keep answered.
    super::sandbox_record::restate(sandbox).await?;
    let id = match kept {
        Ok(id) if plain_id(&id) => id,
        Ok(id) => {
            log.line(&format!(
                "warning: snapshot: the provider named the snapshot it kept {:?}, which is not a plain id (printable ASCII, no spaces, at most 256 bytes): it is not recorded",
                id.chars().take(80).collect::<String>()
            ));
            return Ok(());
        }
        Err(e) => {
            log.line(&format!(
                "warning: snapshot: the prepared sandbox was not kept: {e}"
            ));
            return Ok(());
        }
    };
    match wanted.record(id.clone(), provider, source, spec) {
        Ok(replaced) => {
            log.line(&format!(
                "snapshot: kept the prepared sandbox as snapshot {id}; a later run with the same set-up and inputs starts from it"
            ));
            if let Some(old) = replaced.filter(|old| old.id != id)
                && let Err(e) = provider.remove_snapshot(spec, &old.id).await
            {
                log.line(&format!(
                    "warning: snapshot: the older snapshot {} it replaces was not removed: {e}",
                    old.id
                ));
            }
        }
        Err(e) => log.line(&format!(
            "warning: snapshot: {id} was kept but not recorded, so no run will use it: {e}"
        )),
    }
    Ok(())
}

/// An id a provider returns goes into the log, a record and `snapshot
/// ls`: a provider is untrusted, so it must be plain text that cannot
/// rewrite a terminal or a line.
fn plain_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The snapshots kept for the repository whose common git dir is
/// `git_dir`, with their records' paths, oldest first.
pub fn list(git_dir: &Path) -> Vec<(PathBuf, KeptSnapshot)> {
    let mut found: Vec<(PathBuf, KeptSnapshot)> = std::fs::read_dir(git_dir.join(DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| Some((p.clone(), read(&p)?)))
        .collect();
    found.sort_by_key(|(_, k)| k.created);
    found
}

/// Remove a kept snapshot through its provider (loaded as the run named
/// it, its credentials from this process's env), then its record. A
/// failure keeps the record, so a later `rm` or gc tries again.
pub async fn remove(
    repo: &Repo,
    runtime: &PluginRuntime,
    record: &Path,
    kept: &KeptSnapshot,
) -> Result<()> {
    let (provider, env) = load_provider(repo, runtime, &kept.provider).await?;
    let spec = SandboxSpec {
        run_id: kept.run_id.clone(),
        name: kept.run_id.clone(),
        worktree: kept.worktree.clone(),
        git_dir: repo.git_dir(),
        branch: kept.branch.clone(),
        env,
        config: kept.config.clone(),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    provider.remove_snapshot(&spec, &kept.id).await?;
    match std::fs::remove_file(record) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Other(anyhow::anyhow!(
            "removed snapshot {}, but not its record {}: {e}",
            kept.id,
            record.display()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::plain_id;

    #[test]
    fn a_snapshot_id_is_plain_printable_ascii() {
        for id in ["snap_mock12", "sanddune-0123abcd-9f3e2a10", "a:b/c"] {
            assert!(plain_id(id), "{id}");
        }
        let long = "x".repeat(257);
        for id in [
            "",
            "two words",
            "esc\u{1b}[2J",
            "line\nbreak",
            "naïve",
            long.as_str(),
        ] {
            assert!(!plain_id(id), "{id:?}");
        }
    }
}
