//! The `kubernetes` sandbox provider end to end: the real binary, the
//! built-in component and the host's `pods` capability through kube-rs.
//!
//! Every test runs twice. `mock::NAME` runs against the loopback Kubernetes
//! API server of tests/k8s-mock, whose pods are docker containers of the
//! test image, so the fake claude in them really edits and commits; the
//! repository goes in over the exec stream and the commits come back to the
//! host repository's branches. `real::NAME` runs against the real cluster
//! `SANDDUNE_TEST_KUBECONFIG` names (tests/k8s-cluster starts one in CI),
//! with the image `SANDDUNE_TEST_K8S_IMAGE`: in a namespace of its own when
//! `SANDDUNE_TEST_K8S_ADMIN_KUBECONFIG` can make one (bound to the ClusterRole
//! `sanddune`, as the Role of docs/providers/kubernetes.md), so the tests run
//! in parallel, else all in `SANDDUNE_TEST_K8S_NAMESPACE` (one at a time).
//! What needs the mock's fault injection is not run there, saying so.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::engines::{IMAGE, require_engine};
use common::tmux::{self, Tmux};
use common::trials::{self, not_here, skip};
use common::{TestRepo, scaffolded, shell_line, stderr, stdout};
use k8s_mock::K8sMock;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, AttachParams, DeleteParams, DynamicObject, ListParams};
use serde_json::{Value, json};

/// The cluster a test runs against, and a kube-rs client to look at it as
/// another client would.
struct Cluster {
    /// None on a real cluster.
    mock: Option<K8sMock>,
    kubeconfig: PathBuf,
    context: String,
    namespace: String,
    image: String,
    runtime: tokio::runtime::Runtime,
    pods: Api<Pod>,
    /// On a real cluster, the client that made the test's own namespace,
    /// which deletes it after the test.
    admin: Option<kube::Client>,
}

thread_local! {
    /// Set on the thread of a `real::` test.
    static ON_REAL_CLUSTER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A kube-rs client of `kubeconfig`'s current context.
fn client_of(runtime: &tokio::runtime::Runtime, kubeconfig: &std::path::Path) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    })
}

fn cluster(repo: &TestRepo) -> Cluster {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (mock, kubeconfig, namespace, image, admin) = if ON_REAL_CLUSTER.get() {
        let Some(path) = std::env::var_os("SANDDUNE_TEST_KUBECONFIG") else {
            skip(
                "no real cluster: as root, `tests/k8s-cluster/cluster.sh build && tests/k8s-cluster/cluster.sh start`, then `source` the env file it names",
            )
        };
        let image = std::env::var("SANDDUNE_TEST_K8S_IMAGE").unwrap_or_else(|_| {
            skip("SANDDUNE_TEST_K8S_IMAGE must name an image the cluster can pull with the test fakes")
        });
        let shared =
            std::env::var("SANDDUNE_TEST_K8S_NAMESPACE").unwrap_or_else(|_| "default".into());
        match std::env::var_os("SANDDUNE_TEST_K8S_ADMIN_KUBECONFIG") {
            Some(admin) => {
                let admin = client_of(&runtime, std::path::Path::new(&admin));
                let namespace = runtime.block_on(own_namespace(&admin, &shared));
                (None, PathBuf::from(path), namespace, image, Some(admin))
            }
            None => (None, PathBuf::from(path), shared, image, None),
        }
    } else {
        require_engine("docker");
        let mock = K8sMock::start().unwrap_or_else(|e| skip(format!("the k8s mock: {e}")));
        let kubeconfig = repo.home.path().join("mock.kubeconfig");
        std::fs::write(&kubeconfig, mock.kubeconfig()).unwrap();
        (
            Some(mock),
            kubeconfig,
            "default".to_string(),
            IMAGE.to_string(),
            None,
        )
    };
    let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let context = config.current_context.clone().unwrap_or_default();
    let pods = Api::namespaced(client_of(&runtime, &kubeconfig), &namespace);
    Cluster {
        mock,
        kubeconfig,
        context,
        namespace,
        image,
        runtime,
        pods,
        admin,
    }
}

