//! The `kubernetes` sandbox provider end to end: the real binary, the
//! built-in component, the host's `pods` capability through kube-rs, and the
//! loopback Kubernetes API server of tests/k8s-mock, whose pods are docker
//! containers of the test image, so the fake claude in them really edits
//! and commits. The repository goes in over the exec stream and the commits
//! come back to the host repository's branches.

mod common;

use std::process::{Command, Output};
use std::time::Instant;

use common::engines::{IMAGE, require_engine};
use common::trials::{self, skip, trial};
use common::{TestRepo, scaffolded, stderr, stdout};
use k8s_mock::K8sMock;
use serde_json::Value;

/// The mock, and its kubeconfig written in the test's home.
struct Cluster {
    mock: K8sMock,
    kubeconfig: std::path::PathBuf,
}

fn cluster(repo: &TestRepo) -> Cluster {
    require_engine("docker");
    let mock = K8sMock::start().unwrap_or_else(|e| skip(format!("the k8s mock: {e}")));
    let kubeconfig = repo.home.path().join("mock.kubeconfig");
    std::fs::write(&kubeconfig, mock.kubeconfig()).unwrap();
    Cluster { mock, kubeconfig }
}

/// `sanddune ARGS` with the mock's kubeconfig.
fn sanddune(repo: &TestRepo, kubeconfig: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = repo.command(args);
    cmd.env("KUBECONFIG", kubeconfig);
    cmd
}

/// `sanddune run --sandbox kubernetes` of the image's fake claude.
fn run(repo: &TestRepo, kubeconfig: &std::path::Path, branch: &str, extra: &[&str]) -> Output {
    let image = format!("image={IMAGE}");
    let mut args = vec![
        "run",
        "--sandbox",
        "kubernetes",
        "--agent",
        "claude-code",
        "--prompt",
        "add a note",
        "--branch",
        branch,
        "--sandbox-opt",
        &image,
    ];
    args.extend_from_slice(extra);
    sanddune(repo, kubeconfig, &args).output().unwrap()
}

fn kubernetes_a_run_commits_on_its_branch_and_deletes_its_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let out = run(
        &repo,
        &c.kubeconfig,
        "k8s-note",
        &["--sandbox-opt", "ttl=20m", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(result["branch"], "k8s-note", "{result}");
    assert!(
        !repo
            .git(&["log", "-1", "--format=%s", "k8s-note"])
            .is_empty(),
        "no commit on the branch"
    );
    assert_eq!(c.mock.pods_not_ended("default"), 0, "a pod was left");
    assert!(c.mock.containers().is_empty(), "a pod's container was left");
    // plugin inspect names the namespace and the verbs the host grants.
    let out = sanddune(&repo, &c.kubeconfig, &["plugin", "inspect", "kubernetes"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("by default namespace `default` of context `mock`"),
        "{text}"
    );
    assert!(
        text.contains("verbs: create, get, list, delete pods; create pods/exec"),
        "{text}"
    );
    assert!(text.contains("sanddune:plugin@0.5.0"), "{text}");
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

    // No image: refused before anything is created.
    let out = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
        ],
    )
    .output()
    .unwrap();
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
        c.mock.allow_all();
        c.mock.set_unschedulable(None);
        c.mock.set_pod_quota(None);
        fault(&c.mock);
        let mut extra = Vec::new();
        for o in &options {
            extra.extend(["--sandbox-opt", o.as_str()]);
        }
        let out = run(
            &repo,
            &c.kubeconfig,
            &format!("k8s-fault-{}", what.len()),
            &extra,
        );
        assert!(!out.status.success(), "{what}: succeeded");
        for want in wants {
            assert!(stderr(&out).contains(&want), "{what}: {}", stderr(&out));
        }
        assert_eq!(
            c.mock.pods_not_ended("default"),
            0,
            "{what}: a pod was left"
        );
    }

    // A wrong token: 401 names the user; a closed port names the server.
    let bad = repo.home.path().join("bad.kubeconfig");
    std::fs::write(&bad, c.mock.kubeconfig_with_token("wrong")).unwrap();
    let out = run(&repo, &bad, "k8s-401", &[]);
    assert!(
        stderr(&out).contains("did not accept the credentials of kubeconfig user `mock-user`"),
        "{}",
        stderr(&out)
    );
    let url = c.mock.url().to_string();
    c.mock.stop();
    let out = run(&repo, &c.kubeconfig, "k8s-down", &[]);
    assert!(
        stderr(&out).contains(&format!(
            "cannot reach the API server of context `mock` at {url}"
        )),
        "{}",
        stderr(&out)
    );
}

/// A pod deleted under a running agent fails the run with the reason, and
/// the host's repository keeps what it had.
fn kubernetes_a_pod_deleted_mid_run_fails_the_run_naming_it() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let image = format!("image={IMAGE}");
    let child = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "FAKE:run:sleep 60",
            "--branch",
            "k8s-gone",
            "--sandbox-opt",
            &image,
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    let pod = loop {
        let running = c.mock.pod_names("default").into_iter().find(|name| {
            c.mock
                .pod("default", name)
                .is_some_and(|p| p["status"]["phase"] == "Running")
        });
        if let Some(name) = running {
            break name;
        }
        assert!(Instant::now() < deadline, "the pod never ran");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    // Past the sync, into the agent's minute of sleep.
    std::thread::sleep(std::time::Duration::from_secs(5));
    c.mock.remove_pod_container("default", &pod).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("pod `{pod}`")),
        "{}",
        stderr(&out)
    );
    assert_eq!(c.mock.pods_not_ended("default"), 0);
}

