//! The engine side of the capability: bollard calls to Docker or to
//! Podman's compatible socket, each made only after the policy allowed it,
//! and the host imports every WIT version's bindings call on `PluginState`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, NetworkConnectRequest};
use bollard::query_parameters::{
    CreateContainerOptions, DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::exec::{exec, exec_interactive, start_forwarder};
use super::keep_id::{self, KeepIdLock};
use super::limits::LimitHit;
use super::policy::{
    ContainerGrant, PLUGIN_LABEL, RUN_LABEL, check_spec, container_labels, labelled_mine,
    readable_source, split_container_path, writable_target,
};
use super::pool;
use super::snapshot::Kept;
use super::{ContainerSpec, Engine, EngineInfo, ExecOptions, ExecStatus, InteractiveExecOptions};
use crate::capability::PluginState;
use crate::capability::egress::PROXY_PORT;
use crate::capability::link::{self, SandboxLink};
use crate::capability::output::OutputLine;
use crate::capability::pool::{Claimed, POOL_LABEL, PoolTicket, SlotRecord};

/// Per-instance state: the connected engine and what this instance created.
#[derive(Default)]
pub struct ContainerState {
    client: Option<Docker>,
    engine: Option<Engine>,
    created: Vec<String>,
    /// The link (egress proxy, credential gateway) of each created
    /// container that has one.
    links: HashMap<String, SandboxLink>,
}

impl ContainerState {
    /// Kill and remove every container this instance created and did not
    /// remove itself. Runs when the sandbox closes or is dropped, whatever
    /// the plugin did.
    pub fn remove_all(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let ids = std::mem::take(&mut self.created);
        self.links.clear();
        let client = self.client.clone();
        async move {
            let Some(docker) = client else { return };
            for id in ids {
                let _ = force_remove(&docker, &id).await;
            }
        }
    }

    /// Freeze every process of every container this instance created (the
    /// engine's pause, the cgroup freezer), so nothing in them writes again;
    /// `remove_all` still kills and removes them. False when it created none
    /// or one would not pause (rootless cgroup v1 cannot): then nothing is
    /// known to be stopped.
    pub fn pause_all(&self) -> impl Future<Output = bool> + Send + 'static {
        let ids = self.created.clone();
        let client = self.client.clone();
        async move {
            let Some(docker) = client.filter(|_| !ids.is_empty()) else {
                return false;
            };
            for id in ids {
                if let Err(e) = docker.pause_container(&id).await {
                    tracing::debug!("cannot pause container {id}: {e}");
                    return false;
                }
            }
            true
        }
    }

    /// Commit the container `grant`'s snapshot may keep, as that snapshot
    /// (see `Snapshot::keep`).
    pub fn keep_snapshot(
        &self,
        grant: &ContainerGrant,
        worktree_files: bool,
    ) -> impl Future<Output = Result<Kept, String>> + Send + 'static {
        let client = self.client.clone();
        let snapshot = grant.snapshot.clone();
        async move {
            match (client, snapshot) {
                (Some(docker), Some(snapshot)) => snapshot.keep(&docker, worktree_files).await,
                _ => Err("this sandbox keeps no snapshot".into()),
            }
        }
    }

    /// The resource limits the containers this instance created have hit,
    /// read from their cgroups. (A future that owns what it needs: the
    /// state is not `Sync`.)
    pub fn limit_hits(
        &self,
        grant: &ContainerGrant,
    ) -> impl Future<Output = Vec<LimitHit>> + Send + 'static {
        let ids = self.created.clone();
        let client = self.client.clone();
        let limits = grant.containment.limits;
        async move {
            let Some(docker) = client else {
                return vec![];
            };
            let mut hits = Vec::new();
            for id in ids {
                let pid = docker
                    .inspect_container(&id, None)
                    .await
                    .ok()
                    .and_then(|c| c.state?.pid)
                    .filter(|pid| *pid > 0);
                if let Some(pid) = pid {
                    hits.extend(limits.hits(pid as u32));
                }
            }
            hits
        }
    }
}

/// What this process learned of the engine at each socket, kept for its
/// life. Learned once: callers that ask at the same moment (a workflow's
/// items, a run and its [`warm_up`]) wait for the one asking.
struct PerSocket<T>(std::sync::Mutex<Vec<(String, Arc<tokio::sync::OnceCell<T>>)>>);

