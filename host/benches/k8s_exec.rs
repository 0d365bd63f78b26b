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

mod common;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};

fn main() {
    let rounds = common::rounds(100);
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
    let (_runtime, mut sandbox) = rt.block_on(common::sandbox(
        "kubernetes",
        repo.path(),
        &[("ANTHROPIC_API_KEY", "sk-bench")],
        &[("image", "sanddune-test:latest")],
    ));
    let provider_times = rt.block_on(common::exec_times(&mut sandbox, rounds));

    // kube-rs alone: the same exec in the same pod.
    let pod = mock.pod_names("default").pop().expect("the sandbox's pod");
    let pods: Api<Pod> = rt.block_on(async {
        let config = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        Api::namespaced(kube::Client::try_from(config).unwrap(), "default")
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
        "kubernetes exec of `true` over the k8s mock",
        "kube-rs alone",
        provider_times,
        bare_times,
    );
}
