//! Warm sandboxes (`pool=N`, ADR 0037) on real engines, through
//! `sanddune run` as a user runs it, each run a process of its own: a run
//! leaves a container waiting, the next claims it, and it is as fresh as a
//! created one; two runs at once never share one; an idle one ends itself,
//! and gc sweeps what is left.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::engines::*;
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};
use serde_json::Value;

const POOL_LABEL: &str = "sanddune.pool";

/// A run on `engine` with `pool=1`, its log on stderr, its result on
/// stdout.
fn pooled_command(engine: &str, repo: &TestRepo, prompt: &str, extra: &[&str]) -> Command {
    let image = format!("image={IMAGE}");
    let mut args = vec!["run", "--sandbox", engine, "--agent", "claude-code"];
    args.extend(["--prompt", prompt, "--sandbox-opt", &image]);
    args.extend(["--sandbox-opt", "pool=1", "--log", "terminal", "--json"]);
    let mounts = fake_mounts(repo);
    args.extend(mounts.iter().map(String::as_str));
    args.extend_from_slice(extra);
    repo.command(&args)
}

fn pooled_run(engine: &str, repo: &TestRepo, prompt: &str, extra: &[&str]) -> Output {
    pooled_command(engine, repo, prompt, extra)
        .output()
        .unwrap()
}

/// The warm containers of `repo`'s pools, with their states.
fn waiting(engine: &str, repo: &TestRepo) -> Vec<(String, String)> {
    let git_dir = std::fs::canonicalize(repo.path().join(".git")).unwrap();
    let out = Command::new(engine)
        .args(["ps", "-aq", "--no-trunc", "--filter"])
        .arg(format!("label={POOL_LABEL}"))
        .output()
        .unwrap();
    // Podman's `ps` templates differ from Docker's; `inspect`'s agree.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|id| {
            let slot = inspect(
                engine,
                id,
                &format!("{{{{index .Config.Labels \"{POOL_LABEL}\"}}}}"),
            );
            slot.starts_with(&git_dir.display().to_string()).then(|| {
                let state = inspect(engine, id, "{{.State.Status}}");
                (id.to_string(), state)
            })
        })
        .collect()
}

