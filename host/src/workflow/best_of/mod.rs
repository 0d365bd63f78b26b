//! Best-of-N: one prompt, N candidates at once, each in its own sandbox on
//! its own branch (different agents or models if asked); a check in each
//! candidate's sandbox; a tie-break among those that passed; the winner
//! lands by the branch strategy and the others stay on their branches.
//! The candidates are a workflow's items to the live view, `ps`, `logs`
//! and `stop`: each run is named `<name>-<k>` and registered as item
//! `<name>-<k>` of workflow `<name>`. ADR 0030.

mod judge;
mod tie_break;

use std::time::{Duration, Instant};

use serde::Serialize;

pub use judge::Judge;
pub use tie_break::TieBreak;

use super::event::{
    ItemResult, ItemStatus, LabelledEventCallback, WorkflowEvent, WorkflowEventCallback,
};
use super::fan_out::fan_out;
use super::merge_queue::{self, Landing, QueuedBranch};
use crate::error::{Error, Result};
use crate::outcome::Commit;
use crate::plugin::PluginRef;
use crate::run::{
    self, AbortHandle, BranchStrategy, CheckResult, PlannedRun, Prompt, RunOptions, RunResult,
    StructuredOutput, WorkflowItem,
};
use crate::worktree::{DiffStat, Repo};

/// Where best-of's branches live: `sanddune/best-of-<run id>/...`.
pub const BRANCH_PREFIX: &str = "sanddune/best-of-";

/// One candidate: who works on the task.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub agent: PluginRef,
    /// The agent's default when None.
    pub model: Option<String>,
}

/// A best-of-N run.
pub struct BestOf {
    /// The task as one run would do it: the sandbox part, the agent part
    /// (each candidate's agent and model replace its own), where the
    /// winner lands (`strategy`: merge-to-head by default, or a new branch;
    /// head is refused), and the check.
    pub run: RunOptions,
    pub candidates: Vec<Candidate>,
    pub tie_break: TieBreak,
    pub judge: Judge,
    /// Delete the other candidates' branches once the winner has landed.
    pub discard_losers: bool,
    /// Names the candidates (`<name>-<k>`) and the judge (`<name>-judge`).
    pub name: String,
    /// The workflow the candidates are items of in `ps` and the live view:
    /// `name` itself from `sanddune run`, the workflow's from a step.
    pub workflow: String,
    /// At most this many candidates at once.
    pub parallel: usize,
    /// A candidate still working after this long is stopped (timed out).
    pub timeout: Option<Duration>,
    pub on_event: Option<WorkflowEventCallback>,
    pub on_stream_event: Option<LabelledEventCallback>,
}

