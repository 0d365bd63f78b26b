//! What a sandbox's provider instance may do: its grants, from what it
//! may ask for and this sandbox's paths (the worktree, the scratch dir and
//! the user's declared mounts).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::spec::{ProviderConfig, SandboxSpec};
use crate::capability::containers::snapshot::{Snapshot, SnapshotOptions};
use crate::capability::containers::{Containment, GitShield};
use crate::capability::pool::PoolOptions;
use crate::capability::{
    Capabilities, ContainerGrant, DirectoryAccess, Grants, HttpGrant, PodGrant,
};
use crate::error::{Error, Result};
use crate::plugin::api::ProviderInfo;

/// What a provider granted `caps` gets in one sandbox: `caps` resolved
/// against its worktree, scratch dir and declared mounts, with outgoing
/// HTTP to `http_origins`.
pub(super) fn for_sandbox(
    caps: &Capabilities,
    http_origins: Result<Vec<String>>,
    spec: &SandboxSpec,
    scratch: Option<&Path>,
    resolved: &Resolved,
) -> Result<Grants> {
    let (worktree, env) = (spec.worktree.as_path(), &spec.env);
    let containers = if caps.containers {
        let mut grant = container_grant(
            spec,
            scratch,
            &resolved.mounts,
            resolved.containment.clone(),
        )?;
        grant.snapshot = resolved.snapshot.as_ref().map(|options| {
            Arc::new(Snapshot::new(
                options,
                &spec.setup,
                &spec.worktree,
                &spec.git_dir,
            ))
        });
        grant.pool = spec.pool.clone();
        Some(grant)
    } else {
        None
    };
    let jail = if caps.jail {
        Some(container_grant(
            spec,
            scratch,
            &resolved.mounts,
            resolved.containment.clone(),
        )?)
    } else {
        None
    };
    let pods = if caps.pods {
        Some(pod_grant(spec, scratch, &resolved.config)?)
    } else {
        None
    };
    let mut directories = Vec::new();
    match caps.worktree {
        DirectoryAccess::None => {}
        DirectoryAccess::ReadOnly => directories.push((worktree.to_path_buf(), false)),
        DirectoryAccess::ReadWrite => directories.push((worktree.to_path_buf(), true)),
    }
    Ok(Grants {
        programs: caps.programs.clone(),
        scratch_dir: scratch.map(Path::to_path_buf),
        directories,
        env: env
            .iter()
            .filter(|(k, _)| caps.env_keys.contains(k))
            .cloned()
            .collect(),
        containers,
        pods,
        jail,
        http: {
            let origins = http_origins?;
            if origins.is_empty() {
                None
            } else {
                Some(HttpGrant::parse(&origins).map_err(Error::input)?)
            }
        },
    })
}

/// A provider's options after the host took its part of them.
pub(super) struct Resolved {
    /// What the provider is told.
    pub(super) config: ProviderConfig,
    /// The declared mounts' sources, granted to the containers capability.
    pub(super) mounts: Vec<PathBuf>,
    /// The limits and egress policy a container provider's grant applies.
    pub(super) containment: Containment,
    /// The snapshot options, under `snapshot=auto`.
    pub(super) snapshot: Option<SnapshotOptions>,
}

/// Resolve the user's declared mounts (see [`resolve_mounts`]) and, for a
/// provider with the containers capability, take the containment keys
/// (`egress`, `cpus`, `memory`, `pids`, `disk`) out of its options: the host
/// applies them. Another provider keeps a key it declares as an option of
/// its own (vercel's and daytona's `egress`); one it does not is refused,
/// before anything is created, rather than silently not enforced.
pub(super) fn resolve(
    spec: &SandboxSpec,
    caps: &Capabilities,
    info: &ProviderInfo,
) -> Result<Resolved> {
    let (mut config, mounts) = resolve_mounts(&spec.config)?;
    // The run reads the pool options itself: it claims before the create.
    let (snapshot, _pool) = take_prepared(&mut config, caps, info)?;
    let mut containment = take_containment(&mut config, caps, info)?;
    if caps.containers {
        containment.share_memory(spec.side_by_side);
    }
    if caps.containers || caps.jail {
        containment.gateway = spec.gateway.clone();
    }
    Ok(Resolved {
        config,
        mounts,
        containment,
        snapshot,
    })
}

