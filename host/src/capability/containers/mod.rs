//! The `containers` capability: a container engine (Docker Engine API through
//! bollard, to Docker or to Podman's compatible socket), confined.
//!
//! A container provider that may run the docker CLI is root on the host. This
//! capability is the engine minus that: every container the host creates for
//! a plugin carries the run's labels and every later operation checks them;
//! privileged mode, host namespaces, added capabilities, devices and bind
//! mounts outside the grant are refused before the engine sees the request.
//! Execs are brokered like host processes: the host can kill what an exec
//! started inside the container (a killed exec client would leave it running).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig, NetworkConnectRequest};
use bollard::query_parameters::{
    CreateContainerOptions, DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

use super::output::{OutputLine, OutputStream};
use super::process::{Killer, MAX_LINE_BYTES};
use super::{PluginState, tty};

/// Label keys the host sets on every container it creates for a plugin.
pub const RUN_LABEL: &str = "sanddune.run";
pub const PLUGIN_LABEL: &str = "sanddune.plugin";
/// The sandbox's name (the run's name or branch), for people and `gc`.
pub const NAME_LABEL: &str = "sanddune.name";
/// The creating sanddune process (pid and start time), so `sanddune gc` can
/// tell a crashed run's containers from a live one's.
pub const OWNER_LABEL: &str = "sanddune.owner";

/// The env variable that marks every process of one exec inside the
/// container, so the host can find and kill them all (descendants inherit it).
const EXEC_MARK: &str = "SANDDUNE_EXEC";

/// Output an exec without a sink returns, per stream.
const MAX_CAPTURE_BYTES: usize = 1 << 20;

/// After killing an exec's processes, how long to wait for its output to end
/// before returning anyway (a daemonised grandchild may hold the pipe).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(3);

/// Which engine to speak to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

/// What `connect` found.
#[derive(Clone, Debug)]
pub struct EngineInfo {
    pub version: String,
    pub host_uid: u32,
    pub host_gid: u32,
    pub rootless: bool,
}

/// A bind mount; `source` is an absolute host path.
#[derive(Clone, Debug)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub read_only: bool,
    pub selinux_relabel: bool,
}

/// What a plugin asks to create (the WIT's `container-spec`).
#[derive(Clone, Debug, Default)]
pub struct ContainerSpec {
    pub image: String,
    pub cmd: Vec<String>,
    pub entrypoint: Option<Vec<String>>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub networks: Vec<String>,
    pub labels: Vec<(String, String)>,
    pub userns: Option<String>,
    pub privileged: bool,
    pub cap_add: Vec<String>,
    pub devices: Vec<String>,
    pub pid_mode: Option<String>,
    pub ipc_mode: Option<String>,
    pub network_mode: Option<String>,
}

/// One exec in a container.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub stdin: Option<Vec<u8>>,
    pub timeout_ms: Option<u64>,
}

/// How an exec ended, and its output when there was no sink.
#[derive(Clone, Debug, Default)]
pub struct ExecStatus {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub killed: bool,
    pub stdout: String,
    pub stderr: String,
}

/// One exec with the user's terminal attached through a TTY.
#[derive(Clone, Debug, Default)]
pub struct InteractiveExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: Option<String>,
}

/// What one plugin instance may do with the capability.
#[derive(Clone, Debug)]
pub struct ContainerGrant {
    /// The run its containers are labelled with.
    pub run_id: String,
    /// The sandbox's name, labelled too.
    pub name: String,
    /// Host paths a container may bind-mount, canonical: the worktree, the
    /// repository's git dir and the mounts the user declared.
    pub mount_sources: Vec<PathBuf>,
    /// Host paths `copy-in` may read (the mount sources and the scratch dir).
    pub readable: Vec<PathBuf>,
    /// Host paths `copy-file-out` may write (the worktree and the scratch dir).
    pub writable: Vec<PathBuf>,
}

impl ContainerGrant {
    /// Whether `copy-in` may read the host path `path`, as it checks.
    pub fn may_read(&self, path: &Path) -> bool {
        path.to_str()
            .and_then(|p| canonical(p).ok())
            .is_some_and(|p| within(&p, &self.readable))
    }

    /// Whether `copy-file-out` may write the host path `path`, as it checks.
    pub fn may_write(&self, path: &Path) -> bool {
        path.to_str()
            .is_some_and(|p| writable_target(p, self).is_ok())
    }
}

/// Per-instance state: the connected engine and what this instance created.
#[derive(Default)]
pub struct ContainerState {
    client: Option<Docker>,
    engine: Option<Engine>,
    created: Vec<String>,
}

impl ContainerState {
    /// Kill and remove every container this instance created and did not
    /// remove itself. Runs when the sandbox closes or is dropped, whatever
    /// the plugin did.
    pub fn remove_all(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let ids = std::mem::take(&mut self.created);
        let client = self.client.clone();
        async move {
            let Some(docker) = client else { return };
            for id in ids {
                let _ = force_remove(&docker, &id).await;
            }
        }
    }
}

/// Connect to an engine and agree on an API version (Debian's engines speak
/// 1.41). Builds and long execs stream: the client timeout is generous.
pub async fn connect_negotiated(engine: Engine) -> Result<Docker, String> {
    let socket = engine_socket(engine);
    let docker = Docker::connect_with_unix(&socket, 600, bollard::API_DEFAULT_VERSION)
        .map_err(|e| format!("cannot reach {} at {socket}: {e}", engine_name(engine)))?;
    docker.negotiate_version().await.map_err(|e| {
        format!(
            "{} at {} does not answer: {e}",
            engine_name(engine),
            engine_socket(engine)
        )
    })
}

