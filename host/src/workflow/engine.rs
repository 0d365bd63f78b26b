//! Running a workflow: steps in order, fan-out steps through [`fan_out`],
//! merge steps through the merge queue. A failed single step stops the
//! workflow (later steps read its output); a failed fan-out item is reported
//! and the others go on. Abort stops every branch and keeps its worktree.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::best_of::{self, BestOfResult};
use super::event::{
    ItemResult, ItemStatus, LabelledEventCallback, WorkflowEvent, WorkflowEventCallback,
};
use super::fan_out::{default_parallel, fan_out};
use super::merge_queue::{self, QueuedBranch};
use super::refs::{self, Scope};
use super::{AgentRun, AgentStep, RunPrompt, StepKind, StepStrategy, Workflow};
use crate::error::{Error, Result};
use crate::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use crate::run::{
    AbortHandle, AgentOptions, BranchStrategy, CommitOptions, Hooks, LogMode, Prompt, RunOptions,
    RunResult, SandboxOptions, StreamEvent, Timeouts, WorktreeStrategy,
};
use crate::worktree::Repo;

/// How to run a workflow. The overrides win over the file.
#[derive(Clone)]
pub struct WorkflowOptions {
    /// The repository; relative to the process's cwd.
    pub cwd: PathBuf,
    /// `--arg KEY=VALUE`: only keys the workflow declares.
    pub args: Vec<(String, String)>,
    /// At most this many agents at once (default: the number of cores).
    pub parallel: usize,
    pub sandbox: Option<String>,
    pub agent: Option<String>,
    pub model: Option<String>,
    /// Added to the file's options (and win over them).
    pub sandbox_options: Vec<(String, String)>,
    /// The repository config's `[sandboxOptions]`: under the file's.
    pub project_sandbox_options: Vec<(String, String)>,
    pub agent_options: Vec<(String, String)>,
    /// Call-site env of every run.
    pub env: Vec<(String, String)>,
    pub hooks: Hooks,
    pub copy_to_worktree: Vec<PathBuf>,
    pub timeouts: Timeouts,
    pub log: LogMode,
    pub on_event: Option<WorkflowEventCallback>,
    pub on_stream_event: Option<LabelledEventCallback>,
    pub abort: AbortHandle,
    pub runtime: Option<PluginRuntime>,
    /// Workspace trust for the repository's config and this workflow's
    /// sandbox options: see [`crate::trust`].
    pub trust: crate::trust::TrustPolicy,
    /// The agent's commit identity and co-authors (`[git]` in the config),
    /// for every run of the workflow.
    pub commit: CommitOptions,
}

impl Default for WorkflowOptions {
    fn default() -> Self {
        Self {
            cwd: PathBuf::from("."),
            args: vec![],
            parallel: default_parallel(),
            sandbox: None,
            agent: None,
            model: None,
            sandbox_options: vec![],
            project_sandbox_options: vec![],
            agent_options: vec![],
            env: vec![],
            hooks: Hooks::default(),
            copy_to_worktree: vec![],
            timeouts: Timeouts::default(),
            log: LogMode::File,
            on_event: None,
            on_stream_event: None,
            abort: AbortHandle::new(),
            runtime: None,
            trust: Default::default(),
            commit: CommitOptions::default(),
        }
    }
}

/// What a workflow did (camelCase in `--json`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowResult {
    pub workflow: String,
    pub steps: Vec<StepResult>,
    /// Every step ran, no item failed and every branch in a merge queue
    /// landed or was up to date.
    pub ok: bool,
    /// Set when the workflow was aborted; the caller's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    pub name: String,
    /// One for a single step, one per item for a fan-out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ItemResult>,
    /// A merge step's queue, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<Vec<QueuedBranch>>,
    /// A best-of step's candidates, winner and landing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_of: Option<BestOfResult>,
    /// Set when the step could not start (e.g. its list was not a list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything an item needs, shared by the tasks of a fan-out.
struct Context {
    workflow: Workflow,
    options: WorkflowOptions,
    runtime: PluginRuntime,
    /// The sandbox closes items left for after their results: a lane is
    /// free for the next item once its item's result is known. All are
    /// finished before the workflow returns.
    closings: std::sync::Mutex<tokio::task::JoinSet<Result<()>>>,
}

