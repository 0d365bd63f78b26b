//! A worktree as a lifecycle of its own ([`WorktreeHandle`]): runs,
//! sandboxes and interactive sessions on it share it. `close` merges a
//! merge-to-head branch that is ahead of the target, then removes the
//! worktree unless it is dirty.

use super::handle::{CloseResult, SandboxHandle};
use super::log::RunLog;
use super::place::{self, Place};
use super::plan::{self, AgentLayers, AgentPlan, SandboxPlan};
use super::strategy::{BranchStrategy, WorktreeStrategy};
use super::{AgentOptions, RunResult, SandboxOptions};
use crate::error::Result;
use crate::plugin::PluginRuntime;
use crate::worktree::Repo;

pub struct WorktreeHandle {
    place: Option<Place>,
    runtime: PluginRuntime,
    log: RunLog,
}

impl WorktreeHandle {
    /// A worktree on its own: its sandboxes come later.
    pub(super) async fn create(
        strategy: WorktreeStrategy,
        options: SandboxOptions,
    ) -> Result<Self> {
        let repo = Repo::discover(&plan::absolute(&options.cwd)?)?;
        plan::check_trust(repo.root(), &options)?;
        let runtime = plan::runtime(&options.runtime)?;
        let hooks = options.hooks.host_on_worktree_ready.clone();
        Self::make(repo, runtime, strategy, &options, &hooks).await
    }

    /// The worktree of a planned sandbox, before the sandbox: its dev
    /// container's initializeCommand runs first among the hooks.
    pub(super) async fn for_plan(strategy: WorktreeStrategy, plan: &SandboxPlan) -> Result<Self> {
        let repo = Repo::discover(plan.repo.root())?;
        let (o, hooks) = (&plan.options, plan.worktree_hooks());
        Self::make(repo, plan.runtime.clone(), strategy, o, &hooks).await
    }

    async fn make(
        repo: Repo,
        runtime: PluginRuntime,
        strategy: WorktreeStrategy,
        options: &SandboxOptions,
        hooks: &[crate::hooks::HostHook],
    ) -> Result<Self> {
        let log = place::open_log(&repo, &options.log, options.name.as_deref())?;
        let id = super::strategy::run_id();
        let place = place::prepare_place(
            &repo,
            (strategy.into(), &id, false),
            options,
            hooks,
            true,
            &log,
        )
        .await?;
        Ok(Self {
            place: Some(place),
            runtime,
            log,
        })
    }

    fn place(&self) -> &Place {
        self.place
            .as_ref()
            .expect("a worktree handle has its place until closed")
    }

    /// The worktree's path on the host.
    pub fn path(&self) -> &std::path::Path {
        self.place().path()
    }

    /// The branch checked out in the worktree.
    pub fn branch(&self) -> &str {
        &self.place().branch
    }

    pub(super) fn runtime(&self) -> &PluginRuntime {
        &self.runtime
    }

    pub(super) fn place_for_interactive(&self) -> Place {
        self.place().clone()
    }

    /// Options on this worktree: its runtime unless they bring one.
    fn on_this(&self, mut options: SandboxOptions) -> SandboxOptions {
        if options.runtime.is_none() {
            options.runtime = Some(self.runtime.clone());
        }
        options
    }

    /// A sandbox on this worktree; its `close` tears down only the sandbox.
    pub async fn create_sandbox(&self, options: SandboxOptions) -> Result<SandboxHandle> {
        let plan = SandboxPlan::new(self.on_this(options)).await?;
        self.start_sandbox(plan).await
    }

    /// Start a planned sandbox on this worktree. The worktree exists
    /// already: the dev container's initializeCommand runs now.
    pub(crate) async fn start_sandbox(&self, plan: SandboxPlan) -> Result<SandboxHandle> {
        let place = self.place().clone();
        if let Some(initialize) = &plan.initialize {
            super::hook_runner::run_on_worktree_ready(
                std::slice::from_ref(initialize),
                place.path(),
                &plan.options.abort,
                &place::hook_log(&self.log),
            )
            .await?;
        }
        SandboxHandle::start(plan, place, false, self.log.clone()).await
    }

    /// The top-level create_sandbox: the sandbox handle takes the worktree
    /// (and releases it if the sandbox does not start).
    pub(super) async fn into_sandbox(mut self, plan: SandboxPlan) -> Result<SandboxHandle> {
        let place = self.place.take().expect("a new worktree has its place");
        SandboxHandle::start(plan, place, true, self.log.clone()).await
    }

    /// One agent run in a fresh sandbox on this worktree; the sandbox is
    /// torn down after it, the worktree stays. The agent is planned with
    /// the sandbox: its env needs are checked before the sandbox exists.
    pub async fn run(&self, sandbox: SandboxOptions, agent: AgentOptions) -> Result<RunResult> {
        let sandbox = self.on_this(sandbox);
        let runtime = sandbox.runtime.clone().expect("set by on_this");
        let place = self.place();
        let branches = (place.branch.as_str(), place.target.as_str());
        let mut agent = AgentPlan::new(&runtime, agent, branches, Some(&self.log)).await?;
        let layers = AgentLayers::of(&agent.agent, &agent.options);
        let plan = SandboxPlan::with_agent(sandbox, Some(layers)).await?;
        agent.check(&plan.env).await?;
        let mut handle = self.start_sandbox(plan).await?;
        let env = handle.env().clone();
        let result = handle.run_agent(agent, env).await;
        let closed = handle.close().await;
        let result = result?;
        closed?;
        Ok(result)
    }

    /// Merge (merge-to-head, when ahead of the target) and remove the
    /// worktree; a dirty one is kept and its path returned.
    pub async fn close(mut self) -> Result<CloseResult> {
        self.log.finish();
        self.close_place(true)
    }

    fn close_place(&mut self, merge: bool) -> Result<CloseResult> {
        let Some(place) = self.place.take() else {
            return Ok(CloseResult::default());
        };
        let repo = place.repo()?;
        let Some(wt) = &place.worktree else {
            return Ok(CloseResult::default());
        };
        let mut merged = false;
        if merge && place.strategy == BranchStrategy::MergeToHead {
            // Gated on the branch being ahead, not on what one run did.
            if !repo
                .commits_since(&repo.branch_head(&place.target)?, &wt.branch)?
                .is_empty()
            {
                repo.merge_into_head(&wt.branch)?;
            }
            merged = true;
        }
        Ok(CloseResult {
            preserved_worktree_path: place::release_worktree(&repo, wt, merged)?,
        })
    }
}

impl Drop for WorktreeHandle {
    fn drop(&mut self) {
        if self.place.is_some() {
            tracing::warn!("a worktree handle was dropped without close(); its worktree is kept");
        }
    }
}