/// A new namespace for one test, where the users bound to the ClusterRole
/// `sanddune` in `shared` get the same binding: they may do there exactly
/// what the docs' Role lets them.
async fn own_namespace(admin: &kube::Client, shared: &str) -> String {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), shared);
    let subjects: Vec<Value> = bindings
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|b| b.role_ref.kind == "ClusterRole" && b.role_ref.name == "sanddune")
        .flat_map(|b| b.subjects.unwrap_or_default())
        .map(|s| serde_json::to_value(s).unwrap())
        .collect();
    assert!(
        !subjects.is_empty(),
        "no RoleBinding to the ClusterRole `sanddune` in namespace `{shared}` names the test user"
    );
    let name = format!("sanddune-t-{:08x}", rand_suffix());
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&Default::default(), &namespace)
        .await
        .unwrap();
    let binding = serde_json::from_value(json!({
        "metadata": {"name": "sanddune"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sanddune"},
        "subjects": subjects,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), &name)
        .create(&Default::default(), &binding)
        .await
        .unwrap();
    // Before 1.24 a pod is refused (500, "No API token found") until the
    // namespace's default service account has its token secret.
    let minor: u32 = admin
        .apiserver_version()
        .await
        .unwrap()
        .minor
        .trim_end_matches('+')
        .parse()
        .unwrap_or(u32::MAX);
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(admin.clone(), &name);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = accounts
            .get_opt("default")
            .await
            .unwrap()
            .is_some_and(|a| minor >= 24 || a.secrets.is_some_and(|s| !s.is_empty()));
        if ready {
            break name;
        }
        assert!(
            Instant::now() < deadline,
            "namespace {name}: no default service account token"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Enough to keep two tests' namespaces apart.
fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    // Each RandomState has keys of its own.
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u32
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(admin) = &self.admin {
            use k8s_openapi::api::core::v1::Namespace;
            let namespaces: Api<Namespace> = Api::all(admin.clone());
            let _ = self
                .runtime
                .block_on(namespaces.delete(&self.namespace, &Default::default()));
        }
    }
}

impl Cluster {
    /// The mock, for a test that makes it fail on cue; skipped on a real
    /// cluster.
    fn mock(&self) -> &K8sMock {
        self.mock.as_ref().unwrap_or_else(|| {
            not_here("this test makes the API server fail on cue, which only the mock can")
        })
    }

    /// `sanddune ARGS` with this cluster's kubeconfig.
    fn sanddune(&self, repo: &TestRepo, args: &[&str]) -> Command {
        let mut cmd = repo.command(args);
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }

    /// `sanddune run --sandbox kubernetes` of the image's fake claude with
    /// `prompt`, in the test namespace.
    fn run(&self, repo: &TestRepo, prompt: &str, extra: &[&str]) -> Command {
        let image = format!("image={}", self.image);
        let mut args = vec!["--sandbox-opt", &image];
        args.extend_from_slice(extra);
        self.run_without_image(repo, prompt, &args)
    }

    /// `sanddune run --sandbox kubernetes --agent claude-code` with
    /// `prompt` in the test namespace, the pod from `extra` (a template) or
    /// from nothing.
    fn run_without_image(&self, repo: &TestRepo, prompt: &str, extra: &[&str]) -> Command {
        let namespace = format!("namespace={}", self.namespace);
        let mut args = vec![
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            prompt,
            "--sandbox-opt",
            &namespace,
        ];
        args.extend_from_slice(extra);
        self.sanddune(repo, &args)
    }

    /// On the mock, which keeps what an audit log would: the agent ran
    /// and no exec's URL (its command line) holds `secret`.
    fn assert_no_exec_url_has(&self, secret: &str) {
        if let Some(mock) = &self.mock {
            let execs = mock.exec_commands();
            assert!(execs.iter().any(|e| e.contains("claude")), "{execs:?}");
            assert!(
                !execs.iter().any(|e| e.contains(secret)),
                "the key is in an exec's URL: {execs:?}"
            );
        }
    }

    /// The pods sanddune made in the namespace, as the API has them.
    fn sanddune_pods(&self) -> Vec<Pod> {
        let params = ListParams::default().labels("sanddune.plugin");
        self.runtime
            .block_on(self.pods.list(&params))
            .unwrap()
            .items
    }

    /// Those not ended nor being deleted: what a run must not leave.
    fn live_pods(&self) -> Vec<String> {
        self.sanddune_pods()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .filter_map(|p| p.metadata.name)
            .collect()
    }

    fn pod(&self, name: &str) -> Option<Value> {
        self.runtime
            .block_on(self.pods.get_opt(name))
            .unwrap()
            .map(|p| serde_json::to_value(p).unwrap())
    }

    /// The first running pod whose name passes `which`, once there is one.
    fn running_pod(&self, which: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let pods = self
                .runtime
                .block_on(self.pods.list(&Default::default()))
                .unwrap();
            let running = pods.items.into_iter().find(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.metadata.deletion_timestamp.is_none()
                    && which(p.metadata.name.as_deref().unwrap_or(""))
            });
            if let Some(pod) = running {
                return pod.metadata.name.unwrap();
            }
            assert!(Instant::now() < deadline, "no pod ran");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `sh -c SCRIPT` in `pod`: its stdout, None when it fails.
    fn exec(&self, pod: &str, script: &str) -> Option<String> {
        self.runtime.block_on(async {
            let mut process = self
                .pods
                .exec(pod, ["sh", "-c", script], &AttachParams::default())
                .await
                .ok()?;
            let mut out = String::new();
            if let Some(mut stdout) = process.stdout() {
                tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out)
                    .await
                    .ok()?;
            }
            let status = process.take_status()?.await?;
            (status.status.as_deref() == Some("Success")).then_some(out)
        })
    }

    /// The pod goes away under whatever runs in it: its container dies on
    /// the mock (the pod fails), the pod is deleted on a real cluster.
    fn kill_pod(&self, pod: &str) {
        match &self.mock {
            Some(mock) => mock.remove_pod_container(&self.namespace, pod).unwrap(),
            None => {
                let now = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                };
                self.runtime.block_on(self.pods.delete(pod, &now)).unwrap();
            }
        }
    }

    /// An agent-sandbox resource of `kind` (`plural`) in the namespace.
    fn sandbox_api(&self, kind: &str, plural: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: "extensions.agents.x-k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: "extensions.agents.x-k8s.io/v1alpha1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        Api::namespaced_with(
            kube::Client::from(self.pods.clone()),
            &self.namespace,
            &resource,
        )
    }
}

fn kubernetes_a_run_commits_on_its_branch_and_deletes_its_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let out = c
        .run(
            &repo,
            "add a note",
            &["--branch", "k8s-note", "--sandbox-opt", "ttl=20m", "--json"],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["branch"], "k8s-note", "{result}");
    assert!(
        !repo
            .git(&["log", "-1", "--format=%s", "k8s-note"])
            .is_empty(),
        "no commit on the branch"
    );
    assert_eq!(c.live_pods(), Vec::<String>::new(), "a pod was left");
    if let Some(mock) = &c.mock {
        assert!(mock.containers().is_empty(), "a pod's container was left");
    }
    // plugin inspect names the namespace and the verbs the host grants.
    let out = c
        .sanddune(&repo, &["plugin", "inspect", "kubernetes"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains(&format!("of context `{}`", c.context)),
        "{text}"
    );
    assert!(
        text.contains("verbs: create, get, list, delete pods; create pods/exec"),
        "{text}"
    );
    assert!(text.contains("sanddune:plugin@0.8.0"), "{text}");
}

