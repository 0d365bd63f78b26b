//! The conformance kit behind `sanddune plugin test`: checks a plugin
//! against the behaviours its world promises, one named check at a time.
//! Sandbox providers are exercised in a real sandbox of a throwaway
//! repository (`sandbox`); agent providers are fed prompts and hostile
//! output lines (`agent`). A check a provider's kind cannot support is
//! skipped with the reason, never passed silently.

pub mod agent;
pub mod sandbox;

use std::path::PathBuf;

use crate::error::Result;
use crate::plugin::agent::AgentProvider;
use crate::plugin::sandbox::SandboxProvider;
use crate::plugin::{PluginKind, PluginRef, PluginRuntime};

/// How one check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Passed; the note says how, when that is worth knowing.
    Pass(String),
    /// Failed, and why.
    Fail(String),
    /// Not applicable to this provider, and why.
    Skip(String),
}

/// One named check and its outcome.
#[derive(Clone, Debug)]
pub struct Check {
    pub name: &'static str,
    pub outcome: Outcome,
}

/// Every check run against one plugin, in order.
#[derive(Clone, Debug)]
pub struct Report {
    /// The provider's name from `describe`.
    pub plugin: String,
    pub kind: PluginKind,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn failures(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Fail(_)))
            .count()
    }

    /// One line per check: `PASS name`, `FAIL name: why`, `SKIP name: why`.
    pub fn lines(&self) -> Vec<String> {
        self.checks
            .iter()
            .map(|c| match &c.outcome {
                Outcome::Pass(note) if note.is_empty() => format!("PASS {}", c.name),
                Outcome::Pass(note) => format!("PASS {} ({note})", c.name),
                Outcome::Fail(why) => format!("FAIL {}: {why}", c.name),
                Outcome::Skip(why) => format!("SKIP {}: {why}", c.name),
            })
            .collect()
    }

    fn push(&mut self, name: &'static str, result: std::result::Result<String, String>) {
        let outcome = match result {
            Ok(note) => Outcome::Pass(note),
            Err(why) => Outcome::Fail(why),
        };
        self.checks.push(Check { name, outcome });
    }

    fn skip(&mut self, name: &'static str, why: &str) {
        self.checks.push(Check {
            name,
            outcome: Outcome::Skip(why.to_string()),
        });
    }
}

/// What the kit needs beyond the plugin itself.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Sandbox options for `create` (`--sandbox-opt`), for providers that
    /// need some (an image, a region).
    pub sandbox_config: Vec<(String, String)>,
    /// A real agent's stdout, one event per line, to check the usage
    /// events the parser makes of it.
    pub transcript: Option<PathBuf>,
}

/// Load `plugin`, detect its world, and run that world's checks.
pub async fn test_plugin(
    runtime: &PluginRuntime,
    plugin: &PluginRef,
    options: &Options,
) -> Result<Report> {
    let plugin = runtime.load(plugin, None)?;
    match plugin.kind {
        PluginKind::Sandbox => {
            let mut provider = SandboxProvider::from_plugin(plugin).await?;
            provider.approve(runtime.file_approval())?;
            Ok(sandbox::run(&provider, &options.sandbox_config).await)
        }
        PluginKind::Agent => {
            let transcript = match &options.transcript {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    crate::Error::input(format!(
                        "cannot read the transcript {}: {e}",
                        path.display()
                    ))
                })?),
                None => None,
            };
            let mut agent = AgentProvider::from_plugin(plugin).await?;
            Ok(agent::run(&mut agent, transcript.as_deref()).await)
        }
    }
}