pub fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Docker => "docker",
        Engine::Podman => "podman",
    }
}

/// The image the docker and podman providers run by default:
/// `sanddune:<repo-dir-name>`, lower case, other characters as `-`, named
/// as they name it from `create-options.host-git-dir` (the repository's
/// common git dir, `<repo>/.git`).
pub fn default_image(git_dir: &Path) -> String {
    let git_dir = git_dir.to_string_lossy();
    let trimmed = git_dir.trim_end_matches('/');
    let repo = trimmed.strip_suffix("/.git").unwrap_or(trimmed);
    let name = repo.rsplit('/').next().unwrap_or("repo");
    let tag: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '_' | '-') => c,
            _ => '-',
        })
        .collect();
    format!("sanddune:{}", tag.trim_start_matches(['.', '-']))
}

/// Where the engine listens. Podman ignores DOCKER_HOST on purpose: with both
/// engines on one machine it points at Docker.
pub fn engine_socket(engine: Engine) -> String {
    let from_env = |key: &str| std::env::var(key).ok().filter(|h| h.starts_with("unix://"));
    match engine {
        Engine::Docker => from_env("DOCKER_HOST").unwrap_or("unix:///var/run/docker.sock".into()),
        Engine::Podman => from_env("CONTAINER_HOST").unwrap_or_else(|| {
            let rootless = std::env::var("XDG_RUNTIME_DIR")
                .map(|dir| format!("{dir}/podman/podman.sock"))
                .ok()
                .filter(|p| Path::new(p).exists());
            format!(
                "unix://{}",
                rootless.unwrap_or("/run/podman/podman.sock".into())
            )
        }),
    }
}

/// Kill (SIGKILL) and remove at once: no stop grace period for a PID 1 that
/// ignores SIGTERM. A container that is already gone is not an error.
pub async fn force_remove(docker: &Docker, id: &str) -> Result<(), String> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // Another remover got there first (two `sanddune gc` at once): done
        // once it is gone.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        }) if message.contains("already in progress") => {
            let deadline = tokio::time::Instant::now() + REMOVAL_WAIT;
            loop {
                match docker.inspect_container(id, None).await {
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404,
                        ..
                    }) => return Ok(()),
                    _ if tokio::time::Instant::now() >= deadline => {
                        return Err(format!(
                            "container {id} is still being removed by someone else after {} s",
                            REMOVAL_WAIT.as_secs()
                        ));
                    }
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
        Err(e) => Err(format!("cannot remove container {id}: {e}")),
    }
}

/// How long [`force_remove`] waits for another process's removal.
const REMOVAL_WAIT: Duration = Duration::from_secs(30);

/// `<pid>:<start time>` of this process: unique across pid reuse.
pub fn owner_id() -> String {
    format!(
        "{}:{}",
        std::process::id(),
        process_start(std::process::id()).unwrap_or(0)
    )
}

/// Whether the process an [`owner_id`] names still runs.
pub fn owner_alive(owner: &str) -> bool {
    let Some((pid, start)) = owner.split_once(':') else {
        return false;
    };
    match (pid.parse::<u32>(), start.parse::<u64>()) {
        (Ok(pid), Ok(start)) => process_start(pid) == Some(start),
        _ => false,
    }
}

/// A process's start time in clock ticks since boot, from /proc.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// A random-enough marker for one exec.
fn exec_mark() -> String {
    use sha2::Digest;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{nanos}:{}:{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let digest = sha2::Sha256::digest(seed.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// Kills every process of one exec inside its container.
struct ExecKill {
    docker: Docker,
    container: String,
    mark: String,
    killed: AtomicBool,
    done: Notify,
    runtime: tokio::runtime::Handle,
}

impl ExecKill {
    fn start(&self) {
        let (docker, container, mark) = (
            self.docker.clone(),
            self.container.clone(),
            self.mark.clone(),
        );
        self.runtime.spawn(async move {
            if let Err(e) = kill_marked(&docker, &container, &mark).await {
                tracing::warn!("cannot kill an exec in container {container}: {e}");
            }
        });
        self.done.notify_one();
    }
}

impl Killer for ExecKill {
    fn kill(&self) {
        if !self.killed.swap(true, Ordering::SeqCst) {
            self.start();
        }
    }
}

/// Inside the container, as root: stop every process whose environment
/// carries the exec's mark, twice over to catch children forked meanwhile,
/// then SIGKILL them all. Stopped first, because the walk goes in the
/// order of /proc's names (`10` before `7`): a shell whose child died
/// first would otherwise run its next command ("Killed", then on).
async fn kill_marked(docker: &Docker, container: &str, mark: &str) -> Result<(), String> {
    let script = r#"pids=
for round in 1 2; do
  for d in /proc/[0-9]*; do
    if grep -qs "$1" "$d/environ"; then
      kill -STOP "${d#/proc/}" 2>/dev/null && pids="$pids ${d#/proc/}"
    fi
  done
done
[ -z "$pids" ] || kill -9 $pids 2>/dev/null
exit 0"#;
    let pattern = format!("{EXEC_MARK}={mark}");
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(vec!["sh", "-c", script, "sanddune-kill", &pattern]),
                user: Some("0"),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    if let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| e.to_string())?
    {
        while output.next().await.is_some() {}
    }
    Ok(())
}

/// Splits one stream's chunks into lines, none longer than MAX_LINE_BYTES.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    fn push(&mut self, mut chunk: &[u8], stream: OutputStream, out: &mut Vec<OutputLine>) {
        while !chunk.is_empty() {
            let room = MAX_LINE_BYTES - self.buf.len();
            match chunk.iter().position(|b| *b == b'\n') {
                Some(i) if i <= room => {
                    self.buf.extend_from_slice(&chunk[..i]);
                    chunk = &chunk[i + 1..];
                    out.push(self.take(stream));
                }
                _ if chunk.len() >= room => {
                    self.buf.extend_from_slice(&chunk[..room]);
                    chunk = &chunk[room..];
                    out.push(self.take(stream));
                }
                _ => {
                    self.buf.extend_from_slice(chunk);
                    chunk = &[];
                }
            }
        }
    }

    fn finish(&mut self, stream: OutputStream, out: &mut Vec<OutputLine>) {
        if !self.buf.is_empty() {
            out.push(self.take(stream));
        }
    }

    fn take(&mut self, stream: OutputStream) -> OutputLine {
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        OutputLine { stream, text }
    }
}

