//! Warm sandboxes (ADR 0037): containers or pods started ahead of the runs
//! that will use them, kept in a repository's pool, so a run claims one in
//! place of creating one. This module is the pool's bookkeeping, shared by
//! the capabilities that fill and claim slots: `containers::pool` for the
//! engines, `pods::pool` for Kubernetes.
//!
//! An engine fixes a container's mounts and labels when it creates it, and
//! a run's mounts are paths named by its run id (its worktree, its agent git
//! dir, its link); a pod is labelled with its run id. So a pool slot is a
//! run id reserved ahead: the host makes the worktree and the agent git dir
//! for it and creates the container or pod as that run's, and the run that
//! claims the slot takes that id as its own. Its env is the claiming run's,
//! given per exec: the container's config holds none.
//!
//! The slot lives in the repository's git dir (`sanddune-pool/KEY/RUN`),
//! which no sandbox can write. A slot is ready while it holds
//! [`READY`]; a run claims it by renaming that file to one naming its
//! process ([`CLAIMED_PREFIX`]), which only one rename can do. A claimed
//! container is used only when the one the claiming run would create is
//! the same ([`Claimed::fits`], on the capability's fingerprint of it).
//! Otherwise it is removed and the run creates its own.
//!
//! The container's first process is a shell ([`waiting_entrypoint`]) that
//! ends after the pool's idle lifetime unless the claim wakes it, which
//! replaces it with the provider's own: an idle container ends itself with
//! no daemon, and `sanddune gc` removes what is left.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::containers::snapshot::hex;
use super::containers::{owner_alive, owner_id};

/// `pool=N`: how many warm containers to keep ready (0: none).
pub const KEY: &str = "pool";
/// `pool-idle=DURATION`: how long a warm container waits for a run.
pub const IDLE_KEY: &str = "pool-idle";
/// The label of a pooled container: its slot directory on the host.
pub const POOL_LABEL: &str = "sanddune.pool";
/// Under the repository's common git dir.
pub const POOLS_DIR: &str = "sanddune-pool";
/// A slot's record while it waits for a run.
pub const READY: &str = "ready.json";
/// How this sanddune wakes its warm containers, part of a pool's key: a
/// sanddune that wakes them otherwise (an older one sent only `SIGUSR1`,
/// which a shell waiting on the pipe ignores) fills and claims another
/// pool, and never adopts a container it could not wake.
pub const WAKE_FORMAT: &str = "wake: a pipe in the link directory, else SIGUSR1";
/// A claimed slot's record: `claimed-<owner id>.json`.
pub const CLAIMED_PREFIX: &str = "claimed-";
/// How long a container waits when `pool-idle` is not given.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// A slot this close to its end is not claimed: its container may end
/// before the claim's signal reaches it.
const MARGIN: Duration = Duration::from_secs(15);
/// The most warm containers one pool keeps.
const MOST: usize = 16;

/// The pool options of a sandbox, when `pool=N` with N > 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    pub size: usize,
    pub idle: Duration,
}

impl PoolOptions {
    /// Whether `key` is one the host takes for pools.
    pub fn is_key(key: &str) -> bool {
        key == KEY || key == IDLE_KEY
    }

    /// The pool options `config` asks for (None unless `pool` is above 0);
    /// their keys are removed from it.
    pub fn take_from(config: &mut Vec<(String, String)>) -> Result<Option<Self>, String> {
        let mut size = 0;
        let mut idle = None;
        let mut rest = Vec::with_capacity(config.len());
        for (key, value) in config.drain(..) {
            if key == KEY {
                size = value
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n <= MOST)
                    .ok_or_else(|| {
                        format!(
                            "pool must be a number of containers from 0 to {MOST}, not `{value}`"
                        )
                    })?;
            } else if key == IDLE_KEY {
                let d = crate::age::parse_age(&value).map_err(|e| format!("pool-idle: {e}"))?;
                if d < MARGIN * 2 {
                    return Err(format!(
                        "pool-idle: `{value}` is too short: a warm container must wait at least {} s",
                        (MARGIN * 2).as_secs()
                    ));
                }
                idle = Some(d);
            } else {
                rest.push((key, value));
            }
        }
        *config = rest;
        if size == 0 && idle.is_some() {
            return Err(format!(
                "{IDLE_KEY} sets how long a warm container waits, but pool=N is not set"
            ));
        }
        Ok((size > 0).then(|| PoolOptions {
            size,
            idle: idle.unwrap_or(DEFAULT_IDLE),
        }))
    }
}