/// `sanddune gc --drain-pool`: the repository's warm containers go.
fn drain(repo: &TestRepo) -> Output {
    let gc = repo.sanddune(&["gc", "--drain-pool"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    gc
}

fn result(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_str(&stdout(out)).unwrap()
}

/// The branches and worktrees of the repository that the pool made.
fn slot_leftovers(repo: &TestRepo) -> (String, Vec<String>, Vec<String>) {
    let branches = repo.git(&["branch", "--list", "sanddune/run-*"]);
    let dir = |path: &str| -> Vec<String> {
        std::fs::read_dir(repo.path().join(path))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    (
        branches,
        dir(".sanddune/worktrees"),
        dir(".git/sanddune-agent"),
    )
}

/// The run after a pooled run takes the container it left waiting, in
/// another process: the log says so, its commit lands, its env is its own
/// and the container's config holds none of it, and nothing of the run
/// before is in it, nor of the wait (its `sleep`, its wake pipe). A new
/// one waits after it; gc leaves that one, and `--drain-pool` removes it
/// with its worktree, branch and agent git dir. `link`: the runs have one
/// (the credential gateway's), and the claim wakes the container through
/// its pipe there; without, by a signal.
fn a_run_claims_the_container_the_last_run_left_waiting(engine: &str, link: bool) {
    require_engine(engine);
    let repo = TestRepo::new();
    let with = |secret: &'static str| {
        let mut args = vec!["--strategy", "merge-to-head", "--env", secret];
        if !link {
            args.push("--no-gateway");
        }
        args
    };
    let first = pooled_run(
        engine,
        &repo,
        "first\nFAKE:file:first.md\nFAKE:run:touch /tmp/left-by-first",
        &with("SANDDUNE_TEST_SECRET=one"),
    );
    let log = stderr(&first);
    let first = result(&first);
    assert!(
        log.contains("pool: no warm sandbox was waiting; creating one"),
        "{log}"
    );
    assert!(log.contains("pool: started 1 warm sandbox(es)"), "{log}");
    let warm = waiting(engine, &repo);
    assert_eq!(warm.len(), 1, "{warm:?}");
    assert_eq!(warm[0].1, "running");
    let id = &warm[0].0;
    let env = inspect(engine, id, "{{json .Config.Env}}");
    assert!(
        // (Podman adds a HOME of its own; the provider's is /home/agent.)
        !env.contains("SANDDUNE_TEST") && !env.contains("ANTHROPIC") && !env.contains("HOME=/home"),
        "the waiting container's config holds a run's env: {env}"
    );
    let reserved = inspect(engine, id, "{{index .Config.Labels \"sanddune.run\"}}");

    let wake = inspect(engine, id, "{{json .Config.Entrypoint}}");
    assert_eq!(wake.contains("/run/sanddune/wake"), link, "{wake}");
    let second = pooled_run(
        engine,
        &repo,
        "second\nFAKE:file:second.md\nFAKE:run:ls /tmp/left-by-first 2>&1; echo $SANDDUNE_TEST_SECRET; \
         test -p /run/sanddune/wake && echo wake-pipe-\"left\"; cat /proc/[0-9]*/cmdline | tr '\\0' ' '",
        &with("SANDDUNE_TEST_SECRET=two"),
    );
    let log = stderr(&second);
    let second = result(&second);
    assert!(
        log.contains(&format!("pool: took a warm container ({})", &id[..12])),
        "{log}"
    );
    let said = second["stdout"].as_str().unwrap();
    assert!(
        said.contains("No such file") && said.contains("two"),
        "the claimed container is not a fresh one with the run's env: {said}"
    );
    assert!(
        !said.contains("wake-pipe-left") && !said.contains("sleep 600"),
        "the wait left something behind: {said}"
    );
    assert!(
        said.contains("sleep infinity"),
        "the provider's process: {said}"
    );
    assert!(
        log.contains(&format!("on branch sanddune/run-{reserved}")),
        "the run took the id the container was made for: {log}"
    );
    for (result, file) in [(&first, "first.md"), (&second, "second.md")] {
        assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
        assert!(repo.path().join(file).exists(), "{file} not merged");
    }
    let calls = repo.calls("claude");
    assert_eq!(calls[1]["env"]["SANDDUNE_TEST_SECRET"], "two", "{calls:?}");
    assert_no_container_left(engine, "run", &reserved);
    let warm = waiting(engine, &repo);
    assert_eq!(warm.len(), 1, "topped up: {warm:?}");
    assert_ne!(&warm[0].0, id);

    let gc = repo.sanddune(&["gc"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert_eq!(waiting(engine, &repo).len(), 1, "gc left the waiting one");
    let gc = drain(&repo);
    assert!(
        stdout(&gc).contains("which no run claimed"),
        "{}",
        stdout(&gc)
    );
    assert!(waiting(engine, &repo).is_empty());
    let (branches, worktrees, agent_dirs) = slot_leftovers(&repo);
    assert!(
        branches.is_empty() && worktrees.is_empty() && agent_dirs.is_empty(),
        "left: {branches} {worktrees:?} {agent_dirs:?}"
    );
}

fn docker_a_run_claims_the_container_the_last_run_left_waiting() {
    a_run_claims_the_container_the_last_run_left_waiting("docker", true);
}

fn docker_a_run_without_a_link_claims_a_container_woken_by_a_signal() {
    a_run_claims_the_container_the_last_run_left_waiting("docker", false);
}

fn podman_a_run_claims_the_container_the_last_run_left_waiting() {
    a_run_claims_the_container_the_last_run_left_waiting("podman", true);
}

/// Two runs started at once with one container waiting: one takes it, the
/// other creates its own, and both land their commits.
fn docker_two_runs_at_once_never_claim_the_same_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let merge = ["--strategy", "merge-to-head"];
    result(&pooled_run(
        "docker",
        &repo,
        "fill\nFAKE:file:fill.md",
        &merge,
    ));
    assert_eq!(waiting("docker", &repo).len(), 1);
    let spawn = |n: &str| {
        pooled_command("docker", &repo, &format!("racer\nFAKE:file:{n}.md"), &merge)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a"), spawn("b"));
    let logs: Vec<String> = [a, b]
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            stderr(&out)
        })
        .collect();
    let took = logs
        .iter()
        .filter(|l| l.contains("pool: took a warm container"))
        .count();
    assert_eq!(took, 1, "{logs:?}");
    assert!(repo.path().join("a.md").exists() && repo.path().join("b.md").exists());
    drain(&repo);
    assert!(waiting("docker", &repo).is_empty());
}

/// A container no run claims within `pool-idle` ends itself, with no
/// sanddune process left; gc then removes it and what was made for it.
fn docker_an_idle_warm_container_ends_itself_and_gc_sweeps_it() {
    require_engine("docker");
    let repo = TestRepo::new();
    result(&pooled_run(
        "docker",
        &repo,
        "idle",
        &["--sandbox-opt", "pool-idle=30s"],
    ));
    let warm = waiting("docker", &repo);
    assert_eq!(warm.len(), 1, "{warm:?}");
    let deadline = Instant::now() + Duration::from_secs(90);
    // (Ended, another test's gc may remove it first: any gc may.)
    while waiting("docker", &repo)
        .first()
        .is_some_and(|(_, state)| state == "running")
    {
        assert!(Instant::now() < deadline, "still running after 90 s");
        std::thread::sleep(Duration::from_secs(2));
    }
    let gc = repo.sanddune(&["gc"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert!(waiting("docker", &repo).is_empty(), "{}", stdout(&gc));
    let (branches, worktrees, agent_dirs) = slot_leftovers(&repo);
    assert!(
        branches.is_empty() && worktrees.is_empty() && agent_dirs.is_empty(),
        "left: {branches} {worktrees:?} {agent_dirs:?}"
    );
}

/// A waiting container that is not the one this run would create (made
/// with a link to the credential gateway; this run has none) is removed,
/// and the run creates its own and lands its commit.
fn docker_a_container_unlike_the_runs_own_is_not_used() {
    require_engine("docker");
    let repo = TestRepo::new();
    result(&pooled_run("docker", &repo, "fill\nFAKE:file:fill.md", &[]));
    let warm = waiting("docker", &repo);
    assert_eq!(warm.len(), 1);
    let out = pooled_run(
        "docker",
        &repo,
        "other\nFAKE:file:other.md",
        &["--no-gateway"],
    );
    let log = stderr(&out);
    result(&out);
    assert!(
        log.contains("pool: the warm container was not used (its image, user, mounts, network or limits differ from this run's); created a new one"),
        "{log}"
    );
    assert!(repo.path().join("other.md").exists());
    assert!(
        !waiting("docker", &repo)
            .iter()
            .any(|(id, _)| *id == warm[0].0),
        "the unused container is gone"
    );
    drain(&repo);
}

/// A waiting container's link forwarder is started with it; one whose
/// forwarder is gone would cut the run off from the credential gateway.
/// The claim sees it is not running (from the engine's process list), and
/// the run creates its own container.
fn docker_a_waiting_container_whose_forwarder_died_is_not_used() {
    require_engine("docker");
    let repo = TestRepo::new();
    result(&pooled_run("docker", &repo, "fill\nFAKE:file:fill.md", &[]));
    let warm = waiting("docker", &repo);
    assert_eq!(warm.len(), 1);
    let killed = Command::new("docker")
        .args([
            "exec",
            "-u",
            "0",
            &warm[0].0,
            "pkill",
            "-f",
            "/run/sanddune/forward",
        ])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = pooled_run("docker", &repo, "next\nFAKE:file:next.md", &[]);
    let log = stderr(&out);
    result(&out);
    assert!(
        log.contains("pool: the warm container was not used (its link's forwarder is not running)"),
        "{log}"
    );
    assert!(repo.path().join("next.md").exists());
    drain(&repo);
}

/// The agent is hostile, and the pool keeps containers waiting beside its
/// run: with two waiting, the agent of the run that claims one writes into
/// every sibling worktree it can name and forges a slot record where the
/// repository's git dir would be. Its container mounts its own worktree
/// alone, so none of it reaches the host: the other slot's worktree is as
/// it was made, no record is forged, and the next run's agent finds
/// nothing of the first in the container it claims.
fn docker_a_hostile_agent_cannot_reach_a_waiting_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let merge = ["--strategy", "merge-to-head", "--sandbox-opt", "pool=2"];
    result(&pooled_run(
        "docker",
        &repo,
        "fill\nFAKE:file:fill.md",
        &merge,
    ));
    assert_eq!(waiting("docker", &repo).len(), 2);
    let hostile = "hostile\nFAKE:file:a.md\nFAKE:run:\
        for d in ../*; do [ \"$d\" -ef . ] || echo pwned > \"$d/pwned.txt\"; done; \
        mkdir -p ../../../.git/sanddune-pool/forged && echo forged > ../../../.git/sanddune-pool/forged/ready.json; \
        echo seen=$(ls ../ | wc -l)";
    let out = pooled_run("docker", &repo, hostile, &merge);
    let log = stderr(&out);
    let hostile = result(&out);
    assert!(log.contains("pool: took a warm container"), "{log}");
    // The agent saw one worktree in their parent: its own.
    assert!(
        hostile["stdout"].as_str().unwrap().contains("seen=1"),
        "{hostile}"
    );
    let worktrees = repo.path().join(".sanddune/worktrees");
    for entry in std::fs::read_dir(&worktrees).unwrap().flatten() {
        assert!(
            !entry.path().join("pwned.txt").exists(),
            "the agent wrote into {}",
            entry.path().display()
        );
    }
    assert!(!repo.path().join(".git/sanddune-pool/forged").exists());
    let out = pooled_run(
        "docker",
        &repo,
        "next\nFAKE:file:b.md\nFAKE:run:ls pwned.txt 2>&1",
        &merge,
    );
    let log = stderr(&out);
    let next = result(&out);
    assert!(log.contains("pool: took a warm container"), "{log}");
    assert!(
        next["stdout"].as_str().unwrap().contains("No such file"),
        "{next}"
    );
    for file in ["fill.md", "a.md", "b.md"] {
        assert!(repo.path().join(file).exists(), "{file} not merged");
    }
    drain(&repo);
    assert!(waiting("docker", &repo).is_empty());
}

/// Under head a container sees sanddune's own directories in the
/// repository laid empty, but only those there at its create. A container
/// left waiting before another run's worktree existed would show that
/// worktree to the next run's agent: it is not used, and the agent sees
/// the directory empty.
fn docker_a_waiting_container_made_before_a_worktree_existed_is_not_used() {
    require_engine("docker");
    let repo = TestRepo::new();
    result(&pooled_run("docker", &repo, "fill\nFAKE:file:fill.md", &[]));
    assert_eq!(waiting("docker", &repo).len(), 1);
    assert!(!repo.path().join(".sanddune/worktrees").exists());
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "other",
        ".sanddune/worktrees/other",
    ]);
    std::fs::write(
        repo.path().join(".sanddune/worktrees/other/secret.txt"),
        "another run's work",
    )
    .unwrap();
    let out = pooled_run(
        "docker",
        &repo,
        "look\nFAKE:file:look.md\nFAKE:run:cat .sanddune/worktrees/other/secret.txt 2>&1; echo entries=$(ls -A .sanddune/worktrees | wc -l)",
        &[],
    );
    let log = stderr(&out);
    let look = result(&out);
    assert!(
        log.contains("pool: the warm container was not used"),
        "{log}"
    );
    let said = look["stdout"].as_str().unwrap();
    assert!(
        !said.contains("another run's work") && said.contains("entries=0"),
        "the agent saw another run's worktree: {said}"
    );
    drain(&repo);
}

/// A `--branch` run claims a warm container too: the slot's worktree gets
/// the run's branch, made at HEAD when new, and an existing branch keeps
/// its own commit (nothing fast-forwards it, as for a branch run that
/// creates its container). The commits land on the branches, and no
/// temporary branch of a claimed slot is left.
fn docker_a_branch_run_claims_a_warm_container() {
    require_engine("docker");
    let repo = TestRepo::new();
    let (new, old) = (unique("new"), unique("old"));
    repo.git(&["branch", &old]);
    let old_tip = repo.git(&["rev-parse", &old]);
    std::fs::write(repo.path().join("later.md"), "after the branch\n").unwrap();
    repo.git(&["add", "later.md"]);
    repo.git(&["commit", "-q", "-m", "later on main"]);
    result(&pooled_run(
        "docker",
        &repo,
        "fill\nFAKE:file:fill.md",
        &["--strategy", "merge-to-head"],
    ));
    for (branch, file) in [(&new, "new.md"), (&old, "old.md")] {
        let out = pooled_run(
            "docker",
            &repo,
            &format!("on a branch\nFAKE:file:{file}"),
            &["--branch", branch],
        );
        let log = stderr(&out);
        let done = result(&out);
        assert!(log.contains("pool: took a warm container"), "{log}");
        assert_eq!(done["branch"], branch.as_str(), "{done}");
        assert_eq!(done["commits"].as_array().unwrap().len(), 1, "{done}");
        assert_eq!(
            repo.git(&["log", "-1", "--format=%s", branch]),
            format!("Add a note to {file}")
        );
        assert!(done["preservedWorktreePath"].is_null(), "{done}");
    }
    // The new branch began at HEAD; the old one kept its commit.
    assert_eq!(
        repo.git(&["rev-parse", &format!("{new}~1")]),
        repo.git(&["rev-parse", "main"])
    );
    assert_eq!(repo.git(&["rev-parse", &format!("{old}~1")]), old_tip);
    drain(&repo);
    let (branches, worktrees, agent_dirs) = slot_leftovers(&repo);
    assert!(
        branches.is_empty() && worktrees.is_empty() && agent_dirs.is_empty(),
        "left: {branches} {worktrees:?} {agent_dirs:?}"
    );
}

/// A branch run on a warm container that leaves work uncommitted keeps
/// its worktree under the branch's own name, as any branch run's: the
/// next run on the branch reuses it with its work (not from the pool).
fn docker_a_kept_branch_worktree_from_the_pool_is_named_by_its_branch() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("kept");
    result(&pooled_run(
        "docker",
        &repo,
        "fill\nFAKE:file:fill.md",
        &["--strategy", "merge-to-head"],
    ));
    let out = pooled_run(
        "docker",
        &repo,
        "half done\nFAKE:file:half.md\nFAKE:no-commit",
        &["--branch", &branch],
    );
    let log = stderr(&out);
    let done = result(&out);
    assert!(log.contains("pool: took a warm container"), "{log}");
    let own = std::fs::canonicalize(repo.path())
        .unwrap()
        .join(".sanddune/worktrees")
        .join(&branch);
    assert_eq!(
        done["preservedWorktreePath"],
        own.display().to_string(),
        "{done}"
    );
    assert!(own.join("half.md").exists());
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("worktree {}\nHEAD", own.display()))
            && list.contains(&format!("branch refs/heads/{branch}")),
        "{list}"
    );
    let out = pooled_run(
        "docker",
        &repo,
        "finish\nFAKE:file:rest.md",
        &["--branch", &branch],
    );
    let log = stderr(&out);
    let done = result(&out);
    assert!(
        log.contains("pool: not used: the branch's worktree")
            && log.contains("worktree reused with its work"),
        "{log}"
    );
    // The run worked in the kept worktree, and left its work there.
    assert_eq!(done["commits"].as_array().unwrap().len(), 1, "{done}");
    assert!(own.join("half.md").exists(), "{done}");
    drain(&repo);
}

