//! sanddune turns "a prompt, an agent, a sandbox" into commits on a branch.
//!
//! Sandbox providers and agent providers are WebAssembly components
//! (`wit/`), loaded by [`plugin::PluginRuntime`] with only the capabilities
//! granted to them ([`capability`]). [`run::run`] drives one run session:
//! worktree, sandbox, iterations, commits back by the branch strategy.

pub mod age;
pub mod attribution;
pub mod capability;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod devcontainer;
pub mod dotenv;
pub mod error;
pub mod hooks;
pub mod image_build;
pub mod init;
pub mod outcome;
pub mod own_dir;
pub mod plugin;
pub mod prompt;
pub mod repo_path;
pub mod run;
pub mod secrets;
pub mod terminal_text;
pub mod trust;
pub mod workflow;
pub mod worktree;

pub use error::{Error, Result};
