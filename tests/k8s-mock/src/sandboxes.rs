//! The agent-sandbox CRDs (kubernetes-sigs/agent-sandbox, v1alpha1) and a
//! minimal controller: a SandboxClaim names a SandboxTemplate and gets a
//! Sandbox, adopted from a SandboxWarmPool of started ones when a pool
//! matches the template, else made for it; each Sandbox is one Pod of its
//! name. Statuses follow the pods; deleting a claim deletes its sandbox
//! and pod, and a pool makes a new sandbox for each one claimed.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{Shared, State, pods, status, time};

pub const SANDBOX_GROUP: &str = "agents.x-k8s.io";
pub const EXTENSIONS_GROUP: &str = "extensions.agents.x-k8s.io";
pub const VERSION: &str = "v1alpha1";

/// Labels the real controllers put on a sandbox's pod.
const NAME_HASH_LABEL: &str = "agents.x-k8s.io/sandbox-name-hash";
const CLAIM_UID_LABEL: &str = "agents.x-k8s.io/claim-uid";
/// The mock's own mark of a sandbox waiting in a pool.
const POOL_LABEL: &str = "agents.x-k8s.io/warm-pool";

pub struct Kind {
    pub group: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub short: &'static str,
}

pub const KINDS: &[Kind] = &[
    Kind {
        group: SANDBOX_GROUP,
        plural: "sandboxes",
        kind: "Sandbox",
        short: "sandbox",
    },
    Kind {
        group: EXTENSIONS_GROUP,
        plural: "sandboxtemplates",
        kind: "SandboxTemplate",
        short: "sandboxtemplate",
    },
    Kind {
        group: EXTENSIONS_GROUP,
        plural: "sandboxclaims",
        kind: "SandboxClaim",
        short: "sandboxclaim",
    },
    Kind {
        group: EXTENSIONS_GROUP,
        plural: "sandboxwarmpools",
        kind: "SandboxWarmPool",
        short: "swp",
    },
];

pub fn kind(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group == group && version == VERSION && k.plural == plural)
}

/// `/apis/GROUP/v1alpha1`'s resources.
pub fn resources(group: &str) -> Option<Value> {
    let resources: Vec<Value> = KINDS
        .iter()
        .filter(|k| k.group == group)
        .map(|k| {
            json!({
                "name": k.plural, "singularName": k.kind.to_lowercase(), "namespaced": true,
                "kind": k.kind, "shortNames": [k.short],
                "verbs": ["create", "delete", "get", "list", "watch"],
            })
        })
        .collect();
    (!resources.is_empty()).then(|| {
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{group}/{VERSION}"),
            "resources": resources,
        })
    })
}

fn key(plural: &str, ns: &str, name: &str) -> (String, String, String) {
    (plural.to_string(), ns.to_string(), name.to_string())
}

/// Store a new object of `kind` (name or generateName; 404 in a missing
/// namespace, 409 when taken), then let the controller act on it.
pub fn create(
    shared: &Arc<Shared>,
    kind: &Kind,
    ns: &str,
    mut body: Value,
) -> Result<Value, (u16, Value)> {
    let mut st = shared.state.lock().unwrap();
    if !st.namespaces.contains_key(ns) {
        return Err((404, status::not_found("namespaces", ns)));
    }
    let name = match (
        body["metadata"]["name"].as_str(),
        body["metadata"]["generateName"].as_str(),
    ) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(prefix)) => format!("{prefix}{}", pods::name_suffix()),
        _ => {
            return Err((
                422,
                status::failure(
                    422,
                    "Invalid",
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        kind.kind
                    ),
                    None,
                ),
            ));
        }
    };
    let resource = format!("{}.{}", kind.plural, kind.group);
    if st.objects.contains_key(&key(kind.plural, ns, &name)) {
        return Err((409, status::already_exists(&resource, &name)));
    }
    body["apiVersion"] = json!(format!("{}/{VERSION}", kind.group));
    body["kind"] = json!(kind.kind);
    body["metadata"]["name"] = json!(name);
    body["metadata"]["namespace"] = json!(ns);
    body["metadata"]["uid"] = json!(pods::uid());
    body["metadata"]["generation"] = json!(1);
    body["metadata"]["creationTimestamp"] = json!(time::now());
    shared.emit(&mut st, "ADDED", &mut body);
    st.objects.insert(key(kind.plural, ns, &name), body.clone());
    reconcile(shared, &mut st);
    Ok(body)
}