/// What became of one candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CandidateStatus {
    /// Commits, and the check passed (or there was none).
    Passed,
    CheckFailed,
    /// The agent finished without a commit.
    NoCommits,
    Failed,
    /// Stopped at the best-of's candidate timeout.
    TimedOut,
    Aborted,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateResult {
    /// From 1.
    pub index: usize,
    /// Its run's name: `sanddune logs LABEL`, `sanddune stop LABEL`.
    pub label: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub branch: String,
    pub status: CandidateStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckResult>,
    /// What its branch changed since the task's base.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<DiffStat>,
    pub commits: Vec<Commit>,
    /// Tokens its agent reported, cached ones included.
    pub tokens: u64,
    pub duration_ms: u64,
    /// When it finished, from the start of the best-of.
    pub finished_ms: u64,
    /// Its branch is still there when the best-of ends.
    pub kept: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_file_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_worktree_path: Option<String>,
    /// Its run's structured output, when the task asked for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

impl CandidateResult {
    fn new(
        index: usize,
        label: String,
        agent: String,
        model: Option<String>,
        branch: String,
    ) -> Self {
        Self {
            index,
            label,
            agent,
            model,
            branch,
            status: CandidateStatus::Failed,
            error: None,
            check: None,
            diff: None,
            commits: vec![],
            tokens: 0,
            duration_ms: 0,
            finished_ms: 0,
            kept: false,
            log_file_path: None,
            preserved_worktree_path: None,
            output: None,
        }
    }

    /// Its run's outcome, as the workflow's live view shows an item.
    fn item_result(&self) -> ItemResult {
        let status = match self.status {
            CandidateStatus::Passed => ItemStatus::Succeeded,
            CandidateStatus::Aborted => ItemStatus::Aborted,
            _ => ItemStatus::Failed,
        };
        let error = match (&self.error, &self.check) {
            (Some(e), _) => Some(e.clone()),
            (None, Some(check)) if !check.passed => Some(format!("check {}", check.verdict())),
            _ if self.status == CandidateStatus::NoCommits => Some("no commits".into()),
            _ => None,
        };
        ItemResult {
            index: Some(self.index),
            item: None,
            branch: Some(self.branch.clone()),
            status,
            error,
            commits: self.commits.clone(),
            output: None,
            preserved_worktree_path: self.preserved_worktree_path.clone(),
            pushed: None,
            runs: vec![],
            tokens: self.tokens,
            duration_ms: self.duration_ms,
        }
    }
}

impl BestOfResult {
    /// The winner's structured output, which a workflow's later steps read.
    pub fn output(&self) -> Option<&serde_json::Value> {
        let index = self.winner.as_ref()?.index;
        self.candidates.get(index - 1)?.output.as_ref()
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Winner {
    pub index: usize,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BestOfResult {
    pub name: String,
    /// The commit every candidate started from.
    pub base: String,
    /// Where the winner lands.
    pub target: String,
    pub tie_break: TieBreak,
    pub candidates: Vec<CandidateResult>,
    pub winner: Option<Winner>,
    /// The judge's run, when the tie-break was a judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<RunResult>,
    pub landing: Option<QueuedBranch>,
    /// The winner landed.
    pub ok: bool,
    /// Set when the best-of was aborted; every branch is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    /// Why nothing landed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Run the candidates, judge them, land the winner. Bad input is an `Err`
/// with nothing created (every candidate and the judge are planned first);
/// what happens after is in the result.
pub async fn run(b: BestOf) -> Result<BestOfResult> {
    let repo = Repo::discover(
        &std::path::absolute(&b.run.sandbox.cwd).map_err(|e| Error::input(e.to_string()))?,
    )?;
    let target = check_input(&b, &repo)?;
    let base = repo.branch_head(&repo.current_branch()?)?;
    let id = run::run_id();
    let planned = plan_all(&b, &id).await?;

    let emit = |event: WorkflowEvent| {
        if let Some(on_event) = &b.on_event {
            on_event(&event);
        }
    };
    emit(WorkflowEvent::StepStarted {
        step: b.name.clone(),
        items: Some(planned.len()),
    });
    let started = Instant::now();
    let candidates = fan_out(
        planned,
        b.parallel,
        |_, (plan, abort, c)| run_candidate(&b, plan, abort, c, (&repo, &base), started, &emit),
        |i, panic| CandidateResult {
            error: Some(format!("the candidate's task panicked: {panic}")),
            ..CandidateResult::new(
                i + 1,
                format!("{}-{}", b.name, i + 1),
                String::new(),
                None,
                String::new(),
            )
        },
    )
    .await;

    let mut result = BestOfResult {
        name: b.name.clone(),
        base: base.clone(),
        target,
        tie_break: b.tie_break,
        candidates,
        winner: None,
        judge: None,
        landing: None,
        ok: false,
        aborted: None,
        error: None,
    };
    let parent = &b.run.sandbox.abort;
    if parent.is_aborted() {
        return Ok(finish(result, &repo, Some(parent.reason())));
    }
    let passing: Vec<&CandidateResult> = result
        .candidates
        .iter()
        .filter(|c| c.status == CandidateStatus::Passed)
        .collect();
    if passing.is_empty() {
        result.error = Some(match &b.run.check {
            Some(check) => format!(
                "no candidate passed the check `{}`: nothing landed",
                check.command
            ),
            None => "no candidate finished with commits: nothing landed".into(),
        });
        return Ok(finish(result, &repo, None));
    }
    let chosen = match b.tie_break {
        TieBreak::Judge if passing.len() > 1 => {
            let (judged, run) = ask_judge(&b, &id, (&repo, &base), &passing, &emit).await;
            result.judge = run;
            match judged {
                Judged::Chose(index, reason) => Ok((index, format!("the judge: {reason}"))),
                Judged::Failed(e) => Err(e),
                Judged::Aborted(reason) => return Ok(finish(result, &repo, Some(reason))),
            }
        }
        rule => Ok(tie_break::choose(&passing, rule)),
    };
    let (index, reason) = match chosen {
        Ok(chosen) => chosen,
        Err(e) => {
            result.error = Some(format!("{e}: nothing landed"));
            return Ok(finish(result, &repo, None));
        }
    };
    if parent.is_aborted() {
        return Ok(finish(result, &repo, Some(parent.reason())));
    }
    result.winner = Some(Winner { index, reason });
    let winner = result.candidates[index - 1].branch.clone();
    let landing = land(&repo, &b.run.strategy, &winner);
    emit(WorkflowEvent::Landing(landing.clone()));
    result.ok = matches!(landing.landing, Landing::Landed { .. } | Landing::UpToDate);
    if result.ok {
        let _ = repo.delete_branch(&winner);
        if b.discard_losers {
            for c in &result.candidates {
                if c.branch != winner && c.preserved_worktree_path.is_none() {
                    let _ = repo.delete_branch(&c.branch);
                }
            }
        }
    } else {
        result.error = Some(format!(
            "the winner's branch `{winner}` did not land: {:?}",
            landing.landing
        ));
    }
    result.landing = Some(landing);
    Ok(finish(result, &repo, None))
}

/// What can be refused before anything is planned; the branch the winner
/// lands on.
fn check_input(b: &BestOf, repo: &Repo) -> Result<String> {
    if b.candidates.len() < 2 {
        return Err(Error::input("best-of needs at least 2 candidates"));
    }
    if b.run.resume_session.is_some() {
        return Err(Error::input(
            "best-of cannot resume a session: each candidate starts its own",
        ));
    }
    match &b.run.strategy {
        Some(BranchStrategy::Head) => Err(Error::input(
            "best-of cannot use the head strategy: the candidates cannot all work in your checkout; \
             the winner is merged into it (merge-to-head, the default) or put on a new --branch",
        )),
        Some(BranchStrategy::Branch(name)) if repo.branch_exists(name) => Err(Error::input(
            format!("the branch `{name}` exists already: best-of puts the winner on a new branch"),
        )),
        Some(BranchStrategy::Branch(name)) => Ok(name.clone()),
        _ => repo.current_branch(),
    }
}

/// Every candidate planned, each with its abort handle and its result to
/// fill in; the judge planned with a stand-in prompt, so that its key and
/// env are checked too. Nothing is created.
async fn plan_all(b: &BestOf, id: &str) -> Result<Vec<(PlannedRun, AbortHandle, CandidateResult)>> {
    let n = b.candidates.len();
    let mut planned = Vec::with_capacity(n);
    for (i, c) in b.candidates.iter().enumerate() {
        let index = i + 1;
        let label = format!("{}-{index}", b.name);
        let model = c.model.clone().or_else(|| b.run.agent.model.clone());
        let branch = branch_name(id, index, &c.agent, model.as_deref());
        let options = candidate_options(b, (&label, &branch), c, model.clone(), n);
        let abort = options.sandbox.abort.clone();
        let plan = run::plan(options).await?;
        let result =
            CandidateResult::new(index, label, plan.agent_name().to_string(), model, branch);
        planned.push((plan, abort, result));
    }
    if b.tie_break == TieBreak::Judge {
        let options = judge_options(b, id, Prompt::Inline("check".into()), vec![1, 2]);
        drop(run::plan(options).await?);
    }
    Ok(planned)
}

/// One candidate's run, reported as an item; stopped at the timeout.
async fn run_candidate(
    b: &BestOf,
    plan: PlannedRun,
    abort: AbortHandle,
    mut c: CandidateResult,
    (repo, base): (&Repo, &str),
    started: Instant,
    emit: &impl Fn(WorkflowEvent),
) -> CandidateResult {
    emit(WorkflowEvent::ItemStarted {
        label: c.label.clone(),
        branch: Some(c.branch.clone()),
    });
    let began = Instant::now();
    let timed_out = b
        .timeout
        .map(|t| format!("timed out after {} s", t.as_secs()));
    let _timer = b.timeout.zip(timed_out.clone()).map(|(t, reason)| {
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::time::sleep(t).await;
            abort.abort(reason);
        }))
    });
    let outcome = plan.run().await;
    settle(&mut c, outcome, repo, base);
    if c.status == CandidateStatus::Aborted
        && timed_out.is_some_and(|t| c.error.as_deref().is_some_and(|e| e.contains(&t)))
    {
        c.status = CandidateStatus::TimedOut;
    }
    c.duration_ms = began.elapsed().as_millis() as u64;
    c.finished_ms = started.elapsed().as_millis() as u64;
    emit(WorkflowEvent::ItemFinished {
        label: c.label.clone(),
        result: c.item_result(),
    });
    c
}

/// What the judge said.
enum Judged {
    Chose(usize, String),
    /// Why there is no choice.
    Failed(String),
    Aborted(String),
}

/// The judge's run over the passing candidates' diffs, shown as an item;
/// its branch is deleted after (unless an abort kept its worktree).
async fn ask_judge(
    b: &BestOf,
    id: &str,
    (repo, base): (&Repo, &str),
    passing: &[&CandidateResult],
    emit: &impl Fn(WorkflowEvent),
) -> (Judged, Option<RunResult>) {
    let label = format!("{}-judge", b.name);
    emit(WorkflowEvent::StepStarted {
        step: label.clone(),
        items: None,
    });
    let task = task_text(&b.run.agent.prompt);
    let prompt = judge::prompt(&b.judge, &task, repo, base, passing);
    let indices = passing.iter().map(|c| c.index).collect();
    let options = judge_options(b, id, Prompt::Inline(prompt), indices);
    let branch = judge_branch(id);
    emit(WorkflowEvent::ItemStarted {
        label: label.clone(),
        branch: Some(branch.clone()),
    });
    let began = Instant::now();
    let outcome = run::run(options).await;
    emit(WorkflowEvent::ItemFinished {
        label,
        result: judge_item(&outcome, &branch, began),
    });
    let _ = repo.delete_branch(&branch);
    match outcome {
        Ok(run) => {
            let judged = match run.output.as_ref().and_then(judge::answer) {
                Some((index, reason)) => Judged::Chose(index, reason),
                None => Judged::Failed("the judge gave no answer".into()),
            };
            (judged, Some(run))
        }
        Err(Error::Aborted(reason)) => (Judged::Aborted(reason), None),
        Err(e) => (Judged::Failed(format!("the judge failed: {e}")), None),
    }
}

/// The end: which branches are still there, and the reason an abort gave.
fn finish(mut result: BestOfResult, repo: &Repo, aborted: Option<String>) -> BestOfResult {
    for c in &mut result.candidates {
        // A candidate with nothing on its branch leaves nothing behind.
        if c.commits.is_empty()
            && c.preserved_worktree_path.is_none()
            && repo.branch_exists(&c.branch)
        {
            let _ = repo.delete_branch(&c.branch);
        }
        c.kept = !c.branch.is_empty() && repo.branch_exists(&c.branch);
    }
    result.aborted = aborted;
    result
}

/// Fill in a candidate from its run's outcome.
fn settle(c: &mut CandidateResult, outcome: Result<RunResult>, repo: &Repo, base: &str) {
    match outcome {
        Ok(run) => {
            c.commits = run.commits.clone();
            c.check = run.check.clone();
            c.tokens = run.tokens();
            c.log_file_path = run.log_file_path.clone();
            c.preserved_worktree_path = run.preserved_worktree_path.clone();
            c.output = run.output.clone();
            c.status = if run.commits.is_empty() {
                CandidateStatus::NoCommits
            } else if run.check.as_ref().is_some_and(|check| !check.passed) {
                CandidateStatus::CheckFailed
            } else {
                CandidateStatus::Passed
            };
        }
        Err(e) => {
            c.status = if matches!(e, Error::Aborted(_)) {
                CandidateStatus::Aborted
            } else {
                CandidateStatus::Failed
            };
            if let Error::Output(o) = &e {
                c.commits = o.commits.clone();
            }
            c.error = Some(e.to_string());
        }
    }
    if repo.branch_exists(&c.branch) {
        c.diff = repo.diff_stat(base, &c.branch).ok();
    }
}

/// `sanddune/best-of-<id>/<k>-<agent>[-<model>]`, with what git refuses in
/// a branch name made `-`.
fn branch_name(id: &str, index: usize, agent: &PluginRef, model: Option<&str>) -> String {
    let agent = match agent {
        PluginRef::Builtin(name) => name.clone(),
        PluginRef::File(path) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".into()),
    };
    let mut who = agent;
    if let Some(model) = model {
        who.push('-');
        who.push_str(model);
    }
    let who: String = who
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || "._-".contains(ch) {
                ch
            } else {
                '-'
            }
        })
        .take(60)
        .collect();
    let who = who.trim_matches(['.', '-']).replace("..", "-");
    format!("{BRANCH_PREFIX}{id}/{index}-{who}")
}

