//! What every real-CLI test shares: the pinned CLIs installed from
//! tests/agent-clis, a real repository, the model mock, and `sanddune run`
//! with the test-isolated sandbox provider and only the env given.
//!
//! The CLIs install with `npm ci` under `CARGO_TARGET_TMPDIR` once per
//! lockfile (a cached target dir skips it). Without node and npm each test
//! says SKIPPED; under `CI` that is a failure. Claude Code refuses to skip
//! permissions as root, so as root the runs are the non-root test user's
//! (SANDDUNE_TEST_NON_ROOT_USER, set up by .ci/run as for tests/non_root.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub use sanddune_model_mock::{Fault, ModelMock, Usage};
use serde_json::Value;

use crate::common::{self, TestRepo, stderr, stdout};

fn sources() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/agent-clis")
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn skip(why: &str) -> Option<()> {
    assert!(std::env::var_os("CI").is_none(), "under CI: {why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// The installed CLIs' bin dir (node_modules/.bin), installed once.
fn clis() -> Option<PathBuf> {
    if !have("node") || !have("npm") {
        skip("node and npm are needed to install the pinned agent CLIs")?;
    }
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let installed = INSTALLED
        .get_or_init(|| install(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("agent-clis")));
    Some(installed.clone().unwrap_or_else(|e| panic!("{e}")))
}

fn install(dir: &Path) -> Result<PathBuf, String> {
    let src = sources();
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let lock = std::fs::read(src.join("package-lock.json"))
        .map_err(|e| format!("reading the lockfile: {e}"))?;
    let installed_lock = dir.join("node_modules/.sanddune-installed-lock.json");
    let current = std::fs::read(&installed_lock).is_ok_and(|l| l == lock);
    if !current {
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(src.join(file), dir.join(file))
                .map_err(|e| format!("copying {file}: {e}"))?;
        }
        let started = std::time::Instant::now();
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--quiet"])
            .current_dir(dir)
            .status()
            .map_err(|e| format!("npm ci in {}: {e}", dir.display()))?;
        if !status.success() {
            return Err(format!("npm ci in {} failed: {status}", dir.display()));
        }
        std::fs::write(&installed_lock, &lock)
            .map_err(|e| format!("writing {}: {e}", installed_lock.display()))?;
        eprintln!(
            "installed the agent CLIs in {} in {:.1?}",
            dir.display(),
            started.elapsed()
        );
    }
    Ok(dir.join("node_modules/.bin"))
}

/// Who runs sanddune: this process, or as root the non-root test user.
fn runner() -> Option<Option<String>> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(None);
    }
    match std::env::var("SANDDUNE_TEST_NON_ROOT_USER") {
        Ok(user) => Some(Some(user)),
        Err(_) => {
            skip(
                "as root the agent CLIs need a non-root user (Claude Code refuses to skip \
                 permissions as root): run tests/images/non-root-user.sh and set \
                 SANDDUNE_TEST_NON_ROOT_USER",
            )?;
            None
        }
    }
}

/// One agent's test: its repository, the mock and the CLIs.
pub struct Agent {
    pub name: &'static str,
    pub repo: TestRepo,
    pub mock: ModelMock,
    bin: PathBuf,
    user: Option<String>,
}

impl Agent {
    /// None (said SKIPPED) when the CLIs cannot be installed here.
    pub fn new(name: &'static str) -> Option<Agent> {
        let bin = clis()?;
        let user = runner()?;
        let repo = TestRepo::new();
        if let Some(user) = &user {
            for dir in [repo.path(), repo.home.path()] {
                let out = Command::new("chown")
                    .args(["-R", &format!("{user}:")])
                    .arg(dir)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", stderr(&out));
            }
        }
        Some(Agent {
            name,
            repo,
            mock: ModelMock::start(),
            bin,
            user,
        })
    }

    /// `sanddune run --sandbox test-isolated --agent NAME --json ARGS` with
    /// nothing of this process's environment but PATH (the CLIs, node, git)
    /// and HOME, plus `env`: only what a user of the agent would set.
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.run_command(Command::new(common::BIN), args, env)
    }

    /// As [`Agent::run`], killed (exit 124) if it runs over `secs`: for runs
    /// that must end by themselves.
    pub fn run_within(&self, secs: u64, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=10", &secs.to_string(), common::BIN]);
        self.run_command(cmd, args, env)
    }

    fn run_command(&self, mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> Output {
        cmd.args([
            "run",
            "--sandbox",
            "test-isolated",
            "--agent",
            self.name,
            "--json",
        ])
        .args(args)
        .current_dir(self.repo.path())
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                self.bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", self.repo.home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("SANDDUNE_CACHE_DIR", self.cache_dir())
        .envs(env.iter().copied());
        match &self.user {
            None => cmd.output().unwrap(),
            Some(user) => {
                let line = format!(
                    "cd '{}' && {}",
                    self.repo.path().display(),
                    common::shell_line(&cmd)
                );
                Command::new("runuser")
                    .args(["-u", user, "--", "sh", "-c", &line])
                    .output()
                    .unwrap()
            }
        }
    }

    /// The compiled-component cache, shared by the tests and writable by
    /// whoever runs them.
    fn cache_dir(&self) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("real-agents-cache");
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(user) = &self.user {
            let _ = Command::new("chown")
                .args(["-R", &format!("{user}:")])
                .arg(&dir)
                .output();
        }
        dir
    }

    /// A run that must succeed: its JSON result.
    pub fn ok(&self, out: &Output) -> Value {
        assert!(
            out.status.success(),
            "{}: exit {:?}\n{}\n{}\nmock saw: {:#?}",
            self.name,
            out.status.code(),
            stdout(out),
            stderr(out),
            self.mock
                .exchanges()
                .iter()
                .map(|e| format!("{} {} {}", e.status, e.method, e.path))
                .collect::<Vec<_>>()
        );
        serde_json::from_str(&stdout(out)).unwrap()
    }

    /// git in the repository (as root, whoever owns it).
    pub fn git(&self, args: &[&str]) -> String {
        let mut all = vec!["-c", "safe.directory=*"];
        all.extend_from_slice(args);
        self.repo.git(&all)
    }
}

/// The run result's usage of one iteration, as the mock's `Usage`.
pub fn usage_of(iteration: &Value) -> Usage {
    let u = &iteration["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or_else(|| panic!("no {k} in {u}"));
    Usage {
        input: n("inputTokens"),
        output: n("outputTokens"),
        cache_read: n("cacheReadInputTokens"),
        cache_write: n("cacheCreationInputTokens"),
    }
}
