//! What every real-CLI test shares: the pinned CLIs installed from
//! tests/agent-clis, a real repository, the model mock, and `sanddune run`
//! with the test-isolated sandbox provider (or a bubblewrap jail, or a
//! warm docker container) and only the env given.
//!
//! The CLIs install from the lockfile under `CARGO_TARGET_TMPDIR` once per
//! lockfile (a cached target dir skips it). Without node and npm each test
//! is ignored, with the reason; under `CI` that is a failure. Claude Code refuses to skip
//! permissions as root, so as root the runs are the non-root test user's
//! (SANDDUNE_TEST_NON_ROOT_USER, set up by .ci/run as for tests/non_root.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub use sanddune_model_mock::{COMMIT_MESSAGE, COMPLETION_SIGNAL, Fault, ModelMock, Usage};
use serde_json::Value;

use crate::common::trials::skip;
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

/// The installed CLIs' bin dir (node_modules/.bin), installed once.
fn clis() -> PathBuf {
    if !have("node") || !have("npm") {
        skip("node and npm are needed to install the pinned agent CLIs");
    }
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let installed =
        INSTALLED.get_or_init(
            || match std::env::var("SANDDUNE_AGENT_VERSIONS").as_deref() {
                Err(_) => install(&tmp.join("agent-clis")),
                Ok("latest") => install_latest(&tmp.join("agent-clis-latest")),
                Ok(other) => Err(format!(
                    "SANDDUNE_AGENT_VERSIONS={other}: the only value is `latest` (the newest \
                 published CLIs); unset, the tests use tests/agent-clis/package-lock.json"
                )),
            },
        );
    installed.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The newest published version of each CLI in the lockfile's
/// package.json (tests/agent-clis/latest.sh), installed once a day.
fn install_latest(dir: &Path) -> Result<PathBuf, String> {
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs()
        / 86_400;
    let marker = dir.join("node_modules/.sanddune-installed-day");
    if std::fs::read_to_string(&marker).is_ok_and(|d| d == today.to_string()) {
        return Ok(dir.join("node_modules/.bin"));
    }
    let text = std::fs::read_to_string(sources().join("package.json"))
        .map_err(|e| format!("reading package.json: {e}"))?;
    let mut package: Value =
        serde_json::from_str(&text).map_err(|e| format!("package.json: {e}"))?;
    for version in package["dependencies"]
        .as_object_mut()
        .ok_or("package.json has no dependencies")?
        .values_mut()
    {
        *version = Value::from("latest");
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(dir.join("package-lock.json"));
    std::fs::write(dir.join("package.json"), package.to_string())
        .map_err(|e| format!("writing package.json: {e}"))?;
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--quiet"])
        .current_dir(dir)
        .status()
        .map_err(|e| format!("npm install in {}: {e}", dir.display()))?;
    if !status.success() {
        return Err(format!("npm install in {} failed: {status}", dir.display()));
    }
    std::fs::write(&marker, today.to_string())
        .map_err(|e| format!("writing {}: {e}", marker.display()))?;
    Ok(dir.join("node_modules/.bin"))
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
        // `npm install` of the lockfile, not `npm ci`: ci refuses a
        // lockfile lacking the other platforms' optional binaries (opencode's
        // darwin packages), which a registry mirror may not carry.
        let status = Command::new("npm")
            .args(["install", "--no-save", "--no-audit", "--no-fund", "--quiet"])
            .current_dir(dir)
            .status()
            .map_err(|e| format!("npm install in {}: {e}", dir.display()))?;
        if !status.success() {
            return Err(format!("npm install in {} failed: {status}", dir.display()));
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
fn runner() -> Option<String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .unwrap_or_else(|e| skip(format!("`id -u` does not run: {e}")));
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return None;
    }
    match std::env::var("SANDDUNE_TEST_NON_ROOT_USER") {
        Ok(user) => Some(user),
        Err(_) => skip(
            "as root the agent CLIs need a non-root user (Claude Code refuses to skip \
             permissions as root): run tests/images/non-root-user.sh and set \
             SANDDUNE_TEST_NON_ROOT_USER",
        ),
    }
}

/// One agent's test: its repository, the mock and the CLIs.
pub struct Agent {
    pub name: &'static str,
    pub repo: TestRepo,
    pub mock: ModelMock,
    /// What a user of the agent sets to reach the mock (`env`).
    pub env: Vec<(&'static str, String)>,
    bin: PathBuf,
    user: Option<String>,
    /// `--sandbox` and its options: test-isolated unless [`Agent::in_jail`]
    /// or [`Agent::in_docker_pool`].
    sandbox: Vec<String>,
    logs: std::cell::RefCell<Vec<String>>,
}

impl Agent {
    /// The test is skipped when the CLIs cannot be installed here. `env`
    /// gives the variables that point the agent at the mock's URL.
    pub fn new(name: &'static str, env: fn(&str) -> Vec<(&'static str, String)>) -> Agent {
        let bin = clis();
        let user = runner();
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
        let mock = ModelMock::start();
        Agent {
            name,
            repo,
            env: env(mock.url()),
            mock,
            bin,
            user,
            sandbox: vec!["--sandbox".into(), "test-isolated".into()],
            logs: Default::default(),
        }
    }

    /// The same agent in a bubblewrap jail: the CLIs (installed under the
    /// target dir, which the jail does not see) bound read-only at their
    /// path. The mock is on the host's loopback, which a jail under
    /// `egress=allow-all` shares.
    pub fn in_jail(mut self) -> Agent {
        let clis = self.bin.parent().and_then(Path::parent).unwrap();
        let clis = clis.canonicalize().unwrap().display().to_string();
        self.sandbox = vec![
            "--sandbox".into(),
            "bubblewrap".into(),
            "--sandbox-opt".into(),
            format!("mount={clis}:{clis}:ro"),
        ];
        self
    }

    /// The same agent in a docker sandbox with a warm pool of one
    /// (`pool=1`, ADR 0037): the first run fills it, the next claims it.
    /// `dir`, a directory of the installed CLIs whose `bin/` holds a static
    /// build of the CLI (the test image has no node), is bound read-only at
    /// `/sanddune-fakes`, whose `bin/` the image's PATH has first. The image
    /// is the one built for whoever runs sanddune (tests/images). The mock
    /// is on the host's loopback: the CLI reaches it through the credential
    /// gateway, as it would reach the real API.
    pub fn in_docker_pool(mut self, dir: &Path) -> Agent {
        let image = match &self.user {
            Some(_) => "sanddune-test-non-root:latest",
            None => common::engines::IMAGE,
        };
        let found = Command::new("docker")
            .args(["image", "inspect", image])
            .output();
        if !found.is_ok_and(|o| o.status.success()) {
            skip(format!(
                "docker is not reachable or has no {image} (tests/images/build.sh docker, tests/images/non-root-user.sh)"
            ));
        }
        let dir = dir.canonicalize().unwrap().display().to_string();
        self.sandbox = [
            "--sandbox",
            "docker",
            "--sandbox-opt",
            &format!("image={image}"),
            "--sandbox-opt",
            "pool=1",
            "--sandbox-opt",
            &format!("mount={dir}:/sanddune-fakes:ro"),
            "--log",
            "terminal",
        ]
        .map(String::from)
        .to_vec();
        self
    }

    /// The installed CLIs' `node_modules`.
    pub fn modules(&self) -> PathBuf {
        self.bin.parent().unwrap().to_path_buf()
    }

    /// `sanddune run --sandbox test-isolated --agent NAME --json ARGS` (or
    /// its jail) with nothing of this process's environment but PATH (the
    /// CLIs, node, git) and HOME, plus the agent's `env`: only what its user
    /// would set.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = vec!["run"];
        all.extend(self.sandbox.iter().map(String::as_str));
        all.extend(["--agent", self.name, "--json"]);
        all.extend_from_slice(args);
        self.sanddune(&all)
    }

    /// `sanddune ARGS` in the repository, as [`Agent::run`] runs it.
    pub fn sanddune(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(common::BIN);
        cmd.args(args)
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
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let out = match &self.user {
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
        };
        self.logs.borrow_mut().push(stderr(&out));
        out
    }

    /// What each run so far wrote to stderr (its log, under `--log
    /// terminal`).
    pub fn logs(&self) -> Vec<String> {
        self.logs.borrow().clone()
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

/// The usage the mock reported for the agent's own turns: answers to
/// requests offering tools (not side requests such as opencode's title).
/// Codex 0.169 offers its tools in an `additional_tools` input item.
pub fn turn_usages(mock: &ModelMock) -> Vec<Usage> {
    let offers_tools = |body: &Value| {
        body["tools"].as_array().is_some_and(|t| !t.is_empty())
            || body["input"]
                .as_array()
                .is_some_and(|i| i.iter().any(|i| i["type"] == "additional_tools"))
    };
    mock.exchanges()
        .iter()
        .filter(|e| offers_tools(&e.body))
        .filter_map(|e| e.usage)
        .collect()
}

/// The checks every agent passes: one run commits with a plain git commit
/// and ends on the completion signal, reporting a session id and exactly
/// the usage the mock reported for its turns; `resume` runs again with
/// `--resume ID`, which must keep the session, commit again and report
/// that run's usage alone. `args` are the agent's own (a model).
pub fn commits_and_reports_usage(agent: &Agent, args: &[&str], resume: bool) {
    let run = |prompt: &str, more: &[&str]| {
        let mut all = vec!["--prompt", prompt];
        all.extend_from_slice(args);
        all.extend_from_slice(more);
        agent.ok(&agent.run(&all))
    };
    let result = run("add a line", &[]);
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    the_api_got_the_real_key_only(agent);
    let commits = result["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{result}");
    assert_eq!(
        agent.git(&["rev-parse", "HEAD"]),
        commits[0]["sha"].as_str().unwrap()
    );
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let it = &result["iterations"][0];
    let first = turn_usages(&agent.mock);
    assert_eq!(first.len(), 2, "{}: a tool call and the answer", agent.name);
    assert_eq!(usage_of(it), Usage::total(&first), "{it}");
    let id = it["sessionId"].as_str().unwrap().to_string();
    assert!(!id.is_empty(), "{it}");
    if !resume {
        return;
    }
    let result = run("add another line", &["--resume", &id]);
    let it = &result["iterations"][0];
    assert_eq!(it["sessionId"], id.as_str(), "resumed, not a new session");
    assert_eq!(result["commits"].as_array().unwrap().len(), 1, "{result}");
    assert_eq!(agent.git(&["rev-list", "--count", "HEAD"]), "3");
    let all = turn_usages(&agent.mock);
    assert_eq!(usage_of(it), Usage::total(&all[first.len()..]), "{it}");
    // The model saw the first run's conversation.
    let last = agent.mock.exchanges().pop().unwrap();
    assert!(
        last.body.to_string().contains("add a line"),
        "the resumed conversation: {}",
        last.body
    );
}

/// The run went through the credential gateway: the CLI held only a
/// placeholder, and the model API got the key the user set on every
/// request, never the placeholder.
pub fn the_api_got_the_real_key_only(agent: &Agent) {
    let keys: Vec<&str> = agent
        .env
        .iter()
        .filter(|(k, _)| k.ends_with("_API_KEY"))
        .map(|(_, v)| v.as_str())
        .collect();
    let exchanges = agent.mock.exchanges();
    assert!(!exchanges.is_empty());
    for e in &exchanges {
        let headers = format!("{:?}", e.headers);
        assert!(
            !headers.contains("sanddune-placeholder"),
            "{}: the placeholder reached the API: {} {} {headers}",
            agent.name,
            e.method,
            e.path
        );
        assert!(
            keys.iter().any(|k| headers.contains(k)),
            "{}: no key of {keys:?} on {} {}: {headers}",
            agent.name,
            e.method,
            e.path
        );
    }
}

/// A 401 from the model API fails the run (exit 1) with an error holding
/// each of `says` (what the CLI said, the variable to check), and nothing
/// lands on the user's branch.
pub fn refused_credentials_fail_the_run(agent: &Agent, args: &[&str], says: &[&str]) {
    agent.mock.inject(Fault::Unauthorized);
    let mut all = vec!["--prompt", "add a line"];
    all.extend_from_slice(args);
    let out = agent.run(&all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", agent.name);
    for want in says {
        assert!(err.contains(want), "{}: no {want:?} in {err}", agent.name);
    }
    assert_eq!(agent.git(&["log", "-1", "--format=%s", "main"]), "initial");
}

/// A 429 with retry-after and then a stream cut by an error event: the
/// CLI retries, and the run succeeds with the usage of every answer the
/// mock sent for its turns; `counts_the_cut` says whether the CLI adds the
/// cut answer's message_start usage (the only answer reporting output 1).
pub fn rides_out_a_429_and_a_cut_stream(agent: &Agent, args: &[&str], counts_the_cut: bool) {
    agent.mock.inject(Fault::RateLimited { retry_after: 1 });
    agent.mock.inject(Fault::ServerErrorMidStream);
    let mut all = vec!["--prompt", "add a line"];
    all.extend_from_slice(args);
    let result = agent.ok(&agent.run(&all));
    assert_eq!(result["completionSignal"], COMPLETION_SIGNAL, "{result}");
    assert_eq!(agent.git(&["log", "-1", "--format=%s"]), COMMIT_MESSAGE);
    let statuses: Vec<u16> = agent.mock.exchanges().iter().map(|e| e.status).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    let reported: Vec<Usage> = turn_usages(&agent.mock)
        .into_iter()
        .filter(|u| counts_the_cut || u.output != 1)
        .collect();
    assert_eq!(
        usage_of(&result["iterations"][0]),
        Usage::total(&reported),
        "{result}"
    );
}

/// A model that never says the completion signal: every iteration runs
/// and commits, and the run ends at --max-iterations without the signal.
pub fn runs_to_max_iterations_without_the_signal(agent: &Agent, args: &[&str]) {
    agent.mock.inject(Fault::NeverComplete);
    let mut all = vec!["--prompt", "add a line", "--max-iterations", "2"];
    all.extend_from_slice(args);
    let result = agent.ok(&agent.run(&all));
    assert_eq!(
        result["iterations"].as_array().unwrap().len(),
        2,
        "{result}"
    );
    assert!(result["completionSignal"].is_null(), "{result}");
    assert_eq!(result["commits"].as_array().unwrap().len(), 2, "{result}");
}

/// The model API's URL (the variable `key`) points at a closed port: the
/// run fails within `within`, and its error names the URL and the variable
/// that set it.
pub fn an_unreachable_api_fails_the_run(
    agent: &mut Agent,
    key: &'static str,
    args: &[&str],
    within: std::time::Duration,
) {
    // A port just bound and released: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}");
    for (k, v) in agent.env.iter_mut() {
        if *k == key {
            *v = url.clone();
        }
    }
    let mut all = vec!["--prompt", "add a line"];
    all.extend_from_slice(args);
    let started = std::time::Instant::now();
    let out = agent.run(&all);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{}: {err}", agent.name);
    assert!(took < within, "{}: took {took:?}: {err}", agent.name);
    assert!(err.contains(&url), "{}: {url} not in {err}", agent.name);
    assert!(err.contains(key), "{}: {key} not in {err}", agent.name);
}
