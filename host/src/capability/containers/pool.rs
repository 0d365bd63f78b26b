//! Warm sandboxes (ADR 0037): containers started ahead of the runs that
//! will use them, kept in a repository's pool, so a run claims one in place
//! of creating one.
//!
//! An engine fixes a container's mounts and labels when it creates it, and
//! a run's mounts are paths named by its run id (its worktree, its agent git
//! dir, its link). So a pool slot is a run id reserved ahead: the host
//! makes the worktree, the agent git dir and the link directory for it and
//! creates the container with that run's mounts, and the run that claims
//! the slot takes that id as its own. Its env is the claiming run's, given
//! per exec: the container's config holds none.
//!
//! The slot lives in the repository's git dir (`sanddune-pool/KEY/RUN`),
//! which no sandbox can write. A slot is ready while it holds
//! [`READY`]; a run claims it by renaming that file to one naming its
//! process ([`CLAIMED_PREFIX`]), which only one rename can do. A claimed
//! container is used only when the container the claiming run would create
//! is the same one ([`fingerprint`]): the same image, user, command, binds,
//! network and limits. Otherwise it is removed and the run creates its own.
//!
//! The container's first process is a shell that ends after the pool's idle
//! lifetime unless the claim wakes it, which replaces it with the
//! provider's own: an idle container ends itself with no daemon, and
//! `sanddune gc` removes what is left. A container with a link directory
//! is woken through a pipe there ([`WAKE`]), which only the host can
//! write; one without, by `SIGUSR1`, which costs the engine a runtime call
//! (about 20 ms on dockerd, and an exec started beside it waits for it).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::KillContainerOptionsBuilder;
use sha2::{Digest, Sha256};

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
/// The pipe in a warm container's link directory its first process waits on.
pub const WAKE: &str = "wake";
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
    pub container: String,
    /// `docker` or `podman`.
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
        let id = &claimed.record.container;
        Some(match claimed.outcome()? {
            Ok(()) => format!(
                "pool: took a warm container ({}), started ahead",
                &id[..12.min(id.len())]
            ),
            Err(why) => {
                format!("pool: the warm container was not used ({why}); created a new one")
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

    /// `forwarder`: the exec of its link's forwarder, if it has a link;
    /// `wake`: the pipe that wakes it, if it waits on one.
    pub(super) fn created(
        &self,
        container: &str,
        engine: &str,
        fingerprint: &str,
        forwarder: Option<String>,
        wake: Option<PathBuf>,
    ) {
        *self.made.lock().unwrap() = Some(SlotRecord {
            container: container.into(),
            engine: engine.into(),
            fingerprint: fingerprint.into(),
            // Its first process started its idle wait a moment ago.
            until: unix_now() + self.idle.as_secs(),
            link: forwarder.is_some().then(|| self.link.clone()),
            forwarder,
            wake,
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

    pub(super) fn missed(&self, why: String) {
        *self.outcome.lock().unwrap() = Some(Err(why));
    }

    /// Take the warm container for a create whose would-be container has
    /// `fingerprint`: wake it (its first process becomes the provider's)
    /// and check it runs.
    pub(super) async fn adopt(
        &self,
        docker: &Docker,
        fingerprint: &str,
        env: Vec<(String, String)>,
    ) -> Result<String, String> {
        let id = &self.record.container;
        if self.record.fingerprint != fingerprint {
            return Err("its image, user, mounts, network or limits differ from this run's".into());
        }
        if self.record.until < unix_now() + MARGIN.as_secs() {
            return Err("its idle lifetime was about to end".into());
        }
        match &self.record.wake {
            Some(pipe) => wake(pipe)?,
            None => {
                let signal = KillContainerOptionsBuilder::default()
                    .signal("USR1")
                    .build();
                docker
                    .kill_container(id, Some(signal))
                    .await
                    .map_err(|e| format!("it did not take the claim's signal: {e}"))?;
            }
        }
        // The forwarder was started with it; without it the run's link
        // would be cut off.
        let forwarder = async {
            match &self.record.forwarder {
                Some(exec) => docker
                    .inspect_exec(exec)
                    .await
                    .is_ok_and(|e| e.running == Some(true)),
                None => true,
            }
        };
        let (info, forwarder) = tokio::join!(docker.inspect_container(id, None), forwarder);
        let info = info.map_err(|e| format!("cannot inspect it: {e}"))?;
        if info.state.and_then(|s| s.running) != Some(true) {
            return Err("it is no longer running".into());
        }
        if !forwarder {
            return Err("its link's forwarder is not running".into());
        }
        *self.env.lock().unwrap() = Some((id.clone(), env));
        *self.outcome.lock().unwrap() = Some(Ok(()));
        Ok(id.clone())
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
    let owner = super::owner_id();
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
            return if super::owner_alive(owner) {
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

/// What makes two containers the same for a run: everything of the create
/// but its env (given per exec) and the host's labels (whose it is), and
/// the link's forwarder a warm one runs from its start.
pub(super) fn fingerprint(
    body: &ContainerCreateBody,
    networks: &[String],
    plugin: &str,
    forwarder: Option<&[String]>,
) -> String {
    let mut body = body.clone();
    body.env = None;
    let value = serde_json::json!({
        "body": body,
        "networks": networks,
        "plugin": plugin,
        "forwarder": forwarder,
    });
    hex(&Sha256::digest(value.to_string().as_bytes()))
}

/// The first process of a waiting container: a shell that ends after
/// `idle` unless woken first, which makes it `main` (the provider's
/// entrypoint and command). With `pipe` (its path in the container), the
/// wake is a line `go` there: the shell reads the pipe while a `sleep`
/// holds it open for writing, so the sleep's end is the read's end of
/// file. Without, the wake is `SIGUSR1`. The sleep is reaped before the
/// hand-over: the agent finds no process of the wait.
pub(super) fn waiting_entrypoint(
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

/// Make the pipe a warm container waits on in its link directory `dir`:
/// readable by the container's user, whoever it maps to; only the host,
/// which owns the directory, can write or replace it.
pub(super) fn make_wake(dir: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let pipe = dir.join(WAKE);
    let _ = std::fs::remove_file(&pipe);
    let path = std::ffi::CString::new(pipe.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a pipe path with a NUL"))?;
    // SAFETY: a NUL-terminated path this function owns.
    if unsafe { libc::mkfifo(path.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    std::fs::set_permissions(&pipe, std::fs::Permissions::from_mode(0o644))?;
    Ok(pipe)
}

/// Wake a warm container through its pipe, which also proves its waiting
/// shell is there (no reader: `ENXIO`); the pipe then goes, so the link
/// directory is as a new container's.
fn wake(pipe: &Path) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(pipe)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => "it no longer waits for a run".to_string(),
            _ => format!("cannot wake it through {}: {e}", pipe.display()),
        })?;
    if !file.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
        return Err(format!("{} is not its pipe", pipe.display()));
    }
    file.write_all(b"go\n")
        .map_err(|e| format!("cannot wake it through {}: {e}", pipe.display()))?;
    drop(file);
    let _ = std::fs::remove_file(pipe);
    Ok(())
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    /// Start the waiting shell of `pipe`'s kind on the host's `sh`, with
    /// `echo handed-over` as the provider's process.
    fn waiting(idle: u64, pipe: Option<&Path>) -> std::process::Child {
        let pipe = pipe.map(|p| p.to_str().unwrap());
        let argv = waiting_entrypoint(
            Duration::from_secs(idle),
            pipe,
            vec!["echo".into(), "handed-over".into()],
        );
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn said(child: std::process::Child) -> String {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }

    /// Until a reader opens it, the pipe cannot be woken.
    fn wake_when_waiting(pipe: &Path) {
        for _ in 0..1000 {
            match wake(pipe) {
                Ok(()) => return,
                Err(e) if e.contains("no longer waits") => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("the shell never waited on its pipe");
    }

    #[test]
    fn a_shell_woken_through_its_pipe_hands_over_and_the_pipe_goes() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = make_wake(dir.path()).unwrap();
        let shell = waiting(60, Some(&pipe));
        wake_when_waiting(&pipe);
        assert_eq!(said(shell), "handed-over\n");
        // No pipe is left. (The idle `sleep` opens its end in the
        // background: woken first, its redirect can make a plain file in
        // this writable dir. A container's link dir is read-only to it.)
        use std::os::unix::fs::FileTypeExt;
        let left = std::fs::symlink_metadata(&pipe);
        assert!(
            left.is_err() || left.is_ok_and(|m| !m.file_type().is_fifo() && m.len() == 0),
            "the link directory is as a new container's"
        );
        assert!(wake(&pipe).is_err(), "nothing left to wake");
    }

    #[test]
    fn a_shell_not_woken_ends_after_its_idle_lifetime_and_then_cannot_be() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = make_wake(dir.path()).unwrap();
        assert_eq!(said(waiting(1, Some(&pipe))), "", "it ended itself");
        assert!(wake(&pipe).unwrap_err().contains("no longer waits"));
        // The signal's kind ends the same way.
        assert_eq!(said(waiting(1, None)), "");
    }

    #[test]
    fn a_shell_woken_by_the_signal_hands_over() {
        let shell = waiting(60, None);
        // A signal before the trap is set would end the shell: wait until
        // the kernel says it catches SIGUSR1 (bit 10 of `SigCgt`).
        let status = format!("/proc/{}/status", shell.id());
        let catches = || {
            std::fs::read_to_string(&status)
                .ok()
                .and_then(|s| {
                    let mask = s.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
                    u64::from_str_radix(mask.trim(), 16).ok()
                })
                .is_some_and(|mask| mask & (1 << (libc::SIGUSR1 - 1)) != 0)
        };
        for _ in 0..1000 {
            if catches() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(catches(), "the shell never set its trap");
        // SAFETY: signalling a child this test started.
        assert_eq!(unsafe { libc::kill(shell.id() as i32, libc::SIGUSR1) }, 0);
        assert_eq!(said(shell), "handed-over\n");
    }

    #[test]
    fn a_pipe_replaced_by_a_file_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join(WAKE);
        std::fs::write(&pipe, "").unwrap();
        assert!(wake(&pipe).unwrap_err().contains("is not its pipe"));
        assert_eq!(std::fs::read(&pipe).unwrap(), b"");
    }
}