/// `workflow run --parallel 8` of 16 items onto the cluster: each item in
/// its own pod, every branch landed, nothing left.
fn kubernetes_a_16_item_workflow_fans_out_and_lands_every_branch() {
    let issues: Vec<(String, String)> = (1..=16)
        .map(|i| (i.to_string(), format!("task {i}")))
        .collect();
    let refs: Vec<(&str, &str)> = issues
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
            &format!("name = \"implement\"\nsandbox = \"kubernetes\"\nsandboxOptions = {{ image = \"{IMAGE}\" }}\n"),
            1,
        )
        .replacen("promptFile = \"prompts/implement.md\"", "prompt = \"implement the task\"", 1)
        .lines()
        .filter(|l| !l.starts_with("promptArgs"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&file, text).unwrap();
    let started = Instant::now();
    let out = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "workflow",
            "run",
            "parallel-planner",
            "--parallel",
            "8",
            "--json",
        ],
    )
    .output()
    .unwrap();
    let wall = started.elapsed();
    let result: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stderr(&out)));
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
    assert_eq!(c.mock.pods_not_ended("default"), 0, "a pod was left");
    eprintln!(
        "16 items, --parallel 8, onto the mock: {:.1}s",
        wall.as_secs_f64()
    );
}

/// The run's pod, once it runs.
fn running_pod(mock: &K8sMock) -> String {
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let running = mock.pod_names("default").into_iter().find(|name| {
            mock.pod("default", name)
                .is_some_and(|p| p["status"]["phase"] == "Running")
        });
        if let Some(name) = running {
            return name;
        }
        assert!(Instant::now() < deadline, "the pod never ran");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Ctrl-C during the agent's turn deletes the pod.
fn kubernetes_ctrl_c_deletes_the_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let image = format!("image={IMAGE}");
    let child = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "FAKE:run:sleep 60",
            "--sandbox-opt",
            &image,
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let pod = running_pod(&c.mock);
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the abort took {:?}",
        started.elapsed()
    );
    assert!(
        c.mock.pod("default", &pod).is_none(),
        "pod {pod} is still there: {}",
        stderr(&out)
    );
}

/// A run killed with its commit still in the pod: `gc` brings the commit
/// onto the run's branch and deletes the pod.
fn kubernetes_gc_brings_a_killed_runs_commit_out_and_deletes_its_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let image = format!("image={IMAGE}");
    let child = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "note stranded\nFAKE:file:notes/stranded.md\nFAKE:slow",
            "--sandbox-opt",
            &image,
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let committed = || {
        c.mock.pod_names("default").iter().any(|pod| {
            c.mock.container_of("default", pod).is_some_and(|id| {
                Command::new("docker")
                    .args([
                        "exec",
                        &id,
                        "git",
                        "-C",
                        "/home/agent/workspace",
                        "log",
                        "--format=%s",
                    ])
                    .output()
                    .is_ok_and(|o| stdout(&o).contains("Add a note"))
            })
        })
    };
    common::kill_once(child, "the agent's commit in its pod", committed);
    let on_branches = || repo.git(&["log", "--all", "--format=%s"]);
    assert!(!on_branches().contains("Add a note"));
    let out = sanddune(&repo, &c.kubeconfig, &["gc"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(on_branches().contains("Add a note"), "{}", stdout(&out));
    assert_eq!(c.mock.pods_not_ended("default"), 0, "{}", stdout(&out));
}

/// `template=` claims a pod from an agent-sandbox SandboxTemplate's warm
/// pool; the run commits there, and its claim is deleted at the end.
fn kubernetes_a_template_claims_a_warm_pod_and_deletes_the_claim() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let ext = "extensions.agents.x-k8s.io/v1alpha1";
    let objects = [
        serde_json::json!({"apiVersion": ext, "kind": "SandboxTemplate", "metadata": {"name": "agent"},
            "spec": {"podTemplate": {"spec": {"containers": [
                {"name": "agent", "image": IMAGE, "command": ["sleep", "infinity"]}]}}}}),
        serde_json::json!({"apiVersion": ext, "kind": "SandboxWarmPool", "metadata": {"name": "pool"},
            "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "agent"}}}),
    ];
    let (runtime, client) = kube_client(&c.kubeconfig);
    let api = |kind: &str, plural: &str| {
        let resource = kube::api::ApiResource {
            group: "extensions.agents.x-k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: ext.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        kube::Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), "default", &resource)
    };
    runtime.block_on(async {
        for (object, plural) in objects.iter().zip(["sandboxtemplates", "sandboxwarmpools"]) {
            let object: kube::api::DynamicObject = serde_json::from_value(object.clone()).unwrap();
            let kind = object.types.clone().unwrap().kind;
            api(&kind, plural)
                .create(&Default::default(), &object)
                .await
                .unwrap();
        }
    });
    // The pool's one sandbox is warm before the run.
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    let warm = loop {
        let warm = c.mock.pod_names("default").into_iter().find(|n| {
            n.starts_with("pool-")
                && c.mock
                    .pod("default", n)
                    .is_some_and(|p| p["status"]["phase"] == "Running")
        });
        if let Some(warm) = warm {
            break warm;
        }
        assert!(Instant::now() < deadline, "the pool never warmed");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "add a note",
            "--branch",
            "k8s-claimed",
            "--sandbox-opt",
            "template=agent",
            "--json",
        ],
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
        c.mock.pod("default", &warm).is_none(),
        "the run did not take the warm pod {warm}"
    );
    let claims = runtime
        .block_on(api("SandboxClaim", "sandboxclaims").list(&Default::default()))
        .unwrap();
    assert!(
        claims.items.is_empty(),
        "the claim was left: {:?}",
        claims.items
    );
    // A template that does not exist is named.
    let out = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "x",
            "--sandbox-opt",
            "template=nope",
            "--sandbox-opt",
            "start-timeout=20s",
        ],
    )
    .output()
    .unwrap();
    assert!(stderr(&out).contains("template=nope"), "{}", stderr(&out));
}

