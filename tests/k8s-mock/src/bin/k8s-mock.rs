//! Serve the Kubernetes API mock on a free loopback port until killed:
//! writes its kubeconfig to the path given (or prints it) and prints
//! `https://127.0.0.1:PORT` on its first line. For trying a provider or
//! kubectl by hand:
//!
//!   k8s-mock /tmp/mock.kubeconfig &
//!   KUBECONFIG=/tmp/mock.kubeconfig kubectl run t --image=sanddune-test:latest -- sleep infinity

use std::io::Write;

fn main() {
    let mock = match k8s_mock::K8sMock::start() {
        Ok(mock) => mock,
        Err(e) => {
            eprintln!("k8s-mock: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", mock.url());
    match std::env::args_os().nth(1) {
        Some(path) => std::fs::write(&path, mock.kubeconfig()).unwrap_or_else(|e| {
            eprintln!("k8s-mock: writing the kubeconfig: {e}");
            std::process::exit(1);
        }),
        None => print!("{}", mock.kubeconfig()),
    }
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}
