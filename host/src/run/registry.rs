//! The live-runs registry (ADR 0019): each run keeps a small record in the
//! repository's common git dir (`sanddune-runs/<run id>.json`) from its
//! start to its end, rewritten whole (a temp file renamed) when its state
//! changes. `sanddune ps` reads the records; `sanddune stop` writes a stop
//! file (`<run id>.stop`) beside one, which the run watches and answers by
//! aborting itself. The repository is also listed in a per-user index, so
//! `ps --all` finds every repository with live runs on this machine.
//!
//! Keeping the registry must never fail or block a run: a write that fails
//! is a warning, and readers only read files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::abort::AbortHandle;
use crate::capability::containers::{owner_alive, owner_id};

/// The records' directory in the repository's common git dir.
pub const DIR: &str = "sanddune-runs";

/// How often a run looks for its stop file.
const STOP_POLL: Duration = Duration::from_millis(200);

/// What a run is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    SettingUp,
    Running,
    Syncing,
    Checking,
    Merging,
    /// The result is out; the sandbox is being torn down.
    Closing,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::SettingUp => "setting up",
            State::Running => "running",
            State::Syncing => "syncing",
            State::Checking => "checking",
            State::Merging => "merging",
            State::Closing => "closing",
        }
    }
}

/// One live run, as `ps` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub name: String,
    pub run_id: String,
    /// The workflow and the item label, for a workflow item's run.
    pub workflow: Option<String>,
    pub item: Option<String>,
    pub sandbox: String,
    pub agent: String,
    pub branch: String,
    /// The iteration under way (0 while setting up) and the most there may be.
    pub iteration: u32,
    pub max_iterations: u32,
    pub state: State,
    /// Unix seconds.
    pub started: u64,
    /// Input and output tokens of the iterations that ended.
    pub tokens: u64,
    pub log_file: Option<PathBuf>,
    /// The repository's root.
    pub repo: PathBuf,
    /// `<pid>:<start time>` of the run's process (see `containers::owner_id`).
    pub owner: String,
    /// The sandbox's limits and egress policy, as the user would write
    /// them (`memory=512m egress=deny-all`), once it is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<String>,
}

/// A workflow item's run: which workflow, which item.
#[derive(Clone, Debug)]
pub struct WorkflowItem {
    pub workflow: String,
    pub item: String,
}

/// A run's registration: updates its record, watches its stop file, and
/// removes both when the last clone is dropped. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Live(Arc<Inner>);

struct Inner {
    dir: PathBuf,
    record: Mutex<Record>,
    _watch: tokio_util::task::AbortOnDropHandle<()>,
}

impl Live {
    /// Register a run (state: setting up) and start watching its stop file:
    /// `sanddune stop` aborts `abort`. Needs a tokio runtime.
    pub(crate) fn start(git_dir: &Path, mut record: Record, abort: AbortHandle) -> Self {
        record.owner = owner_id();
        record.started = now();
        let dir = git_dir.join(DIR);
        let stop = dir.join(format!("{}.stop", record.run_id));
        let watch = tokio::spawn(async move {
            loop {
                tokio::time::sleep(STOP_POLL).await;
                if stop.exists() {
                    abort.abort("stopped by `sanddune stop`");
                    return;
                }
            }
        });
        list_repository(git_dir);
        let live = Self(Arc::new(Inner {
            dir,
            record: Mutex::new(record),
            _watch: tokio_util::task::AbortOnDropHandle::new(watch),
        }));
        live.update(|_| {});
        live
    }

    pub(crate) fn set_state(&self, state: State) {
        self.update(|r| r.state = state);
    }

    /// Iteration `n` begins.
    pub(crate) fn set_iteration(&self, n: u32) {
        self.update(|r| {
            r.iteration = n;
            r.state = State::Running;
        });
    }

    pub(crate) fn set_containment(&self, containment: String) {
        self.update(|r| r.containment = Some(containment));
    }

    pub(crate) fn add_tokens(&self, tokens: u64) {
        self.update(|r| r.tokens += tokens);
    }

    fn update(&self, change: impl FnOnce(&mut Record)) {
        let mut record = self.0.record.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut record);
        let path = self.0.dir.join(format!("{}.json", record.run_id));
        if let Err(e) = write_atomically(&self.0.dir, &path, &record) {
            tracing::warn!(
                "cannot update the live-runs registry at {}: {e}",
                path.display()
            );
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        for ext in ["json", "stop"] {
            let _ = std::fs::remove_file(self.dir.join(format!("{}.{ext}", record.run_id)));
        }
    }
}

