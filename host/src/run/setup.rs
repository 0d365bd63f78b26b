//! The layered setup shared by the entry points: checks that come before
//! any side effect, the place the agent works (worktree or head), and the
//! sandbox on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::env::{self, EnvMap};
use super::hooks::{self, HookLog};
use super::identity::{self, CommitIdentity, CommitOptions};
use super::log::{LogMode, RunLog};
use super::strategy::{self, BranchStrategy, ProviderType, Request};
use super::{AgentOptions, Prompt, SandboxOptions, sandbox_record, secrets, sync};
use crate::capability::containers::GitShield;
use crate::error::{Error, Result};
use crate::plugin::agent::{AgentProvider, CommandRequest};
use crate::plugin::sandbox::{Sandbox, SandboxKind, SandboxProvider, SandboxSpec};
use crate::plugin::{PluginRef, PluginRuntime, RuntimeConfig};
use crate::prompt::{self, Template};
use crate::worktree::{
    AgentGitDir, LOGS_DIR, Repo, SHARED_OBJECTS, WORKTREES_DIR, Worktree, WorktreeOrigin,
    worktree_name,
};

/// The name that selects the no-sandbox provider (interactive only).
pub const NO_SANDBOX: &str = "no-sandbox";

/// The prompt's text, and whether it is a template (from a file).
pub(super) fn resolve_prompt(prompt: &Prompt) -> Result<(String, bool)> {
    let (text, template) = match prompt {
        Prompt::Inline(text) => (text.clone(), false),
        Prompt::File(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                Error::input(format!("cannot read prompt file {}: {e}", path.display()))
            })?,
            true,
        ),
    };
    Ok((text, template))
}

/// Checks on an agent run that need nothing loaded. Returns the prompt
/// text and whether it is a template.
pub(super) fn check_agent_options(o: &AgentOptions) -> Result<(String, bool)> {
    let (text, is_template) = resolve_prompt(&o.prompt)?;
    if text.trim().is_empty() {
        return Err(Error::input(
            "the prompt is empty: give the agent something to do",
        ));
    }
    if !is_template && !o.prompt_args.is_empty() {
        return Err(Error::input(
            "prompt arguments need a prompt template: an inline --prompt is passed literally (use --prompt-file)",
        ));
    }
    if o.idle_timeout.is_zero() {
        return Err(Error::input("--idle-timeout must be at least 1 second"));
    }
    if o.max_iterations == 0 {
        return Err(Error::input("--max-iterations must be at least 1"));
    }
    if o.completion_signals.iter().any(|s| s.is_empty()) {
        return Err(Error::input("a completion signal cannot be empty"));
    }
    if let Some(output) = &o.output {
        output.check()?;
    }
    Ok((text, is_template))
}

pub(super) fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path)
        .map_err(|e| Error::input(format!("bad --cwd {}: {e}", path.display())))
}

/// A run's id: `<unix seconds>-<pid, hex>-<nth run of this process, hex>`.
/// It names the run's branch, worktree and container labels, so two live
/// runs must never share one: the pid tells processes apart (it is not
/// reused while the process lives, nor within its second), the counter the
/// runs of one process. (16 random bits used to collide: about once in 30
/// batches of 64 runs started in one second.)
pub(super) fn run_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{secs}-{:x}-{n:x}", std::process::id())
}

pub(super) fn runtime(given: &Option<PluginRuntime>) -> Result<PluginRuntime> {
    match given {
        Some(rt) => Ok(rt.clone()),
        None => PluginRuntime::new(RuntimeConfig::default()),
    }
}

/// A sandbox provider by name; refuses the no-sandbox provider, which is
/// for interactive sessions only.
pub(super) async fn load_sandbox_provider(
    runtime: &PluginRuntime,
    sandbox: &PluginRef,
) -> Result<SandboxProvider> {
    if matches!(sandbox, PluginRef::Builtin(n) if n == NO_SANDBOX) {
        strategy::resolve(
            None,
            ProviderType::NoSandbox,
            NO_SANDBOX,
            Request::default(),
        )?;
    }
    SandboxProvider::load(runtime, sandbox).await
}