/// `host`, `container:<id>` and `ns:<path>` join a namespace outside the
/// container; `what` names the setting in the error.
fn check_namespace(what: &str, mode: &Option<String>) -> Result<(), String> {
    match mode.as_deref() {
        Some(m) if m == "host" || m.starts_with("container:") || m.starts_with("ns:") => Err(
            format!("refused: {what}={m} would share a namespace outside the container"),
        ),
        _ => Ok(()),
    }
}

/// `path` (canonicalised) is one of `roots` or inside one.
fn within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// Canonical form of a host path the plugin named; it must exist.
fn canonical(path: &str) -> Result<PathBuf, String> {
    if !Path::new(path).is_absolute() {
        return Err(format!("`{path}` is not an absolute host path"));
    }
    std::fs::canonicalize(path).map_err(|e| format!("host path `{path}`: {e}"))
}

/// Everything `create` refuses, checked before the engine sees the request.
pub fn check_spec(spec: &ContainerSpec, grant: &ContainerGrant) -> Result<Vec<String>, String> {
    if spec.privileged {
        return Err("refused: privileged mode".into());
    }
    if !spec.cap_add.is_empty() {
        return Err(format!(
            "refused: added capabilities ({})",
            spec.cap_add.join(", ")
        ));
    }
    if !spec.devices.is_empty() {
        return Err(format!(
            "refused: host devices ({}): no devices were granted",
            spec.devices.join(", ")
        ));
    }
    check_namespace("pid-mode", &spec.pid_mode)?;
    check_namespace("ipc-mode", &spec.ipc_mode)?;
    check_namespace("network-mode", &spec.network_mode)?;
    for network in &spec.networks {
        check_namespace("network", &Some(network.clone()))?;
    }
    match spec.userns.as_deref() {
        None => {}
        Some(m) if m == "keep-id" || m.starts_with("keep-id:") => {}
        Some(m) => return Err(format!("refused: userns={m} (only keep-id is accepted)")),
    }
    if let Some((key, _)) = spec.labels.iter().find(|(k, _)| k.starts_with("sanddune.")) {
        return Err(format!(
            "refused: label `{key}`: labels starting with `sanddune.` are set by the host"
        ));
    }
    let mut binds = Vec::new();
    for m in &spec.mounts {
        // A bind is `source:target:options`: a `:` or `,` in a path would
        // smuggle in options or a second target.
        if [&m.source, &m.target]
            .iter()
            .any(|p| p.contains(':') || p.contains(','))
        {
            return Err(format!(
                "refused: bind mount `{}` -> `{}`: paths may not contain `:` or `,`",
                m.source, m.target
            ));
        }
        if !m.target.starts_with('/') {
            return Err(format!(
                "refused: bind mount target `{}` is not an absolute path",
                m.target
            ));
        }
        let source = canonical(&m.source).map_err(|e| format!("refused: bind mount: {e}"))?;
        if !within(&source, &grant.mount_sources) {
            return Err(format!(
                "refused: bind mount of host path `{}`: only the worktree, the repository's git dir and the mounts the user declared may be mounted",
                m.source
            ));
        }
        let mut options = vec![if m.read_only { "ro" } else { "rw" }];
        if m.selinux_relabel {
            options.push("z");
        }
        binds.push(format!(
            "{}:{}:{}",
            source.display(),
            m.target,
            options.join(",")
        ));
    }
    Ok(binds)
}

/// What one call needs, taken out of the store before the first await
/// (`PluginState` is not `Sync`, so it cannot be borrowed across one).
struct Ctx {
    docker: Docker,
    grant: ContainerGrant,
    plugin: Arc<str>,
    /// What this instance created: known to carry its labels.
    created: Vec<String>,
}

impl PluginState {
    fn container_grant(&self) -> Result<ContainerGrant, String> {
        self.grants.containers.clone().ok_or_else(|| {
            format!(
                "plugin `{}` was not granted the containers capability",
                self.plugin
            )
        })
    }

    fn ctx(&self) -> Result<Ctx, String> {
        let grant = self.container_grant()?;
        let docker = self
            .containers
            .client
            .clone()
            .ok_or_else(|| "no engine: call containers.connect first".to_string())?;
        Ok(Ctx {
            docker,
            grant,
            plugin: self.plugin.clone(),
            created: self.containers.created.clone(),
        })
    }

