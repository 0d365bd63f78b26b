//! The mock speaks the real protocol: real `kubectl` (1.30+, exec over
//! WebSocket v5), the official Python client (`kubernetes`, pinned in
//! python/requirements.txt, exec over v4) and kube-rs drive pods, watches,
//! exec with stdin, `kubectl cp`, the agent-sandbox claims and the error
//! bodies against it, and the injected faults look to them as the real
//! failures do.
//!
//! The Python client is installed by the test itself into a venv under
//! `target/tmp/k8s-python`, so a cached target dir skips the install.
//! Every test needs docker and the `sanddune-test:latest` image
//! (`bash tests/images/build.sh docker`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// The host's test harness, which counts a test that cannot run here as
// ignored (`crate::common::trials` to its macro); not every helper is used.
#[allow(dead_code)]
#[path = "../../common/trials.rs"]
mod trials;
mod common {
    pub(crate) use super::trials;
}
use trials::{skip, trial};

use k8s_mock::K8sMock;

const IMAGE: &str = "sanddune-test:latest";

/// A started mock and a kubeconfig for it, or the test skipped for want
/// of docker or the image.
struct Cluster {
    mock: K8sMock,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let image = Command::new("docker")
            .args(["image", "inspect", IMAGE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !image.is_ok_and(|s| s.success()) {
            skip(format!(
                "docker or its {IMAGE} image is missing (start dockerd, then bash tests/images/build.sh docker)"
            ));
        }
        let mock = K8sMock::start().unwrap_or_else(|e| skip(format!("the mock needs docker: {e}")));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config"), mock.kubeconfig()).unwrap();
        Cluster { mock, dir }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// `kubectl ARGS` with this cluster's kubeconfig and `stdin`.
    fn kubectl(&self, args: &[&str], stdin: &[u8]) -> Output {
        kubectl_with(&self.kubeconfig(), args, stdin)
    }

    /// `kubectl ARGS`, which must succeed: its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, b"");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A pod running `sleep infinity`, Ready.
    fn running_pod(&self, name: &str) {
        let image = format!("--image={IMAGE}");
        self.ok(&[
            "run",
            name,
            &image,
            "--restart=Never",
            "--",
            "sleep",
            "infinity",
        ]);
        self.ok(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=60s",
        ]);
    }

    fn pod_field(&self, name: &str, path: &str) -> String {
        self.ok(&["get", "pod", name, "-o", &format!("jsonpath={{{path}}}")])
    }
}

fn kubectl_with(kubeconfig: &Path, args: &[&str], stdin: &[u8]) -> Output {
    require_kubectl();
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut input, stdin).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// kubectl 1.30 or later: older ones exec over SPDY, which the mock does
/// not serve.
fn require_kubectl() {
    static VERSION: OnceLock<Option<u32>> = OnceLock::new();
    let minor = VERSION.get_or_init(|| {
        let out = Command::new("kubectl")
            .args(["version", "--client", "-o", "json"])
            .output()
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["clientVersion"]["minor"]
            .as_str()?
            .trim_end_matches('+')
            .parse()
            .ok()
    });
    match minor {
        None => skip("kubectl is not installed (.ci/run installs v1.32.4)"),
        Some(m) if *m < 30 => skip(format!(
            "kubectl 1.{m} execs over SPDY only; the mock needs 1.30+ (.ci/run installs v1.32.4)"
        )),
        Some(_) => {}
    }
}

fn docker_has(id: &str) -> bool {
    Command::new("docker")
        .args(["inspect", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn kubectl_runs_execs_copies_and_deletes_pods() {
    let c = Cluster::start();
    c.running_pod("k1");
    let pod: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "pod", "k1", "-o", "json"])).unwrap();
    assert_eq!(pod["status"]["phase"], "Running", "{pod:#}");
    assert_eq!(pod["spec"]["containers"][0]["image"], IMAGE);
    let table = c.ok(&["get", "pods"]);
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["k1", "1/1", "Running", "0"], "{table}");

