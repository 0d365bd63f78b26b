//! The environment a sandbox's commands get, from four layers, lowest first:
//! the caller's process environment < `.sanddune/.env` < the agent provider's
//! env ∪ the sandbox provider's env (disjoint) < the call site's env. Under
//! them all lies the git identity sanddune gives a sandbox (`identity`), so
//! any layer can override it.
//! Pure: the caller reads the files and the process environment.
//!
//! Only the keys the providers declare are taken from the process
//! environment, so an unrelated secret in the caller's shell never reaches
//! an agent. Everything the user wrote down for sanddune (the `.env` file,
//! provider env, call-site env) passes as given.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

pub type EnvMap = BTreeMap<String, String>;

/// The four layers.
#[derive(Clone, Debug, Default)]
pub struct EnvLayers {
    /// The git identity's env (below everything).
    pub identity: EnvMap,
    /// Keys the agent and sandbox providers declare; the only ones read
    /// from the process environment.
    pub declared: Vec<String>,
    /// The process environment (all of it; filtered here by `declared`).
    pub process: EnvMap,
    /// `.sanddune/.env` of the repository.
    pub dotenv: EnvMap,
    pub agent: EnvMap,
    pub sandbox: EnvMap,
    pub call_site: EnvMap,
}

pub fn resolve(layers: &EnvLayers) -> Result<EnvMap> {
    if let Some(key) = layers
        .agent
        .keys()
        .find(|k| layers.sandbox.contains_key(*k))
    {
        return Err(Error::input(format!(
            "env key `{key}` is set by both the agent provider and the sandbox provider: set it once, or at the call site (--env) where overlap is allowed"
        )));
    }
    let mut env = layers.identity.clone();
    for key in &layers.declared {
        if let Some(value) = layers.process.get(key) {
            env.insert(key.clone(), value.clone());
        }
    }
    for layer in [
        &layers.dotenv,
        &layers.agent,
        &layers.sandbox,
        &layers.call_site,
    ] {
        env.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(env)
}

/// Swap the identity layer of a resolved env from `old` to `new` (the
/// sandbox's trailer hook is known only once the sandbox exists), leaving
/// every key a higher layer set as it was.
pub fn replace_identity(env: &mut EnvMap, old: &EnvMap, new: &EnvMap) {
    for (key, value) in new {
        if env.get(key) == old.get(key) {
            env.insert(key.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> EnvMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn layers_override_in_order() {
        let layers = EnvLayers {
            identity: map(&[("GIT_CONFIG_COUNT", "2"), ("A", "identity")]),
            declared: vec!["API_KEY".into(), "A".into()],
            process: map(&[
                ("API_KEY", "process"),
                ("A", "process"),
                ("UNDECLARED_SECRET", "x"),
            ]),
            dotenv: map(&[("A", "dotenv"), ("B", "dotenv")]),
            agent: map(&[("B", "agent"), ("C", "agent")]),
            sandbox: map(&[("D", "sandbox")]),
            call_site: map(&[("C", "call"), ("D", "call")]),
        };
        let env = resolve(&layers).unwrap();
        assert_eq!(
            env,
            map(&[
                ("GIT_CONFIG_COUNT", "2"),
                ("API_KEY", "process"),
                ("A", "dotenv"),
                ("B", "agent"),
                ("C", "call"),
                ("D", "call")
            ])
        );
    }

    #[test]
    fn undeclared_process_keys_never_pass() {
        let layers = EnvLayers {
            process: map(&[("AWS_SECRET_ACCESS_KEY", "s")]),
            ..Default::default()
        };
        assert!(resolve(&layers).unwrap().is_empty());
    }

    #[test]
    fn provider_env_overlap_names_the_key() {
        let layers = EnvLayers {
            agent: map(&[("TOKEN", "a")]),
            sandbox: map(&[("TOKEN", "b")]),
            ..Default::default()
        };
        let err = resolve(&layers).unwrap_err();
        assert!(err.to_string().contains("`TOKEN`"), "{err}");
        assert_eq!(err.exit_code(), 2);
        // The call site may overlap either.
        let layers = EnvLayers {
            agent: map(&[("TOKEN", "a")]),
            call_site: map(&[("TOKEN", "c")]),
            ..Default::default()
        };
        assert_eq!(resolve(&layers).unwrap()["TOKEN"], "c");
    }

    #[test]
    fn the_identity_layer_is_replaced_under_the_others() {
        let old = map(&[("GIT_CONFIG_COUNT", "2"), ("GIT_CONFIG_KEY_0", "user.name")]);
        let new = map(&[
            ("GIT_CONFIG_COUNT", "3"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_KEY_2", "core.hooksPath"),
        ]);
        let mut env = old.clone();
        env.insert("OTHER".into(), "x".into());
        replace_identity(&mut env, &old, &new);
        assert_eq!(env["GIT_CONFIG_COUNT"], "3");
        assert_eq!(env["GIT_CONFIG_KEY_2"], "core.hooksPath");
        assert_eq!(env["OTHER"], "x");

        // The call site set its own git config: it stays as given.
        let mut env = old.clone();
        env.insert("GIT_CONFIG_COUNT".into(), "1".into());
        replace_identity(&mut env, &old, &new);
        assert_eq!(env["GIT_CONFIG_COUNT"], "1");
    }
}