/// The snapshot and pool options of `config`, taken out of it (see
/// [`take_snapshot`], [`take_pool`]); the two together are refused.
pub(super) fn take_prepared(
    config: &mut ProviderConfig,
    caps: &Capabilities,
    info: &ProviderInfo,
) -> Result<(Option<SnapshotOptions>, Option<PoolOptions>)> {
    let snapshot = take_snapshot(config, caps, info)?;
    let pool = take_pool(config, caps, info)?;
    if pool.is_some() && snapshot.is_some() {
        return Err(Error::input(format!(
            "sandbox provider `{}`: pool=N and snapshot=auto do not go together yet: a warm container is made before a run's set-up, a snapshot after it; choose one",
            info.name
        )));
    }
    Ok((snapshot, pool))
}

/// The snapshot options of `config`, taken out of it for a provider with
/// the containers capability (the host commits its container, ADR 0035)
/// or one that keeps snapshots itself (ADR 0038); refused for any other.
fn take_snapshot(
    config: &mut ProviderConfig,
    caps: &Capabilities,
    info: &ProviderInfo,
) -> Result<Option<SnapshotOptions>> {
    if !caps.containers && !info.snapshots {
        if let Some((key, value)) = config.iter().find(|(k, _)| SnapshotOptions::is_key(k)) {
            return Err(Error::input(format!(
                "sandbox provider `{}` cannot keep a snapshot ({key}={value}): it keeps none itself (its contract is older than 0.8, or it says so) and runs no containers through the host; nothing was created",
                info.name
            )));
        }
        return Ok(None);
    }
    SnapshotOptions::take_from(config)
        .map_err(|e| Error::input(format!("sandbox provider `{}`: {e}", info.name)))
}

/// The pool options of `config` (ADR 0037), taken out of it for a provider
/// with the containers or the pods capability; refused for any other, whose
/// sandbox the host cannot start ahead.
fn take_pool(
    config: &mut ProviderConfig,
    caps: &Capabilities,
    info: &ProviderInfo,
) -> Result<Option<PoolOptions>> {
    if !caps.containers && !caps.pods {
        if let Some((key, value)) = config.iter().find(|(k, _)| PoolOptions::is_key(k)) {
            return Err(Error::input(format!(
                "sandbox provider `{}` cannot keep warm sandboxes ({key}={value}): only providers that run containers or pods through the host (docker, podman, kubernetes) can; nothing was created",
                info.name
            )));
        }
        return Ok(None);
    }
    PoolOptions::take_from(config)
        .map_err(|e| Error::input(format!("sandbox provider `{}`: {e}", info.name)))
}

/// The containment keys of `config`, taken out of it for a provider with
/// the containers or the jail capability; refused for one that neither has
/// one nor takes the key itself. A jail takes the egress policy only.
pub(super) fn take_containment(
    config: &mut ProviderConfig,
    caps: &Capabilities,
    info: &ProviderInfo,
) -> Result<Containment> {
    let refuse = |why: String| Error::input(format!("sandbox provider `{}`: {why}", info.name));
    if caps.jail && !caps.containers {
        let containment = Containment::take_from(config).map_err(refuse)?;
        if !containment.limits.is_empty() {
            return Err(refuse(format!(
                "cannot enforce {}: a jail's limits need a cgroup your user may manage, which sanddune does not set up for a jail yet; use docker or podman for limits; nothing was created",
                containment.limits
            )));
        }
        return Ok(containment);
    }
    if !caps.containers {
        if let Some((key, value)) = config
            .iter()
            .find(|(k, _)| Containment::is_key(k) && !info.config.iter().any(|o| &o.name == k))
        {
            return Err(refuse(format!(
                "cannot enforce {key}={value}: only providers that run containers through the host (docker, podman) and those that take `{key}` as an option of their own contain a sandbox that way; nothing was created"
            )));
        }
        return Ok(Containment::default());
    }
    let containment = Containment::take_from(config).map_err(refuse)?;
    // The built-in providers' `network=` would be refused at create: say so
    // before anything exists.
    if containment.decides_network()
        && let Some((_, network)) = config.iter().find(|(k, _)| k == "network")
    {
        return Err(refuse(format!(
            "network={network} and egress={} do not go together: under an egress policy the host decides the sandbox's network",
            containment.egress
        )));
    }
    Ok(containment)
}

