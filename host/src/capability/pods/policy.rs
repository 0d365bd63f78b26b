//! What a plugin may ask of the `pods` capability, decided without a
//! cluster: the pod the host creates for a spec, with the run's labels, or
//! the refusal naming what was asked.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::{PodGrant, PodSpec};

/// The labels on every pod the host creates; keys under `sanddune.` are the
/// host's alone.
pub const RUN_LABEL: &str = "sanddune.run";
pub const PLUGIN_LABEL: &str = "sanddune.plugin";
/// The sandbox's name (the run's name or branch), made a label value.
pub const NAME_LABEL: &str = "sanddune.name";
/// The name of the pod's one container.
pub(super) const CONTAINER: &str = "sandbox";

/// The pod for `spec` in `namespace`, or why it is refused.
pub(super) fn pod_for(
    spec: PodSpec,
    grant: &PodGrant,
    plugin: &str,
    namespace: &str,
) -> Result<Pod, String> {
    if spec.privileged {
        return Err("refused: a privileged container".into());
    }
    if spec.host_network {
        return Err("refused: hostNetwork would put the pod on the node's network".into());
    }
    if spec.host_pid {
        return Err("refused: hostPID would show the pod the node's processes".into());
    }
    if let Some(path) = spec.host_paths.first() {
        return Err(format!(
            "refused: a hostPath volume (`{path}`) would mount the node's filesystem"
        ));
    }
    if !spec.cap_add.is_empty() {
        return Err(format!(
            "refused: added capabilities ({})",
            spec.cap_add.join(", ")
        ));
    }
    if let Some(ns) = spec.namespace.as_deref()
        && ns != namespace
    {
        return Err(format!(
            "refused: namespace `{ns}`: this run's pods live in `{namespace}`, which the user chose (--sandbox-opt namespace=)"
        ));
    }
    if spec.image.trim().is_empty() {
        return Err("no image: a pod needs one".into());
    }
    let mut labels = BTreeMap::new();
    for (key, value) in spec.labels {
        if key.starts_with("sanddune.") {
            return Err(format!(
                "refused: label `{key}`: keys under `sanddune.` are the host's"
            ));
        }
        labels.insert(key, value);
    }
    labels.extend(labels_for(grant, plugin));

    let mut container = json!({
        "name": CONTAINER,
        "image": spec.image,
        "env": spec.env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "securityContext": {"privileged": false, "allowPrivilegeEscalation": false},
        "stdin": false,
        "tty": false,
    });
    if !spec.command.is_empty() {
        container["command"] = json!(spec.command);
    }
    if let Some(dir) = spec.workdir {
        container["workingDir"] = json!(dir);
    }
    let mut resources = serde_json::Map::new();
    if let Some(cpu) = spec.cpus {
        resources.insert("cpu".into(), json!(cpu));
    }
    if let Some(memory) = spec.memory {
        resources.insert("memory".into(), json!(memory));
    }
    if !resources.is_empty() {
        container["resources"] = json!({"requests": resources, "limits": resources});
    }
    let mut pod_spec = json!({
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        // The agent gets no credentials to the cluster unless the user
        // names a service account for it.
        "automountServiceAccountToken": spec.service_account.is_some(),
    });
    if let Some(account) = spec.service_account {
        pod_spec["serviceAccountName"] = json!(account);
    }
    if !spec.node_selector.is_empty() {
        pod_spec["nodeSelector"] =
            json!(spec.node_selector.into_iter().collect::<BTreeMap<_, _>>());
    }
    if let Some(class) = spec.runtime_class {
        pod_spec["runtimeClassName"] = json!(class);
    }
    if !spec.image_pull_secrets.is_empty() {
        pod_spec["imagePullSecrets"] = json!(
            spec.image_pull_secrets
                .iter()
                .map(|s| json!({"name": s}))
                .collect::<Vec<_>>()
        );
    }
    if let Some(seconds) = spec.active_deadline_seconds {
        pod_spec["activeDeadlineSeconds"] = json!(seconds);
    }
    let pod: Value = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("sanddune-{}-", dns_label(&grant.name, 40)),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": pod_spec,
    });
    serde_json::from_value(pod).map_err(|e| format!("the pod spec: {e}"))
}

/// The labels that make a pod or claim this grant's.
pub(super) fn labels_for(grant: &PodGrant, plugin: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUN_LABEL.to_string(), label_value(&grant.run_id)),
        (PLUGIN_LABEL.to_string(), label_value(plugin)),
        (NAME_LABEL.to_string(), label_value(&grant.name)),
    ])
}

/// The label selector of this grant's objects.
pub(super) fn selector(grant: &PodGrant, plugin: &str) -> String {
    format!(
        "{RUN_LABEL}={},{PLUGIN_LABEL}={}",
        label_value(&grant.run_id),
        label_value(plugin)
    )
}