    /// Refusals and failures go to the host's log too, named by plugin.
    /// A failure as the plugin and the user see it: when the engine no
    /// longer answers, that is the news, whatever call found it.
    fn logged<T: Send + 'static>(
        &self,
        r: Result<T, String>,
    ) -> impl Future<Output = Result<T, String>> + Send + 'static {
        let probe = self.containers.client.clone().zip(self.containers.engine);
        let plugin = self.plugin.clone();
        async move {
            let Err(e) = r else { return r };
            let e = match probe {
                Some((docker, engine)) if docker.ping().await.is_err() => format!(
                    "{e} ({} at {} stopped answering: once it is back, `sanddune gc` removes what this run left)",
                    engine_name(engine),
                    engine_socket(engine)
                ),
                _ => e,
            };
            tracing::warn!(plugin = %plugin, "containers: {e}");
            Err(e)
        }
    }
}

impl Ctx {
    /// The container's full id when this plugin created it for this run.
    /// Every other container, existing or not, gets the same refusal.
    async fn owned(&self, reference: &str) -> Result<String, String> {
        // The host labelled these itself: no need to ask the engine again.
        if self.created.iter().any(|id| id == reference) {
            return Ok(reference.to_string());
        }
        let refused = || {
            format!(
                "refused: container `{reference}` is not one plugin `{}` created for run {}",
                self.plugin, self.grant.run_id
            )
        };
        let info = self
            .docker
            .inspect_container(reference, None)
            .await
            .map_err(|_| refused())?;
        let labels = info.config.and_then(|c| c.labels).unwrap_or_default();
        let mine = labels.get(RUN_LABEL) == Some(&self.grant.run_id)
            && labels.get(PLUGIN_LABEL).map(String::as_str) == Some(&*self.plugin);
        match info.id {
            Some(id) if mine => Ok(id),
            _ => Err(refused()),
        }
    }

    async fn image_exists(&self, image: &str) -> Result<bool, String> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(format!("cannot inspect image `{image}`: {e}")),
        }
    }

    async fn image_label(&self, image: &str, key: &str) -> Result<Option<String>, String> {
        let inspect = self
            .docker
            .inspect_image(image)
            .await
            .map_err(|e| format!("cannot inspect image `{image}`: {e}"))?;
        Ok(inspect
            .config
            .and_then(|c| c.labels)
            .and_then(|mut labels| labels.remove(key)))
    }

    /// Create and start; the id is returned even when starting failed (the
    /// container then needs removing).
    async fn create(&self, spec: ContainerSpec) -> Result<String, (String, Option<String>)> {
        let binds = check_spec(&spec, &self.grant).map_err(|e| (e, None))?;
        let mut labels: HashMap<String, String> = spec.labels.into_iter().collect();
        labels.insert(RUN_LABEL.into(), self.grant.run_id.clone());
        labels.insert(PLUGIN_LABEL.into(), self.plugin.to_string());
        labels.insert(OWNER_LABEL.into(), owner_id());
        labels.insert(NAME_LABEL.into(), self.grant.name.clone());
        let mut networks = spec.networks.into_iter();
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: (!spec.cmd.is_empty()).then_some(spec.cmd),
            entrypoint: spec.entrypoint,
            user: spec.user,
            working_dir: spec.workdir,
            env: Some(
                spec.env
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
            labels: Some(labels),
            host_config: Some(HostConfig {
                binds: Some(binds),
                network_mode: networks.next().or(spec.network_mode),
                userns_mode: spec.userns,
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = self
            .docker
            .create_container(None::<CreateContainerOptions>, body)
            .await
            .map_err(|e| {
                (
                    format!("cannot create a container from `{}`: {e}", spec.image),
                    None,
                )
            })?
            .id;
        let started = async {
            for network in networks {
                let request = NetworkConnectRequest {
                    container: id.clone(),
                    endpoint_config: None,
                };
                self.docker
                    .connect_network(&network, request)
                    .await
                    .map_err(|e| format!("cannot attach network `{network}`: {e}"))?;
            }
            self.docker
                .start_container(&id, None)
                .await
                .map_err(|e| format!("cannot start the container: {e}"))
        };
        match started.await {
            Ok(()) => Ok(id),
            Err(e) => Err((e, Some(id))),
        }
    }

    async fn copy_in(
        &self,
        container: &str,
        host_path: &str,
        container_path: &str,
    ) -> Result<(), String> {
        let id = self.owned(container).await?;
        let source = canonical(host_path)?;
        if !within(&source, &self.grant.readable) {
            return Err(format!(
                "refused: reading host path `{host_path}`: only the worktree, the git dir, the declared mounts and the scratch dir are readable"
            ));
        }
        let (parent, name) = split_container_path(container_path)?;
        let tar = tokio::task::spawn_blocking(move || archive(&source, &name))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot read `{host_path}`: {e}"))?;
        let options = UploadToContainerOptionsBuilder::default()
            .path(&parent)
            .build();
        self.docker
            .upload_to_container(&id, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|e| format!("cannot copy into `{container_path}`: {e}"))
    }

    async fn copy_file_out(
        &self,
        container: &str,
        container_path: &str,
        host_path: &str,
    ) -> Result<(), String> {
        let id = self.owned(container).await?;
        let target = writable_target(host_path, &self.grant)?;
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(container_path)
            .build();
        let mut stream = self.docker.download_from_container(&id, Some(options));
        let mut tar = Vec::new();
        while let Some(chunk) = stream.next().await {
            tar.extend_from_slice(
                &chunk.map_err(|e| format!("cannot copy `{container_path}` out: {e}"))?,
            );
        }
        let content = tokio::task::spawn_blocking(move || first_file(&tar))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot copy `{container_path}` out: {e}"))?;
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&target, content).map_err(|e| format!("cannot write `{host_path}`: {e}"))
    }

    async fn list(&self) -> Result<Vec<String>, String> {
        let filters = HashMap::from([(
            "label".to_string(),
            vec![
                format!("{RUN_LABEL}={}", self.grant.run_id),
                format!("{PLUGIN_LABEL}={}", self.plugin),
            ],
        )]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let found = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| format!("cannot list containers: {e}"))?;
        Ok(found.into_iter().filter_map(|c| c.id).collect())
    }
}

/// The content of the first entry of a tar archive, which must be a file.
fn first_file(tar: &[u8]) -> Result<Vec<u8>, String> {
    let mut archive = tar::Archive::new(tar);
    let mut entries = archive.entries().map_err(|e| e.to_string())?;
    let mut entry = entries
        .next()
        .ok_or("empty archive")?
        .map_err(|e| e.to_string())?;
    if !entry.header().entry_type().is_file() {
        return Err("not a regular file".into());
    }
    let mut content = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut content).map_err(|e| e.to_string())?;
    Ok(content)
}