/// The run log; in file mode under `.sanddune/logs/`, kept out of the
/// user's `git status`.
pub(super) fn open_log(repo: &Repo, mode: &LogMode, name: Option<&str>) -> Result<RunLog> {
    if matches!(mode, LogMode::File | LogMode::FileQuiet) {
        repo.exclude_sanddune_dirs()?;
    }
    RunLog::open(mode, &repo.root().join(LOGS_DIR), name)
}

fn read_dotenv(root: &Path) -> Result<EnvMap> {
    let path = root.join(".sanddune/.env");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let source = path.display().to_string();
            env::parse_dotenv(&text, &source)?
                .into_iter()
                .map(|(k, v)| secrets::resolve(&k, &v, root, &source).map(|v| (k, v)))
                .collect()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(EnvMap::new()),
        Err(e) => Err(Error::input(format!("cannot read {}: {e}", path.display()))),
    }
}

/// The env of the sandbox's commands from the four layers (see `env`).
/// `declared` are the keys read from the process env; `identity` lies
/// below them all.
pub(super) fn resolve_env(
    root: &Path,
    identity: EnvMap,
    declared: Vec<String>,
    agent_env: &[(String, String)],
    sandbox_env: &[(String, String)],
    call_site: &[(String, String)],
) -> Result<EnvMap> {
    let map = |pairs: &[(String, String)]| pairs.iter().cloned().collect::<EnvMap>();
    env::resolve(&env::EnvLayers {
        identity,
        declared,
        process: std::env::vars().collect(),
        dotenv: read_dotenv(root)?,
        agent: map(agent_env),
        sandbox: map(sandbox_env),
        call_site: map(call_site),
    })
}

/// The commit identity and the env of the sandbox's commands with it as
/// the lowest layer. Git's identity is computed with the layers above it
/// as the sandbox will see them: a `.sanddune/.env` or `--env` may give
/// `GIT_AUTHOR_NAME` and the rest (see `identity::resolve`).
pub(super) fn resolve_identity_and_env(
    root: &Path,
    commit: &CommitOptions,
    declared: Vec<String>,
    agent_env: &[(String, String)],
    sandbox_env: &[(String, String)],
    call_site: &[(String, String)],
) -> Result<(CommitIdentity, EnvMap)> {
    let above = resolve_env(
        root,
        EnvMap::new(),
        declared,
        agent_env,
        sandbox_env,
        call_site,
    )?;
    let identity = identity::resolve(root, commit, &above)?;
    let mut env = identity.env(None);
    env.extend(above);
    Ok((identity, env))
}

/// The keys the agent reads from the caller's environment: those it needs
/// and the optional ones its CLI honours (a gateway URL, a cloud switch).
pub(super) fn agent_keys(agent: &AgentProvider) -> Vec<String> {
    let info = agent.info();
    info.env
        .iter()
        .flat_map(|r| r.any_of.clone())
        .chain(info.optional_env.iter().cloned())
        .collect()
}

/// An agent provider, loaded and checked against the run's prompt.
pub(super) struct PreparedAgent {
    pub agent: AgentProvider,
    /// What the agent gets when there is nothing to expand.
    pub prompt: String,
    /// A template with shell expressions, expanded before each iteration.
    pub template: Option<Template>,
}

/// Load the agent, substitute prompt arguments, and let the agent provider
/// refuse bad options and prompts now, not after a worktree and a sandbox
/// exist.
pub(super) async fn prepare_agent(
    runtime: &PluginRuntime,
    o: &AgentOptions,
    (text, is_template): (String, bool),
    source: &str,
    target: &str,
    log: Option<&RunLog>,
) -> Result<PreparedAgent> {
    let mut agent = AgentProvider::load(runtime, &o.agent).await?;
    let template = if is_template {
        let t = prompt::render(&text, &o.prompt_args, source, target)?;
        for key in &t.unused {
            let msg = format!("prompt argument `{key}` is not used by the prompt template");
            tracing::warn!("{msg}");
            if let Some(log) = log {
                log.line(&format!("warning: {msg}"));
            }
        }
        Some(t)
    } else {
        None
    };
    // With shell expressions, a readable stand-in until they run.
    let prompt = match &template {
        Some(t) => prompt::assemble(t, &prompt::stand_ins(t)),
        None => text,
    };
    agent
        .build_print_command(&CommandRequest {
            prompt: prompt.clone(),
            model: o.model.clone(),
            options: o.agent_options.clone(),
            resume_session: None,
            skip_permissions: true,
            // The env is resolved with the sandbox; options and prompt are
            // what this early check is for.
            env: Vec::new(),
        })
        .await?;
    Ok(PreparedAgent {
        agent,
        prompt,
        template: template.filter(Template::has_shell_expressions),
    })
}

