//! `sanddune interactive`: the agent's terminal UI in a sandbox, or on the
//! host with `--sandbox no-sandbox` (permission prompts stay on).

use std::path::{Path, PathBuf};

use clap::Args;

use crate::config::CONFIG_FILE;
use crate::error::{Error, Result};
use crate::plugin::PluginRef;
use crate::run::{InteractiveOptions, InteractiveSandbox, Prompt};

#[derive(Args)]
pub struct InteractiveArgs {
    /// Sandbox provider (built-in name or component file), or `no-sandbox`
    /// to run the agent on the host.
    #[arg(long, add = clap_complete::engine::ArgValueCompleter::new(super::completions::sandbox_provider))]
    sandbox: String,
    /// Agent provider: a built-in name or a component file.
    #[arg(long, add = clap_complete::engine::ArgValueCompleter::new(super::completions::agent_provider))]
    agent: String,
    #[arg(long)]
    model: Option<String>,
    /// A first prompt, passed literally.
    #[arg(long, conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// A prompt template; placeholders without a value are asked for here.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
    #[arg(long = "prompt-arg", value_parser = super::key_value)]
    prompt_args: Vec<(String, String)>,
    #[arg(long)]
    name: Option<String>,
    /// Any repository (default: the current directory).
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
    #[arg(long = "hook-worktree-ready")]
    hook_worktree_ready: Vec<String>,
    #[arg(long = "hook-host-sandbox-ready")]
    hook_host_sandbox_ready: Vec<String>,
    #[arg(long = "hook-sandbox-ready")]
    hook_sandbox_ready: Vec<String>,
    #[arg(long = "sandbox-opt", value_parser = super::key_value)]
    sandbox_opts: Vec<(String, String)>,
    #[arg(long = "agent-opt", value_parser = super::key_value)]
    agent_opts: Vec<(String, String)>,
    #[arg(long = "env", value_parser = super::key_value)]
    env: Vec<(String, String)>,
    #[arg(long = "agent-env", value_parser = super::key_value)]
    agent_env: Vec<(String, String)>,
    #[arg(long = "sandbox-env", value_parser = super::key_value)]
    sandbox_env: Vec<(String, String)>,
    /// Approve the repository's host-effective config as it is now,
    /// without asking (`sanddune trust --show` prints it).
    #[arg(long)]
    trust: bool,
    /// Give the sandbox the agent's model API keys as they are, not
    /// placeholders that the host's credential gateway swaps for them
    /// (docs/security.md, "Credential gateway").
    #[arg(long)]
    no_gateway: bool,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn interactive(args: InteractiveArgs) -> Result<()> {
    let trust = super::trust::gate(
        &args.cwd,
        |root| {
            Ok(super::trust::GateScope::Run {
                sandbox: PluginRef::parse(&args.sandbox),
                sandbox_config: crate::config::ProjectConfig::read(root)?
                    .sandbox_options(args.sandbox_opts.clone()),
            })
        },
        args.trust,
    )?;
    let config = super::run::project_config(&args.cwd)?;
    let sandbox = if args.sandbox == crate::run::NO_SANDBOX {
        InteractiveSandbox::NoSandbox
    } else {
        InteractiveSandbox::Provider(PluginRef::parse(&args.sandbox))
    };
    let mut options = InteractiveOptions::new(sandbox, PluginRef::parse(&args.agent));
    options.prompt = match (args.prompt, args.prompt_file) {
        (Some(text), _) => Some(Prompt::Inline(text)),
        (None, Some(path)) => Some(Prompt::File(path)),
        (None, None) => None,
    };
    options.runtime = Some(args.approval.runtime()?);
    options.trust = trust;
    options.credential_gateway = !args.no_gateway;
    options.model = args.model;
    options.prompt_args = args.prompt_args;
    options.name = args.name;
    options.cwd = args.cwd;
    options.hooks = super::run::hooks(
        &config,
        &args.hook_worktree_ready,
        &args.hook_host_sandbox_ready,
        &args.hook_sandbox_ready,
    );
    options.commit = config.commit_options(Path::new(CONFIG_FILE))?;
    options.sandbox_config = config.sandbox_options(args.sandbox_opts);
    options.agent_options = args.agent_opts;
    options.env = super::run::call_site_env(&config, args.env);
    options.agent_env = args.agent_env;
    options.sandbox_env = args.sandbox_env;
    // Ctrl-C belongs to the agent's UI; sanddune waits for it to exit.
    tokio::spawn(async { while tokio::signal::ctrl_c().await.is_ok() {} });
    let result = crate::run::interactive(options).await?;
    println!(
        "agent exited with code {}; {} commit{} on {}",
        result.exit_code,
        result.commits.len(),
        if result.commits.len() == 1 { "" } else { "s" },
        result.branch
    );
    if let Some(path) = &result.preserved_worktree_path {
        println!("worktree kept (uncommitted changes): {path}");
    }
    if result.exit_code != 0 {
        return Err(Error::Agent(format!(
            "the agent exited with code {}",
            result.exit_code
        )));
    }
    Ok(())
}
