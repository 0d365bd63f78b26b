//! `sanddune ps`, `stop` and `gc` on the live-runs registry, through the
//! real binary: runs of the fake `claude` (`FAKE:hang` keeps it working for
//! a minute) in test-isolated sandboxes, and in docker when it is ready.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::engines::{IMAGE, fake_mounts, require_engine};
use common::live::{hanging_run, ps, wait_exit, wait_running};
use common::tmux::{self, Tmux};
use common::trials::{self, trial};
use common::{TestRepo, stderr, stdout};
use serde_json::Value;

/// The worktrees git knows besides the repository itself.
fn extra_worktrees(repo: &TestRepo) -> usize {
    repo.git(&["worktree", "list"]).lines().count() - 1
}

fn dir_entries(path: &std::path::Path) -> usize {
    std::fs::read_dir(path).map_or(0, |d| d.count())
}

fn ps_shows_a_live_run_and_stop_aborts_it_from_another_process() {
    let repo = TestRepo::new();
    let run = hanging_run(&repo, "probe", &["--max-iterations", "3"]);
    let runs = wait_running(&repo, 1);
    let r = &runs[0];
    assert_eq!(r["name"], "probe");
    assert_eq!(r["sandbox"], "test-isolated");
    assert_eq!(r["agent"], "claude-code");
    assert_eq!(
        (r["iteration"].as_u64(), r["maxIterations"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(r["alive"], true);
    assert!(
        r["branch"].as_str().unwrap().starts_with("sanddune/"),
        "{r}"
    );
    let log = r["logFile"].as_str().unwrap();
    assert!(std::path::Path::new(log).is_file(), "{log}");
    let id = r["runId"].as_str().unwrap().to_string();

    // The table a person reads, here and from anywhere (--all).
    let out = repo.sanddune(&["ps"]);
    let table = stdout(&out);
    assert!(table.starts_with("NAME"), "{table}");
    let line = table.lines().find(|l| l.contains(&id)).unwrap();
    for want in [
        "probe",
        "test-isolated",
        "claude-code",
        "1/3",
        "running",
        ".sanddune/logs/probe-",
    ] {
        assert!(line.contains(want), "want `{want}` in: {line}");
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let out = repo
        .command(&["ps", "--all"])
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(stdout(&out).contains(&id), "ps --all: {}", stdout(&out));

    // An unknown name is refused, listing the live runs.
    let out = repo.sanddune(&["stop", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no run is named `nope`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains(&id), "{}", stderr(&out));

    // Stopped from a second process: the run ends as aborted, well before
    // its agent would have, with its worktree kept and no sandbox left.
    let start = Instant::now();
    let out = repo.sanddune(&["stop", "probe"]);
    assert!(out.status.success(), "stop: {}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("stopped run `probe` ({id})")),
        "{}",
        stdout(&out)
    );
    let out = wait_exit(run, Duration::from_secs(20));
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stopped by `sanddune stop`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        extra_worktrees(&repo),
        1,
        "the aborted run's worktree is kept"
    );
    let git_dir = repo.path().join(".git");
    assert_eq!(
        dir_entries(&git_dir.join("sanddune-sandboxes")),
        0,
        "no sandbox left"
    );
    assert_eq!(
        dir_entries(&git_dir.join("sanddune-runs")),
        0,
        "no record left"
    );
    assert_eq!(stdout(&repo.sanddune(&["ps"])), "no live runs\n");
}

/// `sanddune logs` in the background, its stdout piped.
fn logs_in_background(repo: &TestRepo, args: &[&str]) -> Child {
    let mut all = vec!["logs"];
    all.extend_from_slice(args);
    repo.command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn logs_follows_a_run_from_its_start_to_its_end() {
    let repo = TestRepo::new();
    let run = repo
        .command(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "note FAKE:slow FAKE:no-signal",
            "--max-iterations",
            "3",
            "--name",
            "tail",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runs = wait_running(&repo, 1);
    let log = runs[0]["logFile"].as_str().unwrap().to_string();
    let follow = logs_in_background(&repo, &["tail", "-f"]);
    let events = logs_in_background(&repo, &["tail", "-f", "--events"]);
    // Without -f: what the log holds so far, from its start.
    let now = stdout(&repo.sanddune(&["logs", "tail"]));
    assert!(now.contains("iteration 1"), "{now}");

    assert!(wait_exit(run, Duration::from_secs(60)).status.success());
    // The followers end with the run, having printed all of it.
    let follow = wait_exit(follow, Duration::from_secs(10));
    assert!(follow.status.success(), "{}", stderr(&follow));
    assert_eq!(stdout(&follow), std::fs::read_to_string(&log).unwrap());
    assert!(
        stdout(&follow).contains("iteration 3"),
        "{}",
        stdout(&follow)
    );
    let events = wait_exit(events, Duration::from_secs(10));
    let events: Vec<Value> = stdout(&events)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for kind in ["text", "toolCall", "usage"] {
        assert!(
            events.iter().any(|e| e["type"] == kind),
            "no {kind}: {events:?}"
        );
    }
    let usage: Vec<&Value> = events.iter().filter(|e| e["type"] == "usage").collect();
    assert_eq!(usage.len(), 3, "one usage per iteration: {usage:?}");
    assert_eq!(usage[2]["iteration"], 3);
    assert!(usage[0]["outputTokens"].as_u64().unwrap() > 0, "{usage:?}");
    // Once the run has ended, it is no longer a live run.
    let out = repo.sanddune(&["logs", "tail"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn a_run_killed_with_sigkill_shows_as_dead_and_gc_clears_it() {
    let repo = TestRepo::new();
    let mut run = hanging_run(&repo, "doomed", &[]);
    let runs = wait_running(&repo, 1);
    let id = runs[0]["runId"].as_str().unwrap().to_string();
    run.kill().unwrap();
    run.wait().unwrap();

    let runs = ps(&repo, &[]);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["alive"], false);
    let table = stdout(&repo.sanddune(&["ps"]));
    let line = table.lines().find(|l| l.contains(&id)).unwrap();
    assert!(line.contains("dead"), "{line}");
    assert!(table.contains("sanddune gc"), "{table}");
    // A dead run cannot be stopped; it says what clears it.
    let out = repo.sanddune(&["stop", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is dead"), "{}", stderr(&out));

    let out = repo.sanddune(&["gc"]);
    assert!(
        stdout(&out).contains(&format!("cleared the record of dead run `doomed` ({id})")),
        "gc: {}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&repo.sanddune(&["ps"])), "no live runs\n");
}

fn two_runs_with_one_name_are_told_apart_by_id() {
    let repo = TestRepo::new();
    let first = hanging_run(&repo, "twin", &[]);
    let second = hanging_run(&repo, "twin", &[]);
    let runs = wait_running(&repo, 2);
    let ids: Vec<String> = runs
        .iter()
        .map(|r| r["runId"].as_str().unwrap().into())
        .collect();

    let out = repo.sanddune(&["stop", "twin"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 runs are named `twin`"),
        "{}",
        stderr(&out)
    );
    for id in &ids {
        assert!(stderr(&out).contains(id.as_str()), "{}", stderr(&out));
    }

    // By id, one stops and the other runs on.
    let out = repo.sanddune(&["stop", &ids[0]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let left = ps(&repo, &[]);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["runId"], ids[1].as_str());
    assert!(repo.sanddune(&["stop", &ids[1]]).status.success());
    for run in [first, second] {
        assert_eq!(
            wait_exit(run, Duration::from_secs(20)).status.code(),
            Some(130)
        );
    }
}

fn stopping_one_workflow_item_leaves_the_others_to_finish() {
    let repo = TestRepo::new();
    fan_out_workflow(
        &repo,
        "three",
        &[("a", "hang"), ("b", "slow"), ("c", "slow")],
        false,
    );

    let workflow = repo
        .command(&[
            "workflow",
            "run",
            "three",
            "--sandbox",
            "test-isolated",
            "--parallel",
            "3",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The hanging item, told by its workflow and item in ps.
    let deadline = Instant::now() + Duration::from_secs(60);
    let hanging = loop {
        let runs = ps(&repo, &[]);
        if let Some(r) = runs
            .iter()
            .find(|r| r["item"] == "work-1" && r["state"] == "running")
        {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "item work-1 never ran: {runs:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(hanging["workflow"], "three");
    assert_eq!(hanging["name"], "work-1");
    let out = repo.sanddune(&["stop", "work-1"]);
    assert!(out.status.success(), "stop: {}", stderr(&out));

    let out = wait_exit(workflow, Duration::from_secs(50));
    let result: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    let items = result["steps"][1]["items"].as_array().unwrap();
    let statuses: Vec<&str> = items
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["aborted", "succeeded", "succeeded"],
        "{result:#}"
    );
    assert!(
        items[0]["error"]
            .as_str()
            .unwrap()
            .contains("stopped by `sanddune stop`"),
        "{result:#}"
    );
    for branch in ["w-b", "w-c"] {
        let files = repo.git(&["ls-tree", "-r", "--name-only", branch]);
        assert!(
            files.contains(&format!("{}.md", &branch[2..])),
            "{branch}: {files}"
        );
    }
    assert_eq!(stdout(&repo.sanddune(&["ps"])), "no live runs\n");
}

/// Best-of-N's candidates are a workflow's items to `ps`, `logs` and
/// `stop`: stopping the hanging one leaves the other to win.
fn best_of_candidates_are_items_to_ps_logs_and_stop() {
    let repo = TestRepo::new();
    let best_of = repo
        .command(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--prompt",
            "add a note",
            "--model",
            "FAKE:hang,FAKE:slow",
            "--name",
            "fix",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let hanging = loop {
        let runs = ps(&repo, &[]);
        if let Some(r) = runs
            .iter()
            .find(|r| r["item"] == "fix-1" && r["state"] == "running")
        {
            break r.clone();
        }
        assert!(
            Instant::now() < deadline,
            "candidate fix-1 never ran: {runs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(hanging["workflow"], "fix");
    assert_eq!(hanging["name"], "fix-1");
    let out = repo.sanddune(&["logs", "fix-1"]);
    assert!(out.status.success(), "logs: {}", stderr(&out));
    assert!(
        stdout(&out).contains("agent `claude-code`"),
        "{}",
        stdout(&out)
    );
    let out = repo.sanddune(&["stop", "fix-1"]);
    assert!(out.status.success(), "stop: {}", stderr(&out));

    let out = wait_exit(best_of, Duration::from_secs(50));
    let result: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    let statuses: Vec<&str> = result["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["aborted", "passed"], "{result:#}");
    assert_eq!(result["winner"]["index"], 2, "{result:#}");
    assert_eq!(stdout(&repo.sanddune(&["ps"])), "no live runs\n");
}

fn ps_logs_and_stop_a_docker_run() {
    require_engine("docker");
    let repo = TestRepo::new();
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        "docker",
        "--agent",
        "claude-code",
        "--prompt",
        "note FAKE:hang",
        "--name",
        "boxed",
        "--branch",
        "boxed",
        "--sandbox-opt",
        &image,
    ];
    let mounts = fake_mounts(&repo);
    args.extend(mounts.iter().map(String::as_str));
    let run = repo
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runs = wait_running(&repo, 1);
    assert_eq!(runs[0]["sandbox"], "docker");
    assert_eq!(runs[0]["branch"], "boxed");
    let log = runs[0]["logFile"].as_str().unwrap().to_string();
    let follow = logs_in_background(&repo, &["boxed", "-f"]);
    let out = repo.sanddune(&["stop", "boxed"]);
    assert!(out.status.success(), "stop: {}", stderr(&out));
    assert_eq!(
        wait_exit(run, Duration::from_secs(30)).status.code(),
        Some(130)
    );
    // The follower printed the whole log, the stop included, and ended.
    let follow = wait_exit(follow, Duration::from_secs(10));
    assert!(follow.status.success(), "{}", stderr(&follow));
    assert_eq!(stdout(&follow), std::fs::read_to_string(&log).unwrap());
    assert!(
        stdout(&follow).contains("stopped by `sanddune stop`"),
        "{}",
        stdout(&follow)
    );
    common::engines::assert_no_container_left("docker", "run", runs[0]["runId"].as_str().unwrap());
}

/// `sanddune attach` in a terminal, as a person would use it: the shell is
/// in the run's worktree in its sandbox (`git log` shows the branch), a file
/// it writes there is what the waiting agent goes on after, and leaving it
/// leaves the run to commit and end well.
fn attach_while_the_agent_works(repo: &TestRepo, sandbox_args: &[&str]) {
    let mut args = vec![
        "run",
        "--agent",
        "claude-code",
        "--prompt",
        "note FAKE:wait-attached",
        "--name",
        "peek",
        "--branch",
        "peek",
    ];
    args.extend_from_slice(sandbox_args);
    let run = repo
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_running(repo, 1);
    let term = Tmux::start(&repo.shell_line(&["attach", "peek"]), repo.path(), 120, 30);
    term.wait_for("the attach banner", Duration::from_secs(30), |s| {
        s.contains("attached to run `peek`")
    });
    term.send_keys(&["git --no-pager log -1 --format=LOG:%s", "Enter"]);
    term.wait_for("git log in the sandbox", Duration::from_secs(20), |s| {
        s.contains("LOG:initial")
    });
    // Short lines, each once the shell is ready: a long one wraps under the
    // prompt, which readline in a container's terminal may redraw badly.
    term.send_keys(&["G=$(git rev-parse --git-dir) && echo G''SET", "Enter"]);
    term.wait_for("the git dir", Duration::from_secs(20), |s| {
        s.contains("GSET")
    });
    // The agent goes on at once, and the run closes the sandbox when it
    // ends: leave in the same breath.
    term.send_keys(&["touch $G/attached; exit", "Enter"]);
    let (code, screen) = term.wait_exit(Duration::from_secs(30));
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("detached from run `peek`"), "{screen}");

    let out = wait_exit(run, Duration::from_secs(60));
    assert!(out.status.success(), "the run: {}", stderr(&out));
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", "peek"]),
        "Add a note"
    );
}

fn attach_opens_a_shell_in_a_test_isolated_sandbox() {
    tmux::require();
    attach_while_the_agent_works(&TestRepo::new(), &["--sandbox", "test-isolated"]);
}

/// `attach_while_the_agent_works` in a container of `engine` (docker, podman).
fn attach_in_a_container(engine: &str) {
    tmux::require();
    require_engine(engine);
    let repo = TestRepo::new();
    let image = format!("image={IMAGE}");
    let mounts = fake_mounts(&repo);
    let mut args = vec!["--sandbox", engine, "--sandbox-opt", &image];
    args.extend(mounts.iter().map(String::as_str));
    attach_while_the_agent_works(&repo, &args);
}

fn attach_opens_a_shell_in_a_docker_sandbox() {
    attach_in_a_container("docker");
}

fn attach_opens_a_shell_in_a_podman_sandbox() {
    attach_in_a_container("podman");
}

/// A bubblewrap run's options: the fake claude's HOME and itself, bound at
/// their paths.
fn jail_args(repo: &TestRepo) -> Vec<String> {
    let home = repo.home.path().display().to_string();
    let fakes = common::fakes_dir().display().to_string();
    vec![
        "--sandbox".into(),
        "bubblewrap".into(),
        "--sandbox-opt".into(),
        format!("mount={home}:{home}"),
        "--sandbox-opt".into(),
        format!("mount={fakes}:{fakes}:ro"),
    ]
}

/// `attach_while_the_agent_works` in a bubblewrap jail: the shell is a
/// jail of its own over the run's worktree, HOME and agent git dir.
fn attach_opens_a_shell_in_a_bubblewrap_sandbox() {
    tmux::require();
    let repo = TestRepo::new();
    let args = jail_args(&repo);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    attach_while_the_agent_works(&repo, &args);
}

/// `ps` shows a jailed run, `stop` ends it, and nothing of its jail is left.
fn ps_and_stop_a_bubblewrap_run() {
    let repo = TestRepo::new();
    let jail = jail_args(&repo);
    let mut args = vec![
        "run",
        "--agent",
        "claude-code",
        "--prompt",
        "note FAKE:hang",
    ];
    args.extend(["--name", "jailed", "--branch", "jailed"]);
    args.extend(jail.iter().map(String::as_str));
    let run = repo
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runs = wait_running(&repo, 1);
    assert_eq!(runs[0]["sandbox"], "bubblewrap");
    let out = repo.sanddune(&["stop", "jailed"]);
    assert!(out.status.success(), "stop: {}", stderr(&out));
    assert_eq!(
        wait_exit(run, Duration::from_secs(30)).status.code(),
        Some(130)
    );
    // bwrap's command line names the worktree it binds.
    let left = Command::new("pgrep")
        .args(["-f", "--", &format!("bwrap .*{}", repo.path().display())])
        .output()
        .unwrap();
    assert_eq!(stdout(&left), "", "a jail outlived its run");
}

fn attach_refuses_without_a_terminal_and_names_unknown_runs() {
    let repo = TestRepo::new();
    let run = hanging_run(&repo, "busy", &[]);
    wait_running(&repo, 1);
    let out = repo.sanddune(&["attach", "busy"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("attach needs a terminal"),
        "{}",
        stderr(&out)
    );
    let out = repo.sanddune(&["attach", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no run is named `nope`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    assert!(repo.sanddune(&["stop", "busy"]).status.success());
    wait_exit(run, Duration::from_secs(20));
}

/// A workflow `name`: a plan of `items` (id, fake agent mode), each item a
/// run on its own branch `w-<id>` writing `<id>.md`, then (`merge`) the
/// merge queue.
fn fan_out_workflow(repo: &TestRepo, name: &str, items: &[(&str, &str)], merge: bool) {
    let dir = repo.path().join(".sanddune");
    std::fs::create_dir_all(dir.join("workflows")).unwrap();
    let plan: Vec<String> = items
        .iter()
        .map(|(id, mode)| format!(r#"{{"id":"{id}","mode":"{mode}"}}"#))
        .collect();
    let mut file = format!(
        r#"
[defaults]
agent = "claude-code"

[[steps]]
name = "plan"
prompt = 'plan FAKE:say:<plan>{{"items":[{}]}}</plan>'
output = {{ tag = "plan", schemaFile = "plan.schema.json" }}

[[steps]]
name = "work"
forEach = "plan.items"
branch = "w-{{{{item.id}}}}"
promptFile = "work.md"
promptArgs = {{ ID = "{{{{item.id}}}}", MODE = "FAKE:{{{{item.mode}}}}" }}
"#,
        plan.join(",")
    );
    if merge {
        file += "\n[[steps]]\nname = \"land\"\nmerge = \"work\"\n";
    }
    std::fs::write(dir.join(format!("workflows/{name}.toml")), file).unwrap();
    std::fs::write(
        dir.join("plan.schema.json"),
        r#"{"type":"object","required":["items"]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("work.md"),
        "work on {{ID}} {{MODE}} FAKE:file:{{ID}}.md\n",
    )
    .unwrap();
    repo.git(&["add", ".sanddune"]);
    repo.git(&["commit", "-q", "-m", "a workflow"]);
}

/// `six`: six slow items, then the merge queue.
fn six_item_workflow(repo: &TestRepo) {
    let ids = ["1", "2", "3", "4", "5", "6"];
    let items: Vec<(&str, &str)> = ids.iter().map(|id| (*id, "slow")).collect();
    fan_out_workflow(repo, "six", &items, true);
}

/// The rows of `screen` that start with `label` and a blank.
fn rows_of<'a>(screen: &'a str, label: &str) -> Vec<&'a str> {
    let prefix = format!("{label} ");
    screen.lines().filter(|l| l.starts_with(&prefix)).collect()
}

fn the_live_view_shows_each_item_on_one_line_that_updates_in_place() {
    tmux::require();
    let repo = TestRepo::new();
    six_item_workflow(&repo);
    let line = repo.shell_line(&[
        "workflow",
        "run",
        "six",
        "--sandbox",
        "test-isolated",
        "--parallel",
        "3",
    ]);
    let term = Tmux::start(&format!("TERM=xterm {line}"), repo.path(), 120, 40);
    // While the items run: a line each with its branch, iteration and state.
    let running = term.wait_for("three items running", Duration::from_secs(60), |s| {
        (1..=6)
            .filter(|i| {
                rows_of(s, &format!("work-{i}")).iter().any(|r| {
                    r.contains(&format!("w-{i}")) && r.contains("1/1") && r.contains("running")
                })
            })
            .count()
            == 3
    });
    let (code, screen) = term.wait_exit(Duration::from_secs(120));
    assert_eq!(code, 0, "{screen}");
    for i in 1..=6 {
        // One line in the view, updated in place, and one in the summary.
        let rows = rows_of(&screen, &format!("work-{i}"));
        assert_eq!(
            rows.len(),
            2,
            "work-{i} in:\n{screen}\nwhile running:\n{running}"
        );
        assert!(
            rows[0].contains("succeeded") && rows[0].contains("tok"),
            "{}",
            rows[0]
        );
        let summary: Vec<&str> = rows[1].split_whitespace().collect();
        assert_eq!(
            summary[..5],
            [
                format!("work-{i}").as_str(),
                "succeeded",
                &format!("w-{i}"),
                "1",
                "landed"
            ],
            "{screen}"
        );
    }
    assert!(screen.contains("ITEM    STATUS"), "{screen}");
    assert!(
        screen.contains("land: 6 landed, 0 up to date, 0 conflicted"),
        "{screen}"
    );
    assert!(!screen.contains("logging to"), "{screen}");
}

fn the_live_view_shows_a_row_per_best_of_candidate() {
    tmux::require();
    let repo = TestRepo::new();
    let line = repo.shell_line(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note",
        "--model",
        "FAKE:slow,FAKE:slow",
    ]);
    let term = Tmux::start(&format!("TERM=xterm {line}"), repo.path(), 140, 40);
    let running = term.wait_for("both candidates running", Duration::from_secs(60), |s| {
        (1..=2).all(|i| {
            rows_of(s, &format!("best-of-{i}")).iter().any(|r| {
                r.contains(&format!("/{i}-claude-code-FAKE-slow")) && r.contains("running")
            })
        })
    });
    let (code, screen) = term.wait_exit(Duration::from_secs(120));
    assert_eq!(code, 0, "{screen}\nwhile running:\n{running}");
    for i in 1..=2 {
        let rows = rows_of(&screen, &format!("best-of-{i}"));
        assert!(rows[0].contains("succeeded"), "{screen}");
    }
    assert!(
        screen.contains("winner: #1 (fewest changed lines"),
        "{screen}"
    );
    assert!(screen.contains("landed on main"), "{screen}");
}

fn without_a_capable_terminal_the_workflow_prints_plain_lines() {
    tmux::require();
    let repo = TestRepo::new();
    six_item_workflow(&repo);
    let line = repo.shell_line(&["workflow", "run", "six", "--sandbox", "test-isolated"]);
    for env in ["TERM=dumb", "TERM=xterm NO_COLOR=1"] {
        let term = Tmux::start(&format!("{env} {line} 2>&1 | cat -v"), repo.path(), 160, 60);
        let (code, screen) = term.wait_exit(Duration::from_secs(120));
        assert_eq!(code, 0, "{env}: {screen}");
        for i in 1..=6 {
            assert!(
                screen.contains(&format!("[work-{i}] started on w-{i}")),
                "{env}: {screen}"
            );
        }
        assert!(
            !screen.contains("^["),
            "{env}: an escape sequence in:\n{screen}"
        );
        repo.git(&["reset", "-q", "--hard", "HEAD~6"]);
        for i in 1..=6 {
            repo.git(&["branch", "-q", "-D", &format!("w-{i}")]);
        }
    }
}

fn the_json_result_gives_tokens_and_time_per_item() {
    let repo = TestRepo::new();
    six_item_workflow(&repo);
    let out = repo.sanddune(&[
        "workflow",
        "run",
        "six",
        "--sandbox",
        "test-isolated",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let items = result["steps"][1]["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    for item in items {
        assert!(item["tokens"].as_u64().unwrap() > 0, "{item}");
        assert!(item["durationMs"].as_u64().unwrap() > 0, "{item}");
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(ps_shows_a_live_run_and_stop_aborts_it_from_another_process),
        trial!(logs_follows_a_run_from_its_start_to_its_end),
        trial!(a_run_killed_with_sigkill_shows_as_dead_and_gc_clears_it),
        trial!(two_runs_with_one_name_are_told_apart_by_id),
        trial!(stopping_one_workflow_item_leaves_the_others_to_finish),
        trial!(best_of_candidates_are_items_to_ps_logs_and_stop),
        trial!(ps_logs_and_stop_a_docker_run),
        trial!(attach_opens_a_shell_in_a_test_isolated_sandbox),
        trial!(attach_opens_a_shell_in_a_docker_sandbox),
        trial!(attach_opens_a_shell_in_a_podman_sandbox),
        trial!(attach_opens_a_shell_in_a_bubblewrap_sandbox),
        trial!(ps_and_stop_a_bubblewrap_run),
        trial!(attach_refuses_without_a_terminal_and_names_unknown_runs),
        trial!(the_live_view_shows_each_item_on_one_line_that_updates_in_place),
        trial!(the_live_view_shows_a_row_per_best_of_candidate),
        trial!(without_a_capable_terminal_the_workflow_prints_plain_lines),
        trial!(the_json_result_gives_tokens_and_time_per_item),
    ])
}
