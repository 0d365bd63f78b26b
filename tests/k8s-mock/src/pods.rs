//! Pods: their objects as the API and the kubelet write them, selectors,
//! and each pod's life as a docker container.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::{INSTANCE_LABEL, LABEL, POD_LABEL, Pod, Shared, State, status, time};

/// How long a missing image stays `ErrImagePull` before `ImagePullBackOff`,
/// and how often the mock looks for it again (the kubelet retries pulls).
const PULL_RETRY: Duration = Duration::from_secs(1);

pub fn namespace(name: &str) -> Value {
    json!({
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": uid(),
            "resourceVersion": "1",
            "creationTimestamp": time::now(),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

/// A fresh object uid, uuid-shaped.
pub fn uid() -> String {
    let n = random_u128();
    let h = format!("{n:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut a = std::collections::hash_map::RandomState::new().build_hasher();
    a.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    let mut b = std::collections::hash_map::RandomState::new().build_hasher();
    b.write_u64(a.finish());
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// The five characters `generateName` gets, from the apiserver's alphabet.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = random_u128();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u128) as usize];
            n /= ALPHABET.len() as u128;
            c as char
        })
        .collect()
}

/// `a=b,c!=d,e,!f`: the equality and existence selectors (set-based ones
/// beyond that are refused as the real parser refuses a bad selector).
pub fn parse_selector(selector: &str) -> Result<Vec<Requirement>, String> {
    let mut reqs = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let req = if let Some((k, v)) = part.split_once("!=") {
            Requirement::NotEquals(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Requirement::Equals(k.trim().into(), v.trim().into())
        } else if let Some(k) = part.strip_prefix('!') {
            Requirement::Absent(k.trim().into())
        } else if part.contains(' ') || part.contains('(') {
            return Err(format!("unable to parse requirement: {part}"));
        } else {
            Requirement::Present(part.into())
        };
        reqs.push(req);
    }
    Ok(reqs)
}

pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Present(String),
    Absent(String),
}

/// Whether `labels` (a JSON map, or null) meets every requirement.
pub fn matches(reqs: &[Requirement], labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    reqs.iter().all(|r| match r {
        Requirement::Equals(k, v) => get(k) == Some(v),
        Requirement::NotEquals(k, v) => get(k) != Some(v),
        Requirement::Present(k) => get(k).is_some(),
        Requirement::Absent(k) => get(k).is_none(),
    })
}

/// A field selector: `metadata.name`, `metadata.namespace` and
/// `status.phase` with `=`, `==` or `!=`, the fields the real API indexes
/// for pods.
pub fn field_matches(selector: &str, pod: &Value) -> Result<bool, String> {
    for req in parse_selector(selector)? {
        let (field, want, equal) = match &req {
            Requirement::Equals(k, v) => (k, v, true),
            Requirement::NotEquals(k, v) => (k, v, false),
            _ => return Err(format!("invalid field selector: {selector}")),
        };
        let have = match field.as_str() {
            "metadata.name" => &pod["metadata"]["name"],
            "metadata.namespace" => &pod["metadata"]["namespace"],
            "status.phase" => &pod["status"]["phase"],
            "spec.nodeName" => &pod["spec"]["nodeName"],
            _ => {
                return Err(format!("field label not supported: {field}"));
            }
        };
        if (have.as_str().unwrap_or("") == want) != equal {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the pod has ended (Succeeded or Failed).
pub fn ended(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// The pod the API stores for `body` posted to `namespace`, or the
/// error's status code and body.
pub fn admit(state: &State, namespace: &str, mut body: Value) -> Result<Value, (u16, Value)> {
    if body["kind"].as_str().is_some_and(|k| k != "Pod") {
        return Err((
            400,
            status::bad_request(format!(
                "the kind of the object posted to pods must be Pod, not {}",
                body["kind"]
            )),
        ));
    }
    let name = match (
        body["metadata"]["name"].as_str(),
        body["metadata"]["generateName"].as_str(),
    ) {
        (Some(name), _) if !name.is_empty() => name.to_string(),
        (_, Some(prefix)) => format!("{prefix}{}", name_suffix()),
        _ => {
            return Err((
                422,
                status::invalid_pod(
                    "",
                    "metadata.name: Required value: name or generateName is required".into(),
                ),
            ));
        }
    };
    let containers = body["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if containers.is_empty() {
        return Err((
            422,
            status::invalid_pod(&name, "spec.containers: Required value".into()),
        ));
    }
    for (i, c) in containers.iter().enumerate() {
        if c["image"].as_str().is_none_or(str::is_empty) {
            return Err((
                422,
                status::invalid_pod(&name, format!("spec.containers[{i}].image: Required value")),
            ));
        }
        if c["name"].as_str().is_none_or(str::is_empty) {
            return Err((
                422,
                status::invalid_pod(&name, format!("spec.containers[{i}].name: Required value")),
            ));
        }
    }
    if let Some(ns) = body["metadata"]["namespace"].as_str()
        && ns != namespace
    {
        return Err((400, status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request".into(),
        )));
    }
    if !state.namespaces.contains_key(namespace) {
        return Err((404, status::not_found("namespaces", namespace)));
    }
    if state
        .pods
        .contains_key(&(namespace.to_string(), name.clone()))
    {
        return Err((409, status::already_exists("pods", &name)));
    }
    if let Some(limit) = state.pod_quota {
        let used = state
            .pods
            .iter()
            .filter(|((ns, _), p)| ns == namespace && !ended(&p.object))
            .count();
        if used >= limit {
            return Err((403, status::quota_exceeded(&name, used, limit)));
        }
    }
    body["kind"] = json!("Pod");
    body["apiVersion"] = json!("v1");
    let meta = &mut body["metadata"];
    meta["name"] = json!(name);
    meta["namespace"] = json!(namespace);
    meta["uid"] = json!(uid());
    meta["creationTimestamp"] = json!(time::now());
    let spec = &mut body["spec"];
    for (key, default) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("serviceAccountName", json!("default")),
        ("serviceAccount", json!("default")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
        ("enableServiceLinks", json!(true)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
        ("priority", json!(0)),
    ] {
        if spec[key].is_null() {
            spec[key] = default;
        }
    }
    for c in spec["containers"].as_array_mut().into_iter().flatten() {
        for (key, default) in [
            ("resources", json!({})),
            ("terminationMessagePath", json!("/dev/termination-log")),
            ("terminationMessagePolicy", json!("File")),
            (
                "imagePullPolicy",
                json!(if c["image"]
                    .as_str()
                    .is_some_and(|i| i.ends_with(":latest") || !i.contains(':'))
                {
                    "Always"
                } else {
                    "IfNotPresent"
                }),
            ),
        ] {
            if c[key].is_null() {
                c[key] = default;
            }
        }
    }
    body["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    Ok(body)
}

/// Admit and store the pod and start its life; its stored object.
pub fn create(
    shared: &Arc<Shared>,
    st: &mut State,
    ns: &str,
    body: Value,
) -> Result<Value, (u16, Value)> {
    let mut pod = admit(st, ns, body)?;
    shared.emit(st, "ADDED", &mut pod);
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let key = (ns.to_string(), name);
    let stored = Pod {
        object: pod.clone(),
        container: None,
        lost: false,
    };
    st.pods.insert(key.clone(), stored);
    tokio::spawn(run(shared.clone(), key, uid));
    Ok(pod)
}

/// Delete at once, whatever the grace period: the container is removed
/// and the last state of the pod (with its deletionTimestamp) returned;
/// `None` if there is no such pod.
pub async fn delete(shared: &Arc<Shared>, ns: &str, name: &str) -> Option<Value> {
    let pod = shared
        .state
        .lock()
        .unwrap()
        .pods
        .remove(&(ns.to_string(), name.to_string()))?;
    if let Some(id) = &pod.container {
        let _ = remove_container(&shared.docker, id).await;
    }
    let mut object = pod.object;
    object["metadata"]["deletionTimestamp"] = json!(time::now());
    object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    let mut st = shared.state.lock().unwrap();
    shared.emit(&mut st, "DELETED", &mut object);
    Some(object)
}

/// A condition as the kubelet writes it.
fn condition(kind: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> Value {
    let mut c = json!({
        "type": kind,
        "status": if ok { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": time::now(),
    });
    if let Some(reason) = reason {
        c["reason"] = json!(reason);
    }
    if let Some(message) = message {
        c["message"] = json!(message);
    }
    c
}

/// A status of a pod whose first container is in `state` (`waiting`,
/// `running`, `terminated`), with the conditions that go with it.
fn pod_status(pod: &Value, phase: &str, state: Value, container_id: Option<&str>) -> Value {
    let container = &pod["spec"]["containers"][0];
    let name = container["name"].as_str().unwrap_or("");
    let running = state.get("running").is_some();
    let not_ready = (!running).then(|| format!("containers with unready status: [{name}]"));
    let reason = match phase {
        "Succeeded" | "Failed" => Some("PodCompleted"),
        _ if !running => Some("ContainersNotReady"),
        _ => None,
    };
    let mut cs = json!({
        "name": name,
        "image": container["image"],
        "imageID": "",
        "ready": running,
        "restartCount": 0,
        "started": running,
        "state": state,
        "lastState": {},
    });
    if let Some(id) = container_id {
        cs["containerID"] = json!(format!("docker://{id}"));
        cs["imageID"] = json!(format!(
            "docker-pullable://{}",
            container["image"].as_str().unwrap_or("")
        ));
    }
    let started = pod["status"]["startTime"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(time::now);
    json!({
        "phase": phase,
        "conditions": [
            condition("PodReadyToStartContainers", true, None, None),
            condition("Initialized", true, None, None),
            condition("Ready", running, reason, not_ready.clone()),
            condition("ContainersReady", running, reason, not_ready),
            condition("PodScheduled", true, None, None),
        ],
        "hostIP": "10.0.0.1",
        "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": pod["status"]["podIP"].as_str().unwrap_or("10.244.0.2"),
        "podIPs": [{"ip": pod["status"]["podIP"].as_str().unwrap_or("10.244.0.2")}],
        "startTime": started,
        "containerStatuses": [cs],
        "qosClass": "BestEffort",
    })
}

/// Set the pod's status (and node), as a MODIFIED event; false when the
/// pod is gone (deleted meanwhile).
fn update(
    shared: &Shared,
    key: &(String, String),
    uid: &str,
    change: impl FnOnce(&mut Pod),
) -> bool {
    let mut st = shared.state.lock().unwrap();
    let Some(pod) = st.pods.get_mut(key) else {
        return false;
    };
    if pod.object["metadata"]["uid"] != uid {
        return false;
    }
    change(pod);
    let mut object = pod.object.clone();
    shared.emit(&mut st, "MODIFIED", &mut object);
    st.pods.get_mut(key).unwrap().object = object;
    true
}

/// The pod's life: scheduled, its image found (or pulled in vain), its
/// container created and started, Running until the container ends.
pub async fn run(shared: Arc<Shared>, key: (String, String), uid: String) {
    let pod = match shared.state.lock().unwrap().pods.get(&key) {
        Some(p) => p.object.clone(),
        None => return,
    };
    let mut waiting_for_node = false;
    loop {
        let unschedulable = shared.state.lock().unwrap().unschedulable.clone();
        match unschedulable {
            None => break,
            Some(_) if waiting_for_node => {}
            Some(message) => {
                let unscheduled =
                    condition("PodScheduled", false, Some("Unschedulable"), Some(message));
                if !update(&shared, &key, &uid, |p| {
                    p.object["status"]["conditions"] = json!([unscheduled]);
                }) {
                    return;
                }
                waiting_for_node = true;
            }
        }
        tokio::time::sleep(PULL_RETRY).await;
        if !shared.state.lock().unwrap().pods.contains_key(&key) {
            return;
        }
    }
    let scheduled = std::time::Instant::now();
    if !update(&shared, &key, &uid, |p| {
        p.object["spec"]["nodeName"] = json!("mock-node");
        let conditions = json!([condition("PodScheduled", true, None, None)]);
        p.object["status"]["conditions"] = conditions;
    }) {
        return;
    }
    let container = &pod["spec"]["containers"][0];
    let image = container["image"].as_str().unwrap_or("").to_string();
    let mut reason = "ErrImagePull";
    let mut shown = "";
    while shared.docker.inspect_image(&image).await.is_err() {
        // The status changes once to each reason, not on every retry.
        if shown == reason {
            tokio::time::sleep(PULL_RETRY).await;
            if !shared.state.lock().unwrap().pods.contains_key(&key) {
                return;
            }
            continue;
        }
        let message = match reason {
            "ErrImagePull" => format!(
                "failed to pull and unpack image \"{image}\": pull access denied, repository does not exist or may require authorization"
            ),
            _ => format!("Back-off pulling image \"{image}\""),
        };
        let waiting = json!({"waiting": {"reason": reason, "message": message}});
        if !update(&shared, &key, &uid, |p| {
            p.object["status"] = pod_status(&p.object, "Pending", waiting, None);
        }) {
            return;
        }
        shown = reason;
        reason = "ImagePullBackOff";
        tokio::time::sleep(PULL_RETRY).await;
    }
    let id = match create_container(&shared, &key, &pod, &image).await {
        Ok(id) => id,
        Err(message) => {
            let waiting =
                json!({"waiting": {"reason": "CreateContainerError", "message": message}});
            update(&shared, &key, &uid, |p| {
                p.object["status"] = pod_status(&p.object, "Pending", waiting, None);
            });
            return;
        }
    };
    if !update(&shared, &key, &uid, |p| p.container = Some(id.clone())) {
        let _ = remove_container(&shared.docker, &id).await;
        return;
    }
    if let Err(e) = shared.docker.start_container(&id, None).await {
        let message = format!("failed to start container: {e}");
        let waiting = json!({"waiting": {"reason": "RunContainerError", "message": message}});
        update(&shared, &key, &uid, |p| {
            p.object["status"] = pod_status(&p.object, "Pending", waiting, Some(&id));
        });
        return;
    }
    let started = time::now();
    let ip = shared
        .docker
        .inspect_container(&id, None)
        .await
        .ok()
        .and_then(|c| c.network_settings)
        .and_then(|n| n.networks)
        .and_then(|n| {
            n.into_values()
                .find_map(|e| e.ip_address.filter(|ip| !ip.is_empty()))
        });
    if !update(&shared, &key, &uid, |p| {
        if let Some(ip) = &ip {
            p.object["status"]["podIP"] = json!(ip);
        }
        let running = json!({"running": {"startedAt": started}});
        p.object["status"] = pod_status(&p.object, "Running", running, Some(&id));
    }) {
        return;
    }
    // activeDeadlineSeconds counts from the pod's start on its node.
    let deadline = pod["spec"]["activeDeadlineSeconds"]
        .as_u64()
        .map(|s| scheduled + Duration::from_secs(s));
    let code = tokio::select! {
        code = wait_container(&shared.docker, &id) => code,
        _ = sleep_until(deadline) => {
            let _ = shared.docker.kill_container(&id, None).await;
            let terminated = json!({"terminated": {
                "exitCode": 137,
                "reason": "Error",
                "startedAt": started,
                "finishedAt": time::now(),
                "containerID": format!("docker://{id}"),
            }});
            update(&shared, &key, &uid, |p| {
                let mut status = pod_status(&p.object, "Failed", terminated, Some(&id));
                status["reason"] = json!("DeadlineExceeded");
                status["message"] = json!("Pod was active on the node longer than the specified deadline");
                p.object["status"] = status;
            });
            return;
        }
    };
    // Gone rather than exited: the kubelet's words for a vanished container.
    let lost = shared
        .state
        .lock()
        .unwrap()
        .pods
        .get(&key)
        .is_some_and(|p| p.lost);
    let gone = lost || shared.docker.inspect_container(&id, None).await.is_err();
    let (phase, terminated) = match (gone, code) {
        (true, _) => (
            "Failed",
            json!({
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
                "startedAt": null,
                "finishedAt": null,
            }),
        ),
        (false, code) => (
            if code == 0 { "Succeeded" } else { "Failed" },
            json!({
                "exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" },
                "startedAt": started,
                "finishedAt": time::now(),
                "containerID": format!("docker://{id}"),
            }),
        ),
    };
    update(&shared, &key, &uid, |p| {
        let state = json!({"terminated": terminated});
        p.object["status"] = pod_status(&p.object, phase, state, Some(&id));
    });
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The container's exit code once it stops (bollard reports a non-zero
/// one as an error); 137 if waiting fails (removed under us).
async fn wait_container(docker: &Docker, id: &str) -> i64 {
    match docker.wait_container(id, None).next().await {
        Some(Ok(r)) => r.status_code,
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        _ => 137,
    }
}

async fn create_container(
    shared: &Shared,
    key: &(String, String),
    pod: &Value,
    image: &str,
) -> Result<String, String> {
    let c = &pod["spec"]["containers"][0];
    let words = |v: &Value| -> Option<Vec<String>> {
        v.as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
    };
    // Kubernetes' command replaces the image's entrypoint and args its
    // cmd; a command without args drops the image's cmd.
    let command = words(&c["command"]);
    let args = words(&c["args"]).or_else(|| command.as_ref().map(|_| Vec::new()));
    let env = c["env"].as_array().map(|env| {
        env.iter()
            .filter_map(|e| {
                Some(format!(
                    "{}={}",
                    e["name"].as_str()?,
                    e["value"].as_str().unwrap_or("")
                ))
            })
            .collect()
    });
    let instance = shared.state.lock().unwrap().instance.clone();
    let labels = HashMap::from([
        (LABEL.to_string(), "1".to_string()),
        (INSTANCE_LABEL.to_string(), instance),
        (POD_LABEL.to_string(), format!("{}/{}", key.0, key.1)),
    ]);
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: command,
        cmd: args,
        env,
        working_dir: c["workingDir"].as_str().map(str::to_string),
        hostname: Some(key.1.chars().take(63).collect()),
        labels: Some(labels),
        open_stdin: c["stdin"].as_bool(),
        tty: c["tty"].as_bool(),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().build();
    shared
        .docker
        .create_container(Some(options), body)
        .await
        .map(|r| r.id)
        .map_err(|e| format!("failed to create container: {e}"))
}

pub async fn remove_container(docker: &Docker, id: &str) -> Result<(), String> {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    docker
        .remove_container(id, Some(options))
        .await
        .map_err(|e| format!("removing container {id}: {e}"))
}

pub async fn labelled_containers(docker: &Docker, instance: &str) -> Result<Vec<String>, String> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![format!("{INSTANCE_LABEL}={instance}")],
    )]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let list = docker
        .list_containers(Some(options))
        .await
        .map_err(|e| format!("listing containers: {e}"))?;
    Ok(list.into_iter().filter_map(|c| c.id).collect())
}
