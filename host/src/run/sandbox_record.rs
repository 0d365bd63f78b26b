//! An isolated sandbox holds the agent's commits until they are synced out,
//! so a run killed mid-iteration would strand them in a sandbox nobody
//! closes: a scratch dir, a billed cloud sandbox. Each sandbox a run opens
//! is recorded in the repository's git dir
//! (`sanddune-sandboxes/*.json`, `*.closing` once its close has begun)
//! until its close succeeds. This module writes the records; `reclaim`
//! is what `sanddune gc` does with those of dead runs.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capability::containers::GitShield;
use crate::capability::containers::owner_id;
use crate::error::{Error, Result};
use crate::plugin::sandbox::{Sandbox, SandboxProvider, SandboxSpec};

/// The records' directory in the repository's common git dir.
pub(super) const DIR: &str = "sanddune-sandboxes";

/// What `gc` needs to reach one sandbox again. No env values: secrets stay
/// out of the file, and the provider's credentials come from gc's env.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Record {
    /// `<pid>:<start time>` of the run's process.
    pub(super) owner: String,
    /// How the run named the provider (an absolute path for a file).
    pub(super) provider: String,
    /// The name it describes itself by, which its scratch dirs carry.
    pub(super) provider_name: String,
    pub(super) run_id: String,
    pub(super) name: String,
    pub(super) worktree: PathBuf,
    pub(super) branch: String,
    pub(super) config: Vec<(String, String)>,
    /// Where the run made scratch dirs.
    pub(super) tmp_dir: PathBuf,
    /// The provider's `state` of the sandbox; none until `create` returned.
    pub(super) state: Option<String>,
    pub(super) scratch: Option<PathBuf>,
    /// The commit synced into an isolated sandbox: it has it, the host too.
    /// None for a bind-mount sandbox.
    pub(super) base: Option<String>,
    /// The agent git dir laid over the repository's (ADR 0025): a jail
    /// lays it at every command, `attach`'s included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) git_shield: Option<GitShield>,
}

/// A record written before `create`, so a kill during it still leaves
/// gc a way to the scratch dir; [`Pending::created`] completes it.
pub(super) struct Pending {
    path: PathBuf,
    record: Record,
}

/// Record that `provider`, named by the run as `source` (a file's absolute
/// path, or a built-in's name), is about to create a sandbox for `spec`;
/// the record's file is `<id>.json`.
pub(super) fn begin(
    provider: &SandboxProvider,
    source: String,
    id: &str,
    spec: &SandboxSpec,
) -> Result<Pending> {
    let pending = Pending {
        path: spec.git_dir.join(DIR).join(format!("{id}.json")),
        record: Record {
            owner: owner_id(),
            provider: source,
            provider_name: provider.name().to_string(),
            run_id: spec.run_id.clone(),
            name: spec.name.clone(),
            worktree: spec.worktree.clone(),
            branch: spec.branch.clone(),
            config: spec.config.clone(),
            tmp_dir: std::env::temp_dir(),
            state: None,
            scratch: None,
            base: None,
            git_shield: spec.git_shield.clone(),
        },
    };
    pending.write()?;
    Ok(pending)
}

impl Pending {
    /// The sandbox is up (an isolated one about to get `base` synced in):
    /// the record names it, and goes when its close succeeds.
    pub(super) async fn created(
        mut self,
        sandbox: &mut Sandbox,
        base: Option<String>,
    ) -> Result<()> {
        self.record.state = Some(sandbox.state().await?);
        self.record.scratch = sandbox.scratch_dir().map(Path::to_path_buf);
        self.record.base = base;
        self.write()?;
        sandbox.remove_on_close(self.path);
        Ok(())
    }

    /// The create failed, and removed what it made.
    pub(super) fn abandon(self) {
        let _ = std::fs::remove_file(self.path);
    }

    /// Complete or absent: gc never reads half a record.
    fn write(&self) -> Result<()> {
        let io = |e: std::io::Error| Error::Other(anyhow::anyhow!("record the sandbox: {e}"));
        let dir = self.path.parent().expect("a record is in the records dir");
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        file.write_all(&serde_json::to_vec_pretty(&self.record).expect("a record serializes"))
            .map_err(io)?;
        file.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

/// The sandbox's state changed (a provider put another sandbox in its
/// place when it kept a snapshot): its record names the new one.
pub(super) async fn restate(sandbox: &mut Sandbox) -> Result<()> {
    let Some(path) = sandbox.record().map(Path::to_path_buf) else {
        return Ok(());
    };
    let state = sandbox.state().await?;
    let io = |e: String| Error::Other(anyhow::anyhow!("update the sandbox's record: {e}"));
    let bytes = std::fs::read(&path).map_err(|e| io(e.to_string()))?;
    let mut record: Record = serde_json::from_slice(&bytes).map_err(|e| io(e.to_string()))?;
    record.state = Some(state);
    Pending { path, record }.write()
}

/// The records of the sandboxes open now (not those being closed).
pub(super) fn records(git_dir: &Path) -> Vec<Record> {
    std::fs::read_dir(git_dir.join(DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| serde_json::from_slice(&std::fs::read(p).ok()?).ok())
        .collect()
}
