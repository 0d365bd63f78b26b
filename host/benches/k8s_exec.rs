//! Per-exec overhead of the kubernetes sandbox provider: `exec` of `true`
//! through the component (host -> wasm -> the pods capability -> kube-rs's
//! WebSocket exec -> API server -> kubelet, the exit status back) against
//! kube-rs alone making the same exec in the same pod, and the time from
//! create to a Ready pod.
//! The sandbox has an env key, as a run's has the agent's, so each exec
//! goes the way an agent's does: behind the wrapper that reads the env on
//! stdin and enters the workdir.
//! By default over the loopback API mock (tests/k8s-mock, pods backed by
//! docker containers; needs docker and sanddune-test:latest from
//! tests/images/build.sh docker). With SANDDUNE_TEST_KUBECONFIG, on that
//! real cluster, in SANDDUNE_TEST_K8S_NAMESPACE with the image
//! SANDDUNE_TEST_K8S_IMAGE (the env file of tests/k8s-cluster/cluster.sh).
//! Run: cargo bench -p sanddune --bench k8s_exec [-- ROUNDS]

mod common;

use std::path::PathBuf;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};

fn main() {
    let rounds = common::rounds(100);
    let dir = tempfile::tempdir().unwrap();
    let (_mock, kubeconfig, namespace, image, target) =
        match std::env::var_os("SANDDUNE_TEST_KUBECONFIG") {
            Some(path) => (
                None,
                PathBuf::from(path),
                std::env::var("SANDDUNE_TEST_K8S_NAMESPACE").unwrap_or_else(|_| "default".into()),
                std::env::var("SANDDUNE_TEST_K8S_IMAGE").expect("SANDDUNE_TEST_K8S_IMAGE"),
                "a real cluster",
            ),
            None => {
                let mock = k8s_mock::K8sMock::start().expect("the k8s mock needs docker");
                let kubeconfig = dir.path().join("kubeconfig");
                std::fs::write(&kubeconfig, mock.kubeconfig()).unwrap();
                let image = "sanddune-test:latest".to_string();
                (
                    Some(mock),
                    kubeconfig,
                    "default".into(),
                    image,
                    "the k8s mock",
                )
            }
        };
    // SAFETY: set before this process starts any thread that reads the
    // environment; the mock's threads never do.
    unsafe { std::env::set_var("KUBECONFIG", &kubeconfig) };
    let repo = tempfile::tempdir().unwrap();
    // The grant reads from the worktree and its git dir, which must exist.
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let (_runtime, mut sandbox) = rt.block_on(common::sandbox(
        "kubernetes",
        repo.path(),
        &[("ANTHROPIC_API_KEY", "sk-bench")],
        &[("image", &image), ("namespace", &namespace)],
    ));
    println!(
        "create to a Ready pod with its workdir, on {target}: {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let provider_times = rt.block_on(common::exec_times(&mut sandbox, rounds));

    // kube-rs alone: the same exec in the same pod.
    let state: serde_json::Value =
        serde_json::from_str(&rt.block_on(sandbox.state()).unwrap()).unwrap();
    let pod = state["pod"]
        .as_str()
        .expect("the sandbox's pod")
        .to_string();
    let pods: Api<Pod> = rt.block_on(async {
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        Api::namespaced(kube::Client::try_from(config).unwrap(), &namespace)
    });
    let bare_times = common::times(rounds, || {
        rt.block_on(async {
            let mut process = pods
                .exec(&pod, ["true"], &AttachParams::default())
                .await
                .unwrap();
            let status = process.take_status().unwrap().await.unwrap();
            assert_eq!(status.status.as_deref(), Some("Success"));
        })
    });
    rt.block_on(sandbox.close()).unwrap();
    common::report(
        &format!("kubernetes exec of `true` on {target}"),
        "kube-rs alone",
        provider_times,
        bare_times,
    );
}
