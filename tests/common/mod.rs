//! Shared by the integration tests: throwaway repositories, the fake agents,
//! and running the real `sanddune` binary.
#![allow(dead_code)]

pub mod engines;
pub mod hostile;
pub mod live;
pub mod non_root;
pub mod servers;
pub mod snapshots;
pub mod tmux;
// Its macro is unused in the suites on the built-in harness.
#[allow(unused_macros, unused_imports)]
pub mod trials;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_sanddune");

/// A component built for the tests (or a built-in, as a file).
pub fn plugin_file(crate_name: &str) -> PathBuf {
    Path::new(env!("SANDDUNE_TEST_PLUGIN_DIR"))
        .join(format!("{}.wasm", crate_name.replace('-', "_")))
}

/// Compiled components shared by every test run, like a user's cache.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// The fake agent executables, as a path without `..` (a jail binds it at
/// the same path, where a link to it must resolve).
pub fn fakes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fakes")
        .canonicalize()
        .unwrap()
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What a user of each built-in agent provider has in their environment
/// (one key of its env requirement), so a run gets past the check before
/// anything starts; the fakes ignore the values. Any real key of the
/// person running the tests is replaced.
pub const AGENT_KEYS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-sanddune-test"),
    ("OPENAI_API_KEY", "sk-sanddune-test"),
    ("CURSOR_API_KEY", "sanddune-test"),
    ("GH_TOKEN", "sanddune-test"),
    ("GEMINI_API_KEY", "sanddune-test"),
];

/// The git identity of every test repository's user.
pub const USER_NAME: &str = "Test User";
pub const USER_EMAIL: &str = "test.user@sanddune.invalid";

/// A git repository with one commit and a README with a typo, and a HOME
/// of its own for the fake agents.
pub struct TestRepo {
    pub dir: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

impl TestRepo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let p = dir.path();
        git(p, &["init", "-q", "-b", "main"]);
        std::fs::write(p.join("README.md"), "# Project\n\nThis is teh readme.\n").unwrap();
        git(p, &["add", "README.md"]);
        // The user's git identity: the repository's own, since HOME is
        // the test's (no global config).
        git(p, &["config", "user.name", USER_NAME]);
        git(p, &["config", "user.email", USER_EMAIL]);
        git(p, &["commit", "-q", "-m", "initial"]);
        // The fakes, linked into a bin dir of this test's own: they record
        // their calls beside it (see `calls`).
        let bin = home.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for entry in std::fs::read_dir(fakes_dir()).unwrap() {
            let fake = entry.unwrap().path();
            std::os::unix::fs::symlink(&fake, bin.join(fake.file_name().unwrap())).unwrap();
        }
        Self { dir, home }
    }

    /// This test's fakes directory, for PATH.
    pub fn bin(&self) -> PathBuf {
        self.home.path().join("bin")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// Run the real binary in this repository with the fakes first on PATH.
    pub fn sanddune(&self, args: &[&str]) -> Output {
        self.sanddune_with_env(args, &[])
    }

    /// `sanddune`, with extra variables in its own environment.
    pub fn sanddune_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// The real binary, ready to run in this repository: this test's fakes
    /// first on PATH, its own HOME, the shared component cache.
    pub fn command(&self, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .current_dir(self.path())
            .env("PATH", path)
            .env("HOME", self.home.path())
            // The repository's config is all the git config there is.
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            // Nor an identity from the environment (a CI's), which git
            // and so sanddune would rank above the repository's.
            .env_remove("GIT_AUTHOR_NAME")
            .env_remove("GIT_AUTHOR_EMAIL")
            .env_remove("GIT_COMMITTER_NAME")
            .env_remove("GIT_COMMITTER_EMAIL")
            .env_remove("EMAIL")
            .env("SANDDUNE_CACHE_DIR", cache_dir())
            // Approvals go under this test's HOME, like a user's.
            .env_remove("SANDDUNE_STATE_DIR")
            .env_remove("XDG_STATE_HOME")
            .envs(AGENT_KEYS.iter().copied());
        cmd
    }

    /// `command(args)` as one shell line, for a terminal to run.
    pub fn shell_line(&self, args: &[&str]) -> String {
        shell_line(&self.command(args))
    }

    /// The calls a fake agent recorded: {argv, prompt, cwd} each, logged
    /// beside the bin dir it ran from (the sandbox may give it another HOME).
    pub fn calls(&self, program: &str) -> Vec<serde_json::Value> {
        let log = self.home.path().join(format!("fake-{program}-calls.jsonl"));
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A command as one `env ... program args` shell line, with its env.
pub fn shell_line(cmd: &Command) -> String {
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"));
    // env's -u options go before its assignments.
    let (unset, set): (Vec<_>, Vec<_>) = cmd.get_envs().partition(|(_, v)| v.is_none());
    let mut line = String::from("env");
    for (key, _) in unset {
        line += &format!(" -u {}", key.to_string_lossy());
    }
    for (key, value) in set {
        line += &format!(" {}={}", key.to_string_lossy(), quote(value.unwrap()));
    }
    line += &format!(" {}", quote(cmd.get_program()));
    for arg in cmd.get_args() {
        line += &format!(" {}", quote(arg));
    }
    line
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kills `child` with SIGKILL as soon as `ready` holds (polled; at most
/// 60 s, else the test fails naming `what` it waited for).
pub fn kill_once(mut child: std::process::Child, what: &str, ready: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !ready() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("waited 60 s for {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A repository scaffolded by init with `template`, the scripted agent as
/// `claude`, and `issues` in the fake backlog.
pub fn scaffolded(template: &str, issues: &[(&str, &str)]) -> TestRepo {
    let repo = TestRepo::new();
    let bin = repo.bin();
    std::fs::remove_file(bin.join("claude")).unwrap();
    std::os::unix::fs::symlink(fakes_dir().join("workflow-claude"), bin.join("claude")).unwrap();
    let issues: Vec<Value> = issues
        .iter()
        .map(|(id, title)| json!({"id": id, "title": title, "body": format!("do {title}")}))
        .collect();
    std::fs::write(
        repo.home.path().join("issues.json"),
        Value::from(issues).to_string(),
    )
    .unwrap();
    let out = repo.sanddune(&[
        "init",
        "--agent",
        "claude-code",
        "--sandbox",
        "docker",
        "--backlog",
        "github-issues",
        "--template",
        template,
        "--no-build",
    ]);
    assert!(out.status.success(), "init: {}", stderr(&out));
    // What a user has: an identity for the agent's commits.
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "GIT_AUTHOR_NAME=agent\nGIT_AUTHOR_EMAIL=agent@t.invalid\nGIT_COMMITTER_NAME=agent\nGIT_COMMITTER_EMAIL=agent@t.invalid\n",
    )
    .unwrap();
    repo.git(&["add", ".sanddune"]);
    repo.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t.invalid",
        "commit",
        "-q",
        "-m",
        "sanddune init",
    ]);
    repo
}
