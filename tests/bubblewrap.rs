//! The bubblewrap provider with the real `bwrap`, as the non-root CI user
//! (a jail needs no root): the fake agents commit through it with every
//! branch strategy; from inside, the user's real HOME, another repository,
//! the repository's git config and the host's processes are out of reach;
//! what it plants in a git dir never runs on the host; the egress policies
//! hold; a killed run leaves no process behind; and what a jail cannot
//! do (limits, root) or a machine without bubblewrap is refused before
//! anything exists.
//!
//! Needs root and the non-root test user (see `common::non_root`), and
//! bubblewrap (`.ci/run` installs it).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::non_root::*;
use common::trials::{self, skip, trial};
use common::{TestRepo, USER_EMAIL, USER_NAME, fakes_dir, stderr, stdout};

/// bubblewrap on this machine, or the test is skipped (a failure in CI).
fn require_bwrap() {
    let found = Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skip("no bubblewrap here (apt-get install bubblewrap)");
    }
}

/// The options of a jail run of the fake claude: the test's HOME (where the
/// fake logs its calls) read-write, and the fakes themselves read-only, each
/// at its host path.
fn jail_options(repo: &TestRepo) -> Vec<String> {
    let home = repo.home.path().display().to_string();
    let fakes = fakes_dir().display().to_string();
    vec![
        format!("mount={home}:{home}"),
        format!("mount={fakes}:{fakes}:ro"),
    ]
}

/// `sanddune run` of the fake claude in a jail, with `prompt` and `extra`.
fn run_args<'a>(options: &'a [String], prompt: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--sandbox",
        "bubblewrap",
        "--agent",
        "claude-code",
        "--prompt",
        prompt,
        "--json",
    ];
    for o in options {
        args.extend(["--sandbox-opt", o.as_str()]);
    }
    args.extend_from_slice(extra);
    args
}

