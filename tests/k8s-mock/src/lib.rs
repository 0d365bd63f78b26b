//! A loopback mock of the Kubernetes API server (the core/v1 subset a
//! sandbox provider uses: discovery, namespaces, pods, watch, exec, and
//! the agent-sandbox CRDs with a minimal controller) whose
//! pods are real docker containers, for sanddune's tests. Real clients
//! (kubectl, the official Python client) drive it in tests/clients.rs.
//!
//! HTTPS on 127.0.0.1 with a CA of its own (client-go sends a token only
//! over TLS) and one bearer token. Each pod runs its first
//! container's image, command, args, env and working dir in a docker
//! container labelled [`LABEL`] (and [`INSTANCE_LABEL`] with this mock's
//! id), removed with its pod and when the mock is dropped. Pods are never
//! restarted, whatever their `restartPolicy`.
//!
//! Faults a test can inject: a pod's container removed under it (the pod
//! goes Failed), the next exec of a command cut mid-output, the API gone
//! ([`K8sMock::stop`]), a namespace missing, a verb forbidden, pods
//! unschedulable, a pod quota. A pod's `activeDeadlineSeconds` is kept.

mod api;
mod exec;
mod pods;
mod sandboxes;
mod server;
mod status;
mod table;
mod time;
mod tls;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use bollard::Docker;
use serde_json::{Value, json};

/// On every container the mock creates.
pub const LABEL: &str = "sanddune.k8s-mock";
/// This mock's id, on every container it creates.
pub const INSTANCE_LABEL: &str = "sanddune.k8s-mock.instance";
/// `NAMESPACE/NAME` of the pod a container backs.
pub const POD_LABEL: &str = "sanddune.k8s-mock.pod";

/// The bearer token the mock accepts unless started with another.
pub const TOKEN: &str = "mock-token";
/// Who the token authenticates as, in 403 messages.
pub const USER: &str = "mock-user";

/// One change to a pod, kept so a watch from a `resourceVersion` replays
/// what came after it.
#[derive(Clone)]
pub(crate) struct Event {
    pub rv: u64,
    pub kind: &'static str,
    pub object: Value,
}

pub(crate) struct Pod {
    pub object: Value,
    pub container: Option<String>,
    /// Its container was removed under it ([`K8sMock::remove_pod_container`]):
    /// docker's wait can answer before the removal shows.
    pub lost: bool,
}

pub(crate) struct State {
    pub token: String,
    pub instance: String,
    pub namespaces: BTreeMap<String, Value>,
    /// By `(namespace, name)`.
    pub pods: BTreeMap<(String, String), Pod>,
    /// The agent-sandbox objects, by `(plural, namespace, name)`.
    pub objects: BTreeMap<(String, String, String), Value>,
    pub rv: u64,
    pub events: Vec<Event>,
    /// `(verb, resource)` pairs refused with 403 (`("create", "pods/exec")`).
    pub forbidden: Vec<(String, String)>,
    /// The next exec whose command line contains one of these is cut.
    pub exec_cuts: Vec<String>,
    /// Every exec's command line, as the request's URL carried it.
    pub exec_log: Vec<String>,
    /// While set, new pods stay Pending, unschedulable for this reason.
    pub unschedulable: Option<String>,
    /// A ResourceQuota's hard `pods` limit, per namespace.
    pub pod_quota: Option<usize>,
    /// Exec speaks only `v4.channel.k8s.io`, as API servers before 1.30
    /// and proxies that pass only v4 do.
    pub exec_v4_only: bool,
    /// The minor release `/version` reports instead of the mock's own.
    pub release_minor: Option<u32>,
}

impl State {
    /// The next resourceVersion, as every write takes one.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }
}

pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub docker: Docker,
    /// Bumped on every pod event: watches wait on it.
    pub changed: tokio::sync::watch::Sender<u64>,
    /// Set once [`K8sMock::stop`] is called: every connection ends.
    pub stopped: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    /// Record `object` as changed (`ADDED`, `MODIFIED`, `DELETED`) at a new
    /// resourceVersion, which is written into it.
    pub fn emit(&self, state: &mut State, kind: &'static str, object: &mut Value) {
        let rv = state.next_rv();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        state.events.push(Event {
            rv,
            kind,
            object: object.clone(),
        });
        self.changed.send_replace(rv);
    }
}

