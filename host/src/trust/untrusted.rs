//! The refusal workspace trust gives. A leaf module (it uses nothing else
//! of the crate), so `error` can carry it without depending on trust's
//! readers of config, workflows and dev containers.

use std::path::PathBuf;

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