/// What the pod is made with: the run's labels, the ttl as its deadline,
/// no service-account token, the limits.
fn kubernetes_the_pod_carries_the_labels_ttl_and_limits() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let image = format!("image={IMAGE}");
    let child = sanddune(
        &repo,
        &c.kubeconfig,
        &[
            "run",
            "--sandbox",
            "kubernetes",
            "--agent",
            "claude-code",
            "--prompt",
            "FAKE:run:sleep 30",
            "--sandbox-opt",
            &image,
            "--sandbox-opt",
            "ttl=45m",
            "--sandbox-opt",
            "cpus=500m",
            "--sandbox-opt",
            "memory=1Gi",
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let pod = running_pod(&c.mock);
    let object = c.mock.pod("default", &pod).unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait_with_output();
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

/// kube-rs on the mock, for what the tests set up as another client would.
fn kube_client(kubeconfig: &std::path::Path) -> (tokio::runtime::Runtime, kube::Client) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let client = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    (runtime, client)
}

/// The hostile pod provider's `create`, run by the real binary: its error.
fn hostile(repo: &TestRepo, c: &Cluster, attack: &str, target: &str) -> String {
    let plugin = common::plugin_file("sanddune-test-plugin-hostile-pods");
    let attack = format!("attack={attack}");
    let image = format!("image={IMAGE}");
    let target = format!("target={target}");
    let out = sanddune(
        repo,
        &c.kubeconfig,
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
        ],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    // The error, without the host's log lines about each refusal.
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
    assert!(c.mock.pod_names("default").is_empty());
    assert!(c.mock.pod_names("kube-system").is_empty());
}

/// A pod of another run, or one sanddune never made, cannot be touched.
fn kubernetes_a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_pod() {
    let repo = TestRepo::new();
    let c = cluster(&repo);
    let (runtime, client) = kube_client(&c.kubeconfig);
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "default");
    let make = |name: &str, labels: Value| {
        let pod = serde_json::json!({"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": IMAGE, "command": ["sleep", "infinity"]}]}});
        runtime
            .block_on(pods.create(&Default::default(), &serde_json::from_value(pod).unwrap()))
            .unwrap();
    };
    make(
        "other-run",
        serde_json::json!({"sanddune.run": "another-run", "sanddune.plugin": "hostile-pods"}),
    );
    make("unlabelled", serde_json::json!({}));
    running_pod(&c.mock);
    for target in ["other-run", "unlabelled"] {
        let err = hostile(&repo, &c, "foreign", target);
        assert!(!err.contains("LEAKED"), "{target}: {err}");
        assert_eq!(
            err.matches(&format!(
                "refused: pod `{target}` was not created by plugin"
            ))
            .count(),
            4,
            "{target}: {err}"
        );
        assert!(
            c.mock.pod("default", target).is_some(),
            "{target} was deleted"
        );
    }
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(kubernetes_a_run_commits_on_its_branch_and_deletes_its_pod),
        trial!(kubernetes_faults_are_named),
        trial!(kubernetes_a_pod_deleted_mid_run_fails_the_run_naming_it),
        trial!(kubernetes_a_16_item_workflow_fans_out_and_lands_every_branch),
        trial!(kubernetes_ctrl_c_deletes_the_pod),
        trial!(kubernetes_gc_brings_a_killed_runs_commit_out_and_deletes_its_pod),
        trial!(kubernetes_a_template_claims_a_warm_pod_and_deletes_the_claim),
        trial!(kubernetes_the_pod_carries_the_labels_ttl_and_limits),
        trial!(
            kubernetes_a_hostile_provider_is_refused_privileges_host_access_and_other_namespaces
        ),
        trial!(kubernetes_a_hostile_provider_cannot_touch_another_runs_or_an_unlabelled_pod),
    ])
}