/// Whether an object's labels say `plugin` created it for this grant's run.
pub(super) fn labelled_mine(
    labels: Option<&BTreeMap<String, String>>,
    grant: &PodGrant,
    plugin: &str,
) -> bool {
    labels.is_some_and(|l| {
        l.get(RUN_LABEL) == Some(&label_value(&grant.run_id))
            && l.get(PLUGIN_LABEL) == Some(&label_value(plugin))
    })
}

/// `value` as a label value: at most 63 of `[A-Za-z0-9._-]`, beginning and
/// ending with a letter or digit.
pub(super) fn label_value(value: &str) -> String {
    let mapped: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// `value` as part of a DNS-1123 name: lower case letters, digits and `-`,
/// at most `max` of them, `x` when nothing is left.
fn dns_label(value: &str, max: usize) -> String {
    let mapped: String = value
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(max)
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "x".into()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> PodGrant {
        PodGrant {
            run_id: "1764180000-2a-0".into(),
            name: "sanddune/Issue 12".into(),
            context: None,
            namespace: None,
            readable: vec![],
            writable: vec![],
            pool: None,
        }
    }

    fn spec() -> PodSpec {
        PodSpec {
            image: "sanddune-test:latest".into(),
            command: vec!["sleep".into(), "infinity".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_carries_the_runs_labels_and_no_cluster_credentials() {
        let pod = pod_for(spec(), &grant(), "kubernetes", "agents").unwrap();
        let meta = &pod.metadata;
        assert_eq!(
            meta.generate_name.as_deref(),
            Some("sanddune-sanddune-issue-12-")
        );
        assert_eq!(meta.namespace.as_deref(), Some("agents"));
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels[RUN_LABEL], "1764180000-2a-0");
        assert_eq!(labels[NAME_LABEL], "sanddune-Issue-12");
        assert!(labelled_mine(Some(labels), &grant(), "kubernetes"));
        assert!(!labelled_mine(Some(labels), &grant(), "other"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let security = spec.containers[0].security_context.clone().unwrap();
        assert_eq!(security.privileged, Some(false));
        assert_eq!(security.allow_privilege_escalation, Some(false));
    }

    #[test]
    fn what_would_reach_the_node_or_another_namespace_is_refused_by_name() {
        let cases: [(PodSpec, &str); 7] = [
            (
                PodSpec {
                    privileged: true,
                    ..spec()
                },
                "privileged",
            ),
            (
                PodSpec {
                    host_network: true,
                    ..spec()
                },
                "hostNetwork",
            ),
            (
                PodSpec {
                    host_pid: true,
                    ..spec()
                },
                "hostPID",
            ),
            (
                PodSpec {
                    host_paths: vec!["/".into()],
                    ..spec()
                },
                "hostPath",
            ),
            (
                PodSpec {
                    cap_add: vec!["SYS_ADMIN".into()],
                    ..spec()
                },
                "SYS_ADMIN",
            ),
            (
                PodSpec {
                    namespace: Some("kube-system".into()),
                    ..spec()
                },
                "namespace `kube-system`",
            ),
            (
                PodSpec {
                    labels: vec![(RUN_LABEL.into(), "other".into())],
                    ..spec()
                },
                "keys under `sanddune.` are the host's",
            ),
        ];
        for (spec, want) in cases {
            let err = pod_for(spec, &grant(), "kubernetes", "agents").unwrap_err();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn limits_and_placement_reach_the_pod() {
        let spec = PodSpec {
            cpus: Some("500m".into()),
            memory: Some("1Gi".into()),
            service_account: Some("agent".into()),
            node_selector: vec![("pool".into(), "agents".into())],
            runtime_class: Some("gvisor".into()),
            image_pull_secrets: vec!["regcred".into()],
            active_deadline_seconds: Some(3600),
            ..spec()
        };
        let pod = pod_for(spec, &grant(), "kubernetes", "agents").unwrap();
        let spec = pod.spec.unwrap();
        let limits = spec.containers[0]
            .resources
            .clone()
            .unwrap()
            .limits
            .unwrap();
        assert_eq!(limits["memory"].0, "1Gi");
        assert_eq!(limits["cpu"].0, "500m");
        assert_eq!(spec.service_account_name.as_deref(), Some("agent"));
        assert_eq!(spec.automount_service_account_token, Some(true));
        assert_eq!(spec.node_selector.unwrap()["pool"], "agents");
        assert_eq!(spec.runtime_class_name.as_deref(), Some("gvisor"));
        assert_eq!(spec.active_deadline_seconds, Some(3600));
        assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "regcred");
    }
}
