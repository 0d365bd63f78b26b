//! `sanddune demo`: a real run on embedded defaults. Makes a throwaway git
//! repository, runs the deterministic demo agent in the test-isolated sandbox
//! provider (both built in), and shows the commit that came back.

use clap::Args;

use crate::error::{Error, Result};
use crate::plugin::PluginRef;
use crate::run::{LogMode, Prompt, RunOptions};
use crate::worktree::git;

#[derive(Args)]
pub struct DemoArgs {
    /// Keep the throwaway repository and print its path.
    #[arg(long)]
    keep: bool,
}

pub async fn demo(args: DemoArgs) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("sanddune-demo-")
        .tempdir()
        .map_err(|e| Error::Other(e.into()))?;
    let repo = dir.path();
    git(repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# demo\n").map_err(|e| Error::Other(e.into()))?;
    git(repo, &["add", "README.md"])?;
    // The throwaway repository's own identity, which the demo agent's
    // commits in the sandbox get, so the demo needs no git setup.
    git(repo, &["config", "user.name", "sanddune demo"])?;
    git(repo, &["config", "user.email", "demo@sanddune.invalid"])?;
    git(repo, &["commit", "-q", "-m", "initial"])?;
    println!("throwaway repository: {}", repo.display());
    println!(
        "sanddune run --sandbox test-isolated --agent demo --prompt \"Say hello in DEMO.md\"\n"
    );

    let mut options = RunOptions::new(
        PluginRef::Builtin("test-isolated".into()),
        PluginRef::Builtin("demo".into()),
        Prompt::Inline("Say hello in DEMO.md".into()),
    );
    options.sandbox.cwd = repo.to_path_buf();
    options.sandbox.log = LogMode::Terminal;
    options.agent.max_iterations = 3;
    let result = crate::run::run(options).await?;
    println!();
    super::run::print_summary(&result, repo);
    println!(
        "\n$ git log --oneline main\n{}",
        git(repo, &["log", "--oneline", "main"])?
    );
    println!(
        "$ cat DEMO.md\n{}",
        std::fs::read_to_string(repo.join("DEMO.md"))
            .unwrap_or_default()
            .trim_end()
    );
    if args.keep {
        println!("\nkept: {}", dir.keep().display());
    }
    Ok(())
}
