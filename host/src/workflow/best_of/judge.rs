//! The judge agent: one more agent run that reads the passing candidates'
//! diffs and answers with the index of the best, through the structured
//! output machinery (`<best-of>{"best": K, "reason": "..."}</best-of>`,
//! checked against a schema that allows only the passing indices).

use serde_json::{Value, json};

use super::CandidateResult;
use crate::worktree::Repo;

/// The structured output's tag.
pub const TAG: &str = "best-of";
/// Each candidate's diff is cut at this many bytes in the judge's prompt ...
const DIFF_BYTES: usize = 64 * 1024;
/// ... and all of them at this many.
const ALL_DIFFS_BYTES: usize = 256 * 1024;

/// Who judges, and what they are told besides the diffs.
#[derive(Clone, Debug, Default)]
pub struct Judge {
    /// The judge's agent provider; the first candidate's when None.
    pub agent: Option<crate::plugin::PluginRef>,
    pub model: Option<String>,
    /// Put before everything else in the judge's prompt.
    pub instructions: Option<String>,
}

/// The schema of the judge's answer: `best` is one of `passing`.
pub fn schema(passing: &[usize]) -> Value {
    json!({
        "type": "object",
        "required": ["best"],
        "properties": {
            "best": {"enum": passing},
            "reason": {"type": "string"}
        }
    })
}

/// The judge's prompt: the instructions, the task, each passing candidate's
/// diff (cut to size), and how to answer.
pub fn prompt(
    judge: &Judge,
    task: &str,
    repo: &Repo,
    base: &str,
    passing: &[&CandidateResult],
) -> String {
    let mut text = String::new();
    if let Some(instructions) = &judge.instructions {
        text.push_str(instructions.trim_end());
        text.push_str("\n\n");
    }
    text.push_str(
        "You are judging candidate solutions of one task, made by coding agents. \
         Read the task and each candidate's diff, and choose the one that solves the \
         task best: correct first, then simple and clear. Do not change any file.\n\n",
    );
    text.push_str("## The task\n\n");
    text.push_str(task.trim_end());
    text.push_str("\n\n");
    let mut budget = ALL_DIFFS_BYTES;
    for c in passing {
        let (patch, cut) = repo
            .diff_patch(base, &c.branch, DIFF_BYTES.min(budget))
            .unwrap_or_else(|e| (format!("(the diff could not be read: {e})"), false));
        budget = budget.saturating_sub(patch.len());
        let lines = c.diff.map_or(0, |d| d.lines());
        text.push_str(&format!(
            "## Candidate {} ({}{}): {lines} changed lines\n\n```diff\n{}{}```\n\n",
            c.index,
            c.agent,
            c.model
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default(),
            patch,
            if cut { "... (cut)\n" } else { "" },
        ));
    }
    let indices: Vec<String> = passing.iter().map(|c| c.index.to_string()).collect();
    text.push_str(&format!(
        "Answer with the best candidate's number ({}) and one sentence why, as the last \
         thing you write, exactly in this form:\n<{TAG}>{{\"best\": N, \"reason\": \"...\"}}</{TAG}>\n",
        indices.join(", ")
    ));
    text
}

/// The judge's answer: the index it chose and its reason.
pub fn answer(output: &Value) -> Option<(usize, String)> {
    let best = output.get("best")?.as_u64()? as usize;
    let reason = output
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("the judge gave no reason")
        .to_string();
    Some((best, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_allows_only_the_passing_indices() {
        let schema = schema(&[2, 3]);
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&json!({"best": 3, "reason": "smaller"})));
        assert!(!validator.is_valid(&json!({"best": 1})));
        assert!(!validator.is_valid(&json!({"reason": "no pick"})));
        assert_eq!(
            answer(&json!({"best": 3, "reason": "smaller"})),
            Some((3, "smaller".to_string()))
        );
    }
}
