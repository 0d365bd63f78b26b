//! What a run needs from the host beyond its options, checked before
//! anything is created: the agent provider's env requirements, and what a
//! built-in sandbox provider needs here (a cloud provider's credentials
//! and options, a container engine that answers and its image, the
//! programs it runs). Each check reads the env the run resolved (every
//! layer, so a key in `.sanddune/.env` or `--sandbox-env` counts), after
//! the plugins are loaded and before the run log, the worktree or the
//! sandbox exist. A missing one is an input error (exit 2) naming what is
//! missing and how to set it.
//!
//! The cloud providers' checks are their own code (`config::credentials`
//! and `config::options` of the vercel and daytona crates), run natively
//! on what the component would see, so the rules and the messages stay in
//! one place. A third-party sandbox provider is checked by its own
//! `create`, as before: its describe cannot say what it needs.

use std::path::Path;

use super::AgentOptions;
use super::agent_files;
use super::env::EnvMap;
use super::setup::{self, PreparedAgent};
use crate::capability::containers::{self, Engine};
use crate::error::{Error, Result};
use crate::plugin::agent::{AgentProvider, CommandRequest};
use crate::plugin::approval::Approval;
use crate::plugin::sandbox::{SandboxKind, SandboxProvider};

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

/// The agent's print command built with the run's values of its declared
/// keys, as the first iteration will build it: a provider that refuses a
/// value (copilot's own endpoint without a model) refuses before anything
/// is created. The prompt and options were checked without env already.
pub(super) async fn check_agent_command(
    prepared: &mut PreparedAgent,
    o: &AgentOptions,
    env: &EnvMap,
) -> Result<()> {
    let pairs: Vec<(String, String)> = env.clone().into_iter().collect();
    let request = CommandRequest {
        prompt: prepared.prompt.clone(),
        model: o.model.clone(),
        options: o.agent_options.clone(),
        resume_session: None,
        skip_permissions: true,
        env: agent_files::declared_values(&setup::agent_keys(&prepared.agent), &pairs),
    };
    prepared.agent.build_print_command(&request).await.map(drop)
}

/// Which built-in a sandbox provider is: its name when it is a built-in or
/// a file byte-identical to one (approved as the built-in), else None.
fn builtin_name(provider: &SandboxProvider) -> Option<&str> {
    (provider.plugin().approval == Approval::BuiltIn).then(|| provider.name())
}

/// What a built-in sandbox provider needs on this host, with `env` the
/// env the run resolved and `config` its options; `git_dir` is the
/// repository's common git dir (the container providers' default image is
/// named after the repository).
pub(super) async fn check_sandbox_provider(
    provider: &SandboxProvider,
    config: &[(String, String)],
    env: &EnvMap,
    git_dir: &Path,
) -> Result<()> {
    provider.check_containment(config)?;
    let Some(name) = builtin_name(provider) else {
        return Ok(());
    };
    // The provider's own options: the host's `history` is not one of them.
    let isolated = provider.info().kind == SandboxKind::Isolated;
    let (_, config) = super::sync::take_history(name, isolated, config)?;
    let config = config.as_slice();
    // The provider sees only its granted keys, from the resolved env.
    let keys = provider.capabilities().env_keys;
    let lookup = |key: &str| {
        keys.iter()
            .any(|k| k == key)
            .then(|| env.get(key).cloned())
            .flatten()
    };
    let refuse = |why: String, hint: &str| {
        Error::input(format!(
            "sandbox provider `{name}`: {why}{hint}; nothing was created"
        ))
    };
    let set_keys = format!(". Set them {WHERE_ENV}, or with --sandbox-env KEY=VALUE");
    match name {
        "vercel" => {
            use sanddune_plugin_vercel::config;
            config::credentials(&lookup).map_err(|e| refuse(e, &set_keys))?;
            config::options(config).map_err(|e| refuse(e, ""))?;
        }
        "daytona" => {
            use sanddune_plugin_daytona::config;
            config::credentials(&lookup).map_err(|e| refuse(e, &set_keys))?;
            config::options(config, &lookup).map_err(|e| refuse(e, ""))?;
        }
        "kubernetes" => {
            sanddune_plugin_kubernetes::config::Options::parse(config)
                .map_err(|e| refuse(e, ""))?;
        }
        "docker" => check_engine(name, Engine::Docker, config, git_dir).await?,
        "podman" => check_engine(name, Engine::Podman, config, git_dir).await?,
        _ => {}
    }
    check_programs(name, &provider.capabilities().programs)
}

/// The engine answers on its socket, and the image the run would use is
/// in it (a run never pulls one).
async fn check_engine(
    name: &str,
    engine: Engine,
    config: &[(String, String)],
    git_dir: &Path,
) -> Result<()> {
    let docker = containers::connect_negotiated(engine).await.map_err(|e| {
        let hint = match engine {
            Engine::Docker => {
                "start Docker, or set DOCKER_HOST to the socket it listens on (unix:///path/to/docker.sock)"
            }
            Engine::Podman => {
                "start it (`systemctl --user start podman.socket`, or `podman system service`), or set CONTAINER_HOST to the socket it listens on (unix:///path/to/podman.sock)"
            }
        };
        Error::input(format!(
            "sandbox provider `{name}` needs a running {} engine ({e}): {hint}; nothing was created",
            match engine {
                Engine::Docker => "Docker",
                Engine::Podman => "Podman",
            }
        ))
    })?;
    let image = config
        .iter()
        .rev()
        .find(|(k, _)| k == "image")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| containers::default_image(git_dir));
    match docker.inspect_image(&image).await {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Err(Error::input(format!(
            "sandbox provider `{name}`: image `{image}` is not in {name}: build it with `sanddune {name} build-image` (a run never pulls one), or name another with --sandbox-opt image=NAME; nothing was created"
        ))),
        // Not knowing is not a refusal: the provider's create says more.
        Err(_) => Ok(()),
    }
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
