//! The capability's calls, as the bindings make them on `PluginState`: each
//! checks the grant and that the pod is this plugin's for this run, then
//! does the work, and a refusal or failure goes to the host's log too.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use tokio::sync::mpsc;

use super::cluster::{self, Cluster};
use super::exec::{exec, exec_bytes, exec_interactive};
use super::lifecycle::{self, claims_resource};
use super::policy::{labelled_mine, labels_for, pod_for, selector};
use super::{ClusterInfo, ExecOptions, ExecStatus, PodGrant, PodSpec, pool};
use crate::capability::containers::{
    archive, first_file, readable_source, split_container_path, writable_target,
};
use crate::capability::output::OutputLine;
use crate::capability::pool::PoolTicket;
use crate::capability::{Brokered, PluginState};

/// The label the agent-sandbox controller puts on a claimed sandbox's pod.
const CLAIM_UID_LABEL: &str = "agents.x-k8s.io/claim-uid";

/// Per-instance state: the connected cluster and what this instance made.
#[derive(Default)]
pub struct PodState {
    cluster: Option<Cluster>,
    /// (pod, the claim it came from) for each pod not removed yet.
    created: Vec<(String, Option<String>)>,
    /// Pods found to be this plugin's for the run, with their claims: each
    /// is checked against the API once per instance, not on every call.
    known: HashMap<String, Option<String>>,
}

impl PodState {
    /// Delete every pod (and claim) this instance made and did not remove
    /// itself. Runs when the sandbox closes or is dropped, whatever the
    /// plugin did.
    pub fn remove_all(&mut self) -> impl Future<Output = ()> + Send + 'static {
        let created = std::mem::take(&mut self.created);
        let cluster = self.cluster.clone();
        async move {
            let Some(cluster) = cluster else { return };
            for (pod, claim) in created {
                let _ = match claim {
                    Some(claim) => lifecycle::delete_claim(&cluster, &claim).await,
                    None => lifecycle::delete_pod(&cluster, &pod).await,
                };
            }
        }
    }
}

/// What one call needs, cloned out of the state so no borrow of it lives
/// across an await.
struct Ctx {
    cluster: Cluster,
    grant: PodGrant,
    plugin: Arc<str>,
    brokered: Brokered,
}

