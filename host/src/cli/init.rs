//! `sanddune init`: scaffold `.sanddune/` (build file, config, prompts, a
//! workflow) and build the sandbox image. Asks at a terminal for what the
//! flags leave open; never touches an existing `.sanddune/`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use super::docker::{ImageArgs, build_image};
use crate::capability::containers::Engine;
use crate::error::{Error, Result};
use crate::init::{AGENTS, BACKLOG_MANAGERS, Choices, SANDBOXES, TEMPLATES, build_file, render};

#[derive(Args)]
pub struct InitArgs {
    /// Agent provider: claude-code, codex, opencode or pi.
    #[arg(long)]
    agent: Option<String>,
    /// Model for the agent (its default when left out).
    #[arg(long)]
    model: Option<String>,
    /// Sandbox provider: docker or podman.
    #[arg(long)]
    sandbox: Option<String>,
    /// Backlog manager: github-issues or beads.
    #[arg(long)]
    backlog: Option<String>,
    /// Template: blank, simple-loop, sequential-reviewer, parallel-planner,
    /// parallel-planner-with-review.
    #[arg(long)]
    template: Option<String>,
    /// Image name (default sanddune:<repo-dir-name>).
    #[arg(long)]
    image_name: Option<String>,
    /// Take the defaults for whatever the flags leave open; ask nothing.
    #[arg(long)]
    yes: bool,
    /// Write the scaffold only; build the image later with build-image.
    #[arg(long)]
    no_build: bool,
    /// Use the repository's .devcontainer/devcontainer.json (or
    /// .devcontainer.json) as the sandbox definition: no build file is
    /// written and nothing is built (a run builds its image).
    #[arg(long, conflicts_with = "image_name")]
    from_devcontainer: bool,
    /// The repository.
    #[arg(long, default_value = ".")]
    cwd: PathBuf,
}