/// A candidate's run: the task with its agent and model, on its branch,
/// registered as an item, stopped with the others or alone.
fn candidate_options(
    b: &BestOf,
    (label, branch): (&str, &str),
    c: &Candidate,
    model: Option<String>,
    n: usize,
) -> RunOptions {
    let mut options = b.run.clone();
    options.strategy = Some(BranchStrategy::Branch(branch.to_string()));
    options.agent.agent = c.agent.clone();
    options.agent.model = model;
    itemize(&mut options, b, label, n.min(b.parallel.max(1)));
    options
}

/// The judge's run: a structured answer, on a branch of its own that is
/// deleted after.
fn judge_options(b: &BestOf, id: &str, prompt: Prompt, passing: Vec<usize>) -> RunOptions {
    let mut options = b.run.clone();
    let first = &b.candidates[0];
    options.agent.agent = b.judge.agent.clone().unwrap_or_else(|| first.agent.clone());
    options.agent.model = b
        .judge
        .model
        .clone()
        .or_else(|| first.model.clone())
        .or_else(|| b.run.agent.model.clone());
    options.agent.prompt = prompt;
    options.agent.prompt_args = vec![];
    options.agent.max_iterations = 1;
    options.agent.output = Some(StructuredOutput {
        tag: judge::TAG.into(),
        schema: judge::schema(&passing),
    });
    options.check = None;
    options.strategy = Some(BranchStrategy::Branch(judge_branch(id)));
    itemize(&mut options, b, &format!("{}-judge", b.name), 1);
    options
}