impl Ctx {
    /// The pod `name` when this plugin made it for this run, with the claim
    /// it came from; else the refusal.
    async fn owned(&self, name: &str) -> Result<Option<String>, String> {
        let refused = || {
            format!(
                "refused: pod `{name}` was not created by plugin `{}` for this run",
                self.plugin
            )
        };
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace);
        let pod = pods
            .get_opt(name)
            .await
            .map_err(|e| self.cluster.error("get", "pods", e))?
            .ok_or_else(|| format!("pod `{name}` does not exist (it was deleted)"))?;
        let labels = pod.metadata.labels.as_ref();
        if labelled_mine(labels, &self.grant, &self.plugin) {
            return Ok(None);
        }
        // A claimed pod carries its claim's uid, and the claim our labels.
        let Some(uid) = labels.and_then(|l| l.get(CLAIM_UID_LABEL)) else {
            return Err(refused());
        };
        let claim = self
            .claims()
            .await?
            .into_iter()
            .find(|c| c.metadata.uid.as_ref() == Some(uid))
            .and_then(|c| c.metadata.name)
            .ok_or_else(refused)?;
        Ok(Some(claim))
    }

    async fn claims(&self) -> Result<Vec<DynamicObject>, String> {
        let claims: Api<DynamicObject> = Api::namespaced_with(
            self.cluster.client.clone(),
            &self.cluster.namespace,
            &claims_resource(),
        );
        match claims
            .list(&ListParams::default().labels(&selector(&self.grant, &self.plugin)))
            .await
        {
            Ok(list) => Ok(list.items),
            // A cluster without agent-sandbox has no claims, and a user the
            // Role gives no claims (they are only for template=) made none.
            // RBAC answers before the API is looked up, so that is a 403.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::info!(
                        "no SandboxClaims looked at in namespace `{}`: {} ({})",
                        self.cluster.namespace,
                        if s.code == 404 {
                            "the cluster has no agent-sandbox extensions"
                        } else {
                            "the kubeconfig user may not list them"
                        },
                        s.message
                    )
                });
                Ok(Vec::new())
            }
            Err(e) => Err(self.cluster.error("list", "sandboxclaims", e)),
        }
    }

    async fn create(&self, mut spec: PodSpec, timeout: Duration) -> Result<String, String> {
        let ticket = self.grant.pool.as_deref();
        // A pooled pod's spec holds no env: the claiming run's goes to
        // each exec.
        let env = match ticket {
            Some(_) => std::mem::take(&mut spec.env),
            None => vec![],
        };
        let mut pod = pod_for(spec, &self.grant, &self.plugin, &self.cluster.namespace)?;
        // Only a pooled create pays for the digest.
        let fingerprint = ticket
            .map(|_| pool::fingerprint(&pod, &self.cluster, &self.plugin))
            .unwrap_or_default();
        // A sandbox of more than one pod claims for its first.
        if let Some(PoolTicket::Claim(claim)) = ticket
            && claim.outcome().is_none()
        {
            let wanted = (&pod, fingerprint.as_str());
            match pool::adopt(claim, &self.cluster, &self.brokered, wanted, env).await {
                Ok(name) => return Ok(name),
                Err(why) => {
                    claim.missed(why);
                    let id = claim.dir.file_name().unwrap_or_default().to_string_lossy();
                    let _ = pool::remove(&claim.record, &id).await;
                }
            }
        }
        let waiting = match ticket {
            Some(PoolTicket::Fill(slot)) => {
                pool::make_waiting(&mut pod, slot)?;
                Some(slot)
            }
            _ => None,
        };
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace);
        let created = pods
            .create(&Default::default(), &pod)
            .await
            .map_err(|e| self.cluster.error("create", "pods", e))?;
        let name = created.metadata.name.unwrap_or_default();
        match lifecycle::wait_ready(&self.cluster, &name, timeout).await {
            Ok(()) => {
                if let Some(slot) = waiting {
                    slot.created(pool::record(&name, fingerprint, &self.cluster));
                }
                Ok(name)
            }
            Err(e) => {
                let _ = lifecycle::delete_pod(&self.cluster, &name).await;
                Err(e)
            }
        }
    }

    /// An exec's env: the run's first when its warm pod's spec holds none
    /// of it, then the exec's own, which wins.
    fn exec_env(&self, pod: &str, own: Vec<(String, String)>) -> Vec<(String, String)> {
        let Some(PoolTicket::Claim(claim)) = self.grant.pool.as_deref() else {
            return own;
        };
        let mut env = claim.exec_env(pod).unwrap_or_default();
        env.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
        env.extend(own);
        env
    }

    async fn copy_in(&self, pod: &str, host_path: &str, pod_path: &str) -> Result<(), String> {
        let source = readable_source(host_path, &self.grant.readable)?;
        let (parent, name) = extract_at(pod_path)?;
        let tar = tokio::task::spawn_blocking(move || archive(&source, &name))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot read `{host_path}`: {e}"))?;
        let argv = ["tar", "-x", "-f", "-", "-C", &parent]
            .map(String::from)
            .to_vec();
        exec_bytes(&self.cluster, &self.brokered, pod, argv, Some(tar))
            .await
            .map(drop)
            .map_err(|e| format!("cannot copy into `{pod_path}`: {e}"))
    }

    async fn copy_file_out(
        &self,
        pod: &str,
        pod_path: &str,
        host_path: &str,
    ) -> Result<(), String> {
        self.owned(pod).await?;
        let target = writable_target(host_path, &self.grant.writable)?;
        let (parent, name) = split_container_path(pod_path)?;
        let argv = ["tar", "-c", "-f", "-", "-C", &parent, "--", &name]
            .map(String::from)
            .to_vec();
        let tar = exec_bytes(&self.cluster, &self.brokered, pod, argv, None)
            .await
            .map_err(|e| format!("cannot copy `{pod_path}` out: {e}"))?;
        let content = tokio::task::spawn_blocking(move || first_file(&tar))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot copy `{pod_path}` out: {e}"))?;
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&target, content).map_err(|e| format!("cannot write `{host_path}`: {e}"))
    }

    async fn remove(&self, pod: &str, claim: Option<String>) -> Result<(), String> {
        match claim {
            Some(claim) => lifecycle::delete_claim(&self.cluster, &claim).await,
            None => lifecycle::delete_pod(&self.cluster, pod).await,
        }
    }

    async fn list(&self) -> Result<Vec<String>, String> {
        let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.cluster.namespace);
        let mut names: Vec<String> = pods
            .list(&ListParams::default().labels(&selector(&self.grant, &self.plugin)))
            .await
            .map_err(|e| self.cluster.error("list", "pods", e))?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        // A claim's pod is named after its sandbox.
        for claim in self.claims().await? {
            let status = claim.data.get("status");
            if let Some(pod) = status.and_then(|s| s["sandbox"]["name"].as_str()) {
                names.push(pod.to_string());
            }
        }
        Ok(names)
    }
}