    let out = c.kubectl(
        &[
            "exec",
            "-i",
            "k1",
            "--",
            "sh",
            "-c",
            "cat; echo err >&2; exit 3",
        ],
        b"through stdin\n",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through stdin\n");
    assert!(stderr(&out).starts_with("err\n"), "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));

    let local = tempfile::tempdir().unwrap();
    let payload: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(local.path().join("in.txt"), &payload).unwrap();
    let from = local.path().join("in.txt");
    c.ok(&["cp", from.to_str().unwrap(), "k1:/tmp/in.txt"]);
    assert_eq!(
        c.ok(&["exec", "k1", "--", "wc", "-l", "/tmp/in.txt"]),
        "20000 /tmp/in.txt\n"
    );
    let back = local.path().join("back.txt");
    c.ok(&["cp", "k1:/tmp/in.txt", back.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), payload);

    // Per-exec overhead: kubectl through the mock against docker exec.
    let id = c.mock.container_of("default", "k1").unwrap();
    let n = 5;
    let started = Instant::now();
    for _ in 0..n {
        c.ok(&["exec", "k1", "--", "true"]);
    }
    let through_mock = started.elapsed() / n;
    let started = Instant::now();
    for _ in 0..n {
        assert!(
            Command::new("docker")
                .args(["exec", &id, "true"])
                .status()
                .unwrap()
                .success()
        );
    }
    eprintln!(
        "kubectl exec true through the mock: {through_mock:.0?}; docker exec true: {:.0?}",
        started.elapsed() / n
    );

    let out = c.ok(&["delete", "pod", "k1"]);
    assert_eq!(out, "pod \"k1\" deleted\n");
    assert!(!docker_has(&id), "the pod's container {id} outlived it");
    let out = c.kubectl(&["get", "pod", "k1"], b"");
    assert_eq!(
        stderr(&out),
        "Error from server (NotFound): pods \"k1\" not found\n"
    );
}

fn pods_end_as_their_container_ends() {
    let c = Cluster::start();
    let image = format!("--image={IMAGE}");
    c.ok(&[
        "run",
        "ok",
        &image,
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "exit 0",
    ]);
    c.ok(&[
        "run",
        "bad",
        &image,
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "exit 5",
    ]);
    for (name, phase) in [("ok", "Succeeded"), ("bad", "Failed")] {
        let phase = format!("--for=jsonpath={{.status.phase}}={phase}");
        c.ok(&["wait", &phase, &format!("pod/{name}"), "--timeout=60s"]);
    }
    let terminated = ".status.containerStatuses[0].state.terminated";
    assert_eq!(
        c.pod_field("ok", &format!("{terminated}.reason")),
        "Completed"
    );
    assert_eq!(c.pod_field("bad", &format!("{terminated}.reason")), "Error");
    assert_eq!(c.pod_field("bad", &format!("{terminated}.exitCode")), "5");
    let ready = ".status.conditions[?(@.type==\"Ready\")].status";
    assert_eq!(c.pod_field("bad", ready), "False");

    // generateName, as a provider names its pods.
    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod",
            "metadata": {{"generateName": "gen-", "labels": {{"sanddune.run": "r1"}}}},
            "spec": {{"containers": [{{"name": "main", "image": "{IMAGE}", "command": ["sleep", "infinity"]}}]}}}}"#
    );
    let out = c.kubectl(&["create", "-f", "-", "-o", "name"], manifest.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        name.starts_with("pod/gen-") && name.len() == "pod/gen-".len() + 5,
        "{name}"
    );
    let listed = c.ok(&["get", "pods", "-l", "sanddune.run=r1", "-o", "name"]);
    assert_eq!(listed.trim(), name);
}

fn kubectl_prints_the_real_api_errors() {
    let c = Cluster::start();
    let out = c.kubectl(&["get", "pod", "nope"], b"");
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        "Error from server (NotFound): pods \"nope\" not found\n"
    );

    let wrong = c.dir.path().join("wrong-token");
    std::fs::write(&wrong, c.mock.kubeconfig_with_token("not-the-token")).unwrap();
    let out = kubectl_with(&wrong, &["get", "pods"], b"");
    assert!(!out.status.success());
    assert!(
        stderr(&out).ends_with("error: You must be logged in to the server (Unauthorized)\n"),
        "{}",
        stderr(&out)
    );

    let image = format!("--image={IMAGE}");
    let out = c.kubectl(&["run", "x", &image, "-n", "gone", "--", "true"], b"");
    assert_eq!(
        stderr(&out),
        "Error from server (NotFound): namespaces \"gone\" not found\n"
    );

    c.mock.forbid("create", "pods");
    let out = c.kubectl(&["run", "x", &image, "--", "true"], b"");
    assert_eq!(
        stderr(&out),
        "Error from server (Forbidden): pods is forbidden: User \"mock-user\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\"\n"
    );
    c.mock.allow_all();

    c.running_pod("dup");
    let out = c.kubectl(&["run", "dup", &image, "--", "true"], b"");
    assert_eq!(
        stderr(&out),
        "Error from server (AlreadyExists): pods \"dup\" already exists\n"
    );

    c.mock.forbid("create", "pods/exec");
    let out = c.kubectl(&["exec", "dup", "--", "true"], b"");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "pods \"dup\" is forbidden: User \"mock-user\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        stderr(&out)
    );
}