impl Context {
    fn close_later(&self, closing: crate::run::Closing) {
        if !closing.is_done() {
            let mut closings = self.closings.lock().unwrap_or_else(|e| e.into_inner());
            closings.spawn(closing.finish());
        }
    }

    /// Finish every close left for later. A failure leaves a sandbox for
    /// `sanddune gc`; the item's run log says so, and so does the host's log.
    async fn finish_closings(&self) {
        let mut closings =
            std::mem::take(&mut *self.closings.lock().unwrap_or_else(|e| e.into_inner()));
        while let Some(closed) = closings.join_next().await {
            match closed {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!("a sandbox did not close after its item's result: {e}")
                }
                Err(e) => tracing::warn!("a sandbox's close did not end: {e}"),
            }
        }
    }
}

impl Workflow {
    /// Run the workflow's steps in order. Bad input (an undeclared
    /// argument, a step without a sandbox or agent) is an `Err` before
    /// anything starts; what happens after is in the result.
    pub async fn run(&self, options: WorkflowOptions) -> Result<WorkflowResult> {
        let mut scope = Scope {
            args: self.resolve_args(&options.args)?,
            ..Scope::default()
        };
        self.check_plugins(&options)?;
        let repo = Repo::discover(
            &std::path::absolute(&options.cwd).map_err(|e| Error::input(e.to_string()))?,
        )?;
        let sandbox_config: Vec<_> = options
            .project_sandbox_options
            .iter()
            .chain(&options.sandbox_options)
            .cloned()
            .collect();
        let effects = self.host_effects(repo.root());
        let trusted = crate::trust::Scope::Workflow {
            workflow: &effects,
            sandbox_config: &sandbox_config,
        };
        crate::trust::require(repo.root(), &trusted, options.trust)?;
        // A step's remote to push to exists, before anything starts.
        for step in &self.steps {
            if let StepKind::Agent(AgentStep { push: Some(to), .. }) = &step.kind {
                repo.push_remote(to, &repo.current_branch()?)
                    .map_err(|e| Error::input(format!("step `{}`: {e}", step.name)))?;
            }
        }
        let runtime = match &options.runtime {
            Some(rt) => rt.clone(),
            None => PluginRuntime::new(RuntimeConfig::default())?,
        };
        let ctx = Arc::new(Context {
            workflow: self.clone(),
            options,
            runtime,
            closings: Default::default(),
        });
        let mut result = WorkflowResult {
            workflow: self.name.clone(),
            steps: vec![],
            ok: true,
            aborted: None,
        };
        for step in &self.steps {
            if ctx.options.abort.is_aborted() {
                break;
            }
            let mut step_result = StepResult {
                name: step.name.clone(),
                items: vec![],
                merge: None,
                best_of: None,
                error: None,
            };
            let mut stop = false;
            match &step.kind {
                StepKind::Agent(agent) => match items_of(agent, &scope) {
                    Err(e) => {
                        step_result.error = Some(e);
                        stop = true;
                    }
                    Ok(None) if agent.best_of.is_some() => {
                        match best_of_step(&ctx, &step.name, agent, &scope).await {
                            Ok(best) => {
                                stop = !best.ok;
                                if let Some(output) = best.output() {
                                    scope.outputs.insert(step.name.clone(), output.clone());
                                }
                                step_result.best_of = Some(best);
                            }
                            Err(e) => {
                                step_result.error = Some(e.to_string());
                                stop = true;
                            }
                        }
                    }
                    Ok(None) => {
                        emit(
                            &ctx,
                            WorkflowEvent::StepStarted {
                                step: step.name.clone(),
                                items: None,
                            },
                        );
                        let item =
                            run_item(ctx.clone(), step.name.clone(), scope.clone(), None).await;
                        stop = item.status != ItemStatus::Succeeded;
                        if let Some(output) = &item.output {
                            scope.outputs.insert(step.name.clone(), output.clone());
                        }
                        step_result.items.push(item);
                    }
                    Ok(Some(items)) => {
                        emit(
                            &ctx,
                            WorkflowEvent::StepStarted {
                                step: step.name.clone(),
                                items: Some(items.len()),
                            },
                        );
                        let side_by_side = ctx.options.parallel.min(items.len()) as u32;
                        let results = fan_out(
                            items,
                            ctx.options.parallel,
                            |i, item| {
                                let mut scope = scope.clone();
                                scope.item = Some((item, i + 1));
                                scope.side_by_side = side_by_side;
                                run_item(ctx.clone(), step.name.clone(), scope, Some(i + 1))
                            },
                            |i, panic| {
                                let mut r = ItemResult::new(Some(i + 1), None, None);
                                r.status = ItemStatus::Failed;
                                r.error = Some(format!("the item's task panicked: {panic}"));
                                r
                            },
                        )
                        .await;
                        let outputs = results
                            .iter()
                            .map(|r| r.output.clone().unwrap_or(Value::Null))
                            .collect();
                        scope
                            .outputs
                            .insert(step.name.clone(), Value::Array(outputs));
                        step_result.items = results;
                    }
                },
                StepKind::Merge { from } => {
                    let queue = match merge_step(&ctx, &step.name, from, &result) {
                        Ok(queue) => queue,
                        Err(e) => {
                            ctx.finish_closings().await;
                            return Err(e);
                        }
                    };
                    step_result.merge = Some(queue);
                }
            }
            result.ok &= step_ok(&step_result);
            result.steps.push(step_result);
            if stop {
                break;
            }
        }
        ctx.finish_closings().await;
        if ctx.options.abort.is_aborted() {
            result.aborted = Some(ctx.options.abort.reason());
        }
        result.ok &= result.aborted.is_none() && result.steps.len() == self.steps.len();
        Ok(result)
    }

