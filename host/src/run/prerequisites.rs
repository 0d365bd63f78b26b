//! What a run needs from the host beyond its options, checked before
//! anything is created: the agent provider's env requirements, and what
//! the sandbox provider needs here (its credentials and options, a
//! container engine that answers and its image, the programs it runs).
//! Each check reads the env the run resolved (every layer, so a key in
//! `.sanddune/.env` or `--sandbox-env` counts), after the plugins are
//! loaded and before the run log, the worktree or the sandbox exist. A
//! missing one is an input error (exit 2) naming what is missing and how
//! to set it.
//!
//! A sandbox provider's own checks are its `preflight` (contract 0.6), run
//! in the component with the capabilities `create` gets: the host names no
//! provider, and a third-party provider's checks run exactly as a
//! built-in's.

use std::path::Path;

use super::env::EnvMap;
use crate::error::{Error, Result};
use crate::plugin::agent::AgentProvider;
use crate::plugin::api::PreflightError;
use crate::plugin::approval::Approval;
use crate::plugin::sandbox::{SandboxProvider, SandboxSpec};

/// Where a key the user must set can come from.
const WHERE_ENV: &str = "in your environment (export KEY=VALUE), in .sanddune/.env";

/// A key counts as set when it has a value other than blanks, as the
/// providers themselves read their keys.
fn is_set(env: &EnvMap, key: &str) -> bool {
    env.get(key).is_some_and(|v| !v.trim().is_empty())
}

/// Every env requirement of the agent provider has one of its keys set in
/// `env` (the env its commands get). For unattended runs: an interactive
/// session's agent can still log in at its own prompt.
pub(super) fn check_agent_env(agent: &AgentProvider, env: &EnvMap) -> Result<()> {
    let missing: Vec<String> = agent
        .info()
        .env
        .iter()
        .filter(|r| !r.any_of.iter().any(|k| is_set(env, k)))
        .map(|r| {
            let keys = match r.any_of.as_slice() {
                [one] => one.clone(),
                [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
                [] => "(no key)".into(),
            };
            if r.description.trim().is_empty() {
                format!("  {keys}")
            } else {
                format!("  {keys}: {}", r.description.trim())
            }
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let example = agent
        .info()
        .env
        .iter()
        .find(|r| !r.any_of.iter().any(|k| is_set(env, k)))
        .and_then(|r| r.any_of.first())
        .cloned()
        .unwrap_or_else(|| "KEY".into());
    Err(Error::input(format!(
        "agent provider `{}` needs env that is not set:\n{}\nSet {} {WHERE_ENV}, or with --agent-env {example}=VALUE; nothing was started",
        agent.name(),
        missing.join("\n"),
        if missing.len() == 1 {
            "one of them"
        } else {
            "one key of each"
        },
    )))
}

/// What the sandbox provider needs on this host: `options` as the user
/// gave them (with the dev container's), `config` as the provider is told
/// them, `env` the env the run resolved, `git_dir` the repository's common
/// git dir. The host's own checks (containment, the programs the
/// provider runs) apply to every provider; the provider's `preflight`
/// (since 0.6) checks its credentials, options and what the machine must
/// have, through the same capabilities `create` gets. An older provider is
/// checked by its own `create`.
pub(super) async fn check_sandbox_provider(
    provider: &SandboxProvider,
    options: &[(String, String)],
    config: &[(String, String)],
    env: &EnvMap,
    git_dir: &Path,
) -> Result<()> {
    provider.check_containment(options)?;
    let name = provider.name();
    if provider.plugin().approval == Approval::Unapproved {
        // A component file not approved yet: it is granted nothing until
        // it is, so it is checked where it is used.
        return Ok(());
    }
    // No worktree exists yet: the provider is granted an empty one, and
    // labels nothing (it creates nothing).
    let empty = tempfile::tempdir()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot create a temporary directory: {e}")))?;
    let spec = SandboxSpec {
        run_id: "preflight".into(),
        name: name.to_string(),
        worktree: empty.path().to_path_buf(),
        git_dir: git_dir.to_path_buf(),
        branch: String::new(),
        env: env.clone().into_iter().collect(),
        config: crate::devcontainer::mount_workspace(config.to_vec(), empty.path()),
        side_by_side: 1,
        git_shield: None,
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    let refuse = |why: String, hint: &str| {
        Error::input(format!(
            "sandbox provider `{name}`: {why}{hint}; nothing was created"
        ))
    };
    match provider.preflight(&spec).await? {
        Some(Err(PreflightError::Credentials(why))) => {
            let hint = format!(". Set them {WHERE_ENV}, or with --sandbox-env KEY=VALUE");
            return Err(refuse(why, &hint));
        }
        Some(Err(PreflightError::Options(why) | PreflightError::Host(why))) => {
            return Err(refuse(why, ""));
        }
        Some(Ok(())) | None => {}
    }
    check_programs(name, &provider.capabilities().programs)
}

/// Each program the provider runs is there: an absolute path that exists,
/// or a bare name found on PATH.
fn check_programs(name: &str, programs: &[String]) -> Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for program in programs {
        let found = if Path::new(program).is_absolute() {
            Path::new(program).is_file()
        } else {
            std::env::split_paths(&path).any(|dir| dir.join(program).is_file())
        };
        if !found {
            return Err(Error::input(format!(
                "sandbox provider `{name}` runs `{program}`, which is not {}: install it{}; nothing was created",
                if Path::new(program).is_absolute() {
                    "there"
                } else {
                    "on PATH"
                },
                if Path::new(program).is_absolute() {
                    ""
                } else {
                    " or add its directory to PATH"
                }
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_values_are_not_set() {
        let env: EnvMap = [("A".to_string(), " ".to_string()), ("B".into(), "x".into())]
            .into_iter()
            .collect();
        assert!(!is_set(&env, "A"));
        assert!(is_set(&env, "B"));
        assert!(!is_set(&env, "C"));
    }

    #[test]
    fn a_missing_program_is_named() {
        assert!(check_programs("p", &["sh".into()]).is_ok());
        let err = check_programs("p", &["sanddune-no-such-program".into()]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .contains("`sanddune-no-such-program`, which is not on PATH"),
            "{err}"
        );
        let err = check_programs("p", &["/nonexistent/sh".into()]).unwrap_err();
        assert!(err.to_string().contains("which is not there"), "{err}");
    }
}