fn faults_look_like_the_real_failures() {
    let c = Cluster::start();
    let image = "--image=sanddune-no-such-image:1";
    c.ok(&["run", "noimage", image, "--restart=Never", "--", "true"]);
    let reason = ".status.containerStatuses[0].state.waiting.reason";
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains(&"ImagePullBackOff".to_string()) && Instant::now() < deadline {
        let r = c.pod_field("noimage", reason);
        if seen.last() != Some(&r) {
            seen.push(r);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        seen.contains(&"ErrImagePull".into()) && seen.contains(&"ImagePullBackOff".into()),
        "{seen:?}"
    );
    assert_eq!(c.pod_field("noimage", ".status.phase"), "Pending");

    c.running_pod("victim");
    c.mock.remove_pod_container("default", "victim").unwrap();
    c.ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Failed",
        "pod/victim",
        "--timeout=30s",
    ]);
    assert_eq!(
        c.pod_field(
            "victim",
            ".status.containerStatuses[0].state.terminated.reason"
        ),
        "ContainerStatusUnknown"
    );
    let out = c.kubectl(&["exec", "victim", "--", "true"], b"");
    assert!(
        stderr(&out)
            .contains("cannot exec into a container in a completed pod; current phase is Failed"),
        "{}",
        stderr(&out)
    );

    c.running_pod("cut");
    c.mock.cut_exec("marker");
    let out = c.kubectl(
        &[
            "exec",
            "cut",
            "--",
            "sh",
            "-c",
            "echo first; sleep 2; echo marker never",
        ],
        b"",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first\n");
    assert!(!out.status.success(), "a cut exec succeeded");
    let out = c.kubectl(&["exec", "cut", "--", "echo", "marker"], b"");
    assert!(
        out.status.success(),
        "the cut was not one-shot: {}",
        stderr(&out)
    );

    c.mock
        .set_unschedulable(Some("0/1 nodes are available: 1 Insufficient cpu."));
    c.ok(&[
        "run",
        "waits",
        "--image=sanddune-test:latest",
        "--",
        "sleep",
        "infinity",
    ]);
    let scheduled = ".status.conditions[?(@.type==\"PodScheduled\")]";
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.pod_field("waits", &format!("{scheduled}.reason")) != "Unschedulable" {
        assert!(
            Instant::now() < deadline,
            "the pod never showed Unschedulable"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        c.pod_field("waits", &format!("{scheduled}.message")),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
    assert_eq!(c.pod_field("waits", ".status.phase"), "Pending");
    c.mock.set_unschedulable(None);
    c.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/waits",
        "--timeout=60s",
    ]);

    let manifest = format!(
        r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "ttl"}},
            "spec": {{"activeDeadlineSeconds": 2, "restartPolicy": "Never",
                     "containers": [{{"name": "main", "image": "{IMAGE}", "command": ["sleep", "infinity"]}}]}}}}"#
    );
    let out = c.kubectl(&["create", "-f", "-"], manifest.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    c.ok(&[
        "wait",
        "--for=jsonpath={.status.reason}=DeadlineExceeded",
        "pod/ttl",
        "--timeout=30s",
    ]);
    assert_eq!(c.pod_field("ttl", ".status.phase"), "Failed");

    let running = c.mock.pods_not_ended("default");
    c.mock.set_pod_quota(Some(running));
    let out = c.kubectl(
        &["run", "over", "--image=sanddune-test:latest", "--", "true"],
        b"",
    );
    assert_eq!(
        stderr(&out),
        format!(
            "Error from server (Forbidden): pods \"over\" is forbidden: exceeded quota: pod-quota, requested: pods=1, used: pods={running}, limited: pods={running}\n"
        )
    );
    c.mock.set_pod_quota(None);

    c.mock.remove_namespace("default");
    let out = c.kubectl(&["get", "namespace", "default"], b"");
    assert_eq!(
        stderr(&out),
        "Error from server (NotFound): namespaces \"default\" not found\n"
    );
    c.mock.add_namespace("default");

    c.mock.stop();
    let out = c.kubectl(&["get", "pods", "--request-timeout=5s"], b"");
    assert!(!out.status.success());
    let refused = format!(
        "The connection to the server {} was refused",
        c.mock.url().trim_start_matches("https://")
    );
    assert!(stderr(&out).starts_with(&refused), "{}", stderr(&out));
}