    /// The declared arguments with `given` over their defaults.
    fn resolve_args(&self, given: &[(String, String)]) -> Result<BTreeMap<String, String>> {
        let mut args: BTreeMap<_, _> = self.args.iter().cloned().collect();
        for (key, value) in given {
            if !args.contains_key(key) {
                let declared: Vec<_> = self.args.iter().map(|(k, _)| k.as_str()).collect();
                return Err(Error::input(format!(
                    "workflow `{}` has no argument `{key}` (declared: {})",
                    self.name,
                    if declared.is_empty() {
                        "none".into()
                    } else {
                        declared.join(", ")
                    }
                )));
            }
            args.insert(key.clone(), value.clone());
        }
        Ok(args)
    }

    /// Every agent step needs a sandbox provider and every run an agent.
    fn check_plugins(&self, o: &WorkflowOptions) -> Result<()> {
        for step in &self.steps {
            let StepKind::Agent(a) = &step.kind else {
                continue;
            };
            if o.sandbox.is_none() && a.sandbox.is_none() && self.defaults.sandbox.is_none() {
                return Err(Error::input(format!(
                    "step `{}` has no sandbox provider: set `sandbox` in [defaults] or the step, or pass --sandbox",
                    step.name
                )));
            }
            for run in &a.runs {
                if o.agent.is_none() && run.agent.is_none() && self.defaults.agent.is_none() {
                    return Err(Error::input(format!(
                        "step `{}` (run `{}`) has no agent provider: set `agent` in [defaults] or the step, or pass --agent",
                        step.name, run.name
                    )));
                }
            }
        }
        Ok(())
    }
}

fn emit(ctx: &Context, event: WorkflowEvent) {
    if let Some(cb) = &ctx.options.on_event {
        cb(&event);
    }
}

fn step_ok(step: &StepResult) -> bool {
    step.error.is_none()
        && step.best_of.as_ref().is_none_or(|b| b.ok)
        && step.items.iter().all(|i| i.status == ItemStatus::Succeeded)
        && step.merge.iter().flatten().all(|q| {
            matches!(
                q.landing,
                merge_queue::Landing::Landed { .. } | merge_queue::Landing::UpToDate
            )
        })
}

/// A fan-out step's list, or None for a single step.
fn items_of(step: &AgentStep, scope: &Scope) -> Result<Option<Vec<Value>>, String> {
    let Some(reference) = &step.for_each else {
        return Ok(None);
    };
    match refs::lookup(reference, scope)? {
        Value::Array(items) => Ok(Some(items)),
        other => Err(format!(
            "forEach = \"{reference}\" is not a list but {}",
            refs::display(&other)
        )),
    }
}

