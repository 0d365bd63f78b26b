//! The `sanddune` command line.

mod attach;
mod best_of;
mod completions;
mod demo;
mod devcontainer;
mod docker;
mod gc;
mod init;
mod inspect;
mod interactive;
mod live_view;
mod logs;
mod outcome_words;
mod plugin;
mod plugin_test;
mod progress;
mod ps;
mod reference;
mod run;
mod scaffold;
mod snapshot;
mod stop;
mod table;
mod trust;
mod workflow;

use clap::{Parser, Subcommand};

use crate::error::Error;

pub use reference::reference_markdown;

#[derive(Parser)]
#[command(
    name = "sanddune",
    version,
    about = "Run AI coding agents in sandboxes and bring their commits back to a branch"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Commands {
    /// Scaffold .sanddune/ (image build file, config, prompts, a workflow) and build the image.
    Init(init::InitArgs),
    /// Run an agent in a sandbox until it signals completion or hits --max-iterations.
    Run(run::RunArgs),
    /// The agent's terminal UI in a sandbox (or on the host: --sandbox no-sandbox).
    Interactive(interactive::InteractiveArgs),
    /// Work with sandbox and agent provider plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommands,
    },
    /// A real run end to end in a throwaway repository: the test-isolated
    /// sandbox provider and the deterministic demo agent (no Docker, no API key).
    Demo(demo::DemoArgs),
    /// The Docker sandbox image: build-image, remove-image.
    Docker {
        #[command(subcommand)]
        command: docker::DockerCommands,
    },
    /// The Podman sandbox image: build-image, remove-image.
    Podman {
        #[command(subcommand)]
        command: docker::PodmanCommands,
    },
    /// The runs alive now: name, run id, sandbox, agent, iteration, state, tokens, log.
    Ps(ps::PsArgs),
    /// A live run's log (-f: follow it until the run ends; --events: the agent's events as JSON lines).
    Logs(logs::LogsArgs),
    /// A shell inside a live run's sandbox, in its worktree, while the agent works.
    Attach(attach::AttachArgs),
    /// Stop a live run as Ctrl-C on it would (in a workflow, that item only).
    Stop(stop::StopArgs),
    /// Clean up after crashed runs: their sandboxes, containers, worktrees and run records.
    Gc(gc::GcArgs),
    /// The prepared snapshots runs with --sandbox-opt snapshot=auto kept: ls, rm.
    Snapshot {
        #[command(subcommand)]
        command: snapshot::SnapshotCommands,
    },
    /// The shell's completion script (bash, zsh, fish, powershell, elvish):
    /// commands, flags, plugin, workflow and live run names.
    Completions(completions::CompletionsArgs),
    /// Approve what the repository's config makes the host do (host hooks,
    /// secret references, mounts, a dev container's initializeCommand, ...);
    /// --show prints it and what changed.
    Trust(trust::TrustArgs),
    /// The repository's dev container: resolve prints the configuration a
    /// run would use.
    Devcontainer {
        #[command(subcommand)]
        command: devcontainer::DevcontainerCommands,
    },
    /// Run the workflows in .sanddune/workflows: plan, fan out, review, land.
    Workflow {
        #[command(subcommand)]
        command: workflow::WorkflowCommands,
    },
}

#[derive(Subcommand)]
enum PluginCommands {
    /// Show what a plugin is, what it asks for, and what it actually imports.
    Inspect(inspect::InspectArgs),
    /// Install a provider from a file or an https URL, approving what it may do.
    Add(plugin::AddArgs),
    /// The installed plugins and what each was granted.
    List,
    /// Replace an installed plugin with a newer version (asks again when it wants more).
    Update(plugin::UpdateArgs),
    /// Uninstall a plugin.
    Remove(plugin::RemoveArgs),
    /// Start a provider project: a buildable copy of a built-in, with the WIT.
    New(scaffold::NewArgs),
    /// Run the conformance kit against a plugin: one PASS/FAIL/SKIP line per check.
    Test(plugin_test::PluginTestArgs),
    /// Write a built-in provider's component to a file (to inspect, pin or share it).
    Export(plugin::ExportArgs),
}