/// Where the agent's branch is checked out on the host, and what the run
/// does with it at the end.
#[derive(Clone, Debug)]
pub(super) struct Place {
    pub root: PathBuf,
    /// None under head: the agent works in the repository itself. Shared
    /// by a worktree handle and the sandboxes on it; the worktree lock goes
    /// with the last of them.
    pub worktree: Option<Arc<Worktree>>,
    /// The source branch.
    pub branch: String,
    /// The target branch: the host's branch when the place was made.
    pub target: String,
    pub strategy: BranchStrategy,
    pub run_id: String,
}

impl Place {
    pub fn path(&self) -> &Path {
        match &self.worktree {
            Some(wt) => &wt.path,
            None => &self.root,
        }
    }

    pub fn repo(&self) -> Result<Repo> {
        Repo::discover(&self.root)
    }
}

/// The source branch a strategy works on.
pub(super) fn source_branch(strategy: &BranchStrategy, target: &str, id: &str) -> String {
    match strategy {
        BranchStrategy::Head => target.to_string(),
        BranchStrategy::MergeToHead => format!("sanddune/run-{id}"),
        BranchStrategy::Branch(branch) => branch.clone(),
    }
}

pub(super) fn hook_log(log: &RunLog) -> HookLog {
    let log = log.clone();
    Arc::new(move |label: &str, line: &str| log.line(&format!("{label}: {line}")))
}

/// Whether the host needs a new worktree's files: not when the agent works
/// on a copy in an isolated sandbox and no host step (copyToWorktree, a
/// host hook) runs in the worktree. Then only the branch's commits land
/// there, and a checkout of a big tree would be wasted (`worktree` writes
/// the files later if someone needs them).
pub(super) fn host_needs_files(provider: &SandboxProvider, o: &SandboxOptions) -> bool {
    provider.info().kind != SandboxKind::Isolated
        || !o.copy_to_worktree.is_empty()
        || !o.hooks.host_on_worktree_ready.is_empty()
        || !o.hooks.host_on_sandbox_ready.is_empty()
}

/// Make the place: the worktree (if the strategy has one; with its files
/// unless `files` is false, see [`host_needs_files`]), copyToWorktree,
/// then host.onWorktreeReady. A failure removes what it made.
pub(super) async fn prepare_place(
    repo: &Repo,
    strategy: BranchStrategy,
    id: &str,
    o: &SandboxOptions,
    files: bool,
    log: &RunLog,
) -> Result<Place> {
    let target = repo.current_branch()?;
    let branch = source_branch(&strategy, &target, id);
    let add = |name: &str, branch: &str, temporary: bool| {
        if files {
            repo.add_worktree(name, branch, temporary)
        } else {
            repo.add_worktree_without_files(name, branch, temporary)
        }
    };
    let worktree = match &strategy {
        BranchStrategy::Head => None,
        BranchStrategy::MergeToHead => Some(add(&format!("run-{id}"), &branch, true)?),
        BranchStrategy::Branch(b) => Some(add(&worktree_name(b), b, false)?),
    };
    let place = Place {
        root: repo.root().to_path_buf(),
        worktree: worktree.map(Arc::new),
        branch,
        target,
        strategy,
        run_id: id.to_string(),
    };
    if let Some(wt) = &place.worktree {
        log.status(&match &wt.origin {
            WorktreeOrigin::Created => format!("worktree created: {}", wt.path.display()),
            WorktreeOrigin::Reused => format!(
                "worktree reused with its work: {} (it was kept by an earlier run)",
                wt.path.display()
            ),
            WorktreeOrigin::FastForwarded { from } => format!(
                "worktree reused: {}, fast-forwarded from {} to {}",
                wt.path.display(),
                &from[..from.len().min(10)],
                place.target
            ),
        });
    }
    let ready = async {
        if let Some(wt) = place.worktree.clone()
            && !o.copy_to_worktree.is_empty()
        {
            log.status("copying into the worktree");
            let (root, paths, timeout) = (
                place.root.clone(),
                o.copy_to_worktree.clone(),
                o.timeouts.copy_to_worktree,
            );
            // Copies block; keep them off the async workers.
            tokio::task::spawn_blocking(move || {
                Repo::discover(&root)?.copy_to_worktree(&wt, &paths, timeout)
            })
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("the copy task failed: {e}")))??;
        }
        if !o.hooks.host_on_worktree_ready.is_empty() {
            log.status("running host.onWorktreeReady hooks");
        }
        hooks::run_on_worktree_ready(
            &o.hooks.host_on_worktree_ready,
            place.path(),
            &o.abort,
            &hook_log(log),
        )
        .await
    };
    if let Err(e) = ready.await {
        if let Some(wt) = &place.worktree {
            let _ = release_worktree(repo, wt, false);
        }
        return Err(e);
    }
    Ok(place)
}