/// What a slot's record says.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlotRecord {
    /// The container's id, or the pod's name.
    pub container: String,
    /// `docker`, `podman` or [`KUBERNETES`].
    pub engine: String,
    pub fingerprint: String,
    /// Unix seconds: when its container ends itself.
    pub until: u64,
    /// The link directory made for it, if its runs need one.
    pub link: Option<PathBuf>,
    /// The exec of the link's forwarder, started with the container.
    #[serde(default)]
    pub forwarder: Option<String>,
    /// The pipe that wakes it, on the host; None: it waits for `SIGUSR1`.
    /// (Absent from an older sanddune's records, which gc still reads.)
    #[serde(default)]
    pub wake: Option<PathBuf>,
    /// Where a warm pod is: the kubeconfig context and namespace it was
    /// created in, which `gc` connects to.
    #[serde(default)]
    pub cluster: Option<PodPlace>,
}

/// A [`SlotRecord`]'s engine when it holds a pod.
pub const KUBERNETES: &str = "kubernetes";

/// The cluster a warm pod is in.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PodPlace {
    /// None: the in-cluster config of the pod sanddune runs in.
    pub context: Option<String>,
    pub namespace: String,
}

/// A repository's pool for one key: `<git dir>/sanddune-pool/<key>`.
pub fn pool_dir(git_dir: &Path, key: &str) -> PathBuf {
    git_dir.join(POOLS_DIR).join(key)
}

/// What a sandbox's create does with its pool: fill a slot, or use the one
/// its run claimed.
#[derive(Debug)]
pub enum PoolTicket {
    Fill(FillSlot),
    Claim(Claimed),
}

impl PoolTicket {
    /// What a run's log says of its claimed slot once the sandbox's create
    /// used it, or did not; None before, and for a fill.
    pub fn outcome(&self) -> Option<String> {
        let PoolTicket::Claim(claimed) = self else {
            return None;
        };
        let record = &claimed.record;
        let (kind, id) = match record.engine.as_str() {
            KUBERNETES => ("pod", record.container.as_str()),
            _ => (
                "container",
                &record.container[..12.min(record.container.len())],
            ),
        };
        Some(match claimed.outcome()? {
            Ok(()) => format!("pool: took a warm {kind} ({id}), started ahead"),
            Err(why) => {
                format!("pool: the warm {kind} was not used ({why}); created a new one")
            }
        })
    }
}

/// A slot being filled: the engine creates its container to wait.
#[derive(Debug)]
pub struct FillSlot {
    pub dir: PathBuf,
    pub idle: Duration,
    /// Where the link directory goes if the container needs one.
    pub link: PathBuf,
    /// What the create made: its record, less the deadline.
    made: Mutex<Option<SlotRecord>>,
}

impl FillSlot {
    pub fn new(dir: PathBuf, idle: Duration, link: PathBuf) -> Self {
        Self {
            dir,
            idle,
            link,
            made: Mutex::new(None),
        }
    }

    /// Its container or pod exists and waits: `made` is its record, whose
    /// deadline this sets.
    pub(crate) fn created(&self, made: SlotRecord) {
        *self.made.lock().unwrap() = Some(SlotRecord {
            // Its first process started its idle wait a moment ago.
            until: unix_now() + self.idle.as_secs(),
            ..made
        });
    }

    /// The record of the slot once its container exists.
    pub fn record(&self) -> Option<SlotRecord> {
        self.made.lock().unwrap().clone()
    }
}

type Env = Vec<(String, String)>;

/// A slot a run claimed: its container, once the create checked it is the
/// one the run would make, and the run's env, which its execs get.
#[derive(Debug)]
pub struct Claimed {
    pub dir: PathBuf,
    /// Its record under this process's claim.
    file: PathBuf,
    pub record: SlotRecord,
    /// Given back unused: the slot stays.
    given_back: std::sync::atomic::AtomicBool,
    env: Mutex<Option<(String, Env)>>,
    /// What became of it, for the run's log.
    outcome: Mutex<Option<Result<(), String>>>,
}

impl Claimed {
    /// The env a claimed container's execs get first.
    pub fn exec_env(&self, container: &str) -> Option<Vec<(String, String)>> {
        match &*self.env.lock().unwrap() {
            Some((id, env)) if id == container => Some(env.clone()),
            _ => None,
        }
    }

    /// Ok when the run uses the warm container, the reason when it made
    /// its own; None before its create.
    pub fn outcome(&self) -> Option<Result<(), String>> {
        self.outcome.lock().unwrap().clone()
    }