impl<T: Clone> PerSocket<T> {
    const fn new() -> Self {
        Self(std::sync::Mutex::new(Vec::new()))
    }

    /// What is known at `socket`, learned by `learn` if nothing is yet
    /// (and then `true`: just learned).
    async fn get_or_learn<F: Future<Output = Result<T, String>>>(
        &self,
        socket: &str,
        learn: impl FnOnce() -> F,
    ) -> Result<(T, bool), String> {
        let cell = {
            let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match known.iter().find(|(s, _)| s == socket) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(tokio::sync::OnceCell::new());
                    known.push((socket.to_string(), cell.clone()));
                    cell
                }
            }
        };
        let mut learned = false;
        let value = cell
            .get_or_try_init(|| {
                learned = true;
                learn()
            })
            .await?;
        Ok((value.clone(), learned))
    }
}

/// Connect to an engine and agree on an API version (Debian's engines speak
/// 1.41). Builds and long execs stream: the client timeout is generous.
pub async fn connect_negotiated(engine: Engine) -> Result<Docker, String> {
    Ok(agree(engine).await?.0)
}

/// Connect to `engine` and agree on an API version, as bollard's
/// negotiation does, keeping the engine's version its `/version` also
/// gave: dockerd answers `/version` in 6-35 ms (it asks containerd and runc
/// theirs), so a process asks it once per socket, where it would ask again
/// to describe the engine. Later connects only ping (under a millisecond),
/// so an engine that stopped is still found here.
async fn agree(engine: Engine) -> Result<(Docker, String), String> {
    static AGREED: PerSocket<(bollard::ClientVersion, String)> = PerSocket::new();
    let socket = engine_socket(engine);
    let unreachable = |e: bollard::errors::Error| {
        format!("cannot reach {} at {socket}: {e}", engine_name(engine))
    };
    let silent = |e: bollard::errors::Error| {
        format!("{} at {socket} does not answer: {e}", engine_name(engine))
    };
    let negotiate = || async {
        let probe = Docker::connect_with_unix(&socket, 600, bollard::API_DEFAULT_VERSION)
            .map_err(unreachable)?;
        let answer = probe.version().await.map_err(silent)?;
        let spoken = answer
            .api_version
            .as_deref()
            .and_then(api_version)
            .ok_or_else(|| {
                format!(
                    "{} at {socket} gave no API version it speaks",
                    engine_name(engine)
                )
            })?;
        let api = if spoken < *bollard::API_DEFAULT_VERSION {
            spoken
        } else {
            *bollard::API_DEFAULT_VERSION
        };
        Ok((api, answer.version.unwrap_or_default()))
    };
    let ((api, version), learned) = AGREED.get_or_learn(&socket, negotiate).await?;
    let docker = Docker::connect_with_unix(&socket, 600, &api).map_err(unreachable)?;
    if !learned {
        docker.ping().await.map_err(silent)?;
    }
    Ok((docker, version))
}

/// `1.41` as a client version.
fn api_version(text: &str) -> Option<bollard::ClientVersion> {
    let (major, minor) = text.split_once('.')?;
    Some(bollard::ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    })
}

