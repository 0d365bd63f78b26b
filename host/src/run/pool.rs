//! Warm sandboxes for runs (ADR 0037): a run whose container provider has
//! `pool=N` claims a container started ahead in place of creating one, and
//! tops the pool up after its result; `sanddune gc` sweeps what no run
//! claimed.
//!
//! A slot is a run id reserved ahead (see `capability::containers::pool`):
//! its temporary worktree (`run-<id>`, merge-to-head) or the repository
//! itself (head), its agent git dir, parked, and a container created by the
//! provider for that run. The claiming run takes the id at its plan, before
//! anything of its own exists, so its worktree, agent git dir and link are
//! the container's mounts. A `--branch` run claims from the same slots as
//! merge-to-head: the slot's worktree keeps its `run-<id>` name (the
//! container mounts it by that path) and gets the run's branch; kept at
//! the end, it moves to the branch's own name.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::place::Place;
use super::strategy::{BranchStrategy, run_id, source_branch};
use crate::capability::containers::{Engine, connect_negotiated, force_remove};
use crate::capability::gateway::Gateway;
use crate::capability::pool::{
    self, FillSlot, PoolOptions, PoolTicket, SlotRecord, SlotState, pool_dir,
};
use crate::capability::{link, pods};
use crate::plugin::sandbox::{SandboxProvider, SandboxSpec};
use crate::worktree::Repo;

/// A run's pool: where its slots are, and the one it claimed.
pub(crate) struct RunPool {
    options: PoolOptions,
    dir: PathBuf,
    /// The run's.
    strategy: BranchStrategy,
    claimed: Option<Arc<PoolTicket>>,
    /// What the run's log says of it.
    pub note: Option<String>,
}

/// The pool a run's provider options ask for (`pool=N`), None when they
/// ask for none. Its key is what the sandbox's create depends on, short of
/// the run: a claimed container is used only when it is the one the run
/// would create (see `capability::containers::pool`).
pub(super) fn plan(
    provider: &SandboxProvider,
    config: &[(String, String)],
    repo: &Repo,
    side_by_side: u32,
    strategy: &BranchStrategy,
) -> Option<RunPool> {
    let mut config = config.to_vec();
    let options = PoolOptions::take_from(&mut config).ok()??;
    let kind = match slots_of(strategy) {
        BranchStrategy::Head => "head",
        _ => "merge-to-head",
    };
    let plugin = provider.plugin();
    let config: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let git_dir = repo.git_dir();
    let key = pool::key_of(&[
        &plugin.source,
        &plugin.sha256,
        &config.join("\n"),
        kind,
        &side_by_side.to_string(),
        &git_dir.display().to_string(),
        pool::WAKE_FORMAT,
    ]);
    Some(RunPool {
        options,
        dir: pool_dir(&git_dir, &key),
        strategy: strategy.clone(),
        claimed: None,
        note: None,
    })
}

/// The slots a strategy's runs claim: a branch run takes a merge-to-head
/// slot's worktree and puts its branch in it.
fn slots_of(strategy: &BranchStrategy) -> BranchStrategy {
    match strategy {
        BranchStrategy::Head => BranchStrategy::Head,
        _ => BranchStrategy::MergeToHead,
    }
}

impl RunPool {
    /// Claim a warm container: the run id it was made for, which the run
    /// takes as its own. A merge-to-head slot's worktree is brought to the
    /// host's HEAD first; a branch run's gets its branch.
    pub(super) fn claim(&mut self, repo: &Repo) -> Option<String> {
        if let BranchStrategy::Branch(branch) = &self.strategy
            && let Some(own) = repo.branch_worktree_there(branch)
        {
            self.note = Some(format!(
                "pool: not used: the branch's worktree {} is there, and is reused with its work",
                own.display()
            ));
            return None;
        }
        let Some((id, claimed)) = pool::claim(&self.dir) else {
            self.note = Some("pool: no warm sandbox was waiting; creating one".into());
            return None;
        };
        // Its engine is known now: what the provider's preflight will ask
        // of it is asked beside the worktree's and the agent's planning.
        if claimed.record.engine != pool::KUBERNETES {
            crate::capability::containers::warm_up(engine_of(&claimed.record.engine));
        }
        let (name, temporary) = (format!("run-{id}"), format!("sanddune/run-{id}"));
        let ready = match &self.strategy {
            BranchStrategy::Head => Ok(()),
            BranchStrategy::MergeToHead => repo.reset_pooled_worktree(&name, &temporary),
            BranchStrategy::Branch(branch) => {
                repo.switch_pooled_worktree(&name, &temporary, branch)
            }
        };
        if let Err(e) = ready {
            // Left expired, for gc's sweep.
            claimed.discard();
            self.note = Some(format!(
                "pool: the warm container's worktree could not be made this run's ({e}); creating one"
            ));
            return None;
        }
        self.note = Some(format!(
            "pool: claimed the warm sandbox made ahead for run {id}: its worktree and sandbox are this run's"
        ));
        self.claimed = Some(Arc::new(PoolTicket::Claim(claimed)));
        Some(id)
    }

