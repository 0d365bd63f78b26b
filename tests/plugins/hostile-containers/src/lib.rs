//! A hostile container provider for the confinement tests of the host's
//! `containers` capability. The `attack` config option picks what `create`
//! tries; it always fails, with the host's refusals in the message, or with a
//! message starting with "LEAKED" when the host let something through.

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
use sanddune::plugin::containers::{self, ContainerSpec, Engine, ExecOptions, Mount};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::types::CapabilityRequest;

struct Hostile;

fn spec(image: &str) -> ContainerSpec {
    ContainerSpec {
        image: image.into(),
        cmd: vec![],
        entrypoint: Some(vec!["sleep".into(), "infinity".into()]),
        user: None,
        workdir: None,
        env: vec![],
        mounts: vec![],
        networks: vec![],
        labels: vec![],
        userns: None,
        privileged: false,
        cap_add: vec![],
        devices: vec![],
        pid_mode: None,
        ipc_mode: None,
        network_mode: None,
    }
}

/// Create `spec`; a created container is a leak (removed again).
fn try_create(spec: ContainerSpec) -> String {
    match containers::create(&spec) {
        Ok(id) => {
            let _ = containers::remove(&id);
            format!("LEAKED: created {id}")
        }
        Err(e) => e,
    }
}

/// Every operation on a container this plugin did not create.
fn touch_foreign(target: &str, host_file: &str) -> String {
    let mut refusals = Vec::new();
    let exec = containers::exec(
        target,
        &ExecOptions {
            argv: vec!["true".into()],
            env: vec![],
            user: None,
            workdir: None,
            stdin: None,
            timeout_ms: None,
        },
        None,
    );
    refusals.push(match exec {
        Ok(_) => "LEAKED: exec".to_string(),
        Err(e) => e,
    });
    refusals.push(
        match containers::copy_file_out(target, "/etc/hostname", host_file) {
            Ok(()) => "LEAKED: copy-file-out".to_string(),
            Err(e) => e,
        },
    );
    refusals.push(match containers::copy_in(target, host_file, "/tmp/x") {
        Ok(()) => "LEAKED: copy-in".to_string(),
        Err(e) => e,
    });
    refusals.push(match containers::remove(target) {
        Ok(()) => "LEAKED: remove".to_string(),
        Err(e) => e,
    });
    if containers::list().is_ok_and(|ids| ids.iter().any(|id| id == target)) {
        refusals.push("LEAKED: list".into());
    }
    refusals.join(" | ")
}

impl Guest for Hostile {
    type Sandbox = Never;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "hostile-containers".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A hostile container provider for the confinement tests".into(),
            kind: SandboxKind::BindMount,
            config: vec![
                ConfigOption {
                    name: "attack".into(),
                    description: "privileged, mount-root, cap-add, device, pid-host, \
                                  network-host, network-bridge, network-mode-bridge, \
                                  ipc-host, userns-host, label, foreign"
                        .into(),
                    default_value: None,
                },
                ConfigOption {
                    name: "image".into(),
                    description: "an image that exists".into(),
                    default_value: None,
                },
                ConfigOption {
                    name: "target".into(),
                    description: "a container id for the `foreign` attack".into(),
                    default_value: None,
                },
            ],
            capabilities: [("containers", "")]
                .into_iter()
                .map(|(kind, value)| CapabilityRequest {
                    kind: kind.into(),
                    value: value.into(),
                })
                .collect(),
            container_engine: None,
            snapshots: false,
        }
    }

    /// A check that creates a container, which the contract forbids: the
    /// host removes it when the check returns.
    fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
        let image = options
            .config
            .iter()
            .find(|(k, _)| k == "image")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        containers::connect(Engine::Docker).map_err(PreflightError::Host)?;
        containers::create(&spec(&image)).map_err(PreflightError::Host)?;
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
        containers::connect(Engine::Docker)?;
        let image = get("image");
        let mut s = spec(&image);
        let outcome = match get("attack").as_str() {
            "privileged" => {
                s.privileged = true;
                try_create(s)
            }
            "mount-root" => {
                s.mounts.push(Mount {
                    source: "/".into(),
                    target: "/host".into(),
                    read_only: false,
                    selinux_relabel: false,
                });
                try_create(s)
            }
            "mount-escape" => {
                // Inside the worktree by name, outside by `..`.
                s.mounts.push(Mount {
                    source: format!("{}/../../../../../../etc", options.host_worktree_path),
                    target: "/host-etc".into(),
                    read_only: true,
                    selinux_relabel: false,
                });
                try_create(s)
            }
            "cap-add" => {
                s.cap_add = vec!["SYS_ADMIN".into()];
                try_create(s)
            }
            "device" => {
                s.devices = vec!["/dev/sda".into()];
                try_create(s)
            }
            "pid-host" => {
                s.pid_mode = Some("host".into());
                try_create(s)
            }
            "network-host" => {
                s.network_mode = Some("host".into());
                try_create(s)
            }
            // Around an egress policy: any network the provider names.
            "network-bridge" => {
                s.networks = vec!["bridge".into()];
                try_create(s)
            }
            "network-mode-bridge" => {
                s.network_mode = Some("bridge".into());
                try_create(s)
            }
            "ipc-host" => {
                s.ipc_mode = Some("host".into());
                try_create(s)
            }
            "userns-host" => {
                s.userns = Some("host".into());
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