/// A branch run on a warm container killed with SIGKILL mid-iteration:
/// gc collects it as any dead branch run's (its worktree's lock names the
/// branch git says that worktree holds). The work left in it is kept under
/// the branch's own name, where the next run on the branch reuses it, and
/// no container of it survives.
fn docker_a_killed_branch_run_on_a_warm_container_is_collected_by_gc() {
    require_engine("docker");
    let repo = TestRepo::new();
    let branch = unique("killed");
    result(&pooled_run(
        "docker",
        &repo,
        "fill\nFAKE:file:fill.md",
        &["--strategy", "merge-to-head"],
    ));
    let mut child = pooled_command("docker", &repo, "hang\nFAKE:hang", &["--branch", &branch])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !repo
        .calls("claude")
        .iter()
        .any(|c| c["prompt"] == "hang\nFAKE:hang")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let worktrees = repo.path().join(".sanddune/worktrees");
    let claimed = std::fs::read_dir(&worktrees)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("run-") && n.ends_with(".lock"))
        .expect("the run's worktree lock");
    let name = claimed.trim_end_matches(".lock").to_string();
    // What the agent had written when it was killed.
    std::fs::write(worktrees.join(&name).join("wip.txt"), "work in progress\n").unwrap();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    child.wait().unwrap();
    let gc = repo.sanddune(&["gc"]);
    assert!(gc.status.success(), "{}", stderr(&gc));
    let own = worktrees.join(&branch);
    assert!(
        own.join("wip.txt").exists() && !worktrees.join(&name).exists(),
        "gc: {}\n{:?}",
        stdout(&gc),
        std::fs::read_dir(&worktrees)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    );
    assert!(
        !worktrees.join(&claimed).exists(),
        "the dead run's lock is left"
    );
    assert_no_container_left("docker", "run", name.trim_start_matches("run-"));
    let out = pooled_run(
        "docker",
        &repo,
        "finish\nFAKE:file:rest.md",
        &["--branch", &branch],
    );
    let log = stderr(&out);
    result(&out);
    assert!(log.contains("worktree reused with its work"), "{log}");
    drain(&repo);
}