    /// Whether the run claimed a warm container, whose worktree it opens.
    pub(super) fn claimed(&self) -> bool {
        self.claimed.is_some()
    }

    /// The claimed slot, for the sandbox's create: from here on it is the
    /// run's, and goes when the sandbox does.
    pub(super) fn ticket(&mut self) -> Option<Arc<PoolTicket>> {
        self.claimed.take()
    }

    /// What tops the pool up: sandboxes as the run's own (`sandbox`).
    pub(super) fn refill(&self, sandbox: FillFrom) -> Refill {
        Refill {
            sandbox,
            strategy: slots_of(&self.strategy),
            options: self.options,
            dir: self.dir.clone(),
        }
    }
}

impl Drop for RunPool {
    /// A claimed slot the run never used (its plan failed after the
    /// claim, or it was never started) goes back to the pool.
    fn drop(&mut self) {
        if let Some(PoolTicket::Claim(claimed)) = self.claimed.take().as_deref() {
            claimed.give_back();
        }
    }
}

/// What a run's sandbox is made of, for the pool's to be made the same way.
pub(super) struct FillFrom {
    pub root: PathBuf,
    pub provider: SandboxProvider,
    pub config: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    pub gateway: Option<Arc<Gateway>>,
    pub side_by_side: u32,
}

/// Tops a pool up to its size, as the run that planned it would create its
/// sandbox.
pub(super) struct Refill {
    sandbox: FillFrom,
    strategy: BranchStrategy,
    options: PoolOptions,
    dir: PathBuf,
}

impl Refill {
    /// Start containers until the pool has its size waiting; what was done,
    /// for the run's log. One process fills a pool at a time; another that
    /// finds it filling leaves it.
    pub(super) async fn run(self) -> Vec<String> {
        if let Err(e) = std::fs::create_dir_all(&self.dir) {
            return vec![format!(
                "warning: pool: cannot make {}: {e}",
                self.dir.display()
            )];
        }
        let Some(_filling) = FillLock::try_take(&self.dir) else {
            return vec![];
        };
        let missing = self.options.size.saturating_sub(pool::ready(&self.dir));
        let mut started = 0;
        for _ in 0..missing {
            match self.fill_one().await {
                Ok(()) => started += 1,
                Err(e) => {
                    return vec![format!(
                        "warning: pool: a warm sandbox could not be started: {e}"
                    )];
                }
            }
        }
        if started == 0 {
            return vec![];
        }
        vec![format!(
            "pool: started {started} warm sandbox(es) for the runs to come (idle lifetime {}s)",
            self.options.idle.as_secs()
        )]
    }

    async fn fill_one(&self) -> Result<(), String> {
        let id = run_id();
        let slot = self.dir.join(&id);
        std::fs::create_dir(&slot).map_err(|e| format!("{}: {e}", slot.display()))?;
        let made = self.make(&id, &slot).await;
        if made.is_err() {
            let repo = Repo::discover(&self.sandbox.root).map_err(|e| e.to_string())?;
            repo.remove_parked_agent_git_dir(&id);
            if self.strategy == BranchStrategy::MergeToHead {
                let _ = repo
                    .remove_pooled_worktree(&format!("run-{id}"), &format!("sanddune/run-{id}"));
            }
            let _ = std::fs::remove_dir_all(&slot);
        }
        made
    }

    /// The slot's worktree, parked agent git dir and container, then its
    /// record: ready for a run.
    async fn make(&self, id: &str, slot: &Path) -> Result<(), String> {
        let error = |e: crate::error::Error| e.to_string();
        let repo = Repo::discover(&self.sandbox.root).map_err(error)?;
        let target = repo.current_branch().map_err(error)?;
        let branch = source_branch(&self.strategy, &target, id);
        let worktree = match self.strategy {
            BranchStrategy::MergeToHead => Some(Arc::new(
                repo.add_worktree(&format!("run-{id}"), &branch, true)
                    .map_err(error)?,
            )),
            _ => None,
        };
        let place = Place {
            root: repo.root().to_path_buf(),
            worktree,
            branch,
            target,
            strategy: self.strategy.clone(),
            run_id: id.to_string(),
        };
        let (agent_git, git_shield) = place
            .agent_git_dir(&self.sandbox.provider, id)
            .map_err(error)?;
        let git_dir = repo.git_dir();
        drop(repo);
        let ticket = Arc::new(PoolTicket::Fill(FillSlot::new(
            slot.to_path_buf(),
            self.options.idle,
            link::pooled_dir(id),
        )));
        let spec = SandboxSpec {
            run_id: id.to_string(),
            name: format!("pool-{id}"),
            worktree: place.path().to_path_buf(),
            git_dir,
            branch: place.branch.clone(),
            env: self.sandbox.env.clone(),
            config: crate::devcontainer::mount_workspace(self.sandbox.config.clone(), place.path()),
            side_by_side: self.sandbox.side_by_side,
            git_shield,
            gateway: self.sandbox.gateway.clone(),
            setup: vec![],
            pool: Some(ticket.clone()),
            snapshot: None,
        };
        let sandbox = match self.sandbox.provider.create(&spec).await {
            Ok(sandbox) => sandbox,
            Err(e) => {
                if let Some(dir) = agent_git {
                    dir.remove();
                }
                return Err(e.to_string());
            }
        };
        sandbox.park();
        let PoolTicket::Fill(filled) = &*ticket else {
            unreachable!("made as a fill");
        };
        let record = filled
            .record()
            .ok_or("the provider made no container through the host")?;
        if let Some(dir) = agent_git {
            dir.park()
                .map_err(|e| format!("park the agent git dir: {e}"))?;
        }
        pool::publish(slot, &record).map_err(|e| format!("{}: {e}", slot.display()))
    }
}

