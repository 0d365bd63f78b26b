//! What a plugin may ask of the containers capability, decided without an
//! engine: the grant, everything `create` refuses, the host paths the file
//! calls may read and write, and the labels that say whose a container is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::containment::Containment;
use super::snapshot::Snapshot;
use super::{ContainerSpec, Mount};
use crate::capability::link::MOUNT as LINK_MOUNT;
use crate::capability::pool::PoolTicket;

/// Label keys the host sets on every container it creates for a plugin.
pub const RUN_LABEL: &str = "sanddune.run";
pub const PLUGIN_LABEL: &str = "sanddune.plugin";
/// The sandbox's name (the run's name or branch), for people and `gc`.
pub const NAME_LABEL: &str = "sanddune.name";
/// The creating sanddune process (pid and start time), so `sanddune gc` can
/// tell a crashed run's containers from a live one's.
pub const OWNER_LABEL: &str = "sanddune.owner";

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
    /// The user's limits and egress policy, applied to every container.
    pub containment: Containment,
    /// The agent git dir laid over the repository's (ADR 0025); set for
    /// every sandbox on a git worktree.
    pub git_shield: Option<GitShield>,
    /// The sandbox's prepared snapshot, under `snapshot=auto`: its first
    /// container may start from one, or be kept as one.
    pub snapshot: Option<Arc<Snapshot>>,
    /// The sandbox's warm container (ADR 0037): a pool slot its create
    /// fills, or the one its run claimed.
    pub pool: Option<Arc<PoolTicket>>,
}

/// What keeps the repository's git dir out of the sandbox's reach: every
/// container gets the agent git dir where git looks for the worktree's,
/// the repository's objects read-only beside it, and a linked worktree's
/// `.git` file read-only; a mount of the git dir itself is made read-only,
/// and the file calls neither read nor write inside it (ADR 0025). A
/// sandbox record keeps it, for a jail that `attach` opens later.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitShield {
    /// The repository's common git dir, canonical.
    pub git_dir: PathBuf,
    /// The agent git dir on the host.
    pub agent_git_dir: PathBuf,
    /// The host path where git looks for the worktree's git dir.
    pub target: PathBuf,
    /// A linked worktree's `.git` file (host file, and the worktree's
    /// `.git` path it covers).
    pub git_file: Option<(PathBuf, PathBuf)>,
    /// Where the repository's objects appear in the agent git dir.
    pub shared_objects: String,
    /// Host directories in the worktree the sandbox sees empty (sanddune's
    /// own, under head), through `empty_dir` laid read-only over them.
    pub hidden: Vec<PathBuf>,
    pub empty_dir: PathBuf,
}

impl ContainerGrant {
    /// Whether `copy-in` may read the host path `path`, as it checks.
    pub fn may_read(&self, path: &Path) -> bool {
        path.to_str().is_some_and(|p| {
            readable_source(p, &self.readable).is_ok_and(|p| self.outside_git_dir(&p).is_ok())
        })
    }

    /// Whether `copy-file-out` may write the host path `path`, as it checks.
    pub fn may_write(&self, path: &Path) -> bool {
        path.to_str().is_some_and(|p| {
            writable_target(p, &self.writable).is_ok_and(|p| self.outside_git_dir(&p).is_ok())
        })
    }

    /// Refuses a canonical host path inside the shielded git dir, or one
    /// holding it: what the file calls may not read (its config may hold
    /// credentials) or write.
    pub(crate) fn outside_git_dir(&self, path: &Path) -> Result<(), String> {
        match &self.git_shield {
            Some(shield)
                if path.starts_with(&shield.git_dir) || shield.git_dir.starts_with(path) =>
            {
                Err(format!(
                    "refused: host path `{}` is or holds the repository's git dir, which no sandbox reads or writes",
                    path.display()
                ))
            }
            _ => Ok(()),
        }
    }
}

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

/// The labels a new container carries: the plugin's own (`check_spec` has
/// refused any `sanddune.` one) and the host's, which say whose it is.
pub(super) fn container_labels(
    requested: Vec<(String, String)>,
    grant: &ContainerGrant,
    plugin: &str,
) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = requested.into_iter().collect();
    labels.insert(RUN_LABEL.into(), grant.run_id.clone());
    labels.insert(PLUGIN_LABEL.into(), plugin.to_string());
    labels.insert(OWNER_LABEL.into(), owner_id());
    labels.insert(NAME_LABEL.into(), grant.name.clone());
    labels
}