/// How a component file given as --sandbox is approved to run: the one
/// approval policy (`plugin::approval`) as flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ApprovalArgs {
    /// Approve everything a component file given as --sandbox asks for.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Approve exactly this item for a component file given as --sandbox
    /// (repeatable): program=NAME, scratch-dir, worktree=read-only|read-write,
    /// env=KEY, containers, http=https://HOST[:PORT].
    #[arg(long = "grant", conflicts_with = "yes")]
    grants: Vec<String>,
}

impl ApprovalArgs {
    /// A runtime whose component files are approved by these flags (at a
    /// terminal, without them, the user is asked).
    pub fn runtime(&self) -> crate::error::Result<crate::plugin::PluginRuntime> {
        crate::plugin::PluginRuntime::new(crate::plugin::RuntimeConfig {
            file_approval: crate::plugin::FileApproval::from_flags(self.yes, &self.grants)?,
            ..Default::default()
        })
    }
}

/// Parse arguments, run, and return the process exit code.
pub fn main() -> i32 {
    // A shell asking for completions (`COMPLETE=bash sanddune -- WORDS`)
    // is answered here, and the process exits.
    clap_complete::CompleteEnv::with_factory(<Cli as clap::CommandFactory>::command)
        .var(completions::VAR)
        .complete();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(crate::capability::logging::host_filter(
            std::env::var("SANDDUNE_LOG").ok().as_deref(),
        ))
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(&Error::Other(e.into())),
    };
    let result = rt.block_on(async {
        match cli.command {
            Commands::Init(args) => init::init(args).await,
            Commands::Run(args) => run::run(args).await,
            Commands::Interactive(args) => interactive::interactive(args).await,
            Commands::Plugin { command } => match command {
                PluginCommands::Inspect(args) => inspect::inspect(args).await,
                PluginCommands::Add(args) => plugin::add(args).await,
                PluginCommands::List => plugin::list(),
                PluginCommands::Update(args) => plugin::update(args).await,
                PluginCommands::Remove(args) => plugin::remove(args),
                PluginCommands::New(args) => scaffold::new(args),
                PluginCommands::Test(args) => plugin_test::plugin_test(args).await,
                PluginCommands::Export(args) => plugin::export(args),
            },
            Commands::Demo(args) => demo::demo(args).await,
            Commands::Docker { command } => docker::docker(command).await,
            Commands::Podman { command } => docker::podman(command).await,
            Commands::Ps(args) => ps::ps(args),
            Commands::Logs(args) => logs::logs(args).await,
            Commands::Attach(args) => attach::attach(args).await,
            Commands::Stop(args) => stop::stop(args).await,
            Commands::Gc(args) => gc::gc(args).await,
            Commands::Snapshot { command } => snapshot::snapshot(command).await,
            Commands::Completions(args) => completions::completions(args),
            Commands::Trust(args) => trust::trust(args),
            Commands::Devcontainer { command } => devcontainer::devcontainer(command).await,
            Commands::Workflow { command } => workflow::workflow(command).await,
        }
    });
    match result {
        Ok(()) => 0,
        Err(e) => report(&e),
    }
}

fn report(e: &Error) -> i32 {
    // An error may quote the agent (its stderr, a refused commit).
    eprintln!("error: {}", crate::terminal_text::visible(&e.to_string()));
    e.exit_code()
}

/// Ctrl-C (SIGINT) and SIGTERM abort the run the same way: the agent's
/// processes are killed, the sandbox closed, the worktree kept and its lock
/// released; the run fails with exit code 130. (SIGTERM's default action
/// used to end the process on the spot, leaving the lock, the worktree and
/// the sandbox's scratch dir behind.)
fn abort_on_ctrl_c(abort: &crate::run::AbortHandle) {
    let on_int = abort.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_int.abort("interrupted (Ctrl-C)");
        }
    });
    let on_term = abort.clone();
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::spawn(async move {
            if term.recv().await.is_some() {
                on_term.abort("terminated (SIGTERM)");
            }
        });
    }
}

/// Parse `KEY=VALUE`.
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got `{s}`")),
    }
}