/// An API server whose exec speaks only `v4.channel.k8s.io` (before 1.30,
/// and proxies that pass only v4) has no end of stdin short of closing the
/// stream: the repository goes in, the env and the prompt reach the agent,
/// and the commit comes out all the same. Kubernetes 1.20 is such a server;
/// the mock is made one, and reports an untested release: the run warns
/// once, naming it, and goes on.
fn kubernetes_a_run_works_where_exec_speaks_only_v4() {
    let repo = TestRepo::new();
    // A tree big enough that the copy-in's tar spans many messages.
    let blob: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(repo.path().join("big.txt"), blob).unwrap();
    repo.git(&["add", "big.txt"]);
    repo.git(&["commit", "-q", "-m", "a big file"]);
    let c = cluster(&repo);
    if let Some(mock) = &c.mock {
        mock.serve_exec_v4_only();
        // And says it is a release older than the tested ones.
        mock.report_release(19);
    }
    let out = c
        .run(
            &repo,
            "FAKE:say-env:SANDDUNE_TEST_V4",
            &[
                "--branch",
                "k8s-v4",
                "--env",
                "SANDDUNE_TEST_V4=over v4",
                "--json",
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    if c.mock.is_some() {
        let warning = "is Kubernetes v1.19.0: sanddune is tested on 1.20 to 1.36";
        assert_eq!(stderr(&out).matches(warning).count(), 1, "{}", stderr(&out));
    }
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        result["stdout"]
            .as_str()
            .is_some_and(|r| r.contains("Added a note. over v4")),
        "{result}"
    );
    assert!(
        !repo.git(&["log", "-1", "--format=%s", "k8s-v4"]).is_empty(),
        "no commit on the branch"
    );
    assert_eq!(
        repo.git(&["show", "k8s-v4:big.txt"]).lines().count(),
        100_000
    );
}

/// What a fault test sets up: its name, the options, the fault, what the
/// error must say.
type FaultCase = (
    &'static str,
    Vec<String>,
    Box<dyn Fn(&K8sMock)>,
    Vec<String>,
);

/// Each way the cluster says no is an error that names what to fix, and
/// nothing is left behind.
fn kubernetes_faults_are_named() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let mock = c.mock();

    // No image: refused before anything is created.
    let out = c.run_without_image(&repo, "x", &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("image=IMAGE"), "{}", stderr(&out));

    let cases: Vec<FaultCase> = vec![
        (
            "a missing namespace",
            vec!["namespace=nope".into()],
            Box::new(|_| {}),
            vec!["namespace `nope` does not exist in context `mock`".into()],
        ),
        (
            "an image that never pulls",
            vec!["image=registry.invalid/none:1".into()],
            Box::new(|_| {}),
            vec![
                "cannot pull image `registry.invalid/none:1`".into(),
                "image-pull-secret".into(),
            ],
        ),
        (
            "an unschedulable pod",
            vec!["start-timeout=3s".into()],
            Box::new(|m| {
                m.set_unschedulable(Some("0/3 nodes are available: 3 Insufficient memory."))
            }),
            vec![
                "scheduler cannot place it".into(),
                "Insufficient memory".into(),
            ],
        ),
        (
            "a forbidden create",
            vec![],
            Box::new(|m| m.forbid("create", "pods")),
            vec!["kubeconfig user `mock-user` may not create pods in namespace `default`".into()],
        ),
        (
            "a forbidden exec",
            vec![],
            Box::new(|m| m.forbid("create", "pods/exec")),
            vec![
                "kubeconfig user `mock-user` may not create pods/exec in namespace `default`"
                    .into(),
            ],
        ),
        (
            "an exhausted quota",
            vec![],
            Box::new(|m| m.set_pod_quota(Some(0))),
            vec!["no quota left".into()],
        ),
        (
            "an unknown context",
            vec!["context=prod".into()],
            Box::new(|_| {}),
            vec!["context `prod` is not in your kubeconfig; it has: mock".into()],
        ),
    ];
    for (what, options, fault, wants) in cases {
        mock.allow_all();
        mock.set_unschedulable(None);
        mock.set_pod_quota(None);
        fault(mock);
        let mut extra = Vec::new();
        for o in &options {
            extra.extend(["--sandbox-opt", o.as_str()]);
        }
        let out = c.run(&repo, "add a note", &extra).output().unwrap();
        assert!(!out.status.success(), "{what}: succeeded");
        for want in wants {
            assert!(stderr(&out).contains(&want), "{what}: {}", stderr(&out));
        }
        assert_eq!(
            c.live_pods(),
            Vec::<String>::new(),
            "{what}: a pod was left"
        );
    }
    mock.allow_all();

    // A wrong token: 401 names the user; a closed port names the server.
    let bad = repo.home.path().join("bad.kubeconfig");
    std::fs::write(&bad, mock.kubeconfig_with_token("wrong")).unwrap();
    let out = c
        .run(&repo, "add a note", &[])
        .env("KUBECONFIG", &bad)
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("did not accept the credentials of kubeconfig user `mock-user`"),
        "{}",
        stderr(&out)
    );
    let url = mock.url().to_string();
    mock.stop();
    let out = c.run(&repo, "add a note", &[]).output().unwrap();
    assert!(
        stderr(&out).contains(&format!(
            "cannot reach the API server of context `mock` at {url}"
        )),
        "{}",
        stderr(&out)
    );
}

/// A pod killed under a running agent fails the run naming it, and the
/// host's repository keeps what it had.
fn kubernetes_a_pod_killed_mid_run_fails_the_run_naming_it() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let child = c
        .run(&repo, "FAKE:run:sleep 60", &["--branch", "k8s-gone"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pod = c.running_pod(|n| n.starts_with("sanddune-"));
    // Past the sync, into the agent's minute of sleep.
    std::thread::sleep(Duration::from_secs(5));
    c.kill_pod(&pod);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("pod `{pod}`")),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(c.live_pods(), Vec::<String>::new());
}