pub struct K8sMock {
    url: String,
    ca_pem: String,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl K8sMock {
    /// Start on `127.0.0.1` at a free port with [`TOKEN`], serving from its
    /// own threads; an error when docker cannot be reached.
    pub fn start() -> Result<K8sMock, String> {
        Self::start_with_token(TOKEN)
    }

    pub fn start_with_token(token: &str) -> Result<K8sMock, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("a tokio runtime for the mock: {e}"))?;
        let docker = Docker::connect_with_local_defaults()
            .map_err(|e| format!("connecting to docker: {e}"))?;
        runtime
            .block_on(docker.ping())
            .map_err(|e| format!("docker does not answer: {e}"))?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| format!("binding the mock's port: {e}"))?;
        let url = format!("https://{}", listener.local_addr().unwrap());
        let tls = tls::generate()?;
        let namespaces = ["default", "kube-system", "kube-public", "kube-node-lease"]
            .into_iter()
            .map(|n| (n.to_string(), pods::namespace(n)))
            .collect();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                token: token.to_string(),
                instance: format!(
                    "{}-{}",
                    std::process::id(),
                    COUNTER.fetch_add(1, Ordering::SeqCst)
                ),
                namespaces,
                pods: BTreeMap::new(),
                objects: BTreeMap::new(),
                rv: 1000,
                events: Vec::new(),
                forbidden: Vec::new(),
                exec_cuts: Vec::new(),
                exec_v4_only: false,
                release_minor: None,
                exec_log: Vec::new(),
                unschedulable: None,
                pod_quota: None,
            }),
            docker,
            changed: tokio::sync::watch::channel(0).0,
            stopped: tokio::sync::watch::channel(false).0,
        });
        runtime.spawn(server::serve(listener, tls.config, shared.clone()));
        runtime.spawn(sandboxes::controller(shared.clone()));
        Ok(K8sMock {
            url,
            ca_pem: tls.ca_pem,
            shared,
            runtime: Some(runtime),
        })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The certificate of the CA the server's certificate is signed by.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn token(&self) -> String {
        self.shared.state.lock().unwrap().token.clone()
    }

    /// The value of [`INSTANCE_LABEL`] on this mock's containers.
    pub fn instance(&self) -> String {
        self.shared.state.lock().unwrap().instance.clone()
    }

    /// A kubeconfig for this server with `token`, context `mock`,
    /// namespace `default`.
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: mock
  cluster:
    server: {}
    certificate-authority-data: {}
users:
- name: {USER}
  user:
    token: {token}
contexts:
- name: mock
  context:
    cluster: mock
    user: {USER}
    namespace: default