pub async fn init(args: InitArgs) -> Result<()> {
    let root = repo_root(&args.cwd)?;
    let dir = root.join(".sanddune");
    if dir.exists() {
        return Err(Error::input(format!(
            "{} already exists: init never overwrites it (edit it, or move it away and run init again)",
            dir.display()
        )));
    }
    let devcontainer = if args.from_devcontainer {
        Some(devcontainer_path(&root)?)
    } else {
        None
    };
    let ask = !args.yes && std::io::stdin().is_terminal();
    let missing: Vec<&str> = [
        ("--agent", args.agent.is_none()),
        ("--sandbox", args.sandbox.is_none()),
        ("--backlog", args.backlog.is_none()),
        ("--template", args.template.is_none()),
    ]
    .into_iter()
    .filter_map(|(flag, missing)| missing.then_some(flag))
    .collect();
    if !ask && !args.yes && !missing.is_empty() {
        return Err(Error::input(format!(
            "not a terminal, so nothing can be asked: pass {} (or --yes for the defaults)",
            missing.join(", ")
        )));
    }
    let mut prompter = Prompter { ask };
    let agent = prompter.choose(
        "Agent",
        args.agent,
        &AGENTS.iter().map(|a| (a.0, a.1)).collect::<Vec<_>>(),
    )?;
    let model = match args.model {
        Some(m) => Some(m),
        None if ask => prompter.text("Model (empty: the agent's default)")?,
        None => None,
    };
    let sandbox = prompter.choose(
        "Sandbox",
        args.sandbox,
        &SANDBOXES.iter().map(|s| (*s, *s)).collect::<Vec<_>>(),
    )?;
    let backlog = prompter.choose(
        "Backlog manager",
        args.backlog,
        &BACKLOG_MANAGERS
            .iter()
            .map(|b| (b.name, b.label))
            .collect::<Vec<_>>(),
    )?;
    let template = prompter.choose("Template", args.template, &TEMPLATES)?;
    let choices = Choices {
        agent,
        model,
        sandbox,
        backlog,
        template,
        image_name: args.image_name.clone(),
        devcontainer,
    };
    let files = render(&choices).map_err(Error::input)?;
    write_scaffold(&root, &files)?;
    println!("wrote {}:", dir.display());
    for (path, _) in &files {
        println!("  {path}");
    }
    let engine = if choices.sandbox == "podman" {
        Engine::Podman
    } else {
        Engine::Docker
    };
    let build = !args.no_build && choices.devcontainer.is_none();
    if build {
        let image = ImageArgs {
            image_name: args.image_name,
            cwd: root.clone(),
        };
        if let Err(e) = build_image(engine, &image, None, build_file(&choices.sandbox)).await {
            eprintln!(
                "the scaffold is in place in {}; build the image later with `sanddune {} build-image`",
                dir.display(),
                choices.sandbox
            );
            return Err(e);
        }
    }
    println!(
        "next: put your keys in .sanddune/.env (see .env.example), then\n  sanddune workflow run {}{}",
        choices.template,
        if args.no_build && choices.devcontainer.is_none() {
            format!("   (after `sanddune {} build-image`)", choices.sandbox)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// The repository's devcontainer.json relative to `root`, checked (what a
/// run would refuse is refused now).
fn devcontainer_path(root: &Path) -> Result<String> {
    let path = crate::devcontainer::find(root).ok_or_else(|| {
        Error::input(format!(
            "--from-devcontainer: {} has no {}",
            root.display(),
            crate::devcontainer::FILES.join(" or ")
        ))
    })?;
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::input(format!("cannot read {}: {e}", path.display())))?;
    crate::devcontainer::DevContainer::parse(&text, &path)?;
    Ok(path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string())
}

/// The main repository's root, even from inside a worktree. A repository
/// without commits is fine: init only writes files.
fn repo_root(cwd: &Path) -> Result<PathBuf> {
    let repo = git2::Repository::discover(cwd).map_err(|_| {
        Error::input(format!(
            "{} is not inside a git repository: run `git init` first, or pass --cwd",
            cwd.display()
        ))
    })?;
    let root = if repo.is_worktree() {
        repo.commondir().parent().map(Path::to_path_buf)
    } else {
        repo.workdir().map(Path::to_path_buf)
    };
    root.ok_or_else(|| Error::input("the repository is bare: init needs a working tree"))
}

/// All or nothing: the files go into a fresh directory beside `.sanddune`
/// that is renamed into place.
fn write_scaffold(root: &Path, files: &[(String, String)]) -> Result<()> {
    let fail = |e: std::io::Error| Error::Other(anyhow::anyhow!("writing the scaffold: {e}"));
    let staging = tempfile::Builder::new()
        .prefix(".sanddune-init-")
        .tempdir_in(root)
        .map_err(fail)?;
    for (path, text) in files {
        let path = staging.path().join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        std::fs::write(&path, text).map_err(fail)?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, root.join(".sanddune")).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staged);
        fail(e)
    })
}

/// Numbered menus on stderr, answers from stdin.
struct Prompter {
    ask: bool,
}

impl Prompter {
    /// A flag's value (checked later), else an answer, else the first option.
    fn choose(
        &mut self,
        what: &str,
        given: Option<String>,
        options: &[(&str, &str)],
    ) -> Result<String> {
        if let Some(value) = given {
            return Ok(value);
        }
        if !self.ask {
            return Ok(options[0].0.to_string());
        }
        eprintln!("{what}:");
        for (i, (name, label)) in options.iter().enumerate() {
            eprintln!(
                "  {}) {name}{}",
                i + 1,
                if name == label {
                    String::new()
                } else {
                    format!(" - {label}")
                }
            );
        }
        loop {
            let answer = self.line(&format!("{what} [1]"))?;
            let answer = answer.trim();
            if answer.is_empty() {
                return Ok(options[0].0.to_string());
            }
            if let Ok(n) = answer.parse::<usize>()
                && (1..=options.len()).contains(&n)
            {
                return Ok(options[n - 1].0.to_string());
            }
            if let Some((name, _)) = options.iter().find(|(name, _)| *name == answer) {
                return Ok(name.to_string());
            }
            eprintln!("  pick 1-{} or a name", options.len());
        }
    }

    fn text(&mut self, what: &str) -> Result<Option<String>> {
        let answer = self.line(what)?;
        let answer = answer.trim();
        Ok((!answer.is_empty()).then(|| answer.to_string()))
    }

    fn line(&mut self, prompt: &str) -> Result<String> {
        eprint!("{prompt}: ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let n = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::Other(e.into()))?;
        if n == 0 {
            return Err(Error::input("init was cancelled (end of input)"));
        }
        Ok(line)
    }
}