/// Complete or absent: a reader never sees half a record.
fn write_atomically(dir: &Path, path: &Path, record: &Record) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(&serde_json::to_vec_pretty(record).expect("a record serializes"))?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A record and whether its run's process still runs.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    #[serde(flatten)]
    pub record: Record,
    pub alive: bool,
    /// Seconds since the run started.
    pub elapsed: u64,
    /// Where the record is.
    #[serde(skip)]
    pub path: PathBuf,
}

/// The runs recorded in a repository, oldest first.
pub fn list(git_dir: &Path) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(git_dir.join(DIR)) else {
        return vec![];
    };
    let mut found: Vec<Found> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|path| {
            let record: Record = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            Some(Found {
                alive: owner_alive(&record.owner),
                elapsed: now().saturating_sub(record.started),
                record,
                path,
            })
        })
        .collect();
    found.sort_by(|a, b| {
        (a.record.started, &a.record.run_id).cmp(&(b.record.started, &b.record.run_id))
    });
    found
}

/// Ask a live run to stop: it aborts as Ctrl-C would.
pub fn request_stop(found: &Found) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link: it would truncate what the link names.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(found.path.with_extension("stop"))
        .map(drop)
}

/// Remove the records of runs whose process is gone; returns them.
pub fn clear_dead(git_dir: &Path) -> Vec<Record> {
    list(git_dir)
        .into_iter()
        .filter(|f| !f.alive)
        .filter(|f| std::fs::remove_file(&f.path).is_ok())
        .map(|f| {
            let _ = std::fs::remove_file(f.path.with_extension("stop"));
            f.record
        })
        .collect()
}

/// The per-user index of repositories that have had live runs:
/// `$XDG_STATE_HOME/sanddune/repositories`, else
/// `~/.local/state/sanddune/repositories`; one common git dir a line.
fn index_file() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("sanddune").join("repositories"))
}

/// The git dirs in the per-user index that still exist.
pub fn listed_repositories() -> Vec<PathBuf> {
    let Some(index) = index_file() else {
        return vec![];
    };
    let text = std::fs::read_to_string(index).unwrap_or_default();
    let mut dirs: Vec<PathBuf> = text
        .lines()
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Add the repository to the per-user index unless it is there. One
/// appended line: concurrent runs may both add it, which readers dedupe.
fn list_repository(git_dir: &Path) {
    let Some(index) = index_file() else { return };
    let line = git_dir.display().to_string();
    let text = std::fs::read_to_string(&index).unwrap_or_default();
    if text.lines().any(|l| l == line) {
        return;
    }
    let appended = index
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&index)?;
            file.write_all(format!("{line}\n").as_bytes())
        });
    if let Err(e) = appended {
        tracing::warn!("cannot list the repository in {}: {e}", index.display());
    }
}

/// The one run of `git_dir` that `query` names, by run id or by name. An
/// unknown name lists the runs there are; a name two runs share lists
/// their ids.
pub fn resolve(git_dir: &Path, query: &str) -> crate::error::Result<Found> {
    let runs = list(git_dir);
    if let Some(found) = runs.iter().find(|f| f.record.run_id == query) {
        return Ok(found.clone());
    }
    let mut named: Vec<Found> = runs
        .iter()
        .filter(|f| f.record.name == query)
        .cloned()
        .collect();
    match named.len() {
        1 => Ok(named.remove(0)),
        0 if runs.is_empty() => Err(crate::error::Error::input(format!(
            "no run is named `{query}`: no run is live in this repository"
        ))),
        0 => Err(crate::error::Error::input(format!(
            "no run is named `{query}`; the live runs are:\n{}",
            one_per_line(&runs)
        ))),
        _ => Err(crate::error::Error::input(format!(
            "{} runs are named `{query}`; name one by its run id:\n{}",
            named.len(),
            one_per_line(&named)
        ))),
    }
}

fn one_per_line(runs: &[Found]) -> String {
    runs.iter()
        .map(|f| {
            format!(
                "  {}  {}{}",
                f.record.run_id,
                f.record.name,
                if f.alive { "" } else { " (dead)" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_request_never_writes_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        std::fs::write(&marker, "mine").unwrap();
        let record: Record = serde_json::from_value(serde_json::json!({
            "name": "r", "runId": "r", "workflow": null, "item": null,
            "sandbox": "s", "agent": "a", "branch": "b", "iteration": 0,
            "maxIterations": 1, "state": "running", "started": 0, "tokens": 0,
            "logFile": null, "repo": dir.path(), "owner": "1:1",
        }))
        .unwrap();
        let found = Found {
            record,
            alive: true,
            elapsed: 0,
            path: dir.path().join("r.json"),
        };
        std::os::unix::fs::symlink(&marker, dir.path().join("r.stop")).unwrap();
        assert!(request_stop(&found).is_err());
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "mine");

        std::fs::remove_file(dir.path().join("r.stop")).unwrap();
        request_stop(&found).unwrap();
        assert!(dir.path().join("r.stop").is_file());
    }
}