fn sandbox_claims_take_warm_sandboxes() {
    let c = Cluster::start();
    let create = |manifest: String| {
        let out = c.kubectl(&["create", "-f", "-"], manifest.as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let ext = "extensions.agents.x-k8s.io/v1alpha1";
    create(format!(
        r#"{{"apiVersion": "{ext}", "kind": "SandboxTemplate", "metadata": {{"name": "tpl"}},
            "spec": {{"podTemplate": {{"metadata": {{"labels": {{"app": "agent"}}}},
              "spec": {{"containers": [{{"name": "agent", "image": "{IMAGE}", "command": ["sleep", "infinity"]}}]}}}}}}}}"#
    ));
    create(format!(
        r#"{{"apiVersion": "{ext}", "kind": "SandboxWarmPool", "metadata": {{"name": "pool"}},
            "spec": {{"replicas": 1, "sandboxTemplateRef": {{"name": "tpl"}}}}}}"#
    ));
    let pool_ready = [
        "wait",
        "--for=jsonpath={.status.readyReplicas}=1",
        "sandboxwarmpool/pool",
        "--timeout=60s",
    ];
    c.ok(&pool_ready);
    let claim = |name: &str, template: &str, warmpool: &str| {
        create(format!(
            r#"{{"apiVersion": "{ext}", "kind": "SandboxClaim", "metadata": {{"name": "{name}"}},
                "spec": {{"sandboxTemplateRef": {{"name": "{template}"}}, "warmpool": "{warmpool}"}}}}"#
        ))
    };
    let sandbox_of = |claim: &str| {
        c.ok(&[
            "get",
            "sandboxclaim",
            claim,
            "-o",
            "jsonpath={.status.sandbox.name}",
        ])
    };

    claim("warm", "tpl", "default");
    c.ok(&[
        "wait",
        "--for=condition=Ready",
        "sandboxclaim/warm",
        "--timeout=60s",
    ]);
    let warm = sandbox_of("warm");
    assert!(
        warm.starts_with("pool-"),
        "the claim did not take the pool's sandbox: {warm}"
    );
    assert_eq!(
        c.ok(&["exec", &warm, "--", "echo", "in the sandbox"]),
        "in the sandbox\n"
    );
    let labels = c.ok(&["get", "pod", &warm, "-o", "jsonpath={.metadata.labels.app}"]);
    assert_eq!(labels, "agent");
    // The pool makes another.
    c.ok(&pool_ready);
    let sandboxes = c.ok(&["get", "sandboxes", "-o", "name"]);
    assert_eq!(sandboxes.lines().count(), 2, "{sandboxes}");

    claim("cold", "tpl", "none");
    c.ok(&[
        "wait",
        "--for=condition=Ready",
        "sandboxclaim/cold",
        "--timeout=60s",
    ]);
    assert_eq!(sandbox_of("cold"), "cold");
    let ready = c.ok(&[
        "get",
        "sandbox",
        "cold",
        "-o",
        "jsonpath={.status.conditions[0].status} {.status.serviceFQDN}",
    ]);
    assert_eq!(ready, "True cold.default.svc.cluster.local");

    claim("lost", "no-such-template", "default");
    let reason = c.ok(&[
        "get",
        "sandboxclaim",
        "lost",
        "-o",
        "jsonpath={.status.conditions[0].reason}",
    ]);
    assert_eq!(reason, "TemplateNotFound");

    let container = c.mock.container_of("default", &warm).unwrap();
    c.ok(&["delete", "sandboxclaim", "warm"]);
    let out = c.kubectl(&["get", "sandbox", &warm], b"");
    assert_eq!(
        stderr(&out),
        format!("Error from server (NotFound): sandboxes.agents.x-k8s.io \"{warm}\" not found\n")
    );
    assert!(
        c.mock.pod("default", &warm).is_none(),
        "the claim's pod outlived it"
    );
    assert!(!docker_has(&container), "the claim's container outlived it");
}