/// The judge's run as the live view shows an item.
fn judge_item(outcome: &Result<RunResult>, branch: &str, began: Instant) -> ItemResult {
    let (status, error, tokens) = match outcome {
        Ok(run) => (ItemStatus::Succeeded, None, run.tokens()),
        Err(e @ Error::Aborted(_)) => (ItemStatus::Aborted, Some(e.to_string()), 0),
        Err(e) => (ItemStatus::Failed, Some(e.to_string()), 0),
    };
    ItemResult {
        index: None,
        item: None,
        branch: Some(branch.to_string()),
        status,
        error,
        commits: vec![],
        output: outcome.as_ref().ok().and_then(|r| r.output.clone()),
        preserved_worktree_path: None,
        pushed: None,
        runs: vec![],
        tokens,
        duration_ms: began.elapsed().as_millis() as u64,
    }
}

/// The judge's branch, deleted after it has answered.
fn judge_branch(id: &str) -> String {
    format!("{BRANCH_PREFIX}{id}/judge")
}

/// Name the run `label`, register it as that item of the best-of, give it
/// an abort of its own under the best-of's, and label its agent's events.
fn itemize(options: &mut RunOptions, b: &BestOf, label: &str, side_by_side: usize) {
    let abort = b.run.sandbox.abort.child();
    options.sandbox.abort = abort.clone();
    options.agent.abort = abort;
    options.sandbox.name = Some(label.to_string());
    options.sandbox.workflow_item = Some(WorkflowItem {
        workflow: b.workflow.clone(),
        item: label.to_string(),
    });
    options.sandbox.side_by_side = side_by_side as u32;
    if let Some(on_stream) = &b.on_stream_event {
        let (on_stream, label) = (on_stream.clone(), label.to_string());
        options.agent.on_event = Some(std::sync::Arc::new(move |event| on_stream(&label, event)));
    }
}

