//! Best-of-N through the real binary: `sanddune run --best-of N` with the
//! test-isolated sandbox and the fake `claude`, whose candidates differ by
//! model (a `--model FAKE:...` is one more marker to it): one writes a file
//! the check refuses, the others notes of different sizes.

mod common;

use common::{TestRepo, stderr, stdout};
use serde_json::Value;

/// `sanddune run --best-of ... --json` on the fake claude.
fn best_of(repo: &TestRepo, args: &[&str]) -> (std::process::Output, Value) {
    let mut all = vec![
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--json",
    ];
    all.extend_from_slice(args);
    let out = repo.sanddune(&all);
    let json = serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null);
    (out, json)
}

fn branches(repo: &TestRepo) -> Vec<String> {
    repo.git(&[
        "branch",
        "--format=%(refname:short)",
        "--list",
        "sanddune/*",
    ])
    .lines()
    .map(String::from)
    .collect()
}

/// Nothing of the candidates' runs is left: no worktree, no live record.
fn nothing_left(repo: &TestRepo) {
    assert_eq!(
        repo.git(&["worktree", "list"]).lines().count(),
        1,
        "no worktree left"
    );
    let runs = repo.path().join(".git/sanddune-runs");
    let left: Vec<_> = std::fs::read_dir(&runs)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "live records left: {left:?}");
}

const THREE: &[&str] = &[
    "--prompt",
    "add a note",
    "--model",
    "FAKE:file:BROKEN,FAKE:lines:40,FAKE:lines:3",
    "--check",
    "test ! -e BROKEN",
];

#[test]
fn the_smaller_passing_diff_lands_and_the_others_stay_on_their_branches() {
    let repo = TestRepo::new();
    let (out, result) = best_of(&repo, THREE);
    assert!(out.status.success(), "{}", stderr(&out));
    let c = result["candidates"].as_array().unwrap();
    let statuses: Vec<&str> = c.iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["check-failed", "passed", "passed"], "{result}");
    assert_eq!(c[0]["check"]["exitCode"], 1, "{result}");
    assert_eq!(c[0]["check"]["passed"], false);
    assert_eq!(c[2]["diff"]["insertions"], 4, "the note and 3 lines");
    assert_eq!(result["winner"]["index"], 3, "{result}");
    let reason = result["winner"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "fewest changed lines of the 2 that passed: #3 4 lines against #2 41 lines"
        ),
        "{reason}"
    );
    assert_eq!(result["landing"]["status"], "landed");
    // The winner's note is on the user's branch; its branch is gone.
    assert_eq!(repo.git(&["show", "HEAD:NOTES.md"]).lines().count(), 4);
    let kept = branches(&repo);
    assert_eq!(kept.len(), 2, "{kept:?}");
    for (i, candidate) in c.iter().enumerate() {
        let branch = candidate["branch"].as_str().unwrap();
        assert_eq!(candidate["kept"], i < 2, "{candidate}");
        assert_eq!(
            kept.iter().any(|k| k == branch),
            i < 2,
            "{branch}: {kept:?}"
        );
        assert_eq!(candidate["label"], format!("best-of-{}", i + 1));
    }
    assert!(
        c[0]["branch"]
            .as_str()
            .unwrap()
            .ends_with("/1-claude-code-FAKE-file-BROKEN")
    );
    nothing_left(&repo);
    // Each candidate has its own log, named for it.
    let log = c[1]["logFilePath"].as_str().unwrap();
    assert!(log.contains("/.sanddune/logs/best-of-2"), "{log}");
}

#[test]
fn discard_losers_deletes_the_other_branches() {
    let repo = TestRepo::new();
    let mut args = THREE.to_vec();
    args.push("--discard-losers");
    let (out, result) = best_of(&repo, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result["winner"]["index"], 3);
    assert_eq!(branches(&repo), Vec::<String>::new());
}