/// Remove a worktree unless it is dirty (then its path is returned). A
/// temporary branch goes after a merge or when nothing was committed on
/// it; otherwise it is the user's work and stays.
pub(super) fn release_worktree(repo: &Repo, wt: &Worktree, merged: bool) -> Result<Option<String>> {
    let committed = repo
        .commits_since(&wt.base, &wt.branch)
        .map(|c| !c.is_empty())
        .unwrap_or(true);
    let keep_branch = !wt.temporary || (!merged && committed);
    Ok(repo
        .close_worktree(wt, keep_branch)?
        .map(|p| p.display().to_string()))
}

/// A sandbox that is up, and the env its git identity needs from now on.
pub(super) struct Started {
    pub sandbox: Sandbox,
    pub commit_env: EnvMap,
    /// Where the agent commits, for a container sandbox on host paths.
    pub agent_git: Option<AgentGitDir>,
}

/// The agent git dir for a sandbox whose containers share the worktree
/// (ADR 0025), and the shield its containers get; none for other providers.
fn agent_git_dir(
    provider: &SandboxProvider,
    place: &Place,
) -> Result<(Option<AgentGitDir>, Option<GitShield>)> {
    if provider.info().kind == SandboxKind::Isolated || !provider.capabilities().containers {
        return Ok((None, None));
    }
    let repo = place.repo()?;
    let dir = repo.agent_git_dir(place.path(), &place.branch, &run_id())?;
    let shield = GitShield {
        git_dir: repo.git_dir(),
        agent_git_dir: dir.git_dir(),
        target: dir.target().to_path_buf(),
        git_file: dir
            .git_file()
            .map(|file| (file, dir.worktree().join(".git"))),
        shared_objects: SHARED_OBJECTS.to_string(),
        hidden: hidden_under_head(place),
        empty_dir: dir.empty_dir(),
    };
    Ok((Some(dir), Some(shield)))
}

/// Under head the worktree is the repository root, which holds sanddune's
/// own directories: other runs' worktrees (whose `.git` files the agent
/// could point elsewhere) and the logs. The sandbox sees them empty.
fn hidden_under_head(place: &Place) -> Vec<PathBuf> {
    if place.worktree.is_some() {
        return vec![];
    }
    [WORKTREES_DIR, LOGS_DIR]
        .iter()
        .map(|dir| place.root.join(dir))
        // Only what is there: a mount over a missing path would make it,
        // as root, in your repository.
        .filter(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()))
        .collect()
}

/// The sandbox options as the provider is told them, with the host's part
/// taken out: the sync's `history` (isolated providers), and the dev
/// container's workspace as a mount of `worktree`.
pub(super) fn provider_config(
    provider: &SandboxProvider,
    config: &[(String, String)],
    worktree: &Path,
) -> Result<(crate::worktree::History, Vec<(String, String)>)> {
    let isolated = provider.info().kind == SandboxKind::Isolated;
    let (history, config) = sync::take_history(provider.name(), isolated, config)?;
    Ok((
        history,
        crate::devcontainer::mount_workspace(config, worktree),
    ))
}

