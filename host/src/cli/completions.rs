//! `sanddune completions SHELL`: the shell's registration script. The
//! script asks sanddune itself for candidates as the user types
//! (`COMPLETE=SHELL sanddune -- WORDS`, clap_complete's dynamic engine), so
//! besides commands and flags it completes what exists now: plugin names
//! (built-in and installed), workflow names and live run names.

use std::ffi::OsStr;
use std::io::Write;

use clap::Args;
use clap_complete::engine::{CompletionCandidate, PathCompleter, ValueCompleter};
use clap_complete::env::Shells;

use crate::error::{Error, Result};
use crate::plugin::{PluginKind, builtin, store};
use crate::run::registry;
use crate::worktree::Repo;

/// The variable that turns a `sanddune` call into a completion request.
pub const VAR: &str = "COMPLETE";

#[derive(Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, powershell or elvish.
    shell: String,
}

pub fn completions(args: CompletionsArgs) -> Result<()> {
    let shells = Shells::builtins();
    let Some(shell) = shells.completer(&args.shell) else {
        let names: Vec<&str> = shells.names().collect();
        return Err(Error::input(format!(
            "no completions for shell `{}`: pick one of {}",
            args.shell,
            names.join(", ")
        )));
    };
    // The program as the user called it: the script calls it back.
    let completer = std::env::args().next().unwrap_or_else(|| "sanddune".into());
    let mut out = std::io::stdout().lock();
    shell
        .write_registration(VAR, "sanddune", "sanddune", &completer, &mut out)
        .and_then(|()| out.flush())
        .map_err(|e| Error::Other(e.into()))
}

/// The live runs of the repository in the current directory: names and ids.
pub fn live_runs() -> Vec<CompletionCandidate> {
    let Ok(repo) = Repo::discover(std::path::Path::new(".")) else {
        return vec![];
    };
    let runs = registry::list(&repo.git_dir());
    let mut candidates: Vec<CompletionCandidate> = runs
        .iter()
        .map(|f| {
            CompletionCandidate::new(&f.record.name).help(Some(
                format!(
                    "{} {} on {}",
                    f.record.run_id,
                    f.record.state.label(),
                    f.record.branch
                )
                .into(),
            ))
        })
        .collect();
    candidates.extend(
        runs.iter()
            .map(|f| CompletionCandidate::new(&f.record.run_id).hide(true)),
    );
    candidates
}

/// The workflows of the repository in the current directory.
pub fn workflows() -> Vec<CompletionCandidate> {
    let Ok(repo) = Repo::discover(std::path::Path::new(".")) else {
        return vec![];
    };
    crate::workflow::file::list(repo.root())
        .unwrap_or_default()
        .into_iter()
        .map(|(name, description)| CompletionCandidate::new(name).help(Some(description.into())))
        .collect()
}

pub fn installed_plugins() -> Vec<CompletionCandidate> {
    installed()
        .into_iter()
        .map(|r| CompletionCandidate::new(r.name).help(Some(r.kind.into())))
        .collect()
}

/// Built-in and installed plugins of `kind`.
fn plugins(kind: PluginKind) -> Vec<CompletionCandidate> {
    let mut names: Vec<CompletionCandidate> = builtin::BUILTIN
        .iter()
        .filter(|b| crate::plugin::exported_kind(b.bytes) == Some(kind))
        .map(|b| CompletionCandidate::new(b.name).help(Some("built-in".into())))
        .collect();
    names.extend(
        installed()
            .into_iter()
            .filter(|r| r.kind == kind.word())
            .map(|r| CompletionCandidate::new(r.name).help(Some("installed".into()))),
    );
    names
}

fn installed() -> Vec<store::Record> {
    store::default_dir()
        .map(store::PluginStore::open)
        .and_then(|s| s.list().ok())
        .unwrap_or_default()
}

/// `--sandbox`: a provider's name, or a component file once the word looks
/// like a path.
pub fn sandbox_provider(current: &OsStr) -> Vec<CompletionCandidate> {
    let mut names = plugins(PluginKind::Sandbox);
    names.push(CompletionCandidate::new(crate::run::NO_SANDBOX).help(Some("the host".into())));
    name_or_file(names, current)
}

/// `--agent`: a provider's name, or a component file.
pub fn agent_provider(current: &OsStr) -> Vec<CompletionCandidate> {
    name_or_file(plugins(PluginKind::Agent), current)
}

fn name_or_file(names: Vec<CompletionCandidate>, current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    if typed.starts_with('.') || typed.contains('/') {
        return PathCompleter::file().complete(current);
    }
    names
        .into_iter()
        .filter(|c| c.get_value().to_string_lossy().starts_with(typed.as_ref()))
        .collect()
}