/// The API server drops the agent's exec stream mid-command, with no
/// close frame and no exit status, as when the connection to it is lost:
/// the run fails saying so instead of waiting on a dead stream, and the
/// host's repository keeps what it had.
fn kubernetes_an_exec_stream_cut_mid_command_fails_the_run_naming_it() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    // The agent's command line; its prompt goes on stdin.
    c.mock().cut_exec("stream-json");
    let head = repo.git(&["rev-parse", "HEAD"]);
    let mut child = c
        .run(&repo, "FAKE:run:sleep 20", &["--branch", "k8s-cut"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A guard, not a timing claim: a run that waits on the dead stream
    // would otherwise hang the suite.
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the run still waits on a cut exec stream");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("closed the exec stream"),
        "{}",
        stderr(&out)
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(c.live_pods(), Vec::<String>::new());
}

/// `sanddune interactive` in a pod: the agent's UI on the user's terminal
/// through the exec's TTY (its size, a resize, keys, Ctrl-C for the agent),
/// its commit brought back, the terminal given back cooked, the pod gone.
fn kubernetes_interactive_gives_the_agent_a_tty_in_the_pod() {
    tmux::require();
    let patience = Duration::from_secs(90);
    let repo = TestRepo::new();
    let c = cluster(&repo);
    // The agent's key reaches it, though a TTY exec takes no env and its
    // argv is a URL the API server's audit log keeps.
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "PROBE_API_KEY=s3cret 'tty' value\n",
    )
    .unwrap();
    let image = format!("image={}", c.image);
    let namespace = format!("namespace={}", c.namespace);
    let command = c.sanddune(
        &repo,
        &[
            "interactive",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--sandbox-opt",
            &image,
            "--sandbox-opt",
            &namespace,
        ],
    );
    let term = Tmux::start(
        &tmux::reporting_cooked(&shell_line(&command)),
        repo.path(),
        100,
        30,
    );
    term.wait_for("the agent's UI in the pod", patience, |s| {
        s.contains("fake claude UI")
    });
    term.send_keys(&["FAKE:say-env:PROBE_API_KEY", "Enter"]);
    term.wait_for("the agent to say its key", patience, |s| {
        s.contains("done: FAKE:say-env:PROBE_API_KEY s3cret 'tty' value")
    });
    let (status, screen) = tmux::play_the_fake_ui(&term, "pod", patience);
    assert_eq!(status, 0, "{screen}");
    assert!(screen.contains("agent exited with code 0"), "{screen}");
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]), "Add a note");
    assert!(screen.contains("terminal-cooked"), "{screen}");
    assert_eq!(c.live_pods(), Vec::<String>::new());
    c.assert_no_exec_url_has("s3cret");
}

/// Ctrl-C during the agent's turn deletes the pod.
fn kubernetes_ctrl_c_deletes_the_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let child = c
        .run(&repo, "FAKE:run:sleep 60", &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pod = c.running_pod(|n| n.starts_with("sanddune-"));
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the abort took {:?}",
        started.elapsed()
    );
    assert!(
        c.pod(&pod)
            .is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null()),
        "pod {pod} is still there: {}",
        stderr(&out)
    );
}