/// Where `copy-in` extracts its archive and the name of what it holds. A
/// plain absolute path is extracted at `/` by its whole name, so `tar`
/// makes its missing parents as it extracts (no exec for a `mkdir`, about
/// 100 ms on a cluster); one with `.` or `..` in it, in its parent.
fn extract_at(pod_path: &str) -> Result<(String, String), String> {
    use std::path::{Component, Path};
    let path = Path::new(pod_path);
    let mut names = vec![];
    for part in path.components() {
        match part {
            Component::Normal(name) => names.push(name.to_string_lossy()),
            Component::RootDir => {}
            _ => return split_container_path(pod_path),
        }
    }
    if !path.is_absolute() || names.is_empty() {
        return split_container_path(pod_path);
    }
    Ok(("/".into(), names.join("/")))
}

impl PluginState {
    fn pod_grant(&self) -> Result<PodGrant, String> {
        self.grants.pods.clone().ok_or_else(|| {
            format!(
                "plugin `{}` was not granted the pods capability",
                self.plugin
            )
        })
    }

    fn pods_ctx(&self) -> Result<Ctx, String> {
        let grant = self.pod_grant()?;
        let cluster = self
            .pods
            .cluster
            .clone()
            .ok_or("no cluster: call pods.connect first")?;
        Ok(Ctx {
            cluster,
            grant,
            plugin: self.plugin.clone(),
            brokered: self.brokered.clone(),
        })
    }

    /// Refusals and failures go to the host's log too, named by plugin.
    fn pods_logged<T>(&self, r: Result<T, String>) -> Result<T, String> {
        if let Err(e) = &r {
            tracing::warn!("plugin `{}`: pods: {e}", self.plugin);
        }
        r
    }

    /// The context for a call on `pod`, once `pod` is known to be this
    /// plugin's for the run; with the claim it came from.
    async fn pods_checked(&mut self, pod: &str) -> Result<(Ctx, Option<String>), String> {
        let ctx = self.pods_ctx()?;
        let claim = match self.pods.known.get(pod) {
            Some(claim) => claim.clone(),
            None => ctx.owned(pod).await?,
        };
        self.pods.known.insert(pod.to_string(), claim.clone());
        Ok((ctx, claim))
    }

    pub async fn pods_connect(&mut self) -> Result<ClusterInfo, String> {
        let r = match self.pod_grant() {
            Ok(grant) => cluster::connect(&grant).await,
            Err(e) => Err(e),
        };
        let r = r.map(|(cluster, info)| {
            self.pods.cluster = Some(cluster);
            info
        });
        self.pods_logged(r)
    }

    pub async fn pods_create(&mut self, spec: PodSpec, timeout_ms: u64) -> Result<String, String> {
        let r = match self.pods_ctx() {
            Ok(ctx) => ctx.create(spec, Duration::from_millis(timeout_ms)).await,
            Err(e) => Err(e),
        };
        if let Ok(name) = &r {
            self.pods.created.push((name.clone(), None));
            self.pods.known.insert(name.clone(), None);
        }
        self.pods_logged(r)
    }