/// Delete the object and what it owns: a claim its sandbox, a sandbox its
/// pod, a pool its unclaimed sandboxes.
pub async fn delete(shared: &Arc<Shared>, kind: &Kind, ns: &str, name: &str) -> Option<Value> {
    let (object, sandboxes) = {
        let mut st = shared.state.lock().unwrap();
        let mut object = st.objects.remove(&key(kind.plural, ns, name))?;
        object["metadata"]["deletionTimestamp"] = json!(time::now());
        shared.emit(&mut st, "DELETED", &mut object);
        let owned: Vec<String> = st
            .objects
            .iter()
            .filter(|((plural, n, _), s)| {
                plural == "sandboxes"
                    && n == ns
                    && match kind.plural {
                        "sandboxes" => s["metadata"]["name"] == name,
                        "sandboxclaims" => owner(s) == Some(name),
                        "sandboxwarmpools" => s["metadata"]["labels"][POOL_LABEL] == name,
                        _ => false,
                    }
            })
            .map(|((_, _, n), _)| n.clone())
            .collect();
        for sandbox in &owned {
            if let Some(mut s) = st.objects.remove(&key("sandboxes", ns, sandbox)) {
                shared.emit(&mut st, "DELETED", &mut s);
            }
        }
        (object, owned)
    };
    let mut pods_gone: Vec<String> = sandboxes;
    if kind.plural == "sandboxes" {
        pods_gone.push(name.to_string());
    }
    for pod in pods_gone {
        pods::delete(shared, ns, &pod).await;
    }
    reconcile(shared, &mut shared.state.lock().unwrap());
    Some(object)
}

/// Reconcile after every change (pods becoming Ready move sandboxes,
/// claims and pools), until the mock stops.
pub async fn controller(shared: Arc<Shared>) {
    let mut changed = shared.changed.subscribe();
    let mut stopped = shared.stopped.subscribe();
    loop {
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            _ = stopped.wait_for(|s| *s) => return,
        }
        reconcile(&shared, &mut shared.state.lock().unwrap());
    }
}

/// The claim owning a sandbox.
fn owner(sandbox: &Value) -> Option<&str> {
    sandbox["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["kind"] == "SandboxClaim")?["name"]
        .as_str()
}

/// What the controllers would do now: claims get sandboxes, pools fill
/// up, statuses follow the pods. Cheap and idempotent: it runs after every
/// change.
pub fn reconcile(shared: &Arc<Shared>, st: &mut State) {
    let objects = |st: &State, plural: &str| -> Vec<Value> {
        st.objects
            .iter()
            .filter(|((p, _, _), _)| p == plural)
            .map(|(_, v)| v.clone())
            .collect()
    };
    for claim in objects(st, "sandboxclaims") {
        if claim["status"]["sandbox"]["name"].is_string() {
            continue;
        }
        bind(shared, st, &claim);
    }
    for pool in objects(st, "sandboxwarmpools") {
        fill(shared, st, &pool);
    }
    for sandbox in objects(st, "sandboxes") {
        let ns = sandbox["metadata"]["namespace"].as_str().unwrap_or("");
        let name = sandbox["metadata"]["name"].as_str().unwrap_or("");
        let pod = st
            .pods
            .get(&(ns.to_string(), name.to_string()))
            .map(|p| p.object.clone());
        let (ready, reason, message) = match &pod {
            Some(pod) if ready(pod) => (true, "DependenciesReady", "Pod is Ready".to_string()),
            Some(pod) => (
                false,
                "DependenciesNotReady",
                format!(
                    "Pod is not Ready; phase {}",
                    pod["status"]["phase"].as_str().unwrap_or("Pending")
                ),
            ),
            None => (
                false,
                "DependenciesNotReady",
                "Pod does not exist".to_string(),
            ),
        };
        let status = json!({
            "service": name,
            "serviceFQDN": format!("{name}.{ns}.svc.cluster.local"),
            "replicas": 1,
            "selector": format!("{NAME_HASH_LABEL}={}", name_hash(name)),
            "conditions": [condition(ready, reason, &message)],
        });
        set_status(shared, st, "sandboxes", &sandbox, status);
    }
    for claim in objects(st, "sandboxclaims") {
        let ns = claim["metadata"]["namespace"].as_str().unwrap_or("");
        let Some(name) = claim["status"]["sandbox"]["name"].as_str() else {
            continue;
        };
        let sandbox = st.objects.get(&key("sandboxes", ns, name));
        let cond = sandbox
            .map(|s| s["status"]["conditions"][0].clone())
            .filter(|c| c.is_object())
            .unwrap_or_else(|| condition(false, "SandboxNotFound", "the claim's sandbox is gone"));
        let ips = st
            .pods
            .get(&(ns.to_string(), name.to_string()))
            .and_then(|p| p.object["status"]["podIP"].as_str().map(str::to_string));
        let mut status = json!({"conditions": [cond], "sandbox": {"name": name}});
        if let Some(ip) = ips {
            status["sandbox"]["podIPs"] = json!([ip]);
        }
        set_status(shared, st, "sandboxclaims", &claim, status);
    }
    for pool in objects(st, "sandboxwarmpools") {
        let members = pool_members(st, &pool);
        let ready_count = members
            .iter()
            .filter(|s| s["status"]["conditions"][0]["status"] == "True")
            .count();
        let status = json!({"replicas": members.len(), "readyReplicas": ready_count});
        set_status(shared, st, "sandboxwarmpools", &pool, status);
    }
}

fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A `metav1.Condition` of type Ready.
fn condition(ready: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": "Ready",
        "status": if ready { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "observedGeneration": 1,
        "lastTransitionTime": time::now(),
    })
}

