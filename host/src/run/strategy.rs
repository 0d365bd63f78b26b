//! Branch strategy: where an agent's commits land. Pure: no I/O.

use crate::error::{Error, Result};
use crate::plugin::sandbox::SandboxKind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BranchStrategy {
    /// Work directly in the host's working directory, on its current branch.
    Head,
    /// Work on a temporary branch in a worktree, merged into HEAD at the end.
    MergeToHead,
    /// Work on this branch in a worktree; the branch is kept.
    Branch(String),
}

/// The strategy a run uses: the requested one if it fits the sandbox
/// provider's kind, else the kind's default (bind-mount: head, isolated:
/// merge-to-head).
pub fn resolve(
    requested: Option<BranchStrategy>,
    kind: SandboxKind,
    provider: &str,
) -> Result<BranchStrategy> {
    match (requested, kind) {
        (Some(BranchStrategy::Head), SandboxKind::Isolated) => Err(Error::input(format!(
            "the head branch strategy needs a bind-mount sandbox provider, and `{provider}` is isolated (it cannot write to the host directly): use merge-to-head or a branch"
        ))),
        (Some(strategy), _) => Ok(strategy),
        (None, SandboxKind::BindMount) => Ok(BranchStrategy::Head),
        (None, SandboxKind::Isolated) => Ok(BranchStrategy::MergeToHead),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix() {
        use BranchStrategy::*;
        use SandboxKind::*;
        let b = || Some(Branch("feat".into()));
        let cases: &[(Option<BranchStrategy>, SandboxKind, Option<BranchStrategy>)] = &[
            (None, BindMount, Some(Head)),
            (None, Isolated, Some(MergeToHead)),
            (Some(Head), BindMount, Some(Head)),
            (Some(Head), Isolated, None),
            (Some(MergeToHead), BindMount, Some(MergeToHead)),
            (Some(MergeToHead), Isolated, Some(MergeToHead)),
            (b(), BindMount, b()),
            (b(), Isolated, b()),
        ];
        for (requested, kind, expected) in cases {
            let got = resolve(requested.clone(), *kind, "p").ok();
            assert_eq!(&got, expected, "{requested:?} x {kind:?}");
        }
    }

    #[test]
    fn isolated_head_names_the_provider() {
        let e = resolve(Some(BranchStrategy::Head), SandboxKind::Isolated, "vercel").unwrap_err();
        assert!(e.to_string().contains("`vercel` is isolated"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }
}