    pub async fn pods_claim(
        &mut self,
        template: String,
        timeout_ms: u64,
    ) -> Result<String, String> {
        let r = match self.pods_ctx() {
            // A template's pods are kept warm by its SandboxWarmPool.
            Ok(ctx) if ctx.grant.pool.is_some() => Err(format!(
                "pool=N keeps warm pods the host creates, not SandboxClaims of template `{template}`: give the template a SandboxWarmPool instead, and drop pool="
            )),
            Ok(ctx) => {
                let labels = labels_for(&ctx.grant, &ctx.plugin);
                let timeout = Duration::from_millis(timeout_ms);
                lifecycle::claim(&ctx.cluster, &template, labels, timeout).await
            }
            Err(e) => Err(e),
        };
        let r = r.map(|(claim, pod)| {
            self.pods.created.push((pod.clone(), Some(claim.clone())));
            self.pods.known.insert(pod.clone(), Some(claim));
            pod
        });
        self.pods_logged(r)
    }

    /// `sink` receives each line as it arrives; without one the output is
    /// returned in the status.
    pub async fn pods_exec(
        &mut self,
        pod: String,
        options: ExecOptions,
        tx: Option<mpsc::Sender<OutputLine>>,
    ) -> Result<ExecStatus, String> {
        let r = match self.pods_checked(&pod).await {
            Ok((ctx, _)) => {
                let options = ExecOptions {
                    env: ctx.exec_env(&pod, options.env),
                    ..options
                };
                exec(&ctx.cluster, &ctx.brokered, &pod, options, tx).await
            }
            Err(e) => Err(e),
        };
        self.pods_logged(r)
    }

    pub async fn pods_exec_interactive(
        &mut self,
        pod: String,
        argv: Vec<String>,
        workdir: Option<String>,
    ) -> Result<i32, String> {
        let r = match self.pods_checked(&pod).await {
            Ok((ctx, _)) => {
                exec_interactive(&ctx.cluster, &ctx.brokered, &pod, argv, workdir).await
            }
            Err(e) => Err(e),
        };
        self.pods_logged(r)
    }

    pub async fn pods_copy_in(
        &mut self,
        pod: String,
        host_path: String,
        pod_path: String,
    ) -> Result<(), String> {
        let r = match self.pods_checked(&pod).await {
            Ok((ctx, _)) => ctx.copy_in(&pod, &host_path, &pod_path).await,
            Err(e) => Err(e),
        };
        self.pods_logged(r)
    }

    pub async fn pods_copy_file_out(
        &mut self,
        pod: String,
        pod_path: String,
        host_path: String,
    ) -> Result<(), String> {
        let r = match self.pods_checked(&pod).await {
            Ok((ctx, _)) => ctx.copy_file_out(&pod, &pod_path, &host_path).await,
            Err(e) => Err(e),
        };
        self.pods_logged(r)
    }

    pub async fn pods_remove(&mut self, pod: String) -> Result<(), String> {
        let r = match self.pods_checked(&pod).await {
            Ok((ctx, claim)) => ctx.remove(&pod, claim).await,
            // Already gone: nothing to remove.
            Err(e) if e.contains("does not exist") => Ok(()),
            Err(e) => Err(e),
        };
        if r.is_ok() {
            self.pods.created.retain(|(p, _)| p != &pod);
            self.pods.known.remove(&pod);
        }
        self.pods_logged(r)
    }

    pub async fn pods_list(&mut self) -> Result<Vec<String>, String> {
        let r = match self.pods_ctx() {
            Ok(ctx) => ctx.list().await,
            Err(e) => Err(e),
        };
        self.pods_logged(r)
    }
}

#[cfg(test)]
mod tests {
    use super::extract_at;

    #[test]
    fn copy_in_extracts_a_plain_path_at_the_root_and_any_other_in_its_parent() {
        let at = |p: &str| extract_at(p).map(|(dir, name)| format!("{dir} {name}"));
        assert_eq!(
            at("/w/.git/objects/pack/p.idx").unwrap(),
            "/ w/.git/objects/pack/p.idx"
        );
        assert_eq!(at("/w/../etc/f").unwrap(), "/w/../etc f");
        assert_eq!(at("/w/./f").unwrap(), "/ w/f", "std drops a `.` inside");
        assert!(at("relative/f").is_err());
        assert!(at("/").is_err());
    }
}