fn agent_step<'a>(ctx: &'a Context, step: &str) -> &'a AgentStep {
    match ctx
        .workflow
        .steps
        .iter()
        .find(|s| s.name == step)
        .map(|s| &s.kind)
    {
        Some(StepKind::Agent(a)) => a,
        _ => unreachable!("items run only for agent steps"),
    }
}

/// One item (or the single run) of an agent step: its runs one after
/// another in one sandbox.
async fn run_item(
    ctx: Arc<Context>,
    step: String,
    scope: Scope,
    index: Option<usize>,
) -> ItemResult {
    let a = agent_step(&ctx, &step);
    let label = match index {
        Some(i) => format!("{step}-{i}"),
        None => step.clone(),
    };
    let item = scope.item.as_ref().map(|(v, _)| v.clone());
    let strategy = match &a.strategy {
        StepStrategy::Default => Ok(None),
        StepStrategy::Head => Ok(Some(BranchStrategy::Head)),
        StepStrategy::MergeToHead => Ok(Some(BranchStrategy::MergeToHead)),
        StepStrategy::Branch(template) => refs::render(template, &scope)
            .map(|b| Some(BranchStrategy::Branch(b)))
            .map_err(|e| Error::input(format!("step `{step}`, branch: {e}"))),
    };
    let branch = match &strategy {
        Ok(Some(BranchStrategy::Branch(b))) => Some(b.clone()),
        _ => None,
    };
    let mut result = ItemResult::new(index, item, branch.clone());
    if ctx.options.abort.is_aborted() {
        result.status = ItemStatus::NotStarted;
        return result;
    }
    emit(
        &ctx,
        WorkflowEvent::ItemStarted {
            label: label.clone(),
            branch,
        },
    );
    let started = std::time::Instant::now();
    let outcome = match strategy {
        Ok(strategy) => run_runs(&ctx, a, &scope, &label, strategy, &mut result).await,
        Err(e) => Err(e),
    };
    let outcome = match (outcome, &a.push) {
        (Ok(()), Some(to)) => push_item(&ctx, to, &mut result).await,
        (outcome, _) => outcome,
    };
    if let Err(e) = outcome {
        result.fail(&e);
    }
    result.duration_ms = started.elapsed().as_millis() as u64;
    result.tokens = result.runs.iter().map(RunResult::tokens).sum();
    emit(
        &ctx,
        WorkflowEvent::ItemFinished {
            label,
            result: result.clone(),
        },
    );
    result
}

/// `push` of a step: the item's branch from the host, once its runs made
/// commits (ADR 0033).
async fn push_item(ctx: &Context, to: &crate::run::PushTo, result: &mut ItemResult) -> Result<()> {
    let Some(branch) = result.branch.clone().filter(|_| !result.commits.is_empty()) else {
        return Ok(());
    };
    let root = std::path::absolute(&ctx.options.cwd).map_err(|e| Error::input(e.to_string()))?;
    let remote = Repo::discover(&root)?.push_remote(to, &branch)?;
    let pushed = crate::run::push(&root, &remote, &branch, &ctx.options.abort).await?;
    result.pushed = Some(Box::new(pushed));
    Ok(())
}

