//! What a run produced that its errors carry too: the commits, and why a
//! structured output was refused. A leaf module at the bottom of the crate
//! (it uses nothing else of it), so `error` can name it.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Commit {
    pub sha: String,
}

/// Why a run's structured output was refused, with what the caller needs
/// to recover: the agent's raw text and the commits the run made anyway.
#[derive(Debug)]
pub struct OutputError {
    pub message: String,
    /// The agent's text output over all iterations.
    pub raw: String,
    pub commits: Vec<Commit>,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}