#[test]
fn a_judge_agent_picks_the_winner_through_structured_output() {
    let repo = TestRepo::new();
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--model",
            "FAKE:lines:3,FAKE:lines:40",
            "--tie-break",
            "judge",
            "--judge-model",
            "judge-model",
            "--judge-prompt",
            "Pick one.\nFAKE:say:<best-of>{\"best\": 2, \"reason\": \"clearer\"}</best-of>",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result["winner"]["index"], 2, "the bigger one: {result}");
    assert_eq!(result["winner"]["reason"], "the judge: clearer");
    assert_eq!(repo.git(&["show", "HEAD:NOTES.md"]).lines().count(), 41);
    let calls = repo.calls("claude");
    assert_eq!(calls.len(), 3, "two candidates and the judge");
    let judge = &calls[2];
    let prompt = judge["prompt"].as_str().unwrap();
    for want in [
        "Pick one.",
        "## The task\n\nadd a note",
        "## Candidate 1 (claude-code, FAKE:lines:3): 4 changed lines",
        "## Candidate 2",
        "+line 39",
    ] {
        assert!(
            prompt.contains(want),
            "{want:?} not in the judge's prompt:\n{prompt}"
        );
    }
    assert!(judge["argv"].to_string().contains("judge-model"), "{judge}");
    assert!(
        !branches(&repo).iter().any(|b| b.ends_with("/judge")),
        "the judge's branch is deleted"
    );
    nothing_left(&repo);
}

#[test]
fn a_judge_answer_naming_no_candidate_lands_nothing_and_keeps_every_branch() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--model",
            "FAKE:lines:3,FAKE:lines:40",
            "--tie-break",
            "judge",
            "--judge-prompt",
            "FAKE:say:<best-of>{\"best\": 7}</best-of>",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the judge failed"),
        "{}",
        stderr(&out)
    );
    assert!(result["winner"].is_null(), "{result}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(branches(&repo).len(), 2);
}

#[test]
fn when_every_candidate_fails_the_check_nothing_lands_and_nothing_is_left() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--best-of",
            "2",
            "--check",
            "echo nope; exit 3",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no candidate passed the check `echo nope; exit 3`: nothing landed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(result["ok"], false);
    for c in result["candidates"].as_array().unwrap() {
        assert_eq!(c["status"], "check-failed", "{c}");
        assert_eq!(c["check"]["exitCode"], 3);
        assert_eq!(c["check"]["tail"], "nope");
    }
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before, "nothing landed");
    assert_eq!(
        branches(&repo).len(),
        2,
        "their commits stay on their branches"
    );
    nothing_left(&repo);
}

#[test]
fn a_failed_candidate_does_not_stop_the_others() {
    let repo = TestRepo::new();
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--model",
            "FAKE:is-error,FAKE:lines:2",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let c = result["candidates"].as_array().unwrap();
    assert_eq!(c[0]["status"], "failed", "{result}");
    assert!(c[0]["error"].as_str().unwrap().contains("429"), "{result}");
    assert_eq!(result["winner"]["index"], 2);
    assert_eq!(result["winner"]["reason"], "the only candidate that passed");
}

#[test]
fn a_candidate_that_times_out_is_stopped_and_the_others_go_on() {
    let repo = TestRepo::new();
    let started = std::time::Instant::now();
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--model",
            "FAKE:hang,FAKE:lines:2",
            "--candidate-timeout",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(40),
        "the hang was cut short"
    );
    let c = result["candidates"].as_array().unwrap();
    assert_eq!(c[0]["status"], "timed-out", "{result}");
    assert!(
        c[0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 3 s"),
        "{result}"
    );
    assert_eq!(result["winner"]["index"], 2);
}

