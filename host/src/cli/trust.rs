//! Workspace trust at the command line (ADR 0026): `sanddune trust`, and
//! the gate `run`, `workflow run` and `interactive` pass before they read
//! the config for real. The library refuses what is not approved; here the
//! user approves it: `--trust`, a y/N question at a terminal, or
//! `sanddune trust` beforehand.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::{Error, Result};
use crate::trust::{self, Scope, TrustPolicy};
use crate::worktree::Repo;

#[derive(Args)]
pub struct TrustArgs {
    /// Print what the repository's config makes the host do, and what
    /// changed since you approved it; approve nothing.
    #[arg(long)]
    show: bool,
    /// The repository.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

/// `sanddune trust [--show]`: approve everything the repository's config
/// makes the host do (every workflow, every dev container file).
pub fn trust(args: TrustArgs) -> Result<()> {
    let repo = Repo::discover(&args.cwd)?;
    let root = repo.root();
    let workflows = crate::workflow::every_host_effect(root)?;
    let items = trust::host_effects(
        root,
        &Scope::Repository {
            workflows: &workflows,
        },
    )?;
    if items.is_empty() {
        println!(
            "{}: the config makes the host do nothing; there is nothing to approve",
            root.display()
        );
        return Ok(());
    }
    let changed = trust::unapproved(root, &items)?;
    if args.show {
        for item in &items {
            println!("{item}");
        }
        match changed {
            None => println!("(approved)"),
            Some(u) => println!("not approved; since the approved version:\n{}", u.diff()),
        }
        return Ok(());
    }
    let path = trust::approve(root, &items)?;
    for item in &items {
        println!("{item}");
    }
    println!("approved (recorded in {})", path.display());
    Ok(())
}

/// The gate: the policy for the library when the repository's config in
/// `scope` makes the host do nothing new since the user approved it, or
/// the user approves it now: `--trust` (`approve`; recorded when it can
/// be, and trusted for this call either way, so a read-only state dir does
/// not break CI) or a yes at a terminal (recorded). Without either, the
/// refusal names what changed. Reads the files only.
pub(super) fn gate(
    cwd: &Path,
    scope: impl FnOnce(&Path) -> Result<GateScope>,
    approve: bool,
) -> Result<TrustPolicy> {
    // Not a repository: the run itself says so.
    let Ok(repo) = Repo::discover(cwd) else {
        return Ok(TrustPolicy::Recorded);
    };
    let root = repo.root();
    let owned = scope(root)?;
    let items = trust::host_effects(root, &owned.borrow())?;
    if items.is_empty() {
        return Ok(TrustPolicy::Recorded);
    }
    if approve {
        if let Err(e) = trust::approve(root, &items) {
            tracing::warn!("--trust: {e}; trusted for this run only");
        }
        return Ok(TrustPolicy::Trusted);
    }
    let Some(untrusted) = trust::unapproved(root, &items)? else {
        return Ok(TrustPolicy::Recorded);
    };
    if !can_ask() {
        return Err(Error::Untrusted(Box::new(untrusted)));
    }
    eprintln!(
        "The config in {} makes the host act (an agent can edit these files), and you have not approved this (+ new, - gone):\n{}",
        untrusted.repo.display(),
        untrusted.diff()
    );
    if crate::plugin::approval::confirm("Run it, and trust it until it changes?")? {
        trust::approve(root, &items)?;
        Ok(TrustPolicy::Recorded)
    } else {
        Err(Error::input("not approved: nothing was started"))
    }
}

/// The gate's scope, owned, from the repository root.
pub(super) enum GateScope {
    Run {
        sandbox: crate::plugin::PluginRef,
        sandbox_config: Vec<(String, String)>,
    },
    Workflow {
        workflow: trust::WorkflowEffects,
        sandbox_config: Vec<(String, String)>,
    },
}

impl GateScope {
    fn borrow(&self) -> Scope<'_> {
        match self {
            GateScope::Run {
                sandbox,
                sandbox_config,
            } => Scope::Run {
                sandbox,
                sandbox_config,
            },
            GateScope::Workflow {
                workflow,
                sandbox_config,
            } => Scope::Workflow {
                workflow,
                sandbox_config,
            },
        }
    }
}

/// A question needs a terminal on stdin, and no CI (`CI` set, as CI
/// services do): an unattended run stops instead.
fn can_ask() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    std::io::stdin().is_terminal() && !ci
}
