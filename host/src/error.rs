//! The errors a caller can tell apart, and the CLI's exit code for each.

use std::path::PathBuf;

/// Why sanddune stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller asked for something that cannot work (a flag, a file, a
    /// plugin that does not fit). Nothing was changed.
    #[error("{0}")]
    Input(String),
    /// A plugin failed, was refused a capability, or was stopped for
    /// exceeding its limits.
    #[error("{0}")]
    Plugin(String),
    /// The agent reported failure or ended without a result.
    #[error("{0}")]
    Agent(String),
    /// A lifecycle hook failed or timed out; the setup stopped there.
    #[error("{0}")]
    Hook(String),
    /// The agent's structured output was missing or did not match the
    /// schema; carries its raw text and the run's commits.
    #[error("{0}")]
    Output(Box<crate::outcome::OutputError>),
    /// The repository's config makes the host act and the user has not
    /// approved it (workspace trust): what changed since the approved
    /// version. Nothing was created.
    #[error("{0}")]
    Untrusted(Box<Untrusted>),
    /// The run was cancelled; the reason is the caller's, verbatim.
    #[error("{0}")]
    Aborted(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Error {
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }

    /// Process exit code: 2 bad input, 130 aborted, 1 anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) | Error::Untrusted(_) => 2,
            Error::Aborted(_) => 130,
            _ => 1,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Host-effective config that is not approved: what it is, against the
/// version last approved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Untrusted {
    pub repo: PathBuf,
    /// Items not in the approval record (the reason for the refusal).
    pub added: Vec<String>,
    /// Approved items that are gone (shown for context).
    pub removed: Vec<String>,
}

impl Untrusted {
    /// The diff against the approved version, one `+`/`-` line an item.
    pub fn diff(&self) -> String {
        let added = self.added.iter().map(|i| format!("+ {i}"));
        let removed = self.removed.iter().map(|i| format!("- {i}"));
        added.chain(removed).collect::<Vec<_>>().join("\n")
    }
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the config in {} makes the host act, and this is not what you approved (an agent can edit these files):\n{}\nnothing was started: approve it with `sanddune trust` (`sanddune trust --show` prints it), or pass --trust",
            self.repo.display(),
            self.diff()
        )
    }
}