#[test]
fn candidates_can_use_different_agents() {
    let repo = TestRepo::new();
    // A second --agent adds to the list: claude-code twice, then codex.
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--agent",
            "claude-code,codex",
            "--tie-break",
            "first",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let agents: Vec<&str> = result["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["claude-code", "claude-code", "codex"]);
    assert_eq!(repo.calls("claude").len(), 2);
    assert_eq!(repo.calls("codex").len(), 1);
    assert!(
        result["winner"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("first to finish"),
        "{result}"
    );
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let repo = TestRepo::new();
    for (args, says) in [
        (
            &["--best-of", "3", "--model", "a,b"][..],
            "--model lists 2 values for 3 candidates",
        ),
        (
            &["--best-of", "2", "--strategy", "head"],
            "cannot use the head strategy",
        ),
        (&["--best-of", "1"], "at least 2 candidates"),
        (
            &["--best-of", "2", "--tie-break", "best"],
            "unknown --tie-break `best`",
        ),
        (
            &["--best-of", "2", "--judge-model", "m"],
            "need --tie-break judge",
        ),
        (&["--discard-losers"], "add --best-of N"),
        (
            &["--best-of", "2", "--branch", "main"],
            "the branch `main` exists already",
        ),
        (
            &["--best-of", "2", "--check", " "],
            "the check command is empty",
        ),
        (
            &[
                "--best-of",
                "2",
                "--tie-break",
                "judge",
                "--judge-agent",
                "no-such-agent",
            ],
            "no-such-agent",
        ),
    ] {
        let mut all = vec!["--prompt", "add a note"];
        all.extend_from_slice(args);
        let (out, _) = best_of(&repo, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(says),
            "{args:?}: {says:?} not in {}",
            stderr(&out)
        );
    }
    assert!(repo.calls("claude").is_empty(), "no agent started");
    assert!(branches(&repo).is_empty(), "no branch made");
    nothing_left(&repo);
}

#[test]
fn ctrl_c_during_judging_keeps_every_branch() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let child = repo
        .command(&[
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            "claude-code",
            "--json",
            "--prompt",
            "add a note",
            "--model",
            "FAKE:lines:1,FAKE:lines:2",
            "--tie-break",
            "judge",
            "--judge-prompt",
            "FAKE:hang",
            "--discard-losers",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while repo.calls("claude").len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the judge never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted (Ctrl-C)"),
        "{}",
        stderr(&out)
    );
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["aborted"], "interrupted (Ctrl-C)", "{result}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before, "nothing landed");
    let kept = branches(&repo);
    assert_eq!(
        kept.iter().filter(|b| !b.ends_with("/judge")).count(),
        2,
        "both candidates' branches are kept: {kept:?}"
    );
}

#[test]
fn a_plain_run_with_a_failed_check_keeps_its_commits_off_your_branch() {
    let repo = TestRepo::new();
    let before = repo.git(&["rev-parse", "HEAD"]);
    let (out, result) = best_of(
        &repo,
        &[
            "--prompt",
            "add a note",
            "--strategy",
            "merge-to-head",
            "--check",
            "false",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("the check `false` failed (exit 1); the commits stay on sanddune/run-"),
        "{}",
        stderr(&out)
    );
    assert_eq!(result["check"]["passed"], false, "{result}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(branches(&repo).len(), 1, "the run's branch is kept");
    let (out, result) = best_of(&repo, &["--prompt", "add a note", "--check", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(result["check"]["passed"], true);
    assert_ne!(repo.git(&["rev-parse", "HEAD"]), before, "merged");
}

#[test]
fn a_best_of_workflow_step_lands_its_winner_and_the_next_step_reads_its_output() {
    let repo = TestRepo::new();
    let dir = repo.path().join(".sanddune");
    std::fs::create_dir_all(dir.join("workflows")).unwrap();
    std::fs::write(
        dir.join("workflows/pick.toml"),
        r#"
[defaults]
agent = "claude-code"
sandbox = "test-isolated"

[[steps]]
name = "fix"
prompt = "add a note"
output = { tag = "summary", schemaFile = "summary.schema.json" }

  [steps.bestOf]
  models = ['FAKE:lines:30 FAKE:say:<summary>{"note":"big"}</summary>', 'FAKE:lines:2 FAKE:say:<summary>{"note":"small"}</summary>']
  check = "test -f NOTES.md"

[[steps]]
name = "report"
promptFile = "report.md"
promptArgs = { NOTE = "{{fix.note}}" }
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("summary.schema.json"),
        r#"{"type":"object","required":["note"]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("report.md"),
        "report on {{NOTE}} FAKE:file:REPORT.md\n",
    )
    .unwrap();
    repo.git(&["add", ".sanddune"]);
    repo.git(&["commit", "-q", "-m", "a workflow"]);

    let out = repo.sanddune(&["workflow", "run", "pick", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let best = &result["steps"][0]["bestOf"];
    assert_eq!(best["winner"]["index"], 2, "{result:#}");
    assert_eq!(best["candidates"][0]["label"], "fix-1");
    assert_eq!(best["landing"]["status"], "landed");
    assert_eq!(
        repo.git(&["show", "HEAD~1:NOTES.md"]).lines().count(),
        3,
        "the small note landed"
    );
    let calls = repo.calls("claude");
    assert!(
        calls.last().unwrap()["prompt"]
            .as_str()
            .unwrap()
            .starts_with("report on small"),
        "the next step read the winner's output: {calls:?}"
    );

    // A bestOf that cannot work is named before anything runs.
    for (step, says) in [
        (
            "forEach = \"plan.items\"\n  [steps.bestOf]\n  candidates = 2",
            "not with forEach, then or strategy",
        ),
        (
            "  [steps.bestOf]\n  candidates = 1",
            "at least 2 candidates",
        ),
        (
            "  [steps.bestOf]\n  models = [\"a\", \"b\", \"c\"]\n  agents = [\"x\", \"y\"]",
            "agents lists 2 for 3 candidates",
        ),
        (
            "  [steps.bestOf]\n  candidates = 2\n  judge = { model = \"m\" }",
            "`judge` needs tieBreak = \"judge\"",
        ),
        (
            "  [steps.bestOf]\n  candidates = 2\n  tieBreak = \"best\"",
            "tieBreak = \"best\"",
        ),
        (
            "  [steps.bestOf]\n  candidates = 2\n  colour = 1",
            "unknown field `colour`",
        ),
    ] {
        std::fs::write(
            dir.join("workflows/bad.toml"),
            format!(
                "[defaults]\nagent = \"claude-code\"\nsandbox = \"test-isolated\"\n\n[[steps]]\nname = \"plan\"\nprompt = \"p\"\noutput = {{ tag = \"summary\", schemaFile = \"summary.schema.json\" }}\n\n[[steps]]\nname = \"fix\"\nprompt = \"x\"\n{step}\n"
            ),
        )
        .unwrap();
        let out = repo.sanddune(&["workflow", "run", "bad"]);
        assert_eq!(out.status.code(), Some(2), "{step}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(says),
            "{step}: {says:?} not in {}",
            stderr(&out)
        );
    }
}

#[test]
fn gc_deletes_what_a_killed_best_of_left_with_nothing_of_its_own() {
    let repo = TestRepo::new();
    let head = repo.git(&["rev-parse", "HEAD"]);
    let prefix = "sanddune/best-of-1795000000-1f-0";
    // A judge's branch and a candidate that never committed: spent.
    repo.git(&["branch", &format!("{prefix}/judge"), &head]);
    repo.git(&["branch", &format!("{prefix}/2-claude-code"), &head]);
    // A candidate with a commit of its own: kept.
    let worked = format!("{prefix}/1-claude-code");
    repo.git(&["checkout", "-q", "-b", &worked]);
    std::fs::write(repo.path().join("work.txt"), "work\n").unwrap();
    repo.git(&["add", "work.txt"]);
    repo.git(&["commit", "-q", "-m", "work"]);
    repo.git(&["checkout", "-q", "main"]);
    // One checked out in a worktree (a live run's): kept, as is a branch
    // of another name.
    let live = format!("{prefix}/3-codex");
    let dir = repo.home.path().join("live-worktree");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &live,
        dir.to_str().unwrap(),
        &head,
    ]);
    repo.git(&["branch", "mine", &head]);

    let out = repo.sanddune(&["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    for gone in ["judge", "2-claude-code"] {
        assert!(
            said.contains(&format!("deleted `{prefix}/{gone}`")),
            "{said}"
        );
    }
    let left = branches(&repo);
    assert_eq!(left, [worked.clone(), live.clone()], "{said}");
    assert!(repo.git(&["branch", "--list", "mine"]).contains("mine"));
}

#[test]
fn a_judges_reason_is_printed_as_text_never_as_terminal_escapes() {
    let repo = TestRepo::new();
    // A hostile judge (or a diff that talked it round) answers with an
    // OSC 52 sequence that would write the user's clipboard.
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note",
        "--model",
        "FAKE:lines:1,FAKE:lines:2",
        "--tie-break",
        "judge",
        "--judge-prompt",
        // JSON escapes: its strings hold no raw control character.
        r#"FAKE:say:<best-of>{"best": 1, "reason": "ok\u001b]52;c;aGk=\u0007"}</best-of>"#,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        !said.contains('\u{1b}'),
        "a raw escape reached the terminal: {said:?}"
    );
    assert!(
        said.contains("winner: #1 (the judge: ok\\e]52;c;aGk=\\a)"),
        "{said}"
    );
}