/// Connect to `engine` and describe it and the host user.
async fn connect(engine: Engine) -> Result<(Docker, EngineInfo), String> {
    let docker = connect_negotiated(engine).await?;
    let (version, info) = tokio::join!(docker.version(), docker.info());
    let version = version
        .map_err(|e| format!("{}: {e}", engine_name(engine)))?
        .version
        .unwrap_or_default();
    // SAFETY: getuid/getgid cannot fail.
    let (host_uid, host_gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Docker and Podman 5 say `name=rootless` here; Podman 4's compat API
    // does not, and a non-root user's Podman is rootless (a rootful socket
    // shared with a user would refuse keep-id with the engine's own error).
    let rootless = info
        .ok()
        .and_then(|i| i.security_options)
        .is_some_and(|opts| opts.iter().any(|o| o.contains("rootless")))
        || (matches!(engine, Engine::Podman) && host_uid != 0);
    Ok((
        docker,
        EngineInfo {
            version,
            host_uid,
            host_gid,
            rootless,
        },
    ))
}

/// Start an exec with the kill mark, broker it, stream or capture its lines.
async fn exec(
    ctx: &Ctx,
    brokered: &super::Brokered,
    container: &str,
    options: ExecOptions,
    sink: Option<mpsc::Sender<OutputLine>>,
) -> Result<ExecStatus, String> {
    let docker = &ctx.docker;
    let id = ctx.owned(container).await?;
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let mark = exec_mark();
    let mut env: Vec<String> = options
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    env.push(format!("{EXEC_MARK}={mark}"));
    let exec = docker
        .create_exec(
            &id,
            CreateExecOptions {
                cmd: Some(options.argv.clone()),
                env: Some(env),
                user: options.user.clone(),
                working_dir: options.workdir.clone(),
                attach_stdin: Some(options.stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("cannot exec `{}`: {e}", options.argv.join(" ")))?;
    let kill = Arc::new(ExecKill {
        docker: docker.clone(),
        container: id.clone(),
        mark,
        killed: AtomicBool::new(false),
        done: Notify::new(),
        runtime: tokio::runtime::Handle::current(),
    });
    let registration = brokered.register(kill.clone());
    let result = match sink {
        Some(tx) => run_exec(docker, &exec.id, options, tx, &kill).await,
        None => {
            let (tx, mut rx) = mpsc::channel::<OutputLine>(256);
            let capture = async {
                let (mut stdout, mut stderr) = (String::new(), String::new());
                while let Some(line) = rx.recv().await {
                    let buf = match line.stream {
                        OutputStream::Stdout => &mut stdout,
                        OutputStream::Stderr => &mut stderr,
                    };
                    if buf.len() + line.text.len() < MAX_CAPTURE_BYTES {
                        buf.push_str(&line.text);
                        buf.push('\n');
                    }
                }
                (stdout, stderr)
            };
            let (status, (stdout, stderr)) =
                tokio::join!(run_exec(docker, &exec.id, options, tx, &kill), capture);
            status.map(|s| ExecStatus {
                stdout,
                stderr,
                ..s
            })
        }
    };
    brokered.unregister(registration);
    result
}

/// An exec with the user's terminal: a TTY in the container, the host
/// terminal in raw mode (restored on every exit path by `RawMode`'s drop),
/// keys in, bytes out, window-size changes forwarded. Abort kills it like
/// any exec.
async fn exec_interactive(
    ctx: &Ctx,
    brokered: &super::Brokered,
    container: &str,
    options: InteractiveExecOptions,
) -> Result<i32, String> {
    use tokio::io::AsyncWriteExt as _;
    use tokio::signal::unix::{SignalKind, signal};

    if !tty::attached() {
        return Err(
            "an interactive exec needs a terminal: stdin and stdout are not both one".into(),
        );
    }
    let docker = &ctx.docker;
    let id = ctx.owned(container).await?;
    if brokered.is_cancelled() {
        return Err("the run was cancelled: no new execs".into());
    }
    let mark = exec_mark();
    let mut env: Vec<String> = options
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    env.push(format!("{EXEC_MARK}={mark}"));
    if !options.env.iter().any(|(k, _)| k == "TERM") {
        env.push(format!(
            "TERM={}",
            std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into())
        ));
    }
    let exec = docker
        .create_exec(
            &id,
            CreateExecOptions {
                cmd: Some(options.argv.clone()),
                env: Some(env),
                user: options.user.clone(),
                working_dir: options.workdir.clone(),
                attach_stdin: Some(true),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(true),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("cannot exec `{}`: {e}", options.argv.join(" ")))?;
    let kill = Arc::new(ExecKill {
        docker: docker.clone(),
        container: id.clone(),
        mark,
        killed: AtomicBool::new(false),
        done: Notify::new(),
        runtime: tokio::runtime::Handle::current(),
    });
    let registration = brokered.register(kill.clone());
    let started = docker
        .start_exec(
            &exec.id,
            Some(StartExecOptions {
                detach: false,
                tty: true,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| format!("cannot start exec: {e}"));
    let result = match started {
        Ok(StartExecResults::Attached {
            mut output,
            mut input,
        }) => {
            let resize = |(rows, cols): (u16, u16)| {
                docker.resize_exec(
                    &exec.id,
                    ResizeExecOptions {
                        height: rows,
                        width: cols,
                    },
                )
            };
            let raw = tty::RawMode::enter();
            let mut keys = tty::Keys::start();
            let mut winch = signal(SignalKind::window_change()).ok();
            if let Some(size) = tty::size() {
                let _ = resize(size).await;
            }
            let mut stdout = tokio::io::stdout();
            loop {
                tokio::select! {
                    chunk = output.next() => match chunk {
                        Some(Ok(out)) => {
                            let _ = stdout.write_all(&out.into_bytes()).await;
                            let _ = stdout.flush().await;
                        }
                        _ => break,
                    },
                    Some(bytes) = keys.rx.recv() => {
                        if input.write_all(&bytes).await.is_err() {
                            break;
                        }
                    }
                    Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => std::future::pending().await } } => {
                        if let Some(size) = tty::size() {
                            let _ = resize(size).await;
                        }
                    }
                    () = kill.done.notified() => break,
                }
            }
            drop(keys);
            drop(raw);
            exit_code(docker, &exec.id).await
        }
        Ok(StartExecResults::Detached) => Err("the engine detached the exec".into()),
        Err(e) => Err(e),
    };
    brokered.unregister(registration);
    if kill.killed.load(Ordering::SeqCst) {
        return Err("the interactive exec was killed (the run was aborted)".into());
    }
    result
}

/// An ended exec's exit code; the stream can end a moment before the engine
/// records it.
async fn exit_code(docker: &Docker, exec_id: &str) -> Result<i32, String> {
    for _ in 0..100 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running == Some(true) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(info) => {
                return info
                    .exit_code
                    .map(|c| c as i32)
                    .ok_or_else(|| "the engine recorded no exit code".into());
            }
            Err(e) => return Err(format!("cannot inspect the exec: {e}")),
        }
    }
    Err("the exec did not end".into())
}

/// Start an exec, stream its lines, and wait for its real exit code.
async fn run_exec(
    docker: &Docker,
    exec_id: &str,
    options: ExecOptions,
    tx: mpsc::Sender<OutputLine>,
    kill: &Arc<ExecKill>,
) -> Result<ExecStatus, String> {
    let started = docker
        .start_exec(exec_id, None)
        .await
        .map_err(|e| format!("cannot start exec: {e}"))?;
    let StartExecResults::Attached {
        mut output,
        mut input,
    } = started
    else {
        return Err("the engine detached the exec".into());
    };
    match options.stdin {
        // A task writes stdin so a command that fills its stdout before
        // reading its input never deadlocks against us.
        Some(bytes) => {
            tokio::spawn(async move {
                let _ = input.write_all(&bytes).await;
                let _ = input.shutdown().await;
            });
        }
        None => drop(input),
    }
    let timed_out = AtomicBool::new(false);
    let timer = async {
        match options.timeout_ms {
            Some(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                timed_out.store(true, Ordering::SeqCst);
                kill.start();
                std::future::pending::<()>().await
            }
            None => std::future::pending().await,
        }
    };
    let drain = async {
        let (mut out, mut err) = (Lines::default(), Lines::default());
        let mut lines = Vec::new();
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                    out.push(&message, OutputStream::Stdout, &mut lines)
                }
                Ok(LogOutput::StdErr { message }) => {
                    err.push(&message, OutputStream::Stderr, &mut lines)
                }
                Ok(LogOutput::StdIn { .. }) => {}
                Err(_) => break,
            }
            for line in lines.drain(..) {
                // A consumer that falls behind slows the exec (back-pressure).
                let _ = tx.send(line).await;
            }
        }
        out.finish(OutputStream::Stdout, &mut lines);
        err.finish(OutputStream::Stderr, &mut lines);
        for line in lines {
            let _ = tx.send(line).await;
        }
    };
    // Once killed, output that does not end soon is abandoned.
    let killed_then_grace = async {
        kill.done.notified().await;
        tokio::time::sleep(DRAIN_AFTER_KILL).await;
    };
    tokio::select! {
        () = drain => {}
        () = timer => {}
        () = killed_then_grace => {}
    }
    let timed_out = timed_out.load(Ordering::SeqCst);
    let killed = kill.killed.load(Ordering::SeqCst);
    // The stream can end a moment before the engine records the exit code.
    let mut code = None;
    for _ in 0..100 {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running == Some(true) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(info) => {
                code = info.exit_code.map(|c| c as i32);
                break;
            }
            Err(e) => return Err(format!("cannot inspect exec: {e}")),
        }
    }
    Ok(ExecStatus {
        code: if killed || timed_out { None } else { code },
        timed_out,
        killed,
        stdout: String::new(),
        stderr: String::new(),
    })
}

