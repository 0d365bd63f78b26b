//! Branch strategy: where an agent's commits land. Pure: no I/O.
//!
//! The compatibility matrix (rows: strategy, columns: provider type):
//!
//! | strategy      | bind-mount | isolated | no-sandbox |
//! |---------------|------------|----------|------------|
//! | head          | default    | refused  | default    |
//! | merge-to-head | allowed    | default  | allowed    |
//! | branch        | allowed    | allowed  | allowed    |
//!
//! Where the Rust types can rule a combination out they do: a worktree has
//! no head ([`WorktreeStrategy`]), `run` takes no no-sandbox provider. The
//! rest is refused here, before any side effect.

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

/// The strategies a worktree can have: head has no worktree, so it is not
/// one of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorktreeStrategy {
    MergeToHead,
    Branch(String),
}

impl From<WorktreeStrategy> for BranchStrategy {
    fn from(s: WorktreeStrategy) -> Self {
        match s {
            WorktreeStrategy::MergeToHead => BranchStrategy::MergeToHead,
            WorktreeStrategy::Branch(b) => BranchStrategy::Branch(b),
        }
    }
}

/// What runs the agent, as far as branching cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderType {
    BindMount,
    Isolated,
    /// The agent on the host itself: interactive sessions only.
    NoSandbox,
}

impl From<SandboxKind> for ProviderType {
    fn from(kind: SandboxKind) -> Self {
        match kind {
            SandboxKind::BindMount => ProviderType::BindMount,
            SandboxKind::Isolated => ProviderType::Isolated,
        }
    }
}

/// What the caller asked for, besides the strategy itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The call is an interactive session (the only place for no-sandbox).
    pub interactive: bool,
    /// copyToWorktree was given (it needs a worktree).
    pub copies: bool,
}

/// The strategy a run uses: the requested one if it fits the provider type,
/// else the type's default.
pub fn resolve(
    requested: Option<BranchStrategy>,
    provider: ProviderType,
    provider_name: &str,
    request: Request,
) -> Result<BranchStrategy> {
    if provider == ProviderType::NoSandbox && !request.interactive {
        return Err(Error::input(
            "the no-sandbox provider runs the agent on the host with its permission prompts on, so it is for interactive sessions only (sanddune interactive); an unattended run needs a sandbox provider",
        ));
    }
    let strategy = match (requested, provider) {
        (Some(BranchStrategy::Head), ProviderType::Isolated) => {
            return Err(Error::input(format!(
                "the head branch strategy needs a bind-mount sandbox provider, and `{provider_name}` is isolated (it cannot write to the host directly): use merge-to-head or a branch"
            )));
        }
        (Some(strategy), _) => strategy,
        (None, ProviderType::BindMount | ProviderType::NoSandbox) => BranchStrategy::Head,
        (None, ProviderType::Isolated) => BranchStrategy::MergeToHead,
    };
    if strategy == BranchStrategy::Head && request.copies {
        return Err(Error::input(
            "copyToWorktree needs a worktree, and the head branch strategy works in your repository directly (it has none): choose merge-to-head or a branch, or drop --copy",
        ));
    }
    Ok(strategy)
}

/// A run's id: `<unix seconds>-<pid, hex>-<nth run of this process, hex>`.
/// It names the run's branch, worktree and container labels, so two live
/// runs must never share one: the pid tells processes apart (it is not
/// reused while the process lives, nor within its second), the counter the
/// runs of one process. (16 random bits used to collide: about once in 30
/// batches of 64 runs started in one second.)
pub(crate) fn run_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{secs}-{:x}-{n:x}", std::process::id())
}

/// The source branch a strategy works on.
pub(super) fn source_branch(strategy: &BranchStrategy, target: &str, id: &str) -> String {
    match strategy {
        BranchStrategy::Head => target.to_string(),
        BranchStrategy::MergeToHead => format!("sanddune/run-{id}"),
        BranchStrategy::Branch(branch) => branch.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix() {
        use BranchStrategy::*;
        use ProviderType::*;
        let b = || Some(Branch("feat".into()));
        let (run, tui) = (
            Request::default(),
            Request {
                interactive: true,
                copies: false,
            },
        );
        let cases: &[(
            Option<BranchStrategy>,
            ProviderType,
            Request,
            Option<BranchStrategy>,
        )] = &[
            (None, BindMount, run, Some(Head)),
            (None, Isolated, run, Some(MergeToHead)),
            (Some(Head), BindMount, run, Some(Head)),
            (Some(Head), Isolated, run, None),
            (Some(MergeToHead), BindMount, run, Some(MergeToHead)),
            (Some(MergeToHead), Isolated, run, Some(MergeToHead)),
            (b(), BindMount, run, b()),
            (b(), Isolated, run, b()),
            // no-sandbox: interactive only, head by default.
            (None, NoSandbox, run, None),
            (b(), NoSandbox, run, None),
            (None, NoSandbox, tui, Some(Head)),
            (Some(MergeToHead), NoSandbox, tui, Some(MergeToHead)),
            (b(), NoSandbox, tui, b()),
            (None, BindMount, tui, Some(Head)),
            (None, Isolated, tui, Some(MergeToHead)),
        ];
        for (requested, provider, request, expected) in cases {
            let got = resolve(requested.clone(), *provider, "p", *request).ok();
            assert_eq!(&got, expected, "{requested:?} x {provider:?} x {request:?}");
        }
    }

    #[test]
    fn copy_to_worktree_needs_a_worktree() {
        let copies = Request {
            interactive: false,
            copies: true,
        };
        for requested in [None, Some(BranchStrategy::Head)] {
            let e = resolve(requested, ProviderType::BindMount, "p", copies).unwrap_err();
            assert!(
                e.to_string().contains("copyToWorktree needs a worktree"),
                "{e}"
            );
            assert_eq!(e.exit_code(), 2);
        }
        for requested in [
            BranchStrategy::MergeToHead,
            BranchStrategy::Branch("x".into()),
        ] {
            assert!(resolve(Some(requested), ProviderType::BindMount, "p", copies).is_ok());
        }
        assert_eq!(
            resolve(None, ProviderType::Isolated, "p", copies).unwrap(),
            BranchStrategy::MergeToHead
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        let e = resolve(
            Some(BranchStrategy::Head),
            ProviderType::Isolated,
            "vercel",
            Request::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`vercel` is isolated"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = resolve(
            None,
            ProviderType::NoSandbox,
            "no-sandbox",
            Request::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("interactive sessions only"), "{e}");
    }

    #[test]
    fn a_worktree_strategy_is_never_head() {
        // Compile-time: WorktreeStrategy has no Head; the conversion keeps the rest.
        assert_eq!(
            BranchStrategy::from(WorktreeStrategy::MergeToHead),
            BranchStrategy::MergeToHead
        );
        assert_eq!(
            BranchStrategy::from(WorktreeStrategy::Branch("b".into())),
            BranchStrategy::Branch("b".into())
        );
    }

    #[test]
    fn run_ids_are_unique_across_threads() {
        let threads: Vec<_> = (0..8)
            .map(|_| std::thread::spawn(|| (0..2000).map(|_| run_id()).collect::<Vec<_>>()))
            .collect();
        let mut ids: Vec<String> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let all = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all, "run ids collided");
        let id = run_id();
        assert!(
            id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "usable in a branch and worktree name: {id}"
        );
    }
}