/// A run killed with its commit still in the pod: `gc` brings the commit
/// onto the run's branch and deletes the pod.
fn kubernetes_gc_brings_a_killed_runs_commit_out_and_deletes_its_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let child = c
        .run(
            &repo,
            "note stranded\nFAKE:file:notes/stranded.md\nFAKE:slow",
            &[],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let committed = || {
        c.live_pods().iter().any(|pod| {
            c.exec(pod, "git -C /home/agent/workspace log --format=%s")
                .is_some_and(|log| log.contains("Add a note"))
        })
    };
    common::kill_once(child, "the agent's commit in its pod", committed);
    let on_branches = || repo.git(&["log", "--all", "--format=%s"]);
    assert!(!on_branches().contains("Add a note"));
    let out = c.sanddune(&repo, &["gc"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(on_branches().contains("Add a note"), "{}", stdout(&out));
    assert_eq!(c.live_pods(), Vec::<String>::new(), "{}", stdout(&out));
}

/// `sanddune run --sandbox kubernetes` with `pool=1`, merged to HEAD.
fn pooled_run(c: &Cluster, repo: &TestRepo, prompt: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--strategy",
        "merge-to-head",
        "--sandbox-opt",
        "pool=1",
        "--log",
        "terminal",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = c.run(repo, prompt, &args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// `pool=1` (ADR 0037): the run after a pooled run, in another process,
/// takes the pod it left waiting. The waiting pod's spec holds no env and
/// its first process waits for the claim; the claiming run's log names the
/// pod, the run takes the id the pod was labelled with, its env is its own,
/// the pod's first process is the provider's (no wait left) and its commit
/// lands. The claimed pod goes with its run, a new one waits, and
/// `gc --drain-pool` deletes that one.
fn kubernetes_a_run_claims_the_pod_the_last_run_left_waiting() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let first = pooled_run(
        &c,
        &repo,
        "first\nFAKE:file:first.md",
        &["--env", "SANDDUNE_TEST_SECRET=one"],
    );
    let log = stderr(&first);
    assert!(
        log.contains("pool: no warm sandbox was waiting; creating one"),
        "{log}"
    );
    assert!(log.contains("pool: started 1 warm sandbox(es)"), "{log}");
    let warm = c.live_pods();
    assert_eq!(warm.len(), 1, "{warm:?}");
    let pod = c.pod(&warm[0]).unwrap();
    let container = &pod["spec"]["containers"][0];
    assert!(
        container["command"].to_string().contains("USR1"),
        "{container}"
    );
    assert!(
        container["env"].as_array().is_none_or(|e| e.is_empty()),
        "the waiting pod's spec holds a run's env: {container}"
    );
    let reserved = pod["metadata"]["labels"]["sanddune.run"]
        .as_str()
        .unwrap()
        .to_string();
    // It names its slot (pool key and run id), not the host's paths.
    let slot = pod["metadata"]["annotations"]["sanddune.pool"]
        .as_str()
        .unwrap_or_default();
    assert!(
        slot.ends_with(&format!("/{reserved}")) && !slot.starts_with('/'),
        "{pod}"
    );

    let second = pooled_run(
        &c,
        &repo,
        "second\nFAKE:file:second.md\nFAKE:run:echo secret=$SANDDUNE_TEST_SECRET; tr '\\0' ' ' </proc/1/cmdline",
        &["--env", "SANDDUNE_TEST_SECRET=two"],
    );
    let log = stderr(&second);
    assert!(
        log.contains(&format!("pool: took a warm pod ({})", warm[0])),
        "{log}"
    );
    assert!(
        log.contains(&format!("on branch sanddune/run-{reserved}")),
        "the run took the id the pod was made for: {log}"
    );
    let result: Value = serde_json::from_str(&stdout(&second)).unwrap();
    let said = result["stdout"].as_str().unwrap_or_default();
    assert!(said.contains("secret=two"), "the run's env: {said}");
    assert!(
        said.contains("sleep infinity") && !said.contains("USR1"),
        "the pod's first process is the provider's: {said}"
    );
    for file in ["first.md", "second.md"] {
        assert!(repo.path().join(file).exists(), "{file} not merged");
    }
    let now = c.live_pods();
    assert_eq!(now.len(), 1, "topped up: {now:?}");
    assert_ne!(now[0], warm[0], "the claimed pod went with its run");

    let gc = c.sanddune(&repo, &["gc"]).output().unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert_eq!(c.live_pods(), now, "gc left the waiting one");
    let gc = c.sanddune(&repo, &["gc", "--drain-pool"]).output().unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert!(
        stdout(&gc).contains("which no run claimed"),
        "{}",
        stdout(&gc)
    );
    assert_eq!(c.live_pods(), Vec::<String>::new());
    assert!(
        repo.git(&["branch", "--list", "sanddune/run-*"]).is_empty(),
        "the slot's branch was left"
    );
}

/// A warm pod deleted behind sanddune's back (by a user, an eviction) is
/// not used: the claim says why, the run creates its own pod and lands its
/// commit, and the pool is topped up.
fn kubernetes_a_warm_pod_deleted_behind_sanddunes_back_is_not_used() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    pooled_run(&c, &repo, "first\nFAKE:file:first.md", &[]);
    let warm = c.live_pods();
    assert_eq!(warm.len(), 1, "{warm:?}");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    c.runtime.block_on(c.pods.delete(&warm[0], &now)).unwrap();
    let second = pooled_run(&c, &repo, "second\nFAKE:file:second.md", &[]);
    let log = stderr(&second);
    assert!(
        log.contains("pool: the warm pod was not used (it did not take the claim's signal"),
        "{log}"
    );
    assert!(repo.path().join("second.md").exists(), "not merged");
    let left = c.live_pods();
    assert_eq!(left.len(), 1, "topped up: {left:?}");
    assert!(!left.contains(&warm[0]));
    let gc = c.sanddune(&repo, &["gc", "--drain-pool"]).output().unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert_eq!(c.live_pods(), Vec::<String>::new());
}

/// A warm pod no run claims ends itself after `pool-idle` (its first
/// process exits, the pod is Succeeded), with no daemon; `gc` then deletes
/// it with its slot.
fn kubernetes_a_warm_pod_no_run_claims_ends_itself() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    pooled_run(
        &c,
        &repo,
        "note\nFAKE:file:note.md",
        &["--sandbox-opt", "pool-idle=30s"],
    );
    let warm = c.live_pods();
    assert_eq!(warm.len(), 1, "{warm:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while c.live_pods() == warm {
        assert!(Instant::now() < deadline, "the warm pod did not end itself");
        std::thread::sleep(Duration::from_secs(1));
    }
    let phase = c.pod(&warm[0]).map(|p| p["status"]["phase"].clone());
    assert_eq!(phase, Some(json!("Succeeded")), "it ended as it should");
    let gc = c.sanddune(&repo, &["gc"]).output().unwrap();
    assert!(gc.status.success(), "{}", stderr(&gc));
    assert!(
        stdout(&gc).contains("which no run claimed"),
        "{}",
        stdout(&gc)
    );
    assert!(
        c.pod(&warm[0])
            .is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null()),
        "gc left the ended pod"
    );
}

/// A run killed while its pod is still Pending (never scheduled, so its
/// `activeDeadlineSeconds` never starts) leaves gc a record with no state:
/// gc finds the pod by the run's labels and deletes it, whether or not the
/// user may list SandboxClaims (the docs' Role has them only for
/// `template=`), and says so.
fn kubernetes_gc_reaches_a_pending_pod_of_a_killed_run() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    // Unschedulable: the mock says so, a real scheduler finds no node with
    // this label.
    if let Some(mock) = &c.mock {
        mock.set_unschedulable(Some(
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
        ));
        mock.forbid("list", "sandboxclaims");
    }
    let child = c
        .run(
            &repo,
            "never runs",
            &[
                "--sandbox-opt",
                "node-selector=sanddune.test/nowhere=1",
                "--sandbox-opt",
                "start-timeout=10m",
            ],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::kill_once(child, "the run's Pending pod", || {
        !c.sanddune_pods().is_empty()
    });
    let pending = c.live_pods();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let out = c.sanddune(&repo, &["gc"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("closed 1 kubernetes sandbox(es) that run"),
        "{}",
        stdout(&out)
    );
    assert_eq!(c.live_pods(), Vec::<String>::new(), "{}", stdout(&out));
    // Nothing left for a second gc.
    let again = c.sanddune(&repo, &["gc"]).output().unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!stdout(&again).contains("kubernetes"), "{}", stdout(&again));
}

