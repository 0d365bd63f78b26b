//! `sanddune init` and `sanddune workflow run`, end to end through the real
//! binary: every template scaffolded by init, run on the test-isolated
//! sandbox provider with a scripted `claude` (tests/fakes/workflow-claude)
//! and a fake `gh` serving the backlog.

mod common;

use std::path::Path;
use std::process::Output;

use common::trials::{self, skip, trial};
use common::{TestRepo, scaffolded, stderr, stdout};
use serde_json::{Value, json};

fn workflow(repo: &TestRepo, name: &str, parallel: &str) -> (Output, Value) {
    let out = repo.sanddune(&[
        "workflow",
        "run",
        name,
        "--sandbox",
        "test-isolated",
        "--parallel",
        parallel,
        "--json",
    ]);
    let result = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}\nstderr: {}", stdout(&out), stderr(&out)));
    (out, result)
}

/// The most agents the fake saw running at once.
fn peak_concurrency(repo: &TestRepo) -> usize {
    let log = std::fs::read_to_string(repo.home.path().join("fake-agents.jsonl")).unwrap();
    let spans: Vec<(f64, f64)> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["start"].as_f64().unwrap(), v["end"].as_f64().unwrap()))
        .collect();
    spans
        .iter()
        .map(|(start, _)| {
            spans
                .iter()
                .filter(|(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Bad input: exit code 2, and the message says `want`.
fn assert_refused(out: &Output, want: &str) {
    assert_eq!(out.status.code(), Some(2), "{want}: {}", stderr(out));
    assert!(
        stderr(out).contains(want),
        "want `{want}` in: {}",
        stderr(out)
    );
}

fn on_main(repo: &TestRepo, path: &str) -> bool {
    repo.git(&["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .any(|l| l == path)
}

/// The merge step's landings, in order (the step after the fan-out).
fn queue_statuses(result: &Value) -> Vec<String> {
    result["steps"][2]["merge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["status"].as_str().unwrap().to_string())
        .collect()
}

fn item_statuses(result: &Value, step: usize) -> Vec<String> {
    result["steps"][step]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap().to_string())
        .collect()
}

fn parallel_planner_fans_out_and_the_queue_stops_at_the_first_conflict() {
    let issues = [
        ("1", "alpha"),
        ("2", "shared one"),
        ("3", "beta"),
        ("4", "shared two"),
        ("5", "gamma"),
        ("6", "delta"),
    ];
    let repo = scaffolded("parallel-planner", &issues);
    let before = repo.git(&["rev-parse", "main"]);
    let (out, result) = workflow(&repo, "parallel-planner", "3");
    assert_eq!(
        out.status.code(),
        Some(1),
        "a conflict is not a clean finish: {}",
        stderr(&out)
    );
    assert_eq!(result["ok"], false);

    // The plan: every task of the backlog, through the structured output.
    let plan = &result["steps"][0];
    assert_eq!(plan["name"], "plan");
    assert_eq!(
        plan["items"][0]["output"]["issues"]
            .as_array()
            .unwrap()
            .len(),
        6
    );

    // Six branches, one commit each, never more than three agents at once.
    assert_eq!(item_statuses(&result, 1), vec!["succeeded"; 6]);
    for (id, _) in issues {
        let branch = format!("sanddune/task-{id}");
        assert_eq!(
            repo.git(&["rev-list", "--count", &format!("{before}..{branch}")]),
            "1"
        );
        assert!(
            repo.git(&["log", "-1", "--format=%s", &branch])
                .starts_with(&format!("Implement task {id}"))
        );
    }
    let peak = peak_concurrency(&repo);
    assert!(
        (1..=3).contains(&peak),
        "at most 3 agents at once, saw {peak}"
    );

    // The queue: 1-3 land, 4 conflicts with 2 in shared.txt, 5-6 wait.
    let queue = result["steps"][2]["merge"].as_array().unwrap();
    let statuses = queue_statuses(&result);
    assert_eq!(
        statuses,
        [
            "landed",
            "landed",
            "landed",
            "conflicted",
            "pending",
            "pending"
        ],
        "{queue:?}"
    );
    assert_eq!(queue[3]["branch"], "sanddune/task-4");
    assert_eq!(queue[3]["paths"], json!(["shared.txt"]));
    for path in ["tasks/1.txt", "tasks/3.txt", "shared.txt"] {
        assert!(on_main(&repo, path), "{path} landed");
    }
    assert!(
        !on_main(&repo, "tasks/5.txt"),
        "the queue stopped before task 5"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("shared.txt")).unwrap(),
        "written by task 2\n",
        "the host's working tree follows main"
    );
    // The conflicted and pending branches keep their commits; the host is clean.
    assert!(
        repo.git(&["branch", "--list", "sanddune/task-*"])
            .lines()
            .count()
            == 6
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(
        repo.git(&["worktree", "list"]).lines().count(),
        1,
        "clean worktrees are removed"
    );
    let text = stderr(&out);
    assert!(
        text.contains("[implement-4] started on sanddune/task-4"),
        "{text}"
    );
    assert!(
        text.contains("merge sanddune/task-4: CONFLICT in shared.txt"),
        "{text}"
    );
    // Items freed their lane at their result; every sandbox's close was
    // done before the workflow returned (ADR 0034): no record is left.
    let records = std::fs::read_dir(repo.path().join(".git/sanddune-sandboxes"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(records, 0, "a sandbox was left unclosed");
    assert!(sanddune::run::registry::list(&repo.path().join(".git")).is_empty());
}

fn parallel_planner_with_review_reviews_in_each_branchs_sandbox() {
    let issues = [
        ("7", "alpha"),
        ("8", "beta"),
        ("9", "gamma"),
        ("10", "delta"),
    ];
    let repo = scaffolded("parallel-planner-with-review", &issues);
    let (out, result) = workflow(&repo, "parallel-planner-with-review", "2");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result["ok"], true);
    for item in result["steps"][1]["items"].as_array().unwrap() {
        assert_eq!(item["status"], "succeeded");
        assert_eq!(
            item["runs"].as_array().unwrap().len(),
            2,
            "implement, then review"
        );
        assert_eq!(item["commits"].as_array().unwrap().len(), 2, "{item}");
    }
    for (id, _) in issues {
        assert_eq!(
            repo.git(&["log", "-1", "--format=%s", &format!("sanddune/task-{id}")]),
            format!("Review task {id}")
        );
        assert!(on_main(&repo, &format!("tasks/{id}.txt")));
        assert!(on_main(&repo, &format!("reviews/{id}.md")));
    }
    let queue = result["steps"][2]["merge"].as_array().unwrap();
    assert!(queue.iter().all(|q| q["status"] == "landed"), "{queue:?}");
    let peak = peak_concurrency(&repo);
    assert!(
        (1..=2).contains(&peak),
        "at most 2 agents at once, saw {peak}"
    );
}

fn a_failed_item_is_reported_and_the_queue_goes_on_past_it() {
    let issues = [
        ("1", "alpha"),
        ("2", "broken"),
        ("3", "nothing"),
        ("4", "beta"),
    ];
    let repo = scaffolded("parallel-planner", &issues);
    let (out, result) = workflow(&repo, "parallel-planner", "4");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        item_statuses(&result, 1),
        ["succeeded", "failed", "succeeded", "succeeded"]
    );
    let failed = &result["steps"][1]["items"][1];
    assert!(
        failed["error"].as_str().unwrap().contains("500 overloaded"),
        "{failed}"
    );
    let queue = result["steps"][2]["merge"].as_array().unwrap();
    let statuses = queue_statuses(&result);
    assert_eq!(
        statuses,
        ["landed", "failed", "up-to-date", "landed"],
        "{queue:?}"
    );
    assert!(on_main(&repo, "tasks/1.txt") && on_main(&repo, "tasks/4.txt"));
    assert!(
        stderr(&out).contains("[implement-2] failed:"),
        "{}",
        stderr(&out)
    );
}

fn simple_loop_takes_tasks_until_none_is_left() {
    let repo = scaffolded("simple-loop", &[("1", "a"), ("2", "b"), ("3", "c")]);
    let (out, result) = workflow(&repo, "simple-loop", "1");
    assert!(out.status.success(), "{}", stderr(&out));
    let item = &result["steps"][0]["items"][0];
    assert_eq!(item["runs"][0]["iterations"].as_array().unwrap().len(), 4);
    assert_eq!(item["commits"].as_array().unwrap().len(), 3);
    assert_eq!(item["branch"], "main", "merge-to-head lands on main");
    for id in ["1", "2", "3"] {
        assert!(on_main(&repo, &format!("tasks/{id}.txt")));
    }
}

/// `[git]` in the repository's config applies to a workflow's runs as to
/// `sanddune run`: the agent is the author of every item's commits, the
/// user the committer, credited in a trailer.
fn the_configs_commit_identity_reaches_every_workflow_run() {
    let repo = scaffolded("simple-loop", &[("1", "a"), ("2", "b")]);
    let config = repo.path().join(".sanddune/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    text.push_str(
        "\n[git]\nagentName = \"Fake Agent\"\nagentEmail = \"agent@sanddune.invalid\"\ncoAuthoredBy = \"user\"\n",
    );
    std::fs::write(&config, text).unwrap();
    // The scaffold's .env names an identity of its own, which would win.
    std::fs::write(repo.path().join(".sanddune/.env"), "").unwrap();
    repo.git(&["commit", "-q", "-am", "the agent's identity from [git]"]);
    let (out, result) = workflow(&repo, "simple-loop", "1");
    assert!(out.status.success(), "{}", stderr(&out));
    let commits = result["steps"][0]["items"][0]["commits"]
        .as_array()
        .unwrap();
    assert_eq!(commits.len(), 2, "{result}");
    let user = format!("{} <{}>", common::USER_NAME, common::USER_EMAIL);
    for commit in commits {
        let sha = commit["sha"].as_str().unwrap();
        assert_eq!(
            repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>", sha]),
            format!("Fake Agent <agent@sanddune.invalid>|{user}")
        );
        let message = repo.git(&["log", "-1", "--format=%B", sha]);
        assert!(
            message.ends_with(&format!("Co-authored-by: {user}")),
            "{message}"
        );
    }
}

fn sequential_reviewer_implements_then_reviews_then_merges() {
    let repo = scaffolded("sequential-reviewer", &[("4", "first"), ("5", "second")]);
    let (out, result) = workflow(&repo, "sequential-reviewer", "1");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        result["steps"][0]["items"][0]["runs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        repo.git(&["log", "-2", "--format=%s", "main"]),
        "Review task 4\nImplement task 4: first"
    );
    assert!(!on_main(&repo, "tasks/5.txt"), "one task per run");
    assert_eq!(
        repo.git(&["branch", "--list", "sanddune/*"]),
        "",
        "the temporary branch is gone"
    );
}

fn blank_runs_the_users_prompt_with_progress_in_terminal_mode() {
    let repo = scaffolded("blank", &[]);
    // The only workflow, so no name; terminal mode streams the agent's text.
    let out = repo.sanddune(&[
        "workflow",
        "run",
        "--sandbox",
        "test-isolated",
        "--log",
        "terminal",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "main"]),
        "Add a note"
    );
    let text = stderr(&out);
    assert!(text.contains("[run] Added a note."), "{text}");
    assert!(text.contains("[run] done: 1 commit"), "{text}");
    // The summary table: item, status, branch, commits.
    let summary = stdout(&out);
    let row: Vec<&str> = summary
        .lines()
        .find(|l| l.starts_with("run "))
        .unwrap_or_else(|| panic!("no row for `run`: {summary}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["run", "succeeded", "main", "1"], "{summary}");
}

fn an_empty_plan_fans_out_to_nothing() {
    let repo = scaffolded("parallel-planner", &[]);
    let (out, result) = workflow(&repo, "parallel-planner", "4");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result["steps"][2]["merge"], json!([]));
}

fn init_refuses_an_existing_config_directory() {
    let repo = scaffolded("blank", &[]);
    let before = std::fs::read_to_string(repo.path().join(".sanddune/prompts/prompt.md")).unwrap();
    let out = repo.sanddune(&[
        "init",
        "--yes",
        "--no-build",
        "--template",
        "parallel-planner",
    ]);
    assert_refused(&out, ".sanddune already exists: init never overwrites it");
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".sanddune/prompts/prompt.md")).unwrap(),
        before
    );
    assert!(
        !repo
            .path()
            .join(".sanddune/workflows/parallel-planner.toml")
            .exists()
    );
}

fn init_without_a_terminal_needs_flags_or_yes() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&["init", "--agent", "codex", "--no-build"]);
    assert_refused(&out, "pass --sandbox, --backlog, --template (or --yes");
    assert!(!repo.path().join(".sanddune").exists());
    let out = repo.sanddune(&[
        "init",
        "--yes",
        "--no-build",
        "--sandbox",
        "podman",
        "--backlog",
        "beads",
        "--template",
        "nope",
    ]);
    assert_refused(&out, "unknown template `nope`");
    assert!(
        !repo.path().join(".sanddune").exists(),
        "nothing is written on bad input"
    );
    let out = repo.sanddune(&[
        "init",
        "--yes",
        "--no-build",
        "--sandbox",
        "podman",
        "--backlog",
        "beads",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let containerfile =
        std::fs::read_to_string(repo.path().join(".sanddune/Containerfile")).unwrap();
    assert!(
        containerfile.contains("@beads/bd") && !containerfile.contains("{{"),
        "{containerfile}"
    );
    assert!(repo.path().join(".sanddune/workflows/blank.toml").exists());
}

/// With an engine but no registry, the build fails with the engine's own
/// message and the scaffold stays. Needs an engine; ignored without one
/// (a failure in CI).
fn a_build_without_a_registry_keeps_the_scaffold() {
    let socket = ["/var/run/docker.sock", "/run/docker.sock"]
        .into_iter()
        .find(|s| Path::new(s).exists());
    if socket.is_none() {
        skip("no Docker engine at /var/run/docker.sock");
    }
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "init",
        "--yes",
        "--sandbox",
        "docker",
        "--image-name",
        "sanddune-init-test:none",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("building sanddune-init-test:none failed"),
        "{text}"
    );
    assert!(text.contains("the scaffold is in place"), "{text}");
    assert!(repo.path().join(".sanddune/Dockerfile").exists());
}

fn workflow_file_mistakes_are_named() {
    let repo = scaffolded("parallel-planner", &[]);
    let file = repo
        .path()
        .join(".sanddune/workflows/parallel-planner.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let cases = [
        (
            good.replace("forEach = \"plan.issues\"", "forEach = \"plann.issues\""),
            "forEach = \"plann.issues\": `plann` is not an earlier step with an output (have: plan)",
        ),
        (
            good.replace("maxIterations = 20", "maxIteration = 20"),
            "step `implement`: unknown key `maxIteration`",
        ),
        (
            good.replace("merge = \"implement\"", "merge = \"plan\""),
            "only a step with forEach has branches to merge",
        ),
        (
            good.replace("{{item.id}}", "{{item.id}} {{args.LABEL}}"),
            "`{{args.LABEL}}` names no key declared in [args]",
        ),
        (good.replace("description =", "description = 1 #"), "line 1"),
        (
            good.replace("prompts/implement.md", "prompts/missing.md"),
            "promptFile = \"prompts/missing.md\": no such file",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&file, &text).unwrap();
        let out = repo.sanddune(&[
            "workflow",
            "run",
            "parallel-planner",
            "--sandbox",
            "test-isolated",
        ]);
        assert_refused(&out, want);
        assert_refused(&out, "parallel-planner.toml");
    }
    let out = repo.sanddune(&["workflow", "run", "nightly"]);
    assert_refused(&out, "no workflow `nightly`");
    assert_refused(&out, "(have: parallel-planner)");
    std::fs::write(&file, good).unwrap();
    let out = repo.sanddune(&[
        "workflow",
        "run",
        "--sandbox",
        "test-isolated",
        "--arg",
        "LABEL=x",
    ]);
    assert_refused(&out, "has no argument `LABEL` (declared: none)");
    assert!(
        !repo.home.path().join("fake-agents.jsonl").exists(),
        "no agent ran"
    );
}

fn ctrl_c_stops_every_branch_and_keeps_the_worktrees() {
    ctrl_c_keeps_the_worktrees("parallel-planner", "--json");
}

/// The same with `then`: the runs share a sandbox on a worktree handle.
fn ctrl_c_keeps_the_worktrees_of_a_step_with_then() {
    ctrl_c_keeps_the_worktrees("parallel-planner-with-review", "--log=file");
}

fn ctrl_c_keeps_the_worktrees(template: &str, output: &str) {
    let repo = scaffolded(template, &[("1", "a"), ("2", "b"), ("3", "c")]);
    std::fs::write(repo.home.path().join("fake-sleep-implement"), "30").unwrap();
    let child = repo
        .command(&[
            "workflow",
            "run",
            template,
            "--sandbox",
            "test-isolated",
            "--parallel",
            "2",
            output,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The planner is quick, the implementers take long: interrupt them.
    let worktrees = repo.path().join(".sanddune/worktrees");
    let started = std::time::Instant::now();
    while !worktrees.join("sanddune-task-1").exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the fan-out never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        worktrees.join("sanddune-task-1").exists(),
        "the aborted branch's worktree is kept"
    );
    assert!(!on_main(&repo, "tasks/1.txt"));
    assert!(
        stderr(&out).contains("interrupted (Ctrl-C)"),
        "{}",
        stderr(&out)
    );
    if output == "--json" {
        let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(result["aborted"], "interrupted (Ctrl-C)");
        assert_eq!(
            item_statuses(&result, 1),
            ["aborted", "aborted", "not-started"]
        );
        assert_eq!(
            result["steps"].as_array().unwrap().len(),
            2,
            "no merge after an abort"
        );
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(parallel_planner_fans_out_and_the_queue_stops_at_the_first_conflict),
        trial!(parallel_planner_with_review_reviews_in_each_branchs_sandbox),
        trial!(a_failed_item_is_reported_and_the_queue_goes_on_past_it),
        trial!(simple_loop_takes_tasks_until_none_is_left),
        trial!(the_configs_commit_identity_reaches_every_workflow_run),
        trial!(sequential_reviewer_implements_then_reviews_then_merges),
        trial!(blank_runs_the_users_prompt_with_progress_in_terminal_mode),
        trial!(an_empty_plan_fans_out_to_nothing),
        trial!(init_refuses_an_existing_config_directory),
        trial!(init_without_a_terminal_needs_flags_or_yes),
        trial!(a_build_without_a_registry_keeps_the_scaffold),
        trial!(workflow_file_mistakes_are_named),
        trial!(ctrl_c_stops_every_branch_and_keeps_the_worktrees),
        trial!(ctrl_c_keeps_the_worktrees_of_a_step_with_then),
    ])
}
