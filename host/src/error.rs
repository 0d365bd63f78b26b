//! The errors a caller can tell apart, and the CLI's exit code for each.

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
    Output(Box<crate::run::outcome::OutputError>),
    /// The repository's config makes the host act and the user has not
    /// approved it (workspace trust): what changed since the approved
    /// version. Nothing was created.
    #[error("{0}")]
    Untrusted(Box<crate::trust::untrusted::Untrusted>),
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