/// A workflow's fan-out items are branch runs: with `pool=N` each takes a
/// warm container, here of those a run left waiting, and their commits
/// land on the items' branches. (One at a time: at `--parallel N` items
/// share the machine's limits N ways, so their containers differ from a
/// lone run's and have a pool of their own.)
fn docker_a_workflows_fan_out_items_claim_warm_containers() {
    require_engine("docker");
    let repo = TestRepo::new();
    let sanddune = repo.path().join(".sanddune");
    std::fs::create_dir_all(sanddune.join("workflows")).unwrap();
    std::fs::write(
        sanddune.join("workflows/fan.toml"),
        r#"[defaults]
sandbox = "docker"
agent = "claude-code"

[[steps]]
name = "plan"
strategy = "merge-to-head"
prompt = "list the items\nFAKE:file:plan.md\nFAKE:say:<plan>[1, 2]</plan>"
output = { tag = "plan", schemaFile = "plan.schema.json" }

[[steps]]
name = "implement"
forEach = "plan"
branch = "fan/{{index}}"
promptFile = "item.md"
promptArgs = { N = "{{index}}" }
"#,
    )
    .unwrap();
    std::fs::write(
        sanddune.join("item.md"),
        "item {{N}}\nFAKE:file:item-{{N}}.md\n",
    )
    .unwrap();
    std::fs::write(
        sanddune.join("plan.schema.json"),
        r#"{"type": "array", "items": {"type": "integer"}}"#,
    )
    .unwrap();
    repo.git(&["add", ".sanddune"]);
    repo.git(&["commit", "-q", "-m", "workflow"]);
    let opts = |args: &mut Vec<String>| {
        for opt in [format!("image={IMAGE}"), "pool=3".into()]
            .into_iter()
            .chain(fake_mounts(&repo).into_iter().skip(1).step_by(2))
        {
            args.extend(["--sandbox-opt".into(), opt]);
        }
    };
    // Two waiting for the items (and one for the plan step).
    let mut fill: Vec<String> = ["run", "--sandbox", "docker", "--agent", "claude-code"]
        .map(String::from)
        .into();
    fill.extend(
        [
            "--strategy",
            "merge-to-head",
            "--prompt",
            "fill\nFAKE:file:fill.md",
        ]
        .map(String::from),
    );
    opts(&mut fill);
    let out = repo.sanddune(&fill.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(waiting("docker", &repo).len(), 3);
    let mut run: Vec<String> = [
        "workflow",
        "run",
        "fan",
        "--parallel",
        "1",
        "--json",
        "--trust",
    ]
    .map(String::from)
    .into();
    opts(&mut run);
    let out = repo.sanddune(&run.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let logs = repo.path().join(".sanddune/logs");
    let claimed = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path())
                .is_ok_and(|l| l.contains("pool: took a warm container"))
        })
        .count();
    assert_eq!(claimed, 3, "the plan step and both items claim: {result}");
    for n in ["1", "2"] {
        assert_eq!(
            repo.git(&["log", "-1", "--format=%s", &format!("fan/{n}")]),
            format!("Add a note to item-{n}.md")
        );
    }
    drain(&repo);
}

