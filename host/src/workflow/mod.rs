//! Workflows: several agent runs composed declaratively, the way a backlog
//! is worked: plan, implement each task on its own branch at once, review,
//! land the branches. A workflow is a list of steps (ADR 0011):
//!
//! - an agent step runs one agent, or several one after another in one
//!   sandbox (`then`: implement, then review), with the options of
//!   `sanddune run`; it may ask for a structured output, which later steps
//!   read through value references ([`refs`]);
//! - with `forEach` it fans out over a list from an earlier output, each
//!   item on its own branch, at most `parallel` at once ([`fan_out`]);
//! - a merge step lands the branches of a fan-out step through the merge
//!   queue ([`merge_queue`]).
//!
//! Best-of-N ([`best_of`]) is the same machinery on one task: N candidates
//! at once, judged, the winner landed by the queue.
//!
//! Files live in `.sanddune/workflows/<name>.toml` ([`file`]); the library
//! builds the same [`Workflow`] in code and runs it with [`Workflow::run`].

pub mod best_of;
mod engine;
mod event;
pub mod fan_out;
pub mod file;
pub mod merge_queue;
pub mod refs;

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use engine::{StepResult, WorkflowOptions, WorkflowResult};
pub use event::{
    ItemResult, ItemStatus, LabelledEventCallback, WorkflowEvent, WorkflowEventCallback,
};
pub use fan_out::{default_parallel, fan_out};
pub use merge_queue::{Landing, QueuedBranch};

use crate::run::structured::StructuredOutput;
use crate::trust::{Item, WorkflowEffects};

/// Where a repository keeps its workflow files.
pub const WORKFLOWS_DIR: &str = ".sanddune/workflows";

/// A workflow: named steps run in order.
#[derive(Clone, Debug)]
pub struct Workflow {
    pub name: String,
    pub description: String,
    /// Workflow arguments and their defaults (`--arg KEY=VALUE` overrides
    /// them; an undeclared key is refused).
    pub args: Vec<(String, String)>,
    pub defaults: Defaults,
    pub steps: Vec<Step>,
    /// Where relative prompt and schema files resolve: the config directory.
    pub dir: PathBuf,
}

/// What every agent run gets unless its step says otherwise.
#[derive(Clone, Debug, Default)]
pub struct Defaults {
    pub sandbox: Option<String>,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub max_iterations: Option<u32>,
    pub sandbox_options: Vec<(String, String)>,
    pub agent_options: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
}

#[derive(Clone, Debug)]
pub enum StepKind {
    Agent(AgentStep),
    /// Land the branches of this earlier fan-out step, one at a time.
    Merge {
        from: String,
    },
}

/// Where an agent step's commits go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepStrategy {
    /// The sandbox provider's default branch strategy (one run only).
    Default,
    Head,
    MergeToHead,
    /// A branch; a template with value references (`{{item.branch}}`).
    Branch(String),
}

#[derive(Clone, Debug)]
pub struct AgentStep {
    pub sandbox: Option<String>,
    pub sandbox_options: Vec<(String, String)>,
    /// A reference to a list in an earlier output: one branch per item.
    pub for_each: Option<String>,
    pub strategy: StepStrategy,
    /// Agent runs, one after another in one sandbox; at least one.
    pub runs: Vec<AgentRun>,
    /// Run the step's one run as best-of-N candidates (no forEach, no then).
    pub best_of: Option<Box<BestOfStep>>,
    /// Push each item's branch from the host once its runs are done with
    /// commits (not a best-of).
    pub push: Option<crate::run::PushTo>,
}

/// A best-of step: N candidates of the step's run at once, judged, the
/// winner landed by the step's strategy (merge-to-head, or a new branch).
#[derive(Clone, Debug)]
pub struct BestOfStep {
    /// Each candidate's agent and model; None: the step's.
    pub candidates: Vec<(Option<String>, Option<String>)>,
    pub check: Option<crate::run::Check>,
    pub tie_break: best_of::TieBreak,
    pub judge: best_of::Judge,
    pub discard_losers: bool,
    /// A candidate still working after this long is stopped.
    pub timeout: Option<std::time::Duration>,
}

/// One agent run inside a step: the options of `sanddune run`.
#[derive(Clone, Debug)]
pub struct AgentRun {
    pub name: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub prompt: RunPrompt,
    /// Prompt arguments; values may hold value references.
    pub prompt_args: Vec<(String, String)>,
    pub max_iterations: Option<u32>,
    pub idle_timeout_secs: Option<u64>,
    pub completion_signals: Vec<String>,
    pub agent_options: Vec<(String, String)>,
    pub output: Option<StructuredOutput>,
}

#[derive(Clone, Debug)]
pub enum RunPrompt {
    /// Passed literally, like `--prompt`.
    Inline(String),
    /// A prompt template, relative to [`Workflow::dir`].
    File(PathBuf),
}

impl Workflow {
    /// What this workflow's file makes the host do, for workspace trust:
    /// its mounts, and the dev containers its options name.
    pub fn host_effects(&self, root: &std::path::Path) -> WorkflowEffects {
        let source = format!("{WORKFLOWS_DIR}/{}.toml", self.name);
        let steps = self.steps.iter().filter_map(|s| match &s.kind {
            StepKind::Agent(a) => Some((format!("step `{}`", s.name), a)),
            StepKind::Merge { .. } => None,
        });
        let options = std::iter::once(("defaults".to_string(), &self.defaults.sandbox_options))
            .chain(steps.map(|(name, a)| (name, &a.sandbox_options)));
        let mut devcontainers = BTreeSet::new();
        let mut effects = WorkflowEffects::default();
        for (whose, options) in options {
            for (key, value) in options {
                if key == "mount" {
                    effects.items.push(Item {
                        source: source.clone(),
                        what: format!("{whose} sandboxOptions mount = {value}"),
                    });
                }
            }
            crate::trust::named_devcontainers(root, options, &mut devcontainers);
        }
        effects.devcontainers = devcontainers.into_iter().collect();
        effects
    }
}

/// What every workflow file of the repository makes the host do (`sanddune
/// trust`).
pub fn every_host_effect(root: &std::path::Path) -> crate::error::Result<Vec<WorkflowEffects>> {
    file::list(root)?
        .into_iter()
        .map(|(name, _)| Ok(file::load(root, Some(&name))?.host_effects(root)))
        .collect()
}
