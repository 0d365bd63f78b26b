//! What an agent provider learns of the run and the config files it asks
//! for (contract 0.4, ADR 0018). A CLI that reads its gateway URL only from
//! a config file or a flag is configured from the values of the keys its
//! provider declared; the files go into the sandbox's HOME by an exec in the
//! sandbox, so `$HOME` is the agent's own whatever the provider, and never
//! a host user's.

use super::abort::AbortHandle;
use crate::error::{Error, Result};
use crate::plugin::api::AgentFile;
use crate::plugin::api::EnvVar;
use crate::plugin::sandbox::{Command, ExecRequest, Sandbox, env_vars};

/// The run's values of `keys` (the agent's declared keys) that are set.
pub fn declared_values(keys: &[String], env: &[(String, String)]) -> Vec<EnvVar> {
    env.iter()
        .filter(|(key, _)| keys.contains(key))
        .map(|(key, value)| EnvVar {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

/// A file's path must stay inside HOME: relative, no `..`, not empty.
fn check_path(agent: &str, path: &str) -> Result<()> {
    let escapes = path.is_empty()
        || path.starts_with('/')
        || path.split('/').any(|part| part == ".." || part.is_empty());
    if escapes {
        return Err(Error::Other(anyhow::anyhow!(
            "agent provider `{agent}` asked for a config file at `{path}`, which is not a plain path inside the sandbox's HOME"
        )));
    }
    Ok(())
}

/// Writes `files` into the sandbox's HOME, replacing what is there. `env`
/// is the agent's, so HOME is the one its command will see.
pub async fn write(
    sandbox: &mut Sandbox,
    agent: &str,
    files: &[AgentFile],
    env: &[(String, String)],
    abort: &AbortHandle,
) -> Result<()> {
    for file in files {
        check_path(agent, &file.path)?;
        let script = r#"mkdir -p "$(dirname "$HOME/$1")" && cat > "$HOME/$1""#;
        let request = ExecRequest {
            command: Command::Argv(
                ["sh", "-c", script, "sh", &file.path]
                    .map(String::from)
                    .to_vec(),
            ),
            cwd: None,
            env: env_vars(env),
            stdin: Some(file.contents.clone()),
            sudo: false,
            timeout_ms: None,
        };
        let out = tokio::select! {
            out = sandbox.exec(request, |_| {}) => out?,
            () = abort.aborted() => return Err(Error::Aborted(abort.reason())),
        };
        if out.exit_code != 0 {
            return Err(Error::Other(anyhow::anyhow!(
                "writing agent `{agent}`'s config file ~/{} in the sandbox failed (exit {}): {}",
                file.path,
                out.exit_code,
                out.stderr.trim()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_declared_keys_that_are_set_reach_the_agent() {
        let env = [
            ("ANTHROPIC_BASE_URL", "http://gw"),
            ("GIT_AUTHOR_NAME", "u"),
            ("SECRET", "s"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let keys = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"].map(String::from);
        let values = declared_values(&keys, &env);
        assert_eq!(values.len(), 1);
        assert_eq!(
            (values[0].key.as_str(), values[0].value.as_str()),
            ("ANTHROPIC_BASE_URL", "http://gw")
        );
    }

    #[test]
    fn a_path_outside_home_is_refused_naming_it() {
        for bad in ["", "/etc/passwd", "../x", ".pi/../../x", ".pi//x", ".pi/"] {
            let e = check_path("pi", bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
        }
        check_path("pi", ".pi/agent/models.json").unwrap();
    }
}