/// Learn what a run's sandbox will ask of `engine` (its API version and
/// description) in the background, while the run does its other planning:
/// a run that claimed a warm container knows its engine before its
/// provider's preflight asks.
pub fn warm_up(engine: Engine) {
    tokio::spawn(async move {
        let _ = connect(engine).await;
    });
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

/// What one call needs, taken out of the store before the first await
/// (`PluginState` is not `Sync`, so it cannot be borrowed across one).
pub(super) struct Ctx {
    pub(super) docker: Docker,
    engine: Option<Engine>,
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
            engine: self.containers.engine,
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
    pub(super) async fn owned(&self, reference: &str) -> Result<String, String> {
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
        match info.id {
            Some(id) if labelled_mine(&labels, &self.grant, &self.plugin) => Ok(id),
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
    async fn create(
        &self,
        spec: ContainerSpec,
    ) -> Result<(String, Option<SandboxLink>), (String, Option<String>)> {
        let mut binds = check_spec(&spec, &self.grant).map_err(|e| (e, None))?;
        let containment = &self.grant.containment;
        let pool = self.grant.pool.as_deref();
        let link_failed = |e| {
            (
                format!("cannot open the sandbox's link to the host: {e}"),
                None,
            )
        };
        let link = match (&containment.egress_log, &containment.gateway) {
            (None, None) => None,
            // A waiting container gets its link's directory; the run that
            // claims it serves the sockets.
            _ if matches!(pool, Some(PoolTicket::Fill(_))) => None,
            (egress, gateway) => Some(
                match pool {
                    Some(PoolTicket::Claim(Claimed {
                        record:
                            SlotRecord {
                                link: Some(dir), ..
                            },
                        ..
                    })) => SandboxLink::open_at(dir, egress.clone(), gateway.clone()),
                    _ => SandboxLink::open(&self.grant.run_id, egress.clone(), gateway.clone()),
                }
                .map_err(link_failed)?,
            ),
        };
        if let Some(link) = &link {
            binds.push(link.bind());
        }
        let waiting = match pool {
            Some(PoolTicket::Fill(slot)) => Some(slot),
            _ => None,
        };
        let linked = containment.egress_log.is_some() || containment.gateway.is_some();
        // A warm container with a link directory waits on a pipe there.
        let wake = match waiting.filter(|_| linked) {
            Some(slot) => {
                binds.push(link::prepare(&slot.link).map_err(link_failed)?);
                Some(pool::make_wake(&slot.link).map_err(link_failed)?)
            }
            None => None,
        };
        let mut labels = container_labels(spec.labels.clone(), &self.grant, &self.plugin);
        let requested_networks = spec.networks.clone();
        let mut networks = spec.networks.into_iter();
        let mut env: Vec<String> = spec
            .env
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let network_mode = if containment.decides_network() {
            // Only loopback; the proxy, if any, listens there.
            Some("none".to_string())
        } else {
            networks.next().or(spec.network_mode)
        };
        if containment.egress_log.is_some() {
            let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
            for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                env.push(format!("{key}={proxy}"));
            }
            env.push("NO_PROXY=localhost,127.0.0.1,::1".into());
            env.push("no_proxy=localhost,127.0.0.1,::1".into());
        }
        // A container that may be kept as a snapshot gets the run's env per
        // exec: the engine would copy its config's into the image.
        let (image, committable) = match &self.grant.snapshot {
            Some(snapshot) => snapshot
                .choose_image(&self.docker, &spec.image, spec.user.as_deref())
                .await
                .map_err(|e| (e, None))?,
            None => (spec.image.clone(), false),
        };
        let exec_env = if committable {
            std::mem::take(&mut env)
        } else {
            vec![]
        };
        let mut host_config = HostConfig {
            binds: Some(binds),
            network_mode,
            userns_mode: spec.userns,
            ..Default::default()
        };
        containment.limits.apply(&mut host_config);
        let mut body = ContainerCreateBody {
            image: Some(image),
            cmd: (!spec.cmd.is_empty()).then_some(spec.cmd),
            entrypoint: spec.entrypoint,
            user: spec.user,
            working_dir: spec.workdir,
            env: Some(env),
            labels: Some(spec.labels.into_iter().collect()),
            host_config: Some(host_config),
            ..Default::default()
        };
        // A warm container's forwarder is started when it is (`--later`), so
        // a claim saves that exec; which ports it serves is part of what
        // makes two containers the same.
        let waiting_forwarder = linked.then(|| {
            link::waiting_forwarder_argv(
                containment.egress_log.is_some(),
                containment.gateway.is_some(),
            )
        });
        // Only a pooled create pays for the digest.
        let fingerprint = pool
            .map(|_| {
                pool::fingerprint(
                    &body,
                    &requested_networks,
                    &self.plugin,
                    waiting_forwarder.as_deref(),
                )
            })
            .unwrap_or_default();
        // A sandbox of more than one container claims for its first.
        if let Some(PoolTicket::Claim(claim)) = pool
            && claim.outcome().is_none()
        {
            // Its config holds no env: the run's goes to each exec.
            let env = body
                .env
                .iter()
                .flatten()
                .filter_map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect();
            match pool::adopt(claim, &self.docker, &fingerprint, env).await {
                Ok(id) => {
                    // Its forwarder runs since it was started.
                    return match self.contain(&id, None).await {
                        Ok(()) => Ok((id, link)),
                        Err(e) => Err((e, Some(id))),
                    };
                }
                Err(why) => {
                    claim.missed(why);
                    let _ = force_remove(&self.docker, &claim.record.container).await;
                }
            }
        }
        if let Some(slot) = waiting {
            // The claiming run's env goes to each exec.
            body.env = Some(vec![]);
            let Some(mut main) = body.entrypoint.take() else {
                return Err((
                    "a warm container needs its provider to name its first process (an entrypoint)"
                        .into(),
                    None,
                ));
            };
            main.extend(body.cmd.take().unwrap_or_default());
            let pipe = wake
                .as_ref()
                .map(|_| format!("{}/{}", link::MOUNT, pool::WAKE));
            body.entrypoint = Some(crate::capability::pool::waiting_entrypoint(
                slot.idle,
                pipe.as_deref(),
                main,
            ));
            labels.insert(POOL_LABEL.into(), slot.dir.display().to_string());
        }
        body.labels = Some(labels);
        let serial = match self.engine {
            Some(engine @ Engine::Podman)
                if keep_id::needs_lock(
                    body.host_config
                        .as_ref()
                        .and_then(|h| h.userns_mode.as_deref()),
                ) =>
            {
                KeepIdLock::acquire(&engine_socket(engine)).await
            }
            _ => None,
        };
        let created = self
            .docker
            .create_container(None::<CreateContainerOptions>, body)
            .await;
        drop(serial);
        let id = created
            .map_err(|e| {
                let e = format!("cannot create a container from `{}`: {e}", spec.image);
                let e = match containment.limits.disk {
                    Some(_) if e.contains("storage-opt") || e.contains("storage opt") => format!(
                        "{e}: disk= needs a storage driver that can cap a container's size (overlay2 on xfs mounted with pquota, btrfs or zfs)"
                    ),
                    _ => e,
                };
                (e, None)
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
        let contained = match started.await {
            Ok(()) => self.contain(&id, link.as_ref()).await,
            Err(e) => Err(e),
        };
        // A warm container has no link yet (its claim serves it), but its
        // forwarder starts now.
        let (contained, forwarder) = match (contained, waiting.and(waiting_forwarder)) {
            (Ok(()), Some(argv)) => match start_forwarder(&self.docker, &id, argv).await {
                Ok(exec) => (Ok(()), Some(exec)),
                Err(e) => (Err(e), None),
            },
            (contained, _) => (contained, None),
        };
        match contained {
            Ok(()) => {
                if let Some(snapshot) = self.grant.snapshot.as_ref().filter(|_| committable) {
                    snapshot.created(&id, exec_env);
                }
                if let Some(slot) = waiting {
                    let engine = engine_name(self.engine.unwrap_or(Engine::Docker));
                    slot.created(SlotRecord {
                        container: id.clone(),
                        engine: engine.into(),
                        fingerprint,
                        until: 0,
                        link: forwarder.is_some().then(|| slot.link.clone()),
                        forwarder,
                        wake,
                        cluster: None,
                    });
                }
                Ok((id, link))
            }
            Err(e) => Err((e, Some(id))),
        }
    }

    /// An exec's env: the run's first when the container holds none of it
    /// (see `Snapshot::exec_env`), then the exec's own, which wins.
    fn exec_env(&self, container: &str, own: Vec<(String, String)>) -> Vec<(String, String)> {
        let mut env = match (&self.grant.snapshot, self.grant.pool.as_deref()) {
            (Some(snapshot), _) => snapshot.exec_env(container),
            (None, Some(PoolTicket::Claim(claim))) => claim.exec_env(container).unwrap_or_default(),
            _ => return own,
        };
        env.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
        env.extend(own);
        env
    }

    /// Check the engine kept the limits (rootless engines on cgroup v1
    /// drop them with a warning: a limit not in force is refused, never
    /// ignored), then start the link's forwarder when the container has a
    /// link.
    async fn contain(&self, id: &str, link: Option<&SandboxLink>) -> Result<(), String> {
        let containment = &self.grant.containment;
        if !containment.limits.is_empty() {
            let info = self
                .docker
                .inspect_container(id, None)
                .await
                .map_err(|e| format!("cannot inspect the new container: {e}"))?;
            let kept = info.host_config.unwrap_or_default();
            let limits = containment.limits;
            let dropped = [
                (
                    "memory",
                    limits.memory.is_some()
                        && !containment.shared_memory
                        && kept.memory.unwrap_or(0) == 0,
                ),
                (
                    "pids",
                    limits.pids.is_some() && kept.pids_limit.unwrap_or(0) <= 0,
                ),
                (
                    "cpus",
                    limits.cpus.is_some() && kept.nano_cpus.unwrap_or(0) == 0,
                ),
            ];
            if let Some((key, _)) = dropped.iter().find(|(_, dropped)| *dropped) {
                return Err(format!(
                    "the engine did not apply {key}= to the container (a rootless engine on cgroup v1 cannot); \
                     run with a rootful engine or on cgroup v2, or drop {key}="
                ));
            }
        }
        if let Some(link) = link {
            start_forwarder(&self.docker, id, link.forwarder_argv()).await?;
        }
        Ok(())
    }

    async fn copy_in(
        &self,
        container: &str,
        host_path: &str,
        container_path: &str,
    ) -> Result<(), String> {
        let id = self.owned(container).await?;
        let source = readable_source(host_path, &self.grant.readable)?;
        self.grant.outside_git_dir(&source)?;
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
        let target = writable_target(host_path, &self.grant.writable)?;
        self.grant.outside_git_dir(&target)?;
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
pub(crate) fn first_file(tar: &[u8]) -> Result<Vec<u8>, String> {
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

/// A tar archive holding `host` (file or directory) under the name `name`.
pub(crate) fn archive(host: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    if host.is_dir() {
        builder.append_dir_all(name, host)?;
    } else {
        builder.append_path_with_name(host, name)?;
    }
    builder.into_inner()
}

/// The API version `/info` is asked at beside the negotiation: the one
/// Debian's docker and podman speak. An engine that no longer does (Docker
/// 29 speaks 1.44 and up) is asked again at the agreed version.
const EARLY_INFO_API: bollard::ClientVersion = bollard::ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// Connect to `engine` and describe it and the host user. The description
/// is asked once per socket and process (`/info` is 6-35 ms on dockerd);
/// it does not change while the engine answers. On first contact `/info`
/// is asked beside `/version` rather than after it, at [`EARLY_INFO_API`].
async fn connect(engine: Engine) -> Result<(Docker, EngineInfo), String> {
    static DESCRIBED: PerSocket<EngineInfo> = PerSocket::new();
    let socket = engine_socket(engine);
    let mut fresh = None;
    let agreed_here = &mut fresh;
    let at = &socket;
    let learn = || async move {
        let early = async {
            let docker = Docker::connect_with_unix(at, 600, &EARLY_INFO_API).ok()?;
            docker.info().await.ok()
        };
        let (agreed, early) = tokio::join!(agree(engine), early);
        let (docker, version) = agreed?;
        let info = match early {
            Some(info) => Ok(info),
            None => docker.info().await,
        };
        let info = describe(engine, version, info);
        *agreed_here = Some(docker);
        Ok(info)
    };
    let (info, _) = DESCRIBED.get_or_learn(&socket, learn).await?;
    let docker = match fresh {
        Some(docker) => docker,
        None => agree(engine).await?.0,
    };
    Ok((docker, info))
}

fn describe(
    engine: Engine,
    version: String,
    info: Result<bollard::models::SystemInfo, bollard::errors::Error>,
) -> EngineInfo {
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
    EngineInfo {
        version,
        host_uid,
        host_gid,
        rootless,
    }
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
                Ok((id, link)) => {
                    self.containers.created.push(id.clone());
                    if let Some(link) = link {
                        self.containers.links.insert(id.clone(), link);
                    }
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
                match ctx.owned(&container).await {
                    Ok(id) => {
                        let options = ExecOptions {
                            env: ctx.exec_env(&id, options.env),
                            ..options
                        };
                        exec(&ctx.docker, &brokered, &id, options, tx).await
                    }
                    Err(e) => Err(e),
                }
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
                match ctx.owned(&container).await {
                    Ok(id) => {
                        let options = InteractiveExecOptions {
                            env: ctx.exec_env(&id, options.env),
                            ..options
                        };
                        exec_interactive(&ctx.docker, &brokered, &id, options).await
                    }
                    Err(e) => Err(e),
                }
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
        let r = r.map(|id| {
            self.containers.created.retain(|c| c != &id);
            self.containers.links.remove(&id);
        });
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