/// The task's text for the judge (a prompt file read as the agent got it,
/// template arguments aside).
fn task_text(prompt: &Prompt) -> String {
    match prompt {
        Prompt::Inline(text) => text.clone(),
        Prompt::File(path) => std::fs::read_to_string(path).unwrap_or_else(|e| {
            format!(
                "(the prompt file {} could not be read: {e})",
                path.display()
            )
        }),
    }
}

/// Land the winner's branch: merged into the checked-out branch
/// (merge-to-head), or made the new branch the strategy names.
fn land(repo: &Repo, strategy: &Option<BranchStrategy>, winner: &str) -> QueuedBranch {
    match strategy {
        Some(BranchStrategy::Branch(name)) => {
            let landing = repo
                .branch_head(winner)
                .and_then(|tip| repo.create_branch(name, &tip).map(|()| tip))
                .map_or_else(
                    |e| Landing::Failed {
                        error: e.to_string(),
                    },
                    |commit| Landing::Landed { commit },
                );
            QueuedBranch {
                branch: winner.to_string(),
                landing,
            }
        }
        _ => merge_queue::land(repo, vec![(winner.to_string(), Ok(()))], |_| {})
            .pop()
            .expect("one branch in, one out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_say_who_and_stay_valid() {
        let builtin = PluginRef::Builtin("claude-code".into());
        assert_eq!(
            branch_name("1-a-0", 2, &builtin, Some("opus")),
            "sanddune/best-of-1-a-0/2-claude-code-opus"
        );
        assert_eq!(
            branch_name("1-a-0", 1, &builtin, Some("FAKE:lines:3 ~^..x")),
            "sanddune/best-of-1-a-0/1-claude-code-FAKE-lines-3----x"
        );
        let file = PluginRef::File("./plugins/my agent.wasm".into());
        assert_eq!(
            branch_name("i", 3, &file, None),
            "sanddune/best-of-i/3-my-agent"
        );
        assert!(
            git2::Branch::name_is_valid(&branch_name("i", 1, &builtin, Some("a..b@{c}"))).unwrap()
        );
    }
}