/// A tar archive holding `host` (file or directory) under the name `name`.
fn archive(host: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    if host.is_dir() {
        builder.append_dir_all(name, host)?;
    } else {
        builder.append_path_with_name(host, name)?;
    }
    builder.into_inner()
}

/// Split an absolute container path into (parent, file name).
fn split_container_path(path: &str) -> Result<(String, String), String> {
    let p = Path::new(path);
    match (p.is_absolute(), p.parent(), p.file_name()) {
        (true, Some(parent), Some(name)) => Ok((
            parent.display().to_string(),
            name.to_string_lossy().into_owned(),
        )),
        _ => Err(format!(
            "`{path}` is not an absolute container path to a file"
        )),
    }
}

/// The host path `copy-file-out` may write: its nearest existing ancestor is
/// inside the grant, and it is not a symlink (which could point anywhere).
fn writable_target(path: &str, grant: &ContainerGrant) -> Result<PathBuf, String> {
    let target = PathBuf::from(path);
    if !target.is_absolute() {
        return Err(format!("`{path}` is not an absolute host path"));
    }
    if target
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!("refused: host path `{path}` is a symlink"));
    }
    let ancestor = target
        .ancestors()
        .find(|a| a.exists())
        .ok_or_else(|| format!("host path `{path}` has no existing ancestor"))?;
    let rest = target.strip_prefix(ancestor).map_err(|e| e.to_string())?;
    let existing = std::fs::canonicalize(ancestor).map_err(|e| e.to_string())?;
    if rest
        .components()
        .any(|c| c == std::path::Component::ParentDir)
        || !within(&existing, &grant.writable)
    {
        return Err(format!(
            "refused: writing host path `{path}`: only the worktree and the scratch dir are writable"
        ));
    }
    Ok(existing.join(rest))
}