/// Write `status` unless only its timestamps would change.
fn set_status(shared: &Shared, st: &mut State, plural: &str, object: &Value, status: Value) {
    let strip = |v: &Value| {
        let mut v = v.clone();
        for c in v["conditions"].as_array_mut().into_iter().flatten() {
            c["lastTransitionTime"] = Value::Null;
        }
        v
    };
    if strip(&object["status"]) == strip(&status) {
        return;
    }
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let Some(stored) = st.objects.get(&key(plural, ns, name)) else {
        return;
    };
    let mut updated = stored.clone();
    updated["status"] = status;
    shared.emit(st, "MODIFIED", &mut updated);
    st.objects.insert(key(plural, ns, name), updated);
}

/// A short stable hash of a sandbox's name, for its pod's label.
fn name_hash(name: &str) -> String {
    let mut h: u32 = 2_166_136_261;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(16_777_619);
    }
    format!("{h:08x}")
}

fn pool_members(st: &State, pool: &Value) -> Vec<Value> {
    let ns = &pool["metadata"]["namespace"];
    st.objects
        .iter()
        .filter(|((p, _, _), s)| {
            p == "sandboxes"
                && &s["metadata"]["namespace"] == ns
                && s["metadata"]["labels"][POOL_LABEL] == pool["metadata"]["name"]
        })
        .map(|(_, s)| s.clone())
        .collect()
}

/// The pool's pod template: its own, or its template's.
fn pool_template(st: &State, pool: &Value) -> Option<Value> {
    let ns = pool["metadata"]["namespace"].as_str().unwrap_or("");
    if pool["spec"]["podTemplate"].is_object() {
        return Some(pool["spec"]["podTemplate"].clone());
    }
    let template = pool["spec"]["sandboxTemplateRef"]["name"].as_str()?;
    st.objects
        .get(&key("sandboxtemplates", ns, template))
        .map(|t| t["spec"]["podTemplate"].clone())
}

/// Make sandboxes until the pool holds `spec.replicas` unclaimed ones.
fn fill(shared: &Arc<Shared>, st: &mut State, pool: &Value) {
    let want = pool["spec"]["replicas"].as_u64().unwrap_or(0) as usize;
    let have = pool_members(st, pool).len();
    let Some(template) = pool_template(st, pool) else {
        return;
    };
    let pool_name = pool["metadata"]["name"].as_str().unwrap_or("");
    let ns = pool["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    for _ in have..want {
        let name = format!("{pool_name}-{}", pods::name_suffix());
        let labels = json!({POOL_LABEL: pool_name});
        make_sandbox(shared, st, &ns, &name, &template, labels, None);
    }
}