    /// Give the slot back unused: ready for another run.
    pub fn give_back(&self) {
        if std::fs::rename(&self.file, self.dir.join(READY)).is_ok() {
            self.given_back
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Give the slot up as unusable: expired, for gc's sweep to remove.
    pub fn discard(&self) {
        let record = SlotRecord {
            until: 0,
            ..self.record.clone()
        };
        if publish(&self.dir, &record).is_ok() {
            let _ = std::fs::remove_file(&self.file);
            self.given_back
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub(crate) fn missed(&self, why: String) {
        *self.outcome.lock().unwrap() = Some(Err(why));
    }

    /// Whether the warm container fits a create whose would-be container
    /// has `fingerprint`, and has time left to be woken.
    pub(crate) fn fits(&self, fingerprint: &str) -> Result<(), String> {
        if self.record.fingerprint != fingerprint {
            return Err("its image, user, mounts, network or limits differ from this run's".into());
        }
        if self.record.until < unix_now() + MARGIN.as_secs() {
            return Err("its idle lifetime was about to end".into());
        }
        Ok(())
    }

    /// The run took the woken container `id`, whose execs get `env` first.
    pub(crate) fn took(&self, id: &str, env: Env) {
        *self.env.lock().unwrap() = Some((id.to_string(), env));
        *self.outcome.lock().unwrap() = Some(Ok(()));
    }
}

impl Drop for Claimed {
    /// The slot's record goes with the sandbox that used it (until then,
    /// gc sees its container is a live run's).
    fn drop(&mut self) {
        if !self.given_back.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Claim a ready slot of the pool in `dir` for this process: the first
/// that is not about to end and whose rename succeeds. Its id is the run
/// id the claiming run takes.
pub fn claim(dir: &Path) -> Option<(String, Claimed)> {
    let mut slots: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let record = read_record(&e.path().join(READY))?;
            (record.until > unix_now() + MARGIN.as_secs() * 2).then(|| (record.until, e.path()))
        })
        .collect();
    // The oldest first: it ends soonest.
    slots.sort();
    let owner = owner_id();
    for (_, slot) in slots {
        let claimed = slot.join(format!("{CLAIMED_PREFIX}{owner}.json"));
        if std::fs::rename(slot.join(READY), &claimed).is_err() {
            continue;
        }
        let Some(record) = read_record(&claimed) else {
            continue;
        };
        let id = slot.file_name()?.to_string_lossy().into_owned();
        return Some((
            id,
            Claimed {
                dir: slot,
                file: claimed,
                record,
                given_back: Default::default(),
                env: Mutex::new(None),
                outcome: Mutex::new(None),
            },
        ));
    }
    None
}

/// How many slots of the pool in `dir` wait for a run and are not about
/// to end.
pub fn ready(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            read_record(&e.path().join(READY))
                .is_some_and(|r| r.until > unix_now() + MARGIN.as_secs() * 2)
        })
        .count()
}

/// How long a slot may be without a record while a process fills it.
const FILLING: Duration = Duration::from_secs(120);

/// What a slot directory is now.
#[derive(Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Waiting for a run until its deadline.
    Ready(SlotRecord),
    /// Claimed by a process that still runs.
    Claimed,
    /// Being filled: no record yet, made moments ago.
    Filling,
    /// Claimed by a process that is gone, expired, or never finished.
    Dead(Option<SlotRecord>),
}

/// Read a slot directory's state (for `gc` and the label check).
pub fn slot_state(dir: &Path) -> SlotState {
    if let Some(record) = read_record(&dir.join(READY)) {
        return if record.until > unix_now() {
            SlotState::Ready(record)
        } else {
            SlotState::Dead(Some(record))
        };
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(owner) = name
            .strip_prefix(CLAIMED_PREFIX)
            .and_then(|n| n.strip_suffix(".json"))
        {
            let record = read_record(&entry.path());
            return if owner_alive(owner) {
                SlotState::Claimed
            } else {
                SlotState::Dead(record)
            };
        }
    }
    let young = std::fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .is_ok_and(|made| made.elapsed().unwrap_or_default() < FILLING);
    if young {
        SlotState::Filling
    } else {
        SlotState::Dead(None)
    }
}

fn read_record(path: &Path) -> Option<SlotRecord> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Write a slot's record as ready, in one rename.
pub fn publish(dir: &Path, record: &SlotRecord) -> std::io::Result<()> {
    let tmp = dir.join(".ready.tmp");
    std::fs::write(&tmp, serde_json::to_vec(record).expect("serializable"))?;
    std::fs::rename(tmp, dir.join(READY))
}

/// The first process of a waiting container: a shell that ends after
/// `idle` unless woken first, which makes it `main` (the provider's
/// entrypoint and command). With `pipe` (its path in the container), the
/// wake is a line `go` there: the shell reads the pipe while a `sleep`
/// holds it open for writing, so the sleep's end is the read's end of
/// file. Without, the wake is `SIGUSR1`. The sleep is reaped before the
/// hand-over: the agent finds no process of the wait.
pub(crate) fn waiting_entrypoint(
    idle: Duration,
    pipe: Option<&str>,
    main: Vec<String>,
) -> Vec<String> {
    let idle = idle.as_secs();
    let script = match pipe {
        Some(pipe) => format!(
            "sleep {idle} >'{pipe}' & read w <'{pipe}'; kill $! 2>/dev/null; wait $! 2>/dev/null; \
             [ \"$w\" = go ] && exec \"$@\"; exit 0"
        ),
        None => format!(
            "trap 'kill $! 2>/dev/null; wait $! 2>/dev/null; exec \"$@\"' USR1; sleep {idle} & wait $!"
        ),
    };
    let mut argv = vec!["sh".to_string(), "-c".to_string(), script, "sh".to_string()];
    argv.extend(main);
    argv
}

/// A short hex digest of `parts`: a pool's key.
pub fn key_of(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex(&hasher.finalize())[..20].to_string()
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(pairs: &[(&str, &str)]) -> Result<Option<PoolOptions>, String> {
        let mut config: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let taken = PoolOptions::take_from(&mut config);
        assert!(config.iter().all(|(k, _)| !PoolOptions::is_key(k)));
        taken
    }

    #[test]
    fn pool_options_parse_and_bad_ones_are_refused_by_name() {
        assert_eq!(
            take(&[("pool", "2"), ("image", "x")]).unwrap(),
            Some(PoolOptions {
                size: 2,
                idle: DEFAULT_IDLE
            })
        );
        assert_eq!(
            take(&[("pool", "1"), ("pool-idle", "2m")])
                .unwrap()
                .unwrap()
                .idle,
            Duration::from_secs(120)
        );
        assert_eq!(take(&[("pool", "0")]).unwrap(), None);
        assert!(
            take(&[("pool", "lots")])
                .unwrap_err()
                .contains("from 0 to 16")
        );
        assert!(
            take(&[("pool", "17")])
                .unwrap_err()
                .contains("from 0 to 16")
        );
        assert!(
            take(&[("pool", "1"), ("pool-idle", "5s")])
                .unwrap_err()
                .contains("too short")
        );
        assert!(
            take(&[("pool-idle", "5m")])
                .unwrap_err()
                .contains("pool=N is not set")
        );
    }

    fn slot(pool: &Path, id: &str, until: u64) -> PathBuf {
        let dir = pool.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let record = SlotRecord {
            container: format!("c-{id}"),
            engine: "docker".into(),
            fingerprint: "f".into(),
            until,
            link: None,
            forwarder: None,
            wake: None,
            cluster: None,
        };
        publish(&dir, &record).unwrap();
        dir
    }

    #[test]
    fn a_slot_is_claimed_once_and_one_about_to_end_is_not() {
        let pool = tempfile::tempdir().unwrap();
        slot(pool.path(), "ending", unix_now() + 5);
        slot(pool.path(), "later", unix_now() + 600);
        assert_eq!(ready(pool.path()), 1);
        let (id, claimed) = claim(pool.path()).unwrap();
        assert_eq!(id, "later");
        assert_eq!(claimed.record.container, "c-later");
        assert_eq!(slot_state(&pool.path().join("later")), SlotState::Claimed);
        assert!(claim(pool.path()).is_none(), "claimed twice");
        assert_eq!(ready(pool.path()), 0);
        assert!(matches!(
            slot_state(&pool.path().join("ending")),
            SlotState::Ready(_)
        ));
        claimed.give_back();
        drop(claimed);
        assert_eq!(ready(pool.path()), 1, "given back unused");
        let (_, used) = claim(pool.path()).unwrap();
        drop(used);
        assert!(
            !pool.path().join("later").exists(),
            "a used slot's record goes with its sandbox"
        );
    }

    #[test]
    fn a_dead_claimer_or_a_passed_deadline_makes_a_slot_dead() {
        let pool = tempfile::tempdir().unwrap();
        let gone = slot(pool.path(), "gone", unix_now() + 600);
        std::fs::rename(gone.join(READY), gone.join("claimed-1:1.json")).unwrap();
        assert!(matches!(slot_state(&gone), SlotState::Dead(Some(_))));
        let old = slot(pool.path(), "old", unix_now() - 1);
        assert!(matches!(slot_state(&old), SlotState::Dead(Some(_))));
        let half = pool.path().join("half");
        std::fs::create_dir(&half).unwrap();
        assert_eq!(slot_state(&half), SlotState::Filling, "a fill under way");
        let old = SystemTime::now() - FILLING * 2;
        std::fs::File::open(&half)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(slot_state(&half), SlotState::Dead(None));
    }
}