/// The capability's calls, as the bindings of every WIT version make them.
impl PluginState {
    pub async fn containers_connect(&mut self, engine: Engine) -> Result<EngineInfo, String> {
        let r = match self.container_grant() {
            Ok(_) => connect(engine).await,
            Err(e) => Err(e),
        };
        let r = r.map(|(docker, info)| {
            self.containers.client = Some(docker);
            self.containers.engine = Some(engine);
            info
        });
        self.logged(r).await
    }

    pub async fn containers_image_exists(&mut self, image: String) -> Result<bool, String> {
        let r = match self.ctx() {
            Ok(ctx) => ctx.image_exists(&image).await,
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_image_label(
        &mut self,
        image: String,
        key: String,
    ) -> Result<Option<String>, String> {
        let r = match self.ctx() {
            Ok(ctx) => ctx.image_label(&image, &key).await,
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_create(&mut self, spec: ContainerSpec) -> Result<String, String> {
        let r = match self.ctx() {
            Ok(ctx) => match ctx.create(spec).await {
                Ok(id) => {
                    self.containers.created.push(id.clone());
                    Ok(id)
                }
                Err((e, half_made)) => {
                    if let Some(id) = half_made {
                        let _ = force_remove(&ctx.docker, &id).await;
                    }
                    Err(e)
                }
            },
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    /// `sink` receives each line as it arrives; without one the output is
    /// returned in the status.
    pub async fn containers_exec(
        &mut self,
        container: String,
        options: ExecOptions,
        tx: Option<mpsc::Sender<OutputLine>>,
    ) -> Result<ExecStatus, String> {
        let r = match self.ctx() {
            Ok(ctx) => {
                let brokered = self.brokered.clone();
                exec(&ctx, &brokered, &container, options, tx).await
            }
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_exec_interactive(
        &mut self,
        container: String,
        options: InteractiveExecOptions,
    ) -> Result<i32, String> {
        let r = match self.ctx() {
            Ok(ctx) => {
                let brokered = self.brokered.clone();
                exec_interactive(&ctx, &brokered, &container, options).await
            }
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_copy_in(
        &mut self,
        container: String,
        host_path: String,
        container_path: String,
    ) -> Result<(), String> {
        let r = match self.ctx() {
            Ok(ctx) => ctx.copy_in(&container, &host_path, &container_path).await,
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_copy_file_out(
        &mut self,
        container: String,
        container_path: String,
        host_path: String,
    ) -> Result<(), String> {
        let r = match self.ctx() {
            Ok(ctx) => {
                ctx.copy_file_out(&container, &container_path, &host_path)
                    .await
            }
            Err(e) => Err(e),
        };
        self.logged(r).await
    }

    pub async fn containers_remove(&mut self, container: String) -> Result<(), String> {
        let r = match self.ctx() {
            Ok(ctx) => match ctx.owned(&container).await {
                Ok(id) => force_remove(&ctx.docker, &id).await.map(|()| id),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let r = r.map(|id| self.containers.created.retain(|c| c != &id));
        self.logged(r).await
    }

    pub async fn containers_list(&mut self) -> Result<Vec<String>, String> {
        let r = match self.ctx() {
            Ok(ctx) => ctx.list().await,
            Err(e) => Err(e),
        };
        self.logged(r).await
    }
}

/// The policy half of the capability: what `create` and the file calls
/// refuse, checked without an engine.
#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        worktree: PathBuf,
        outside: PathBuf,
        grant: ContainerGrant,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let worktree = root.join("wt");
        let outside = root.join("elsewhere");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, worktree.join("link-out")).unwrap();
        let grant = ContainerGrant {
            run_id: "r".into(),
            name: "n".into(),
            mount_sources: vec![worktree.clone()],
            readable: vec![worktree.clone()],
            writable: vec![worktree.clone()],
        };
        Fixture {
            _dir: dir,
            worktree,
            outside,
            grant,
        }
    }

    fn mount(source: &Path, target: &str) -> Mount {
        Mount {
            source: source.display().to_string(),
            target: target.into(),
            read_only: true,
            selinux_relabel: true,
        }
    }

    #[test]
    fn create_refuses_every_escape_and_names_it() {
        let f = fixture();
        let some = |s: &str| Some(s.to_string());
        let cases: Vec<(ContainerSpec, &str)> = vec![
            (
                ContainerSpec {
                    privileged: true,
                    ..Default::default()
                },
                "refused: privileged mode",
            ),
            (
                ContainerSpec {
                    cap_add: vec!["SYS_ADMIN".into()],
                    ..Default::default()
                },
                "refused: added capabilities (SYS_ADMIN)",
            ),
            (
                ContainerSpec {
                    devices: vec!["/dev/kvm".into()],
                    ..Default::default()
                },
                "refused: host devices (/dev/kvm)",
            ),
            (
                ContainerSpec {
                    pid_mode: some("host"),
                    ..Default::default()
                },
                "refused: pid-mode=host",
            ),
            (
                ContainerSpec {
                    ipc_mode: some("container:abc"),
                    ..Default::default()
                },
                "refused: ipc-mode=container:abc",
            ),
            (
                ContainerSpec {
                    network_mode: some("ns:/proc/1/ns/net"),
                    ..Default::default()
                },
                "refused: network-mode=ns:/proc/1/ns/net",
            ),
            (
                ContainerSpec {
                    networks: vec!["host".into()],
                    ..Default::default()
                },
                "refused: network=host",
            ),
            (
                ContainerSpec {
                    userns: some("host"),
                    ..Default::default()
                },
                "refused: userns=host (only keep-id",
            ),
            (
                ContainerSpec {
                    labels: vec![("sanddune.run".into(), "other".into())],
                    ..Default::default()
                },
                "refused: label `sanddune.run`",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.worktree, "/w:rw")],
                    ..Default::default()
                },
                "paths may not contain `:` or `,`",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.worktree, "relative")],
                    ..Default::default()
                },
                "is not an absolute path",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.outside, "/x")],
                    ..Default::default()
                },
                "refused: bind mount of host path",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.worktree.join("link-out"), "/x")],
                    ..Default::default()
                },
                "refused: bind mount of host path",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.worktree.join("../elsewhere"), "/x")],
                    ..Default::default()
                },
                "refused: bind mount of host path",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(Path::new("wt"), "/x")],
                    ..Default::default()
                },
                "is not an absolute host path",
            ),
        ];
        for (spec, want) in cases {
            let err = check_spec(&spec, &f.grant).unwrap_err();
            assert!(err.contains(want), "{spec:?}: {err}");
        }
    }

    #[test]
    fn create_accepts_what_the_grant_allows_as_binds() {
        let f = fixture();
        let spec = ContainerSpec {
            image: "img".into(),
            userns: Some("keep-id:uid=1000".into()),
            labels: vec![("app".into(), "x".into())],
            networks: vec!["bridge".into()],
            mounts: vec![
                mount(&f.worktree, "/workspace"),
                Mount {
                    read_only: false,
                    selinux_relabel: false,
                    ..mount(&f.worktree, "/rw")
                },
            ],
            ..Default::default()
        };
        let wt = f.worktree.display();
        assert_eq!(
            check_spec(&spec, &f.grant).unwrap(),
            [format!("{wt}:/workspace:ro,z"), format!("{wt}:/rw:rw")]
        );
    }

    #[test]
    fn copy_out_writes_only_inside_the_grant() {
        let f = fixture();
        let wt = f.worktree.display().to_string();
        let ok = [
            (format!("{wt}/file"), f.worktree.join("file")),
            (
                format!("{wt}/new/dir/file"),
                f.worktree.join("new/dir/file"),
            ),
        ];
        for (path, want) in ok {
            assert_eq!(writable_target(&path, &f.grant).unwrap(), want);
        }
        let refused = [
            (format!("{}/file", f.outside.display()), "only the worktree"),
            (format!("{wt}/link-out/file"), "only the worktree"),
            (format!("{wt}/link-out"), "is a symlink"),
            (
                format!("{wt}/new/../../elsewhere/file"),
                "only the worktree",
            ),
            ("relative/file".to_string(), "not an absolute host path"),
        ];
        for (path, want) in refused {
            let err = writable_target(&path, &f.grant).unwrap_err();
            assert!(err.contains(want), "{path}: {err}");
        }
    }

    #[test]
    fn container_paths_split_into_parent_and_file() {
        assert_eq!(
            split_container_path("/home/agent/a.txt").unwrap(),
            ("/home/agent".to_string(), "a.txt".to_string())
        );
        for bad in ["relative/a.txt", "/", ""] {
            assert!(split_container_path(bad).is_err(), "{bad}");
        }
    }
}
