//! Per-exec overhead of the kubernetes sandbox provider over the loopback
//! Kubernetes API mock (tests/k8s-mock, pods backed by docker containers):
//! `exec` of `true` through the component (host -> wasm -> the pods
//! capability -> kube-rs's WebSocket exec -> mock -> docker exec, the exit
//! status back) against kube-rs alone making the same exec in the same pod.
//! The sandbox has an env key, as a run's has the agent's, so each exec
//! goes the way an agent's does: behind the wrapper that reads the env on
//! stdin and enters the workdir.
//! Needs docker and sanddune-test:latest (tests/images/build.sh docker).
//! Run: cargo bench -p sanddune --bench k8s_exec [-- ROUNDS]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use sanddune::plugin::sandbox::{Command, ExecRequest, SandboxProvider, SandboxSpec};
use sanddune::plugin::{PluginRef, PluginRuntime, RuntimeConfig};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100);
    let mock = k8s_mock::K8sMock::start().expect("the k8s mock needs docker");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, mock.kubeconfig()).unwrap();
    // SAFETY: set before this process starts any thread that reads the
    // environment; the mock's threads never do.
    unsafe { std::env::set_var("KUBECONFIG", &kubeconfig) };
    let repo = tempfile::tempdir().unwrap();
    // The grant reads from the worktree and its git dir, which must exist.
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (provider_times, bare_times) = rt.block_on(async {
        let runtime = PluginRuntime::new(RuntimeConfig::default()).unwrap();
        let provider = SandboxProvider::load(&runtime, &PluginRef::Builtin("kubernetes".into()))
            .await
            .unwrap();
        let spec = SandboxSpec {
            run_id: "bench".into(),
            name: "bench".into(),
            worktree: repo.path().to_path_buf(),
            git_dir: repo.path().join(".git"),
            branch: "main".into(),
            env: vec![("ANTHROPIC_API_KEY".into(), "sk-bench".into())],
            config: vec![("image".into(), "sanddune-test:latest".into())],
            side_by_side: 1,
        };
        let mut sandbox = provider.create(&spec).await.unwrap();
        let request = || ExecRequest {
            command: Command::Argv(vec!["true".into()]),
            cwd: None,
            env: vec![],
            stdin: None,
            sudo: false,
            timeout_ms: None,
        };
        for _ in 0..5 {
            sandbox.exec(request(), |_| {}).await.unwrap();
        }
        let mut provider_times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let out = sandbox.exec(request(), |_| {}).await.unwrap();
            provider_times.push(t.elapsed());
            assert_eq!(out.exit_code, 0);
        }

        // kube-rs alone: the same exec in the same pod.
        let pod = mock.pod_names("default").pop().expect("the sandbox's pod");
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
        let mut bare_times = Vec::with_capacity(rounds);
        for i in 0..rounds + 5 {
            let t = Instant::now();
            let mut process = pods
                .exec(&pod, ["true"], &AttachParams::default())
                .await
                .unwrap();
            let status = process.take_status().unwrap().await.unwrap();
            if i >= 5 {
                bare_times.push(t.elapsed());
            }
            assert_eq!(status.status.as_deref(), Some("Success"));
        }
        sandbox.close().await.unwrap();
        (provider_times, bare_times)
    });
    let (p, b) = (median(provider_times), median(bare_times));
    println!("exec of `true` over the k8s mock, median of {rounds}:");
    println!(
        "  through the kubernetes provider  {:>8.2} ms",
        p.as_secs_f64() * 1e3
    );
    println!(
        "  kube-rs alone                    {:>8.2} ms",
        b.as_secs_f64() * 1e3
    );
    println!(
        "  the provider's overhead          {:>8.2} ms",
        (p.as_secs_f64() - b.as_secs_f64()) * 1e3
    );
}