/// Held while a process fills a pool: the lock goes with the file.
struct FillLock {
    _file: std::fs::File,
}

impl FillLock {
    fn try_take(dir: &Path) -> Option<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("fill.lock"))
            .ok()?;
        // SAFETY: flock on a descriptor this function owns.
        (unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0)
            .then_some(Self { _file: file })
    }
}

/// What `sanddune gc` does with a repository's pools: every slot no run
/// holds whose container ended, whose idle lifetime passed, or whose
/// claiming process is gone goes (with `drain`, every slot waiting too),
/// with its container, its worktree and its parked agent git dir. A line
/// each.
pub async fn sweep(repo: &Repo, drain: bool) -> Vec<String> {
    let mut done = vec![];
    let pools = repo.git_dir().join(pool::POOLS_DIR);
    for pool in std::fs::read_dir(&pools).into_iter().flatten().flatten() {
        for slot in std::fs::read_dir(pool.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if !slot.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let id = slot.file_name().to_string_lossy().into_owned();
            let (record, claimed) = match pool::slot_state(&slot.path()) {
                SlotState::Claimed | SlotState::Filling => continue,
                SlotState::Ready(record) if !drain => {
                    if running(&record, &id).await != Some(false) {
                        continue;
                    }
                    (Some(record), false)
                }
                SlotState::Ready(record) => (Some(record), false),
                SlotState::Dead(record) => {
                    let claimed = std::fs::read_dir(slot.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                        .any(|e| {
                            e.file_name()
                                .to_string_lossy()
                                .starts_with(pool::CLAIMED_PREFIX)
                        });
                    (record, claimed)
                }
            };
            if let Some(record) = record.as_ref().filter(|_| !claimed) {
                remove(record, &id).await;
            }
            let _ = std::fs::remove_dir_all(link::pooled_dir(&id));
            // A run that claimed the slot and died holds its worktree by a
            // lock, and gc collects it as that run's; one with no lock was
            // never the run's.
            let name = format!("run-{id}");
            let worktrees = repo.root().join(crate::worktree::WORKTREES_DIR);
            if worktrees.join(&name).exists() && !worktrees.join(format!("{name}.lock")).exists() {
                let _ = repo.remove_pooled_worktree(&name, &format!("sanddune/{name}"));
            }
            // Parked still: its run died before taking it over.
            repo.remove_parked_agent_git_dir(&id);
            if std::fs::remove_dir_all(slot.path()).is_ok() {
                done.push(match claimed {
                    false => format!("removed warm sandbox {id}, which no run claimed"),
                    true => {
                        format!("cleared warm sandbox {id}'s record: the run that claimed it died")
                    }
                });
            }
        }
    }
    done
}

fn engine_of(name: &str) -> Engine {
    match name {
        "podman" => Engine::Podman,
        _ => Engine::Docker,
    }
}

/// Whether slot `id`'s container or pod runs; None when its engine or
/// cluster does not answer.
async fn running(record: &SlotRecord, id: &str) -> Option<bool> {
    if record.engine == pool::KUBERNETES {
        return pods::pool::waiting(record, id).await;
    }
    let docker = connect_negotiated(engine_of(&record.engine)).await.ok()?;
    match docker.inspect_container(&record.container, None).await {
        Ok(info) => Some(info.state.and_then(|s| s.running) == Some(true)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Some(false),
        Err(_) => None,
    }
}

async fn remove(record: &SlotRecord, id: &str) {
    if record.engine == pool::KUBERNETES {
        let _ = pods::pool::remove(record, id).await;
    } else if let Ok(docker) = connect_negotiated(engine_of(&record.engine)).await {
        let _ = force_remove(&docker, &record.container).await;
    }
}
