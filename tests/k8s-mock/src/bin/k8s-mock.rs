//! Serve the Kubernetes API mock on a free loopback port until SIGINT or
//! SIGTERM, then remove its containers: writes its kubeconfig to the path
//! given (or prints it) and prints `https://127.0.0.1:PORT` on its first
//! line. For trying a provider or kubectl by hand:
//!
//!   k8s-mock /tmp/mock.kubeconfig &
//!   KUBECONFIG=/tmp/mock.kubeconfig kubectl run t --image=sanddune-test:latest -- sleep infinity

use std::io::Write;

use tokio::signal::unix::{SignalKind, signal};

fn main() {
    let mock = k8s_mock::K8sMock::start().unwrap_or_else(|e| fail(&e));
    println!("{}", mock.url());
    match std::env::args_os().nth(1) {
        Some(path) => std::fs::write(&path, mock.kubeconfig())
            .unwrap_or_else(|e| fail(&format!("writing the kubeconfig: {e}"))),
        None => print!("{}", mock.kubeconfig()),
    }
    std::io::stdout().flush().unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut term = signal(SignalKind::terminate()).unwrap();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        });
    drop(mock);
}

fn fail(message: &str) -> ! {
    eprintln!("k8s-mock: {message}");
    std::process::exit(1);
}