/// `template=` claims a pod from an agent-sandbox SandboxTemplate's warm
/// pool; the run commits there, and its claim is deleted at the end.
fn kubernetes_a_template_claims_a_warm_pod_and_deletes_the_claim() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let ext = "extensions.agents.x-k8s.io/v1alpha1";
    let template = format!("sanddune-test-{}", std::process::id());
    let objects = [
        (
            "sandboxtemplates",
            json!({"apiVersion": ext, "kind": "SandboxTemplate", "metadata": {"name": template},
                "spec": {"podTemplate": {"spec": {"containers": [
                    {"name": "agent", "image": c.image, "command": ["sleep", "infinity"]}]}}}}),
        ),
        (
            "sandboxwarmpools",
            json!({"apiVersion": ext, "kind": "SandboxWarmPool", "metadata": {"name": template},
                "spec": {"replicas": 1, "sandboxTemplateRef": {"name": template}}}),
        ),
    ];
    for (plural, object) in &objects {
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let kind = object.types.clone().unwrap().kind;
        match c.runtime.block_on(
            c.sandbox_api(&kind, plural)
                .create(&Default::default(), &object),
        ) {
            Ok(_) => {}
            // A restricted user may not even ask (403).
            Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) && c.mock.is_none() => {
                not_here(
                    "this cluster has no agent-sandbox controller and CRDs (kubernetes-sigs/agent-sandbox) the test user may use",
                )
            }
            Err(e) => panic!("{plural}: {e}"),
        }
    }
    // The pool's one sandbox is warm before the run.
    let warm = c.running_pod(|n| n.starts_with(&format!("{template}-")));
    let option = format!("template={template}");
    let out = c
        .run_without_image(
            &repo,
            "add a note",
            &["--branch", "k8s-claimed", "--sandbox-opt", &option],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !repo
            .git(&["log", "-1", "--format=%s", "k8s-claimed"])
            .is_empty()
    );
    // The run had the warm pod, and deleting its claim deleted it.
    assert!(
        c.pod(&warm)
            .is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null()),
        "the run did not take the warm pod {warm}"
    );
    let claims = c
        .runtime
        .block_on(
            c.sandbox_api("SandboxClaim", "sandboxclaims")
                .list(&ListParams::default().labels("sanddune.plugin")),
        )
        .unwrap();
    assert!(
        claims.items.is_empty(),
        "the claim was left: {:?}",
        claims.items
    );
    // A template that does not exist is named.
    let out = c
        .run_without_image(
            &repo,
            "x",
            &[
                "--sandbox-opt",
                "template=nope",
                "--sandbox-opt",
                "start-timeout=20s",
            ],
        )
        .output()
        .unwrap();
    assert!(stderr(&out).contains("template=nope"), "{}", stderr(&out));
    // pool=N does not pool a template's pods (its SandboxWarmPool does):
    // the run goes on, and its top-up says why it started none.
    let out = c
        .run_without_image(
            &repo,
            "add another note",
            &[
                "--branch",
                "k8s-claimed-2",
                "--sandbox-opt",
                &option,
                "--sandbox-opt",
                "pool=1",
                "--log",
                "terminal",
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: pool: a warm sandbox could not be started")
            && stderr(&out).contains("give the template a SandboxWarmPool instead"),
        "{}",
        stderr(&out)
    );
    assert!(
        repo.git(&["branch", "--list", "sanddune/run-*"]).is_empty(),
        "the failed fill left its branch"
    );
    for (plural, object) in objects.iter().rev() {
        let kind = object["kind"].as_str().unwrap();
        let _ = c.runtime.block_on(
            c.sandbox_api(kind, plural)
                .delete(&template, &Default::default()),
        );
    }
}

/// What the pod is made with: the run's labels, the ttl as its deadline,
/// no service-account token, the limits.
fn kubernetes_the_pod_carries_the_labels_ttl_and_limits() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    // A key the agent needs: it reaches the agent, but neither the pod's
    // spec (whoever may get pods reads it) nor an exec's URL (the audit
    // log keeps those).
    std::fs::create_dir_all(repo.path().join(".sanddune")).unwrap();
    std::fs::write(
        repo.path().join(".sanddune/.env"),
        "PROBE_API_KEY=s3cret-probe-value\n",
    )
    .unwrap();
    let child = c
        .run(
            &repo,
            "FAKE:say-env:PROBE_API_KEY\nFAKE:run:sleep 6",
            &[
                "--sandbox-opt",
                "ttl=45m",
                "--sandbox-opt",
                "cpus=500m",
                "--sandbox-opt",
                "memory=1Gi",
                "--json",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pod = c.running_pod(|n| n.starts_with("sanddune-"));
    let object = c.pod(&pod).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("s3cret-probe-value"),
        "the agent did not see its key: {}",
        stdout(&out)
    );
    assert!(
        !object.to_string().contains("s3cret-probe-value"),
        "the key is in the pod: {object}"
    );
    c.assert_no_exec_url_has("s3cret-probe-value");
    let spec = &object["spec"];
    assert_eq!(spec["activeDeadlineSeconds"], 2700, "{object}");
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(
        spec["containers"][0]["resources"]["limits"]["memory"],
        "1Gi"
    );
    assert_eq!(
        spec["containers"][0]["resources"]["requests"]["cpu"],
        "500m"
    );
    assert_eq!(
        spec["containers"][0]["securityContext"]["privileged"],
        false
    );
    let labels = &object["metadata"]["labels"];
    assert_eq!(labels["sanddune.plugin"], "kubernetes", "{object}");
    assert!(labels["sanddune.run"].is_string(), "{object}");
}