current-context: mock
",
            self.url,
            base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
        )
    }

    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_with_token(&self.token())
    }

    /// Refuse `verb` on `resource` with the real 403 (`"create"`,
    /// `"pods"`; `"pods/exec"` for exec).
    pub fn forbid(&self, verb: &str, resource: &str) {
        let mut st = self.shared.state.lock().unwrap();
        st.forbidden.push((verb.to_string(), resource.to_string()));
    }

    pub fn allow_all(&self) {
        self.shared.state.lock().unwrap().forbidden.clear();
    }

    pub fn add_namespace(&self, name: &str) {
        let mut st = self.shared.state.lock().unwrap();
        st.namespaces
            .insert(name.to_string(), pods::namespace(name));
    }

    /// The namespace is gone: getting it or creating a pod in it is 404.
    /// Its pods stay, as the real API keeps them while a namespace
    /// terminates.
    pub fn remove_namespace(&self, name: &str) {
        self.shared.state.lock().unwrap().namespaces.remove(name);
    }

    /// The pod as the API returns it.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        let st = self.shared.state.lock().unwrap();
        st.pods
            .get(&(namespace.to_string(), name.to_string()))
            .map(|p| p.object.clone())
    }

    /// The id of the docker container backing the pod, once it has one.
    pub fn container_of(&self, namespace: &str, name: &str) -> Option<String> {
        let st = self.shared.state.lock().unwrap();
        st.pods
            .get(&(namespace.to_string(), name.to_string()))
            .and_then(|p| p.container.clone())
    }

    /// Remove the pod's container under it, as when a node loses it: the
    /// pod goes Failed.
    pub fn remove_pod_container(&self, namespace: &str, name: &str) -> Result<(), String> {
        let id = {
            let mut st = self.shared.state.lock().unwrap();
            let pod = st
                .pods
                .get_mut(&(namespace.to_string(), name.to_string()))
                .filter(|p| p.container.is_some())
                .ok_or_else(|| format!("pod {namespace}/{name} has no container"))?;
            pod.lost = true;
            pod.container.clone().unwrap()
        };
        self.block_on(pods::remove_container(&self.shared.docker, &id))
    }

    /// The next exec whose command line (its words joined by spaces)
    /// contains `needle` is cut after its first output: the connection
    /// drops with no exit status and no close frame.
    pub fn cut_exec(&self, needle: &str) {
        let mut st = self.shared.state.lock().unwrap();
        st.exec_cuts.push(needle.to_string());
    }

    /// From now on `/version` reports Kubernetes 1.`minor` (`v1.MINOR.0`):
    /// only what a client reads changes, not what the mock serves.
    pub fn report_release(&self, minor: u32) {
        self.shared.state.lock().unwrap().release_minor = Some(minor);
    }

    /// From now on exec offers only `v4.channel.k8s.io`, which has no
    /// close of stdin: a client's end of stdin can only close the whole
    /// stream, as on API servers before 1.30.
    pub fn serve_exec_v4_only(&self) {
        self.shared.state.lock().unwrap().exec_v4_only = true;
    }

    /// The command line (words joined by spaces) of every exec so far, in
    /// order: what the API server's audit log would keep of them.
    pub fn exec_commands(&self) -> Vec<String> {
        self.shared.state.lock().unwrap().exec_log.clone()
    }

    /// While `Some`, pods created stay Pending with `PodScheduled` False,
    /// reason `Unschedulable` and this message, as the scheduler reports
    /// (`0/1 nodes are available: 1 Insufficient cpu.`); `None` lets
    /// them be scheduled.
    pub fn set_unschedulable(&self, message: Option<&str>) {
        self.shared.state.lock().unwrap().unschedulable = message.map(str::to_string);
    }

    /// A ResourceQuota `pod-quota` allowing `limit` pods not yet ended in
    /// each namespace: one more is refused with the real 403 (`exceeded
    /// quota`).
    pub fn set_pod_quota(&self, limit: Option<usize>) {
        self.shared.state.lock().unwrap().pod_quota = limit;
    }

    /// How many pods of `namespace` have not ended (what a pod quota
    /// counts).
    pub fn pods_not_ended(&self, namespace: &str) -> usize {
        let st = self.shared.state.lock().unwrap();
        st.pods
            .iter()
            .filter(|((ns, _), p)| ns == namespace && !pods::ended(&p.object))
            .count()
    }

    /// The names of the pods in `namespace`, ended or not.
    pub fn pod_names(&self, namespace: &str) -> Vec<String> {
        let st = self.shared.state.lock().unwrap();
        st.pods
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// The API becomes unreachable: the port is closed and every open
    /// connection (watches, execs) is dropped. Containers stay until drop.
    pub fn stop(&self) {
        self.shared.stopped.send_replace(true);
    }

    /// Ids of the containers this mock has and docker still holds.
    pub fn containers(&self) -> Vec<String> {
        self.block_on(pods::labelled_containers(
            &self.shared.docker,
            &self.instance(),
        ))
        .unwrap_or_default()
    }

    fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime
            .as_ref()
            .expect("the mock's runtime")
            .block_on(f)
    }
}

impl Drop for K8sMock {
    fn drop(&mut self) {
        self.stop();
        let instance = self.instance();
        let docker = self.shared.docker.clone();
        if let Some(rt) = self.runtime.take() {
            if let Ok(ids) = rt.block_on(pods::labelled_containers(&docker, &instance)) {
                for id in ids {
                    let _ = rt.block_on(pods::remove_container(&docker, &id));
                }
            }
            rt.shutdown_background();
        }
    }
}