/// Give the claim a sandbox: one adopted from a matching pool, else a
/// new one of its name.
fn bind(shared: &Arc<Shared>, st: &mut State, claim: &Value) {
    let ns = claim["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let claim_name = claim["metadata"]["name"].as_str().unwrap_or("").to_string();
    let template_name = claim["spec"]["sandboxTemplateRef"]["name"]
        .as_str()
        .unwrap_or("");
    let Some(template) = st
        .objects
        .get(&key("sandboxtemplates", &ns, template_name))
        .map(|t| t["spec"]["podTemplate"].clone())
    else {
        let message = format!("SandboxTemplate \"{template_name}\" not found");
        let status = json!({"conditions": [condition(false, "TemplateNotFound", &message)]});
        set_status(shared, st, "sandboxclaims", claim, status);
        return;
    };
    let policy = claim["spec"]["warmpool"].as_str().unwrap_or("default");
    let owner = json!([{
        "apiVersion": format!("{EXTENSIONS_GROUP}/{VERSION}"),
        "kind": "SandboxClaim",
        "name": claim_name,
        "uid": claim["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let claim_uid = claim["metadata"]["uid"].as_str().unwrap_or("").to_string();
    let pools: Vec<Value> = st
        .objects
        .iter()
        .filter(|((p, n, name), _)| {
            p == "sandboxwarmpools" && *n == ns && (policy == "default" || policy == name)
        })
        .map(|(_, v)| v.clone())
        .filter(|pool| {
            pool["spec"]["sandboxTemplateRef"]["name"] == template_name
                || pool_template(st, pool).as_ref() == Some(&template)
        })
        .collect();
    let warm = (policy != "none")
        .then(|| pools.iter().flat_map(|p| pool_members(st, p)).next())
        .flatten();
    let sandbox_name = match warm {
        Some(mut sandbox) => {
            let name = sandbox["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if let Some(labels) = sandbox["metadata"]["labels"].as_object_mut() {
                labels.remove(POOL_LABEL);
            }
            sandbox["metadata"]["ownerReferences"] = owner;
            shared.emit(st, "MODIFIED", &mut sandbox);
            st.objects.insert(key("sandboxes", &ns, &name), sandbox);
            if let Some(pod) = st.pods.get_mut(&(ns.clone(), name.clone())) {
                pod.object["metadata"]["labels"][CLAIM_UID_LABEL] = json!(claim_uid);
                let mut object = pod.object.clone();
                shared.emit(st, "MODIFIED", &mut object);
                st.pods.get_mut(&(ns.clone(), name.clone())).unwrap().object = object;
            }
            name
        }
        None => {
            let labels = json!({});
            make_sandbox(
                shared,
                st,
                &ns,
                &claim_name,
                &template,
                labels,
                Some((owner, claim_uid)),
            );
            claim_name.clone()
        }
    };
    let status = json!({"sandbox": {"name": sandbox_name}, "conditions": [condition(false, "DependenciesNotReady", "Pod is not Ready")]});
    set_status(shared, st, "sandboxclaims", claim, status);
}

/// A Sandbox and its Pod, both named `name`.
fn make_sandbox(
    shared: &Arc<Shared>,
    st: &mut State,
    ns: &str,
    name: &str,
    template: &Value,
    labels: Value,
    owner: Option<(Value, String)>,
) {
    if st.objects.contains_key(&key("sandboxes", ns, name)) {
        return;
    }
    let mut sandbox = json!({
        "apiVersion": format!("{SANDBOX_GROUP}/{VERSION}"),
        "kind": "Sandbox",
        "metadata": {
            "name": name, "namespace": ns, "uid": pods::uid(), "generation": 1,
            "creationTimestamp": time::now(), "labels": labels,
        },
        "spec": {"podTemplate": template, "replicas": 1},
    });
    let mut pod_labels = template["metadata"]["labels"].clone();
    if !pod_labels.is_object() {
        pod_labels = json!({});
    }
    pod_labels[NAME_HASH_LABEL] = json!(name_hash(name));
    if let Some((owner, claim_uid)) = owner {
        sandbox["metadata"]["ownerReferences"] = owner;
        pod_labels[CLAIM_UID_LABEL] = json!(claim_uid);
    }
    shared.emit(st, "ADDED", &mut sandbox);
    st.objects.insert(key("sandboxes", ns, name), sandbox);
    let pod = json!({
        "metadata": {
            "name": name,
            "labels": pod_labels,
            "ownerReferences": [{
                "apiVersion": format!("{SANDBOX_GROUP}/{VERSION}"), "kind": "Sandbox",
                "name": name, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": template["spec"],
    });
    let mut pod = pod;
    if template["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = template["metadata"]["annotations"].clone();
    }
    // A pod the admission refuses leaves the sandbox not Ready, its
    // condition saying the pod does not exist.
    let _ = pods::create(shared, st, ns, pod);
}