/// A `parallel-planner` workflow of `tasks` whose planner runs on the host
/// (the scripted agent is on its PATH) and whose implementers run the
/// image's fake claude in pods of the cluster, with `prompt` (which may
/// use `{{TASK_ID}}` and `{{TASK_TITLE}}`).
fn workflow_on_cluster(tasks: &[(String, String)], prompt: &str) -> (TestRepo, Cluster) {
    let refs: Vec<(&str, &str)> = tasks
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let repo = scaffolded("parallel-planner", &refs);
    let c = cluster(&repo);
    let file = repo
        .path()
        .join(".sanddune/workflows/parallel-planner.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .replacen("name = \"plan\"\n", "name = \"plan\"\nsandbox = \"test-isolated\"\n", 1)
        .replacen(
            "name = \"implement\"\n",
            &format!(
                "name = \"implement\"\nsandbox = \"kubernetes\"\nsandboxOptions = {{ image = \"{}\", namespace = \"{}\" }}\n",
                c.image, c.namespace
            ),
            1,
        )
        .replacen(
            "promptArgs = { TASK_ID = \"{{item.id}}\", TASK_TITLE = \"{{item.title}}\", BRANCH = \"{{item.branch}}\" }",
            "promptArgs = { TASK_ID = \"{{item.id}}\", TASK_TITLE = \"{{item.title}}\" }",
            1,
        );
    std::fs::write(&file, text).unwrap();
    let path = repo.path().join(".sanddune/prompts/implement.md");
    assert!(path.exists());
    std::fs::write(&path, prompt).unwrap();
    (repo, c)
}

/// `sanddune workflow run parallel-planner --parallel N --json`: the
/// process's output and the result it printed.
fn run_workflow(c: &Cluster, repo: &TestRepo, parallel: &str) -> (std::process::Output, Value) {
    let out = c
        .sanddune(
            repo,
            &[
                "workflow",
                "run",
                "parallel-planner",
                "--parallel",
                parallel,
                "--json",
            ],
        )
        .output()
        .unwrap();
    let result: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stderr(&out)));
    (out, result)
}

/// Whether `path` is in the host repository's checked-out branch.
fn on_head(repo: &TestRepo, path: &str) -> bool {
    repo.git(&["ls-tree", "-r", "--name-only", "HEAD"])
        .lines()
        .any(|l| l == path)
}

/// `workflow run --parallel 8` of 16 items onto the cluster: each item in
/// its own pod, every branch landed, nothing left.
fn kubernetes_a_16_item_workflow_fans_out_and_lands_every_branch() {
    let tasks: Vec<(String, String)> = (1..=16)
        .map(|i| (i.to_string(), format!("task {i}")))
        .collect();
    // A note of its own per task, so every branch has something to land.
    let (repo, c) = workflow_on_cluster(
        &tasks,
        "implement {{TASK_TITLE}}\nFAKE:file:notes/{{TASK_ID}}.md\n",
    );
    let started = Instant::now();
    let (out, result) = run_workflow(&c, &repo, "8");
    let wall = started.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let items = result["steps"][1]["items"].as_array().unwrap();
    assert_eq!(items.len(), 16);
    for item in items {
        let branch = item["runs"][0]["branch"].as_str().unwrap();
        assert!(
            !repo.git(&["log", "-1", "--format=%s", branch]).is_empty(),
            "{branch}: no commit"
        );
    }
    let landed = result["steps"][2]["merge"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["status"] == "landed")
        .count();
    assert_eq!(landed, 16, "{}", result["steps"][2]);
    assert_eq!(c.live_pods(), Vec::<String>::new(), "a pod was left");
    eprintln!("16 items, --parallel 8: {:.1}s", wall.as_secs_f64());
}

/// A pod deleted under one item of a workflow: that item fails naming the
/// pod, the others land, and the host keeps everything else.
fn kubernetes_a_pod_deleted_under_a_workflow_item_fails_only_that_item() {
    let tasks: Vec<(String, String)> = [("1", "true"), ("2", "sleep 120"), ("3", "true")]
        .map(|(id, title)| (id.to_string(), title.to_string()))
        .to_vec();
    let (repo, c) = workflow_on_cluster(
        &tasks,
        "implement task {{TASK_ID}}\nFAKE:file:notes/{{TASK_ID}}.md\nFAKE:run:{{TASK_TITLE}}\n",
    );
    let status = repo.git(&["status", "--porcelain"]);
    let runner = std::thread::scope(|scope| {
        let runner = scope.spawn(|| run_workflow(&c, &repo, "3"));
        // The pod whose agent is in its two minutes of sleep (the pattern
        // does not match the grep's own command line).
        let deadline = Instant::now() + Duration::from_secs(120);
        let victim = loop {
            let sleeping = c.live_pods().into_iter().find(|pod| {
                c.exec(
                    pod,
                    "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q 'sleep 12[0]'",
                )
                .is_some()
            });
            if let Some(pod) = sleeping {
                break pod;
            }
            assert!(Instant::now() < deadline, "no pod ran task 2");
            std::thread::sleep(Duration::from_millis(500));
        };
        c.kill_pod(&victim);
        (runner.join().unwrap(), victim)
    });
    let ((out, result), victim) = runner;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let statuses: Vec<&str> = result["steps"][1]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "failed", "succeeded"], "{result}");
    let failed = &result["steps"][1]["items"][1];
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains(&format!("pod `{victim}`")),
        "{failed}"
    );
    let queue: Vec<&str> = result["steps"][2]["merge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["status"].as_str().unwrap())
        .collect();
    assert_eq!(queue, ["landed", "failed", "landed"], "{result}");
    assert!(on_head(&repo, "notes/1.md") && on_head(&repo, "notes/3.md"));
    assert!(!on_head(&repo, "notes/2.md"));
    assert_eq!(repo.git(&["status", "--porcelain"]), status);
    assert_eq!(c.live_pods(), Vec::<String>::new(), "a pod was left");
}

