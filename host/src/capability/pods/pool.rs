//! Warm pods (ADR 0037, amendment "Warm pods"; the slots are
//! `capability::pool`'s): a slot's pod is created as its reserved run's,
//! with a first process that waits for a claim and ends itself after the
//! pool's idle lifetime. A claim wakes it with `SIGUSR1` through one exec,
//! the only way in that the API gives (there is no signal call), and its
//! first process becomes the provider's own.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use sha2::{Digest, Sha256};

use super::PodGrant;
use super::cluster::{self, Cluster};
use super::exec::exec_bytes;
use super::lifecycle::delete_pod;
use super::policy::{NAME_LABEL, RUN_LABEL, label_value};
use crate::capability::Brokered;
use crate::capability::containers::snapshot::hex;
use crate::capability::pool::{
    Claimed, FillSlot, KUBERNETES, POOL_LABEL, PodPlace, SlotRecord, waiting_entrypoint,
};

/// Where `cluster` puts pods, as a slot's record says it.
pub(super) fn place(cluster: &Cluster) -> PodPlace {
    PodPlace {
        // In a pod, sanddune reaches its own cluster with no context.
        context: (!cluster.in_cluster).then(|| cluster.context.clone()),
        namespace: cluster.namespace.clone(),
    }
}

/// What makes two pods the same for a run: everything the host would send
/// but the labels that say whose it is and the name made from them, in the
/// same cluster and namespace, from the same plugin. The env is not in it:
/// a pooled create takes it out of the spec and gives it per exec.
pub(super) fn fingerprint(pod: &Pod, cluster: &Cluster, plugin: &str) -> String {
    let mut pod = pod.clone();
    pod.metadata.generate_name = None;
    if let Some(labels) = pod.metadata.labels.as_mut() {
        labels.remove(RUN_LABEL);
        labels.remove(NAME_LABEL);
    }
    let value = serde_json::json!({
        "pod": pod,
        "place": place(cluster),
        "plugin": plugin,
    });
    hex(&Sha256::digest(value.to_string().as_bytes()))
}

/// Make `pod` wait for a claim: its container's command (and args) run
/// only when a claim wakes it, and its annotation names the slot for gc.
pub(super) fn make_waiting(pod: &mut Pod, slot: &FillSlot) -> Result<(), String> {
    let container = pod
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        .ok_or("the pod has no container")?;
    let Some(mut main) = container.command.take() else {
        return Err("a warm pod needs its provider to name its first process (a command)".into());
    };
    main.extend(container.args.take().unwrap_or_default());
    container.command = Some(waiting_entrypoint(slot.idle, None, main));
    // The slot's pool and id, not its path on the host: whoever may read
    // the namespace's pods reads it.
    let named = slot.dir.iter().rev().take(2).collect::<Vec<_>>();
    let named: Vec<_> = named.iter().rev().map(|p| p.to_string_lossy()).collect();
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(POOL_LABEL.into(), named.join("/"));
    Ok(())
}

/// The record of a slot whose pod `name` waits.
pub(super) fn record(name: &str, fingerprint: String, cluster: &Cluster) -> SlotRecord {
    SlotRecord {
        container: name.into(),
        engine: KUBERNETES.into(),
        fingerprint,
        until: 0,
        link: None,
        forwarder: None,
        wake: None,
        cluster: Some(place(cluster)),
    }
}

/// Take the warm pod `claim` holds for a create whose would-be pod is
/// `wanted` (with `fingerprint`): wake it and check its container still
/// runs the image it was made with. Its execs get `env` first.
pub(super) async fn adopt(
    claim: &Claimed,
    cluster: &Cluster,
    brokered: &Brokered,
    (wanted, fingerprint): (&Pod, &str),
    env: Vec<(String, String)>,
) -> Result<String, String> {
    claim.fits(fingerprint)?;
    let name = &claim.record.container;
    // The waiting shell is the container's PID 1, which takes the signal
    // it has a trap for; `kill` is the shell's own.
    let wake = ["sh", "-c", "kill -USR1 1"].map(String::from).to_vec();
    exec_bytes(cluster, brokered, name, wake, None)
        .await
        .map_err(|e| format!("it did not take the claim's signal: {e}"))?;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let pod = pods
        .get_opt(name)
        .await
        .map_err(|e| cluster.error("get", "pods", e))?
        .ok_or("it was deleted")?;
    // An image is the one field of a pod's container an update may
    // change.
    let image = |p: &Pod| p.spec.as_ref()?.containers.first()?.image.clone();
    if image(&pod) != image(wanted) {
        return Err("its image was changed since it was made".into());
    }
    let running = pod
        .status
        .and_then(|s| s.container_statuses)
        .into_iter()
        .flatten()
        .all(|c| c.state.is_some_and(|s| s.running.is_some()));
    if !running {
        return Err("it is no longer running".into());
    }
    claim.took(name, env);
    Ok(name.clone())
}

/// The cluster of a slot's record, to look at or remove its pod.
async fn connect(record: &SlotRecord) -> Result<Cluster, String> {
    let place = record
        .cluster
        .as_ref()
        .ok_or("the record names no cluster")?;
    let grant = PodGrant {
        run_id: String::new(),
        name: String::new(),
        context: place.context.clone(),
        namespace: Some(place.namespace.clone()),
        readable: vec![],
        writable: vec![],
        pool: None,
    };
    cluster::connect(&grant).await.map(|(cluster, _)| cluster)
}

/// The slot's pod, when it is the one the slot made for run `id` (its
/// labels and annotation say so); None when there is none.
async fn slot_pod(cluster: &Cluster, record: &SlotRecord, id: &str) -> Result<Option<Pod>, String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let pod = pods
        .get_opt(&record.container)
        .await
        .map_err(|e| cluster.error("get", "pods", e))?;
    Ok(pod.filter(|p| {
        let labels = p.metadata.labels.as_ref();
        let annotated = p
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(POOL_LABEL));
        annotated && labels.and_then(|l| l.get(RUN_LABEL)) == Some(&label_value(id))
    }))
}

/// Whether slot `id`'s pod still waits; None when the cluster does not
/// answer.
pub async fn waiting(record: &SlotRecord, id: &str) -> Option<bool> {
    let cluster = connect(record).await.ok()?;
    let pod = slot_pod(&cluster, record, id).await.ok()?;
    Some(pod.is_some_and(|p| {
        p.status
            .and_then(|s| s.phase)
            .is_some_and(|phase| phase == "Running" || phase == "Pending")
    }))
}

/// Delete slot `id`'s pod, if it is still there and still the slot's.
pub async fn remove(record: &SlotRecord, id: &str) -> Result<(), String> {
    let cluster = connect(record).await?;
    match slot_pod(&cluster, record, id).await? {
        Some(_) => delete_pod(&cluster, &record.container).await,
        None => Ok(()),
    }
}