/// Bad pool options are refused before anything exists, naming the key.
fn pool_options_are_checked() {
    let repo = TestRepo::new();
    let refused = |args: &[&str], says: &str| {
        let mut all = vec!["run", "--agent", "claude-code", "--prompt", "x"];
        all.extend_from_slice(args);
        let out = repo.sanddune(&all);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    };
    refused(
        &["--sandbox", "test-isolated", "--sandbox-opt", "pool=1"],
        "cannot keep warm sandboxes (pool=1)",
    );
    refused(
        &["--sandbox", "docker", "--sandbox-opt", "pool=many"],
        "pool must be a number of containers from 0 to 16, not `many`",
    );
    refused(
        &[
            "--sandbox",
            "docker",
            "--sandbox-opt",
            "pool=1",
            "--sandbox-opt",
            "pool-idle=1s",
        ],
        "pool-idle: `1s` is too short",
    );
    refused(
        &[
            "--sandbox",
            "docker",
            "--sandbox-opt",
            "pool=1",
            "--sandbox-opt",
            "snapshot=auto",
        ],
        "pool=N and snapshot=auto do not go together",
    );
    assert!(repo.git(&["branch", "--list", "sanddune/*"]).is_empty());
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(docker_a_run_claims_the_container_the_last_run_left_waiting),
        trial!(docker_a_run_without_a_link_claims_a_container_woken_by_a_signal),
        trial!(podman_a_run_claims_the_container_the_last_run_left_waiting),
        trial!(docker_two_runs_at_once_never_claim_the_same_container),
        trial!(docker_an_idle_warm_container_ends_itself_and_gc_sweeps_it),
        trial!(docker_a_container_unlike_the_runs_own_is_not_used),
        trial!(docker_a_waiting_container_whose_forwarder_died_is_not_used),
        trial!(docker_a_hostile_agent_cannot_reach_a_waiting_container),
        trial!(docker_a_waiting_container_made_before_a_worktree_existed_is_not_used),
        trial!(docker_a_branch_run_claims_a_warm_container),
        trial!(docker_a_kept_branch_worktree_from_the_pool_is_named_by_its_branch),
        trial!(docker_a_killed_branch_run_on_a_warm_container_is_collected_by_gc),
        trial!(docker_a_workflows_fan_out_items_claim_warm_containers),
        trial!(pool_options_are_checked),
    ])
}