/// Whether a container's labels say `plugin` created it for this grant's run:
/// the only containers a plugin may touch.
pub(super) fn labelled_mine(
    labels: &HashMap<String, String>,
    grant: &ContainerGrant,
    plugin: &str,
) -> bool {
    labels.get(RUN_LABEL) == Some(&grant.run_id)
        && labels.get(PLUGIN_LABEL).map(String::as_str) == Some(plugin)
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
/// What passes comes back as the engine's bind strings.
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
    // Under an egress policy the host decides the network: any the
    // provider names would be a way around it.
    let egress = &grant.containment.egress;
    if grant.containment.decides_network()
        && let Some(network) = spec.networks.first().or(spec.network_mode.as_ref())
    {
        return Err(format!(
            "refused: network `{network}`: the sandbox's egress policy (egress={egress}) decides its network"
        ));
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
    checked_binds(&spec.mounts, grant)?
        .iter()
        .map(Bind::engine_string)
        .collect()
}

/// The binds `mounts` ask for, each checked against the grant, with the
/// git dir shielded (ADR 0025): what a container or a jail gets.
pub(crate) fn checked_binds(mounts: &[Mount], grant: &ContainerGrant) -> Result<Vec<Bind>, String> {
    let mut binds = Vec::new();
    for m in mounts {
        check_bind_paths(&m.source, &m.target)?;
        if !m.target.starts_with('/') {
            return Err(format!(
                "refused: bind mount target `{}` is not an absolute path",
                m.target
            ));
        }
        let target = Path::new(&m.target);
        if target
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(format!(
                "refused: bind mount target `{}` holds `..`",
                m.target
            ));
        }
        if target.starts_with(LINK_MOUNT) {
            return Err(format!(
                "refused: bind mount target `{}`: {LINK_MOUNT} is where the host links the sandbox to its egress proxy and credential gateway",
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
        binds.push(Bind {
            source,
            target: PathBuf::from(&m.target),
            read_only: m.read_only,
            relabel: m.selinux_relabel,
        });
    }
    if let Some(shield) = &grant.git_shield {
        shield_git_dir(&mut binds, shield);
    }
    Ok(binds)
}

/// A bind is `source:target:options`: a `:` or `,` in a path would smuggle
/// in options or a second target.
fn check_bind_paths(source: &str, target: &str) -> Result<(), String> {
    if [source, target]
        .iter()
        .any(|p| p.contains(':') || p.contains(','))
    {
        return Err(format!(
            "refused: bind mount `{source}` -> `{target}`: paths may not contain `:` or `,`"
        ));
    }
    Ok(())
}

/// One bind mount, checked.
pub(crate) struct Bind {
    pub(crate) source: PathBuf,
    pub(crate) target: PathBuf,
    pub(crate) read_only: bool,
    relabel: bool,
}

impl Bind {
    fn engine_string(&self) -> Result<String, String> {
        let (source, target) = (self.source.display(), self.target.display());
        check_bind_paths(&source.to_string(), &target.to_string())?;
        let mut options = vec![if self.read_only { "ro" } else { "rw" }];
        if self.relabel {
            options.push("z");
        }
        Ok(format!("{source}:{target}:{}", options.join(",")))
    }
}

/// Where the host path `path` appears in the container: under each bind
/// whose source holds it most closely (a worktree can be mounted twice: at
/// its host path and at a dev container's workspace folder).
fn container_paths(binds: &[Bind], path: &Path) -> Vec<PathBuf> {
    let holding = binds.iter().filter(|b| path.starts_with(&b.source));
    let Some(depth) = holding.clone().map(|b| b.source.components().count()).max() else {
        return vec![];
    };
    holding
        .filter(|b| b.source.components().count() == depth)
        .map(|b| {
            b.target
                .join(path.strip_prefix(&b.source).expect("checked"))
        })
        .collect()
}

/// Apply [`GitShield`] to a container's binds.
fn shield_git_dir(binds: &mut Vec<Bind>, shield: &GitShield) {
    let relabel = binds.iter().any(|b| b.relabel);
    let git_dir = &shield.git_dir;
    let mut added = Vec::new();
    for bind in binds.iter_mut() {
        if bind.source.starts_with(git_dir) {
            bind.read_only = true;
        } else if git_dir.starts_with(&bind.source) && !shield.target.starts_with(git_dir) {
            // A linked worktree's sandbox that mounts a parent of the git
            // dir sees the git dir read-only.
            added.push(Bind {
                source: git_dir.clone(),
                target: bind
                    .target
                    .join(git_dir.strip_prefix(&bind.source).expect("checked")),
                read_only: true,
                relabel,
            });
        }
    }
    binds.extend(added);
    let mut targets = container_paths(binds, &shield.target);
    if targets.is_empty() {
        targets.push(shield.target.clone());
    }
    for target in &targets {
        binds.push(Bind {
            source: shield.git_dir.join("objects"),
            target: target.join(&shield.shared_objects),
            read_only: true,
            relabel,
        });
    }
    for hidden in &shield.hidden {
        for at in container_paths(binds, hidden) {
            binds.push(Bind {
                source: shield.empty_dir.clone(),
                target: at,
                read_only: true,
                relabel,
            });
        }
    }
    if let Some((file, dot_git)) = &shield.git_file {
        for at in container_paths(binds, dot_git) {
            binds.push(Bind {
                source: file.clone(),
                target: at,
                read_only: true,
                relabel,
            });
        }
    }
    for target in targets {
        binds.push(Bind {
            source: shield.agent_git_dir.clone(),
            target,
            read_only: false,
            relabel,
        });
    }
}

/// The host path `copy-in` may read, canonical: inside the grant's readable
/// paths once symlinks are resolved.
pub(crate) fn readable_source(path: &str, readable: &[PathBuf]) -> Result<PathBuf, String> {
    let source = canonical(path)?;
    if !within(&source, readable) {
        return Err(format!(
            "refused: reading host path `{path}`: only the worktree, the git dir, the declared mounts and the scratch dir are readable"
        ));
    }
    Ok(source)
}

/// The host path `copy-file-out` may write: its nearest existing ancestor is
/// inside the grant, and it is not a symlink (which could point anywhere).
pub(crate) fn writable_target(path: &str, writable: &[PathBuf]) -> Result<PathBuf, String> {
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
        || !within(&existing, writable)
    {
        return Err(format!(
            "refused: writing host path `{path}`: only the worktree and the scratch dir are writable"
        ));
    }
    Ok(existing.join(rest))
}

/// Split an absolute container path into (parent, file name).
pub(crate) fn split_container_path(path: &str) -> Result<(String, String), String> {
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

/// What `create` and the file calls refuse, checked without an engine.
#[cfg(test)]
mod tests {
    use super::super::Mount;
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
            containment: Containment::default(),
            git_shield: None,
            snapshot: None,
            pool: None,
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
                    mounts: vec![mount(&f.worktree, "/run/sanddune/proxy.sock")],
                    ..Default::default()
                },
                "is where the host links the sandbox to its egress proxy and credential gateway",
            ),
            (
                ContainerSpec {
                    mounts: vec![mount(&f.worktree, "/run/x/../sanddune")],
                    ..Default::default()
                },
                "holds `..`",
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
    fn a_worktree_mounted_twice_is_shielded_at_both_places() {
        // Head: the repository is the worktree, its git dir inside it.
        let f = fixture();
        let git_dir = f.worktree.join(".git");
        std::fs::create_dir_all(git_dir.join("objects")).unwrap();
        std::fs::create_dir_all(f.worktree.join(".sanddune")).unwrap();
        let agent = f.outside.join("agent-git");
        let empty = f.outside.join("empty");
        let grant = ContainerGrant {
            git_shield: Some(GitShield {
                git_dir: git_dir.clone(),
                agent_git_dir: agent.clone(),
                target: git_dir.clone(),
                git_file: None,
                shared_objects: "objects".into(),
                hidden: vec![f.worktree.join(".sanddune")],
                empty_dir: empty.clone(),
            }),
            ..f.grant.clone()
        };
        let wt = f.worktree.display().to_string();
        let spec = ContainerSpec {
            image: "img".into(),
            mounts: vec![
                Mount {
                    read_only: false,
                    selinux_relabel: false,
                    ..mount(&f.worktree, &wt)
                },
                Mount {
                    read_only: false,
                    selinux_relabel: false,
                    ..mount(&f.worktree, "/workspaces/proj")
                },
            ],
            ..Default::default()
        };
        let binds = check_spec(&spec, &grant).unwrap();
        let (g, a, e) = (git_dir.display(), agent.display(), empty.display());
        for at in [wt.as_str(), "/workspaces/proj"] {
            for expected in [
                format!("{a}:{at}/.git:rw"),
                format!("{g}/objects:{at}/.git/objects:ro"),
                format!("{e}:{at}/.sanddune:ro"),
            ] {
                assert!(binds.contains(&expected), "{expected} not in {binds:?}");
            }
        }
    }

    #[test]
    fn create_accepts_a_mount_inside_a_granted_source_and_private_namespaces() {
        let f = fixture();
        std::fs::create_dir_all(f.worktree.join("sub/dir")).unwrap();
        let spec = ContainerSpec {
            pid_mode: Some("private".into()),
            ipc_mode: Some("shareable".into()),
            network_mode: Some("none".into()),
            userns: Some("keep-id".into()),
            mounts: vec![Mount {
                read_only: false,
                ..mount(&f.worktree.join("sub/dir"), "/data")
            }],
            ..Default::default()
        };
        assert_eq!(
            check_spec(&spec, &f.grant).unwrap(),
            [format!("{}/sub/dir:/data:rw,z", f.worktree.display())]
        );
        // The host network by either field is refused, not dropped.
        let host_net = ContainerSpec {
            network_mode: Some("host".into()),
            ..spec.clone()
        };
        let err = check_spec(&host_net, &f.grant).unwrap_err();
        assert!(err.starts_with("refused: network-mode=host"), "{err}");
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
            assert_eq!(writable_target(&path, &f.grant.writable).unwrap(), want);
            assert!(f.grant.may_write(Path::new(&path)), "{path}");
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
            let err = writable_target(&path, &f.grant.writable).unwrap_err();
            assert!(err.contains(want), "{path}: {err}");
            assert!(!f.grant.may_write(Path::new(&path)), "{path}");
        }
    }

    #[test]
    fn copy_in_reads_only_inside_the_grant() {
        let f = fixture();
        std::fs::write(f.worktree.join("file"), "x").unwrap();
        std::fs::write(f.outside.join("secret"), "x").unwrap();
        let wt = f.worktree.display().to_string();
        assert_eq!(
            readable_source(&format!("{wt}/file"), &f.grant.readable).unwrap(),
            f.worktree.join("file")
        );
        assert!(f.grant.may_read(&f.worktree.join("file")));
        let refused = [
            (
                format!("{}/secret", f.outside.display()),
                "refused: reading",
            ),
            // A symlink inside the worktree is followed, then judged.
            (format!("{wt}/link-out/secret"), "refused: reading"),
            (format!("{wt}/../elsewhere/secret"), "refused: reading"),
            (format!("{wt}/missing"), "host path"),
            ("relative/file".to_string(), "not an absolute host path"),
        ];
        for (path, want) in refused {
            let err = readable_source(&path, &f.grant.readable).unwrap_err();
            assert!(err.contains(want), "{path}: {err}");
            assert!(!f.grant.may_read(Path::new(&path)), "{path}");
        }
    }

    #[test]
    fn labels_say_whose_a_container_is() {
        let f = fixture();
        let labels = container_labels(vec![("app".into(), "x".into())], &f.grant, "docker");
        assert_eq!(labels["app"], "x");
        assert_eq!(labels[RUN_LABEL], "r");
        assert_eq!(labels[PLUGIN_LABEL], "docker");
        assert_eq!(labels[NAME_LABEL], "n");
        assert_eq!(labels[OWNER_LABEL], owner_id());
        assert!(labelled_mine(&labels, &f.grant, "docker"));
        // Another plugin, another run, or no labels at all: not mine.
        assert!(!labelled_mine(&labels, &f.grant, "podman"));
        let other_run = ContainerGrant {
            run_id: "other".into(),
            ..f.grant.clone()
        };
        assert!(!labelled_mine(&labels, &other_run, "docker"));
        assert!(!labelled_mine(&HashMap::new(), &f.grant, "docker"));
    }

    #[test]
    fn the_owner_is_alive_only_while_its_process_runs() {
        assert!(owner_alive(&owner_id()));
        // The same pid with another start time is a reused pid.
        let start = process_start(std::process::id()).unwrap();
        assert!(!owner_alive(&format!(
            "{}:{}",
            std::process::id(),
            start + 1
        )));
        let no_such_pid = format!("{}:1", u32::MAX);
        for bad in ["", "123", "x:1", "1:x", no_such_pid.as_str()] {
            assert!(!owner_alive(bad), "{bad}");
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