/// Sixteen pods at once, as a workflow fans out: all Ready, sixteen execs
/// in parallel, all deleted.
fn sixteen_pods_at_once() {
    let c = Cluster::start();
    let names: Vec<String> = (0..16).map(|i| format!("fan-{i}")).collect();
    let image = format!("--image={IMAGE}");
    let started = Instant::now();
    std::thread::scope(|s| {
        for name in &names {
            let (c, image) = (&c, &image);
            s.spawn(move || {
                c.ok(&[
                    "run",
                    name,
                    image,
                    "--restart=Never",
                    "--",
                    "sleep",
                    "infinity",
                ])
            });
        }
    });
    c.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "--timeout=120s",
    ]);
    let ready = started.elapsed();
    let started = Instant::now();
    std::thread::scope(|s| {
        for name in &names {
            let c = &c;
            s.spawn(move || {
                let out = c.ok(&["exec", name, "--", "sh", "-c", "echo $HOSTNAME"]);
                assert_eq!(out, format!("{name}\n"));
            });
        }
    });
    let execs = started.elapsed();
    c.ok(&["delete", "pods", "--all"]);
    assert!(
        c.mock.containers().is_empty(),
        "containers outlived their pods"
    );
    eprintln!("16 pods: all Ready in {ready:.1?}; 16 parallel kubectl execs in {execs:.1?}");
}

fn dropping_the_mock_removes_its_containers() {
    let c = Cluster::start();
    c.running_pod("d1");
    c.running_pod("d2");
    let ids = c.mock.containers();
    assert_eq!(ids.len(), 2, "{ids:?}");
    drop(c);
    for id in ids {
        assert!(!docker_has(&id), "container {id} outlived the mock");
    }
}

/// `step`'s result, or a failure naming it after 30 s: a client that
/// hangs on the mock fails the test instead of hanging it.
async fn within<T>(step: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(30), f).await {
        Ok(v) => v,
        Err(_) => panic!("kube-rs: {step} hung for 30 s"),
    }
}

/// kube-rs, the client the provider's host side is built on: create,
/// list by label, get until Running, exec with stdin closed (v5), the
/// exit status, a v4-only server ending an exec whose stdin is closed, the
/// NotFound error, delete.
fn kube_rs_accepts_the_mock() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, AttachParams, DeleteParams, ListParams, PostParams};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let c = Cluster::start();
    let kubeconfig = kube::config::Kubeconfig::read_from(c.kubeconfig()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.unwrap();
        let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"generateName": "kube-", "labels": {"client": "kube-rs"}},
            "spec": {"containers": [{"name": "main", "image": IMAGE, "command": ["sleep", "infinity"]}]},
        }))
        .unwrap();
        let created = within("create", pods.create(&PostParams::default(), &pod)).await.unwrap();
        let name = created.metadata.name.unwrap();
        let listed = within("list", pods.list(&ListParams::default().labels("client=kube-rs"))).await.unwrap();
        assert_eq!(listed.items.len(), 1);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pod = within("get", pods.get(&name)).await.unwrap();
            if pod.status.and_then(|s| s.phase).as_deref() == Some("Running") {
                break;
            }
            assert!(Instant::now() < deadline, "the pod never ran");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let params = AttachParams::default().stdin(true).stderr(true);
        let command = ["sh", "-c", "cat; echo err >&2; exit 3"];
        let mut process = within("exec", pods.exec(&name, command, &params)).await.unwrap();
        let mut stdin = process.stdin().unwrap();
        within("write stdin", stdin.write_all(b"through stdin\n")).await.unwrap();
        // Dropping kube-rs's stdin writer is no EOF (its simplex stream
        // lives on in the reader): shutting it down sends v5's close.
        within("close stdin", stdin.shutdown()).await.unwrap();
        let (mut out, mut err) = (String::new(), String::new());
        let mut stdout = process.stdout().unwrap();
        let mut stderr = process.stderr().unwrap();
        let status = process.take_status().unwrap();
        let both = async { tokio::join!(stdout.read_to_string(&mut out), stderr.read_to_string(&mut err)) };
        let (read_out, read_err) = within("read stdout and stderr", both).await;
        read_out.unwrap();
        read_err.unwrap();
        let status = within("status", status).await.expect("an exit status");
        assert_eq!(out, "through stdin\n");
        assert_eq!(err, "err\n");
        let cause = status.details.and_then(|d| d.causes).and_then(|c| c.into_iter().next()).unwrap();
        assert_eq!((cause.reason.as_deref(), cause.message.as_deref()), (Some("ExitCode"), Some("3")));

        // On a v4-only server stdin has no close of its own: kube-rs ends
        // it by closing the connection, which ends the exec with no status,
        // as API servers before 1.30 end it.
        c.mock.serve_exec_v4_only();
        let command = ["sh", "-c", "cat; sleep 1; echo after"];
        let mut process = within("exec v4", pods.exec(&name, command, &params)).await.unwrap();
        let mut stdin = process.stdin().unwrap();
        within("write stdin v4", stdin.write_all(b"x\n")).await.unwrap();
        within("close stdin v4", stdin.shutdown()).await.unwrap();
        let status = process.take_status().unwrap();
        assert!(within("status v4", status).await.is_none(), "a v4 exec whose stdin closed got a status");

        match within("get nope", pods.get("nope")).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"), "{status:?}")
            }
            other => panic!("a missing pod: {other:?}"),
        }
        within("delete", pods.delete(&name, &DeleteParams::default())).await.unwrap();
        assert!(within("get deleted", pods.get_opt(&name)).await.unwrap().is_none());
    });
    drop(runtime);
    assert!(
        c.mock.containers().is_empty(),
        "the deleted pod's container is still there"
    );
}

