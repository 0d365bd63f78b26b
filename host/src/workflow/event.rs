//! What a workflow says as it goes and what each of its items did: the
//! events the live view draws and the item results, shared by the engine
//! and best-of-N.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::merge_queue::QueuedBranch;
use crate::error::Error;
use crate::run::{Commit, RunResult, StreamEvent};

/// A workflow event, for progress per branch.
#[derive(Clone, Debug)]
pub enum WorkflowEvent {
    StepStarted {
        step: String,
        items: Option<usize>,
    },
    ItemStarted {
        label: String,
        branch: Option<String>,
    },
    ItemFinished {
        label: String,
        result: ItemResult,
    },
    Landing(QueuedBranch),
}

pub type WorkflowEventCallback = Arc<dyn Fn(&WorkflowEvent) + Send + Sync>;
/// An agent stream event with the label of the run it came from.
pub type LabelledEventCallback = Arc<dyn Fn(&str, &StreamEvent) + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ItemStatus {
    Succeeded,
    Failed,
    Aborted,
    /// Abort came before it started.
    NotStarted,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemResult {
    /// The item's position from 1 (fan-out only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<Value>,
    /// The source branch for a fan-out item; where the commits are otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    pub status: ItemStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub commits: Vec<Commit>,
    /// The structured output of the last run that asked for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_worktree_path: Option<String>,
    /// What the host pushed after the item's runs (`push` in the step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed: Option<Box<crate::run::Pushed>>,
    /// The run results, one per agent run of the step.
    pub runs: Vec<RunResult>,
    /// Tokens the agent reported over the runs that ended (cached ones
    /// included).
    pub tokens: u64,
    /// From the item's start to its end.
    pub duration_ms: u64,
}

impl ItemResult {
    pub(super) fn new(index: Option<usize>, item: Option<Value>, branch: Option<String>) -> Self {
        Self {
            index,
            item,
            branch,
            status: ItemStatus::Succeeded,
            error: None,
            commits: vec![],
            output: None,
            preserved_worktree_path: None,
            pushed: None,
            runs: vec![],
            tokens: 0,
            duration_ms: 0,
        }
    }

    pub(super) fn fail(&mut self, e: &Error) {
        self.status = if matches!(e, Error::Aborted(_)) {
            ItemStatus::Aborted
        } else {
            ItemStatus::Failed
        };
        if let Error::Output(o) = e {
            self.commits.extend(o.commits.iter().cloned());
        }
        self.error = Some(e.to_string());
    }
}
