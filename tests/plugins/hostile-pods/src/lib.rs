//! A hostile pod provider for the confinement tests of the host's `pods`
//! capability. The `attack` config option picks what `create` tries; it
//! always fails, with the host's refusals in the message, or with a message
//! starting with "LEAKED" when the host let something through.

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../../wit",
    // wasi:http, for providers that reach the network; unused here.
    generate_all,
});

use exports::sanddune::plugin::sandbox_provider::{
    ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox,
    PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::pods::{self, ExecOptions, PodSpec};
use sanddune::plugin::types::CapabilityRequest;

struct Hostile;

fn spec(image: &str) -> PodSpec {
    PodSpec {
        image: image.into(),
        command: vec!["sleep".into(), "infinity".into()],
        env: vec![],
        workdir: None,
        cpus: None,
        memory: None,
        service_account: None,
        node_selector: vec![],
        runtime_class: None,
        image_pull_secrets: vec![],
        active_deadline_seconds: None,
        labels: vec![],
        namespace: None,
        privileged: false,
        host_network: false,
        host_pid: false,
        host_paths: vec![],
        cap_add: vec![],
    }
}

/// Create `spec`; a created pod is a leak (removed again).
fn try_create(spec: PodSpec) -> String {
    match pods::create(&spec, 60_000) {
        Ok(pod) => {
            let _ = pods::remove(&pod);
            format!("LEAKED: created {pod}")
        }
        Err(e) => e,
    }
}

/// Every operation on a pod this plugin did not create.
fn touch_foreign(target: &str, host_file: &str) -> String {
    let mut refusals = Vec::new();
    let exec = pods::exec(
        target,
        &ExecOptions {
            argv: vec!["true".into()],
            env: vec![],
            workdir: None,
            stdin: None,
            timeout_ms: None,
        },
        None,
    );
    refusals.push(match exec {
        Ok(_) => "LEAKED: exec".into(),
        Err(e) => e,
    });
    refusals.push(match pods::copy_in(target, host_file, "/tmp/x") {
        Ok(()) => "LEAKED: copy-in".into(),
        Err(e) => e,
    });
    refusals.push(
        match pods::copy_file_out(target, "/etc/hostname", host_file) {
            Ok(()) => "LEAKED: copy-file-out".into(),
            Err(e) => e,
        },
    );
    refusals.push(match pods::remove(target) {
        Ok(()) => "LEAKED: remove".into(),
        Err(e) => e,
    });
    refusals.join("; ")
}

impl Guest for Hostile {
    type Sandbox = Never;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "hostile-pods".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A hostile pod provider for the confinement tests".into(),
            kind: SandboxKind::Isolated,
            config: ["attack", "image", "target"]
                .into_iter()
                .map(|name| ConfigOption {
                    name: name.into(),
                    description: name.into(),
                    default_value: None,
                })
                .collect(),
            capabilities: vec![CapabilityRequest {
                kind: "pods".into(),
                value: String::new(),
            }],
            container_engine: None,
            snapshots: false,
        }
    }

    fn preflight(_options: PreflightOptions) -> Result<(), PreflightError> {
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        let get = |key: &str| {
            options
                .config
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        pods::connect()?;
        let mut s = spec(&get("image"));
        let outcome = match get("attack").as_str() {
            "privileged" => {
                s.privileged = true;
                try_create(s)
            }
            "host-network" => {
                s.host_network = true;
                try_create(s)
            }
            "host-pid" => {
                s.host_pid = true;
                try_create(s)
            }
            "host-path" => {
                s.host_paths = vec!["/".into()];
                try_create(s)
            }
            "cap-add" => {
                s.cap_add = vec!["SYS_ADMIN".into()];
                try_create(s)
            }
            "namespace" => {
                s.namespace = Some("kube-system".into());
                try_create(s)
            }
            "label" => {
                s.labels = vec![("sanddune.run".into(), "someone-else".into())];
                try_create(s)
            }
            "foreign" => touch_foreign(
                &get("target"),
                &format!("{}/README.md", options.host_worktree_path),
            ),
            other => format!("unknown attack {other}"),
        };
        Err(outcome)
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        Ok(vec![])
    }

    fn attach(_state: String, _options: CreateOptions) -> Result<Sandbox, String> {
        Err("no attach".into())
    }
}

/// `create` never succeeds, so no sandbox ever exists.
enum Never {}

impl GuestSandbox for Never {
    fn worktree_path(&self) -> String {
        match *self {}
    }
    fn state(&self) -> String {
        match *self {}
    }
    fn exec(&self, _: ExecRequest, _: &OutputSink) -> Result<ExecResult, String> {
        match *self {}
    }
    fn interactive_exec(&self, _: ExecRequest) -> Result<i32, String> {
        match *self {}
    }
    fn copy_in(&self, _: String, _: String) -> Result<(), String> {
        match *self {}
    }
    fn copy_file_in(&self, _: String, _: String) -> Result<(), String> {
        match *self {}
    }
    fn copy_file_out(&self, _: String, _: String) -> Result<(), String> {
        match *self {}
    }
    fn read_file(&self, _: String) -> Result<Vec<u8>, String> {
        match *self {}
    }
    fn write_file(&self, _: String, _: Vec<u8>) -> Result<(), String> {
        match *self {}
    }
    fn stat(&self, _: String) -> Result<FileStat, String> {
        match *self {}
    }
    fn read_dir(&self, _: String) -> Result<Vec<String>, String> {
        match *self {}
    }
    fn exists(&self, _: String) -> Result<bool, String> {
        match *self {}
    }
    fn mkdir(&self, _: String, _: bool) -> Result<(), String> {
        match *self {}
    }
    fn remove(&self, _: String, _: bool, _: bool) -> Result<(), String> {
        match *self {}
    }
    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        match *self {}
    }
}

// The export glue only links as a wasm component.
#[cfg(target_arch = "wasm32")]
export!(Hostile);
