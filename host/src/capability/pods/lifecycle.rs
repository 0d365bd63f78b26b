//! A pod's way to Ready, and each way it does not get there in words: an
//! image that does not pull, a pod the scheduler cannot place, one that
//! ends first; and the agent-sandbox claims that give a pod from a template.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use super::cluster::Cluster;

/// How often a pod or claim is looked at while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Waiting reasons that do not get better by waiting.
const IMAGE_ERRORS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];
const START_ERRORS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

/// The agent-sandbox SandboxClaim (extensions.agents.x-k8s.io/v1alpha1).
pub(super) fn claims_resource() -> ApiResource {
    ApiResource {
        group: "extensions.agents.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "extensions.agents.x-k8s.io/v1alpha1".into(),
        kind: "SandboxClaim".into(),
        plural: "sandboxclaims".into(),
    }
}

/// Wait until pod `name` is Ready; an error says why it is not.
pub(super) async fn wait_ready(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods
            .get_opt(name)
            .await
            .map_err(|e| cluster.error("get", "pods", e))?
            .ok_or_else(|| format!("pod `{name}` was deleted before it was ready"))?;
        let pending = match readiness(&pod) {
            Readiness::Ready => return Ok(()),
            Readiness::Failed(why) => return Err(format!("pod `{name}` {why}")),
            Readiness::Pending(why) => why,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "pod `{name}` was not ready after {}s: {pending}; wait longer with --sandbox-opt start-timeout=DURATION",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

enum Readiness {
    Ready,
    Pending(String),
    Failed(String),
}

/// Where `pod` is on its way to Ready.
fn readiness(pod: &Pod) -> Readiness {
    let Some(status) = &pod.status else {
        return Readiness::Pending("it has no status yet".into());
    };
    let phase = status.phase.as_deref().unwrap_or("Pending");
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.waiting.clone());
    if let Some(w) = &waiting {
        let reason = w.reason.as_deref().unwrap_or("");
        let message = w.message.as_deref().unwrap_or("");
        if IMAGE_ERRORS.contains(&reason) {
            let image = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            return Readiness::Failed(format!(
                "cannot start: the cluster cannot pull image `{image}` ({reason}: {message}); check its name and tag, and give --sandbox-opt image-pull-secret=NAME for a private registry"
            ));
        }
        if START_ERRORS.contains(&reason) {
            return Readiness::Failed(format!("cannot start its container ({reason}: {message})"));
        }
    }
    if phase == "Failed" || phase == "Succeeded" {
        let ended = status
            .container_statuses
            .iter()
            .flatten()
            .find_map(|c| c.state.as_ref()?.terminated.clone())
            .map(|t| {
                format!(
                    ", its container {} with exit code {}",
                    t.reason.as_deref().unwrap_or("ended"),
                    t.exit_code
                )
            })
            .unwrap_or_default();
        let why = status
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        return Readiness::Failed(format!("ended ({phase}{why}) before it was ready{ended}"));
    }
    let conditions = status.conditions.iter().flatten();
    let mut pending = format!("it is {phase}");
    for c in conditions {
        if c.type_ == "Ready" && c.status == "True" {
            return Readiness::Ready;
        }
        if c.type_ == "PodScheduled" && c.status == "False" {
            pending = format!(
                "the scheduler cannot place it ({}: {})",
                c.reason.as_deref().unwrap_or("Unschedulable"),
                c.message.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(w) = waiting {
        pending = format!(
            "its container is waiting ({})",
            w.reason.as_deref().unwrap_or("ContainerCreating")
        );
    }
    Readiness::Pending(pending)
}

/// Create a SandboxClaim of `template` with `labels`; wait for its pod to
/// be Ready. Returns (claim, pod); a claim that fails is deleted.
pub(super) async fn claim(
    cluster: &Cluster,
    template: &str,
    labels: std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(String, String), String> {
    let claims: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &claims_resource(),
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1alpha1",
        "kind": "SandboxClaim",
        "metadata": {"generateName": "sanddune-", "labels": labels},
        "spec": {"sandboxTemplateRef": {"name": template}},
    }))
    .map_err(|e| e.to_string())?;
    let created = claims
        .create(&PostParams::default(), &object)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 404 => format!(
                "the cluster of context `{}` has no SandboxClaim resource: template= needs the agent-sandbox controller and its extensions (kubernetes-sigs/agent-sandbox)",
                cluster.context
            ),
            e => cluster.error("create", "sandboxclaims", e),
        })?;
    let name = created.metadata.name.unwrap_or_default();
    let result = async {
        let deadline = Instant::now() + timeout;
        let pod = loop {
            let claim = claims
                .get(&name)
                .await
                .map_err(|e| cluster.error("get", "sandboxclaims", e))?;
            let status = claim.data.get("status");
            if let Some(pod) = status
                .and_then(|s| s["sandbox"]["name"].as_str())
                .filter(|n| !n.is_empty())
            {
                break pod.to_string();
            }
            let condition = status.and_then(|s| s["conditions"].get(0));
            if let Some(c) = condition
                && c["reason"] == "TemplateNotFound"
            {
                return Err(format!(
                    "template={template}: {}",
                    c["message"]
                        .as_str()
                        .unwrap_or("the SandboxTemplate does not exist")
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "SandboxClaim `{name}` got no sandbox in {}s",
                    timeout.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        wait_ready(cluster, &pod, left).await.map(|()| pod)
    }
    .await;
    match result {
        Ok(pod) => Ok((name, pod)),
        Err(e) => {
            let _ = delete_claim(cluster, &name).await;
            Err(e)
        }
    }
}

/// Delete a pod at once; one already gone is no error.
pub(super) async fn delete_pod(cluster: &Cluster, name: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    match pods.delete(name, &now).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(cluster.error("delete", "pods", e)),
    }
}

/// Delete a claim (its controller deletes the sandbox and the pod); one
/// already gone is no error.
pub(super) async fn delete_claim(cluster: &Cluster, name: &str) -> Result<(), String> {
    let claims: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &claims_resource(),
    );
    match claims.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(cluster.error("delete", "sandboxclaims", e)),
    }
}