/// The user's declared bind mounts: every `mount` entry of the provider's
/// config (`SRC:DST[:ro]`). The host resolves SRC (`~`, relative to the
/// current directory) before the provider sees it, and grants exactly these
/// sources to the containers capability besides the worktree and git dir.
fn resolve_mounts(config: &[(String, String)]) -> Result<(ProviderConfig, Vec<PathBuf>)> {
    let mut sources = Vec::new();
    let mut resolved = Vec::with_capacity(config.len());
    for (key, value) in config {
        if key != "mount" {
            resolved.push((key.clone(), value.clone()));
            continue;
        }
        let (source, rest) = value.split_once(':').ok_or_else(|| {
            Error::input(format!(
                "mount `{value}`: expected SOURCE:TARGET or SOURCE:TARGET:ro"
            ))
        })?;
        let expanded = match source.strip_prefix('~') {
            Some(tail) if tail.is_empty() || tail.starts_with('/') => {
                let home = std::env::var_os("HOME")
                    .ok_or_else(|| Error::input(format!("mount `{value}`: HOME is not set")))?;
                PathBuf::from(home).join(tail.trim_start_matches('/'))
            }
            _ => PathBuf::from(source),
        };
        let absolute = std::fs::canonicalize(&expanded).map_err(|e| {
            Error::input(format!(
                "mount `{value}`: source {} does not exist ({e})",
                expanded.display()
            ))
        })?;
        resolved.push((key.clone(), format!("{}:{rest}", absolute.display())));
        sources.push(absolute);
    }
    Ok((resolved, sources))
}

/// The containers grant for one sandbox: what its containers may mount,
/// what `copy-in` may read and `copy-file-out` may write.
fn container_grant(
    spec: &SandboxSpec,
    scratch: Option<&Path>,
    mounts: &[PathBuf],
    containment: Containment,
) -> Result<ContainerGrant> {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p)
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot resolve {}: {e}", p.display())))
    };
    let mut mount_sources = vec![canonical(&spec.worktree)?, canonical(&spec.git_dir)?];
    mount_sources.extend(mounts.iter().cloned());
    let mut writable = vec![canonical(&spec.worktree)?];
    let mut readable = mount_sources.clone();
    if let Some(dir) = scratch {
        writable.push(canonical(dir)?);
        readable.push(canonical(dir)?);
    }
    let git_shield = match &spec.git_shield {
        Some(shield) => Some(GitShield {
            git_dir: canonical(&shield.git_dir)?,
            ..shield.clone()
        }),
        None => None,
    };
    Ok(ContainerGrant {
        git_shield,
        run_id: spec.run_id.clone(),
        name: spec.name.clone(),
        mount_sources,
        readable,
        writable,
        containment,
        snapshot: None,
        pool: None,
    })
}

/// The pods grant for one sandbox: the cluster the user chose with the
/// provider's `context` and `namespace` options (read here, so the provider
/// cannot pick another), what `copy-in` may read and `copy-file-out` write.
fn pod_grant(
    spec: &SandboxSpec,
    scratch: Option<&Path>,
    config: &ProviderConfig,
) -> Result<PodGrant> {
    let option = |key: &str| {
        config
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let files = container_grant(spec, scratch, &[], Containment::default())?;
    Ok(PodGrant {
        run_id: spec.run_id.clone(),
        name: spec.name.clone(),
        context: option("context"),
        namespace: option("namespace"),
        readable: files.readable,
        writable: files.writable,
        pool: spec.pool.clone(),
    })
}