async fn run_runs(
    ctx: &Context,
    a: &AgentStep,
    scope: &Scope,
    label: &str,
    strategy: Option<BranchStrategy>,
    result: &mut ItemResult,
) -> Result<()> {
    let so = sandbox_options(ctx, a, label, scope.side_by_side);
    let multi = a.runs.len() > 1;
    let mut agents = Vec::with_capacity(a.runs.len());
    for run in &a.runs {
        let name = if multi {
            format!("{label}/{}", run.name)
        } else {
            label.to_string()
        };
        agents.push(agent_options(ctx, run, scope, &name)?);
    }
    if !multi {
        let agent = agents.pop().expect("a step has a run");
        let planned = crate::run::plan(RunOptions {
            sandbox: so,
            agent,
            strategy,
            resume_session: None,
            check: None,
            push: None,
        })
        .await?;
        let (run, closing) = planned.run_to_result().await?;
        ctx.close_later(closing);
        record(result, run);
        return Ok(());
    }
    let worktree_strategy = match strategy {
        Some(BranchStrategy::Branch(b)) => WorktreeStrategy::Branch(b),
        _ => WorktreeStrategy::MergeToHead,
    };
    // What the sandbox needs, before the worktree is made for it.
    let plan = crate::run::SandboxPlan::new(so.clone()).await?;
    let wt = crate::run::create_worktree(worktree_strategy, so).await?;
    let mut sandbox = match wt.start_sandbox(plan).await {
        Ok(s) => s,
        Err(e) => {
            keep_or_close(ctx, wt, &e, result).await;
            return Err(e);
        }
    };
    let mut failure = None;
    for agent in agents {
        match sandbox.run(agent).await {
            Ok(run) => record(result, run),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let closed = sandbox.close().await;
    match failure {
        Some(e) => {
            keep_or_close(ctx, wt, &e, result).await;
            Err(e)
        }
        None => {
            closed?;
            let close = wt.close().await?;
            result.preserved_worktree_path = close.preserved_worktree_path;
            Ok(())
        }
    }
}

/// After a failure: an aborted item keeps its worktree as it is; otherwise
/// close it (a dirty one is kept anyway).
async fn keep_or_close(
    ctx: &Context,
    wt: crate::run::WorktreeHandle,
    e: &Error,
    result: &mut ItemResult,
) {
    if matches!(e, Error::Aborted(_)) || ctx.options.abort.is_aborted() {
        result.preserved_worktree_path = Some(wt.path().display().to_string());
        return;
    }
    if let Ok(close) = wt.close().await {
        result.preserved_worktree_path = close.preserved_worktree_path;
    }
}

fn record(result: &mut ItemResult, run: RunResult) {
    result.commits.extend(run.commits.iter().cloned());
    if run.output.is_some() {
        result.output = run.output.clone();
    }
    if run.preserved_worktree_path.is_some() {
        result.preserved_worktree_path = run.preserved_worktree_path.clone();
    }
    if result.branch.is_none() {
        result.branch = Some(run.branch.clone());
    }
    result.runs.push(run);
}

fn sandbox_options(ctx: &Context, a: &AgentStep, label: &str, side_by_side: u32) -> SandboxOptions {
    let o = &ctx.options;
    let w = &ctx.workflow;
    let name = o
        .sandbox
        .as_ref()
        .or(a.sandbox.as_ref())
        .or(w.defaults.sandbox.as_ref())
        .expect("checked before the workflow started");
    let mut so = SandboxOptions::new(PluginRef::parse(name));
    so.sandbox_config = o
        .project_sandbox_options
        .iter()
        .chain(&w.defaults.sandbox_options)
        .chain(&a.sandbox_options)
        .chain(&o.sandbox_options)
        .cloned()
        .collect();
    so.env = o.env.clone();
    so.hooks = o.hooks.clone();
    so.copy_to_worktree = o.copy_to_worktree.clone();
    so.timeouts = o.timeouts;
    so.name = Some(label.to_string());
    so.cwd = o.cwd.clone();
    so.log = o.log.clone();
    so.abort = o.abort.clone();
    so.runtime = Some(ctx.runtime.clone());
    so.side_by_side = side_by_side.max(1);
    so.trust = o.trust;
    so.commit = o.commit.clone();
    so.workflow_item = Some(crate::run::WorkflowItem {
        workflow: w.name.clone(),
        item: label.to_string(),
    });
    so
}

fn agent_options(ctx: &Context, run: &AgentRun, scope: &Scope, name: &str) -> Result<AgentOptions> {
    let o = &ctx.options;
    let w = &ctx.workflow;
    let agent = o
        .agent
        .as_ref()
        .or(run.agent.as_ref())
        .or(w.defaults.agent.as_ref())
        .expect("checked before the workflow started");
    let prompt = match &run.prompt {
        RunPrompt::Inline(text) => Prompt::Inline(text.clone()),
        RunPrompt::File(path) => Prompt::File(w.dir.join(path)),
    };
    let mut ao = AgentOptions::new(PluginRef::parse(agent), prompt);
    ao.model = o
        .model
        .clone()
        .or(run.model.clone())
        .or(w.defaults.model.clone());
    ao.agent_options = w
        .defaults
        .agent_options
        .iter()
        .chain(&run.agent_options)
        .chain(&o.agent_options)
        .cloned()
        .collect();
    for (key, value) in &run.prompt_args {
        let value = refs::render(value, scope)
            .map_err(|e| Error::input(format!("run `{name}`, prompt argument {key}: {e}")))?;
        ao.prompt_args.push((key.clone(), value));
    }
    ao.max_iterations = run
        .max_iterations
        .or(w.defaults.max_iterations)
        .unwrap_or(1);
    if !run.completion_signals.is_empty() {
        ao.completion_signals = run.completion_signals.clone();
    }
    if let Some(secs) = run.idle_timeout_secs {
        ao.idle_timeout = Duration::from_secs(secs);
    }
    ao.env = o.env.clone();
    ao.output = run.output.clone();
    ao.abort = o.abort.clone();
    if let Some(cb) = &o.on_stream_event {
        let (cb, label) = (cb.clone(), name.to_string());
        ao.on_event = Some(Arc::new(move |event: &StreamEvent| cb(&label, event)));
    }
    Ok(ao)
}

/// A best-of step: its one run as the template of every candidate, each
/// candidate an item of the workflow (`<step>-<k>`).
async fn best_of_step(
    ctx: &Context,
    step: &str,
    a: &AgentStep,
    scope: &Scope,
) -> Result<BestOfResult> {
    let b = a.best_of.as_ref().expect("a best-of step");
    let strategy = match &a.strategy {
        StepStrategy::Default | StepStrategy::MergeToHead => None,
        StepStrategy::Head => Some(BranchStrategy::Head),
        StepStrategy::Branch(template) => Some(BranchStrategy::Branch(
            refs::render(template, scope)
                .map_err(|e| Error::input(format!("step `{step}`, branch: {e}")))?,
        )),
    };
    let n = b.candidates.len();
    let template = &a.runs[0];
    let agent = agent_options(ctx, template, scope, step)?;
    let step_agent = agent.agent.to_string();
    let run = RunOptions {
        sandbox: sandbox_options(ctx, a, step, ctx.options.parallel.min(n) as u32),
        agent,
        strategy,
        resume_session: None,
        check: b.check.clone(),
        push: None,
    };
    let candidates = b
        .candidates
        .iter()
        .map(|(agent, model)| best_of::Candidate {
            agent: PluginRef::parse(agent.as_deref().unwrap_or(&step_agent)),
            model: model.clone().or_else(|| run.agent.model.clone()),
        })
        .collect();
    best_of::run(best_of::BestOf {
        run,
        candidates,
        tie_break: b.tie_break,
        judge: b.judge.clone(),
        discard_losers: b.discard_losers,
        name: step.to_string(),
        workflow: ctx.workflow.name.clone(),
        parallel: ctx.options.parallel,
        timeout: b.timeout,
        on_event: ctx.options.on_event.clone(),
        on_stream_event: ctx.options.on_stream_event.clone(),
    })
    .await
}

/// The merge queue over an earlier fan-out step's branches, in item order.
fn merge_step(
    ctx: &Context,
    step: &str,
    from: &str,
    so_far: &WorkflowResult,
) -> Result<Vec<QueuedBranch>> {
    emit(
        ctx,
        WorkflowEvent::StepStarted {
            step: step.to_string(),
            items: None,
        },
    );
    let items = so_far
        .steps
        .iter()
        .find(|s| s.name == from)
        .map(|s| s.items.as_slice())
        .unwrap_or_default();
    let branches = items
        .iter()
        .filter(|i| i.status != ItemStatus::NotStarted)
        .filter_map(|i| {
            let branch = i.branch.clone()?;
            let work = match i.status {
                ItemStatus::Succeeded => Ok(()),
                _ => Err(i.error.clone().unwrap_or_else(|| "failed".into())),
            };
            Some((branch, work))
        })
        .collect();
    let repo = Repo::discover(
        &std::path::absolute(&ctx.options.cwd).map_err(|e| Error::input(e.to_string()))?,
    )?;
    Ok(merge_queue::land(&repo, branches, |q| {
        emit(ctx, WorkflowEvent::Landing(q.clone()))
    }))
}