/// The venv with the pinned Python client, made once per target dir and
/// requirements file.
fn python() -> PathBuf {
    let have = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        skip("python3 with venv is not installed, so the official Kubernetes client cannot run");
    }
    static INSTALLED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("k8s-python");
            let reqs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/requirements.txt");
            let wanted =
                std::fs::read(&reqs).map_err(|e| format!("reading {}: {e}", reqs.display()))?;
            let stamp = dir.join("installed-requirements.txt");
            let bin = dir.join("bin/python");
            if std::fs::read(&stamp).is_ok_and(|s| s == wanted) && bin.exists() {
                return Ok(bin);
            }
            let run = |cmd: &mut Command| -> Result<(), String> {
                let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
                status
                    .success()
                    .then_some(())
                    .ok_or_else(|| format!("{cmd:?} failed: {status}"))
            };
            run(Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&dir))?;
            run(Command::new(dir.join("bin/pip"))
                .args(["install", "-q", "--no-deps", "-r"])
                .arg(&reqs))?;
            std::fs::write(&stamp, wanted)
                .map_err(|e| format!("writing {}: {e}", stamp.display()))?;
            Ok(bin)
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn the_official_python_client_accepts_the_mock() {
    let python = python();
    let c = Cluster::start();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/check.py");
    let out = Command::new(python)
        .arg(script)
        .env("KUBECONFIG", c.kubeconfig())
        .env("K8S_MOCK_IMAGE", IMAGE)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client rejected the mock:\n{text}\n{}",
        stderr(&out)
    );
    for step in [
        "create",
        "watch running",
        "list selector",
        "exec stdin stdout stderr exit",
        "exec preloaded",
        "exec tty",
        "not found",
        "delete",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("ok {step}"))),
            "step {step} missing:\n{text}"
        );
    }
    if let Some(ms) = text.lines().find(|l| l.starts_with("exec-ms")) {
        eprintln!("python client, exec of true through the mock: {ms}");
    }
    assert!(
        c.mock.containers().is_empty(),
        "the deleted pod's container is still there"
    );
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(kubectl_runs_execs_copies_and_deletes_pods),
        trial!(pods_end_as_their_container_ends),
        trial!(kubectl_prints_the_real_api_errors),
        trial!(faults_look_like_the_real_failures),
        trial!(sandbox_claims_take_warm_sandboxes),
        trial!(sixteen_pods_at_once),
        trial!(dropping_the_mock_removes_its_containers),
        trial!(the_official_python_client_accepts_the_mock),
        trial!(kube_rs_accepts_the_mock),
    ])
}