/// Create the sandbox on `place`, sync the repository in (isolated),
/// install the commit trailer's hook (see `identity`), then run the
/// onSandboxReady hooks. A failure closes the sandbox.
pub(super) async fn start_sandbox(
    provider: &SandboxProvider,
    place: &Place,
    env: EnvMap,
    o: &SandboxOptions,
    identity: &CommitIdentity,
    log: &RunLog,
) -> Result<Started> {
    let isolated = provider.info().kind == SandboxKind::Isolated;
    let (history, config) = provider_config(provider, &o.sandbox_config, place.path())?;
    let (agent_git, git_shield) = agent_git_dir(provider, place)?;
    let spec = SandboxSpec {
        run_id: place.run_id.clone(),
        name: o.name.clone().unwrap_or_else(|| place.branch.clone()),
        worktree: place.path().to_path_buf(),
        git_dir: place.repo()?.git_dir(),
        branch: place.branch.clone(),
        env: env.into_iter().collect(),
        config,
        side_by_side: o.side_by_side,
        git_shield,
    };
    log.status(&format!("starting sandbox `{}`", provider.name()));
    let timings = log.timings();
    let source = match PluginRef::parse(&provider.plugin().source) {
        PluginRef::File(path) => absolute(&path)?.display().to_string(),
        PluginRef::Builtin(name) => name,
    };
    let record = sandbox_record::begin(provider, source, &run_id(), &spec)?;
    let mut sandbox = match timings.time("sandbox create", provider.create(&spec)).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            record.abandon();
            if let Some(dir) = agent_git {
                dir.remove();
            }
            return Err(e);
        }
    };
    let ready = async {
        let base = match &place.worktree {
            Some(wt) if isolated => Some(place.repo()?.branch_head(&wt.branch)?),
            _ => None,
        };
        record.created(&mut sandbox, base).await?;
        if isolated {
            let wt = place
                .worktree
                .as_ref()
                .expect("isolated providers always have a worktree");
            if place.repo()?.is_dirty(wt)? {
                log.line(&format!(
                    "warning: {} has uncommitted changes; an isolated sandbox gets committed work only, so they stay on the host",
                    wt.path.display()
                ));
            }
            let start = std::time::Instant::now();
            let bytes = sync::sync_in(&mut sandbox, wt, history).await?;
            timings.record_bytes("sync in", start.elapsed(), bytes);
        }
        let hooks_start = std::time::Instant::now();
        let hooks_dir = match &identity.trailer {
            Some(trailer) => Some(identity::install_trailer_hook(&mut sandbox, trailer).await?),
            None => None,
        };
        if !o.hooks.host_on_sandbox_ready.is_empty()
            || !o.hooks.sandbox_on_sandbox_ready.is_empty()
            || !o.hooks.devcontainer.is_empty()
        {
            log.status("running onSandboxReady hooks");
        }
        hooks::run_on_sandbox_ready(
            &o.hooks,
            place.path(),
            &mut sandbox,
            &o.abort,
            &hook_log(log),
        )
        .await?;
        timings.record("hooks", hooks_start.elapsed());
        Ok(hooks_dir)
    };
    match ready.await {
        Ok(hooks_dir) => Ok(Started {
            sandbox,
            commit_env: identity.env(hooks_dir.as_deref()),
            agent_git,
        }),
        Err(e) => {
            let _ = sandbox.close().await;
            if let Some(mut dir) = agent_git {
                // What a hook committed still lands.
                let _ = dir.take_back();
                dir.remove();
            }
            Err(e)
        }
    }
}

/// The env keys a sandbox provider declares (read from the process env).
pub(super) fn declared_sandbox_keys(provider: &SandboxProvider) -> Vec<String> {
    provider.capabilities().env_keys
}

#[cfg(test)]
mod run_id_tests {
    use super::run_id;

    #[test]
    fn run_ids_are_unique_across_threads() {
        let threads: Vec<_> = (0..8)
            .map(|_| std::thread::spawn(|| (0..2000).map(|_| run_id()).collect::<Vec<_>>()))
            .collect();
        let mut ids: Vec<String> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let all = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all, "run ids collided");
        let id = run_id();
        assert!(
            id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "usable in a branch and worktree name: {id}"
        );
    }
}