/// The hostile pod provider's `create`, run by the real binary: its error,
/// without the host's log lines about each refusal.
fn hostile(repo: &TestRepo, c: &Cluster, attack: &str, target: &str) -> String {
    let plugin = common::plugin_file("sanddune-test-plugin-hostile-pods");
    let [attack, image, target, namespace] = [
        format!("attack={attack}"),
        format!("image={}", c.image),
        format!("target={target}"),
        format!("namespace={}", c.namespace),
    ];
    let out = c
        .sanddune(
            repo,
            &[
                "run",
                "--sandbox",
                plugin.to_str().unwrap(),
                "--agent",
                "demo",
                "--prompt",
                "x",
                "--yes",
                "--sandbox-opt",
                &attack,
                "--sandbox-opt",
                &image,
                "--sandbox-opt",
                &target,
                "--sandbox-opt",
                &namespace,
            ],
        )
        .output()
        .unwrap();
    assert!(!out.status.success());
    stderr(&out)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A provider asking for what would reach the node or another namespace is
/// refused every time, and nothing is created.
fn kubernetes_a_hostile_provider_is_refused_privileges_host_access_and_other_namespaces() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let cases = [
        ("privileged", "refused: a privileged container"),
        ("host-network", "refused: hostNetwork"),
        ("host-pid", "refused: hostPID"),
        ("host-path", "refused: a hostPath volume (`/`)"),
        ("cap-add", "refused: added capabilities (SYS_ADMIN)"),
        ("namespace", "refused: namespace `kube-system`"),
        ("label", "refused: label `sanddune.run`"),
    ];
    for round in 0..2 {
        for (attack, refusal) in cases {
            let err = hostile(&repo, &c, attack, "");
            assert!(!err.contains("LEAKED"), "round {round}, {attack}: {err}");
            assert!(err.contains(refusal), "round {round}, {attack}: {err}");
        }
    }
    assert_eq!(c.sanddune_pods().len(), 0, "a pod was created");
}

/// A pod of another run, or one sanddune never made, cannot be touched.
fn kubernetes_a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let suffix = std::process::id();
    let targets = [
        format!("other-run-{suffix}"),
        format!("unlabelled-{suffix}"),
    ];
    let labels = [
        json!({"sanddune.run": "another-run", "sanddune.plugin": "hostile-pods"}),
        json!({}),
    ];
    for (name, labels) in targets.iter().zip(labels) {
        let pod = json!({"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": c.image, "command": ["sleep", "infinity"]}]}});
        c.runtime
            .block_on(
                c.pods
                    .create(&Default::default(), &serde_json::from_value(pod).unwrap()),
            )
            .unwrap();
    }
    for target in &targets {
        let err = hostile(&repo, &c, "foreign", target);
        assert!(!err.contains("LEAKED"), "{target}: {err}");
        let refusal = format!("refused: pod `{target}` was not created by plugin");
        assert_eq!(err.matches(&refusal).count(), 4, "{target}: {err}");
        assert!(c.pod(target).is_some(), "{target} was deleted");
    }
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    for target in &targets {
        c.runtime.block_on(c.pods.delete(target, &now)).unwrap();
    }
}

/// Each test on the mock, and again on a real cluster (see the top).
fn main() -> std::process::ExitCode {
    let tests: Vec<(&str, fn())> = vec![
        (
            "kubernetes_a_run_commits_on_its_branch_and_deletes_its_pod",
            kubernetes_a_run_commits_on_its_branch_and_deletes_its_pod,
        ),
        (
            "kubernetes_a_run_works_where_exec_speaks_only_v4",
            kubernetes_a_run_works_where_exec_speaks_only_v4,
        ),
        ("kubernetes_faults_are_named", kubernetes_faults_are_named),
        (
            "kubernetes_a_pod_killed_mid_run_fails_the_run_naming_it",
            kubernetes_a_pod_killed_mid_run_fails_the_run_naming_it,
        ),
        (
            "kubernetes_an_exec_stream_cut_mid_command_fails_the_run_naming_it",
            kubernetes_an_exec_stream_cut_mid_command_fails_the_run_naming_it,
        ),
        (
            "kubernetes_interactive_gives_the_agent_a_tty_in_the_pod",
            kubernetes_interactive_gives_the_agent_a_tty_in_the_pod,
        ),
        (
            "kubernetes_ctrl_c_deletes_the_pod",
            kubernetes_ctrl_c_deletes_the_pod,
        ),
        (
            "kubernetes_gc_brings_a_killed_runs_commit_out_and_deletes_its_pod",
            kubernetes_gc_brings_a_killed_runs_commit_out_and_deletes_its_pod,
        ),
        (
            "kubernetes_gc_reaches_a_pending_pod_of_a_killed_run",
            kubernetes_gc_reaches_a_pending_pod_of_a_killed_run,
        ),
        (
            "kubernetes_a_template_claims_a_warm_pod_and_deletes_the_claim",
            kubernetes_a_template_claims_a_warm_pod_and_deletes_the_claim,
        ),
        (
            "kubernetes_a_run_claims_the_pod_the_last_run_left_waiting",
            kubernetes_a_run_claims_the_pod_the_last_run_left_waiting,
        ),
        (
            "kubernetes_a_warm_pod_deleted_behind_sanddunes_back_is_not_used",
            kubernetes_a_warm_pod_deleted_behind_sanddunes_back_is_not_used,
        ),
        (
            "kubernetes_a_warm_pod_no_run_claims_ends_itself",
            kubernetes_a_warm_pod_no_run_claims_ends_itself,
        ),
        (
            "kubernetes_the_pod_carries_the_labels_ttl_and_limits",
            kubernetes_the_pod_carries_the_labels_ttl_and_limits,
        ),
        (
            "kubernetes_a_16_item_workflow_fans_out_and_lands_every_branch",
            kubernetes_a_16_item_workflow_fans_out_and_lands_every_branch,
        ),
        (
            "kubernetes_a_pod_deleted_under_a_workflow_item_fails_only_that_item",
            kubernetes_a_pod_deleted_under_a_workflow_item_fails_only_that_item,
        ),
        (
            "kubernetes_a_hostile_provider_is_refused_privileges_host_access_and_other_namespaces",
            kubernetes_a_hostile_provider_is_refused_privileges_host_access_and_other_namespaces,
        ),
        (
            "kubernetes_a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_pod",
            kubernetes_a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_pod,
        ),
    ];
    let mut all = Vec::new();
    for (name, test) in tests {
        all.push(trials::test(format!("mock::{name}"), test));
        all.push(trials::test(format!("real::{name}"), move || {
            ON_REAL_CLUSTER.set(true);
            test()
        }));
    }
    trials::run(all)
}