fn result_of(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn the_agent_commits_through_a_jail_with_every_branch_strategy() {
    require_bwrap();
    let user = user();
    let strategies: [(&[&str], &str); 3] = [
        (&[], "main"),
        (&["--strategy", "merge-to-head"], "main"),
        (&["--branch", "jailed"], "jailed"),
    ];
    for (strategy, lands_on) in strategies {
        let repo = repo_of(&user);
        let options = jail_options(&repo);
        let out = sanddune_as(&user, &repo, &run_args(&options, "fix the typo", strategy));
        let result = result_of(&out);
        assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
        assert_eq!(
            git(&repo, &["log", "-1", "--format=%s|%an <%ae>", lands_on]),
            format!("Fix typo in README|{USER_NAME} <{USER_EMAIL}>"),
            "{strategy:?}"
        );
        assert_eq!(
            git(&repo, &["show", &format!("{lands_on}:README.md")]),
            "# Project\n\nThis is the readme."
        );
        // Everything the run and the agent wrote is the user's.
        assert_eq!(not_owned_by(&user, repo.path()), Vec::<String>::new());
        assert_eq!(not_owned_by(&user, repo.home.path()), Vec::<String>::new());
    }
}

fn head_a_planted_hook_never_runs_on_the_host() {
    require_bwrap();
    a_planted_hook_never_runs_as_the_user("bubblewrap", &jail_options, &[]);
}

fn merge_to_head_a_planted_hook_never_runs_on_the_host() {
    require_bwrap();
    let strategy = ["--strategy", "merge-to-head"];
    a_planted_hook_never_runs_as_the_user("bubblewrap", &jail_options, &strategy);
}

fn branch_a_planted_hook_never_runs_on_the_host() {
    require_bwrap();
    let strategy = ["--branch", "hostile"];
    a_planted_hook_never_runs_as_the_user("bubblewrap", &jail_options, &strategy);
}

/// The user's real HOME (the one sanddune runs with), another repository,
/// the repository's git config with its credential, the system's files to
/// write and the user's other processes: none is within the agent's reach.
fn from_a_jail_the_users_home_another_repository_and_their_processes_are_out_of_reach() {
    require_bwrap();
    let user = user();
    let repo = repo_of(&user);
    git(
        &repo,
        &[
            "config",
            "http.extraheader",
            "AUTHORIZATION: bearer SECRET-TOKEN-42",
        ],
    );
    let real_home = tempfile::tempdir().unwrap();
    std::fs::create_dir(real_home.path().join(".ssh")).unwrap();
    std::fs::write(real_home.path().join(".ssh/id_ed25519"), "PRIVATE-KEY-7\n").unwrap();
    let other = repo_of(&user);
    std::fs::write(other.path().join("secret.txt"), "OTHER-REPO-9\n").unwrap();
    for dir in [real_home.path(), other.path()] {
        chown(&user, dir);
    }
    // One of the user's processes, which the agent must not see or signal.
    let mut theirs = Command::new("runuser")
        .args(["-u", &user.name, "--", "sleep", "300"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let sleeper = child_pid(theirs.id(), "sleep").expect("the user's sleep");
    let prompt = format!(
        "add a note\n\
         FAKE:run:cat {real}/.ssh/id_ed25519\n\
         FAKE:run:ls {real}\n\
         FAKE:run:cat {other}/secret.txt\n\
         FAKE:run:cat {repo}/.git/config\n\
         FAKE:run:kill -0 {sleeper} && echo SIGNALLED\n\
         FAKE:run:ls /proc | grep -c '^[0-9]'\n\
         FAKE:run:echo HOME=$HOME\n\
         FAKE:run:touch /usr/bin/planted",
        real = real_home.path().display(),
        other = other.path().display(),
        repo = repo.path().display(),
    );
    let options = jail_options(&repo);
    let home = real_home.path().display().to_string();
    let out = sanddune_as_with(
        &user,
        &repo,
        &run_args(&options, &prompt, &[]),
        &[("HOME", home.as_str())],
    );
    let result = result_of(&out);
    let text = result["stdout"].as_str().unwrap();
    for secret in [
        "PRIVATE-KEY-7",
        "OTHER-REPO-9",
        "SECRET-TOKEN-42",
        "SIGNALLED",
    ] {
        assert!(!text.contains(secret), "{secret} reached the agent: {text}");
    }
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(text.contains("No such process"), "{text}");
    assert!(!text.contains(&format!("HOME={home} ")), "{text}");
    assert!(!Path::new("/usr/bin/planted").exists());
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", "main"]),
        "Add a note"
    );
    assert!(
        Path::new(&format!("/proc/{sleeper}")).exists(),
        "the user's process was killed"
    );
    let _ = theirs.kill();
    let _ = theirs.wait();
}

fn egress_policies_hold_in_a_jail() {
    require_bwrap();
    egress_policies_hold_as_the_user("bubblewrap", &jail_options);
}

/// The session the agent keeps in the jail's HOME comes back to the
/// user's, and `--resume` puts it where the agent looks in the next jail.
fn the_session_is_captured_and_resumed() {
    require_bwrap();
    let user = user();
    let repo = repo_of(&user);
    let options = jail_options(&repo);
    let first = result_of(&sanddune_as(
        &user,
        &repo,
        &run_args(&options, "add a note", &[]),
    ));
    let iteration = &first["iterations"][0];
    let id = iteration["sessionId"].as_str().unwrap();
    let path = iteration["sessionFilePath"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionFilePath: {first}"));
    assert!(
        path.starts_with(&repo.home.path().display().to_string()),
        "{path}"
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(repo.path().to_str().unwrap()), "{text}");
    result_of(&sanddune_as(
        &user,
        &repo,
        &run_args(&options, "add another note", &["--resume", id]),
    ));
    let calls = repo.calls("claude");
    let argv = calls.last().unwrap()["argv"].to_string();
    assert!(argv.contains("--resume") && argv.contains(id), "{argv}");
}

/// Ctrl-C ends the jail with everything the agent started in it, and so
/// does a SIGKILL of sanddune, which gets no chance to clean up.
fn a_run_stopped_either_way_leaves_no_process_behind() {
    require_bwrap();
    let user = user();
    for signal in ["INT", "KILL"] {
        let repo = repo_of(&user);
        let options = jail_options(&repo);
        // The prompt (in sanddune's own argv) spells it another way.
        let marker = format!("3600.{}{}", std::process::id(), signal.len());
        let prompt = format!(
            "add a note\nFAKE:run:sleep $((3600)).{}{}",
            std::process::id(),
            signal.len()
        );
        let mut cmd = repo.command(&run_args(&options, &prompt, &[]));
        cmd.env("XDG_RUNTIME_DIR", &user.runtime_dir);
        let line = format!(
            "cd '{}' && exec {}",
            repo.path().display(),
            common::shell_line(&cmd)
        );
        let mut run = Command::new("runuser")
            .args(["-u", &user.name, "--", "sh", "-c", &line])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sleeper = wait_for(|| pgrep(&format!("sleep {marker}")).into_iter().next());
        let sanddune = ancestor(sleeper, "sanddune").expect("sanddune above the jail");
        let killed = Command::new("kill")
            .args([format!("-{signal}"), sanddune.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = run.wait();
        let repo_path = repo.path().display().to_string();
        wait_for(|| {
            (pgrep(&format!("sleep {marker}")).is_empty() && pgrep(&repo_path).is_empty())
                .then_some(())
        });
        if signal == "KILL" {
            let out = sanddune_as(&user, &repo, &["gc"]);
            assert!(out.status.success(), "{}", stderr(&out));
        }
    }
}

/// `sanddune interactive --sandbox bubblewrap` in a real terminal (tmux):
/// the agent's UI runs in the jail on the terminal, a resize reaches it,
/// typed prompts and Ctrl-C are the agent's, and the commit lands. As root:
/// the terminal tests drive tmux as the test's own user.
fn interactive_gives_the_agent_the_terminal_in_a_jail() {
    use common::tmux::{self, Tmux};
    tmux::require();
    require_bwrap();
    let repo = TestRepo::new();
    let options = jail_options(&repo);
    let mut args = vec![
        "interactive",
        "--sandbox",
        "bubblewrap",
        "--agent",
        "claude-code",
    ];
    for o in &options {
        args.extend(["--sandbox-opt", o.as_str()]);
    }
    let term = Tmux::start(
        &tmux::reporting_cooked(&repo.shell_line(&args)),
        repo.path(),
        100,
        30,
    );
    let (status, screen) = tmux::play_the_fake_ui(&term, "jail", Duration::from_secs(60));
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("agent exited with code 0"), "{screen}");
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert!(screen.contains("terminal-cooked"), "{screen}");
}

/// Limits a jail cannot apply and a set-up that needs root are refused,
/// naming what; a machine without bubblewrap is told how to install it.
/// Nothing is created for either refusal made up front.
fn what_a_jail_cannot_do_is_refused_with_the_reason() {
    require_bwrap();
    let repo = TestRepo::new();
    let options = jail_options(&repo);
    let out = repo.sanddune(&run_args(
        &options,
        "fix the typo",
        &["--sandbox-opt", "pids=64"],
    ));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot enforce pids=64"),
        "{}",
        stderr(&out)
    );
    assert_nothing_created(&repo);

    // No bwrap on PATH: only git and sh.
    let bin = tempfile::tempdir().unwrap();
    for program in ["git", "sh"] {
        let found = which(program);
        std::os::unix::fs::symlink(found, bin.path().join(program)).unwrap();
    }
    let out = repo
        .command(&run_args(&options, "fix the typo", &[]))
        .env("PATH", bin.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("apt-get install bubblewrap"),
        "{}",
        stderr(&out)
    );
    assert_nothing_created(&repo);

    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/config.toml"),
        "[[hooks.sandbox.onSandboxReady]]\ncommand = \"apt-get install -y jq\"\nsudo = true\n",
    )
    .unwrap();
    let out = repo.sanddune(&run_args(&options, "fix the typo", &["--trust"]));
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("a jail has no root"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

fn assert_nothing_created(repo: &TestRepo) {
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert!(repo.calls("claude").is_empty(), "the agent ran");
}

fn chown(user: &User, dir: &Path) {
    let out = Command::new("chown")
        .args(["-R", &format!("{}:", user.name)])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

fn which(program: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Pids of the processes whose command line holds `pattern`.
fn pgrep(pattern: &str) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-f", "--", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// `f`'s first Some, polled for up to 60 s.
fn wait_for<T>(f: impl Fn() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "waited 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The parent pid and command name of `pid`, from /proc.
fn stat(pid: u32) -> Option<(u32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let ppid = stat[close + 2..].split(' ').nth(1)?.parse().ok()?;
    Some((ppid, comm))
}

/// The nearest ancestor of `pid` named `comm`.
fn ancestor(mut pid: u32, comm: &str) -> Option<u32> {
    while pid > 1 {
        let (parent, name) = stat(pid)?;
        if name == comm {
            return Some(pid);
        }
        pid = parent;
    }
    None
}

/// The child of `pid` named `comm`.
fn child_pid(pid: u32, comm: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| stat(*p).is_some_and(|(parent, name)| parent == pid && name == comm))
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(the_agent_commits_through_a_jail_with_every_branch_strategy),
        trial!(head_a_planted_hook_never_runs_on_the_host),
        trial!(merge_to_head_a_planted_hook_never_runs_on_the_host),
        trial!(branch_a_planted_hook_never_runs_on_the_host),
        trial!(from_a_jail_the_users_home_another_repository_and_their_processes_are_out_of_reach),
        trial!(egress_policies_hold_in_a_jail),
        trial!(the_session_is_captured_and_resumed),
        trial!(a_run_stopped_either_way_leaves_no_process_behind),
        trial!(what_a_jail_cannot_do_is_refused_with_the_reason),
        trial!(interactive_gives_the_agent_the_terminal_in_a_jail),
    ])
}
