//! Discovery: what kubectl reads to map `pod` and `ns` to their resources.
//! Served in the legacy (unaggregated) shapes with `application/json`, which
//! every client falls back to.

use serde_json::{Value, json};

use crate::sandboxes;

/// The version the mock reports: kubectl's dispatcher picks its client by
/// it, and 1.30+ clients exec over WebSocket (v5) instead of SPDY.
pub const GIT_VERSION: &str = "v1.32.4";

/// `/version`: [`GIT_VERSION`], or release 1.`minor` when a test chose one.
pub fn version(minor: Option<u32>) -> Value {
    let (minor, git_version) = match minor {
        Some(m) => (m.to_string(), format!("v1.{m}.0")),
        None => ("32".to_string(), GIT_VERSION.to_string()),
    };
    json!({
        "major": "1",
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-22T16:03:38Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    })
}

/// The agent-sandbox groups, besides the core group.
pub fn api_groups() -> Value {
    let group = |name: &str| {
        let gv = json!({"groupVersion": format!("{name}/{}", sandboxes::VERSION), "version": sandboxes::VERSION});
        json!({"name": name, "versions": [gv], "preferredVersion": gv})
    };
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [group(sandboxes::SANDBOX_GROUP), group(sandboxes::EXTENSIONS_GROUP)],
    })
}

pub fn core_v1_resources() -> Value {
    let rw = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace",
             "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ns"]},
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": rw, "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/exec", "singularName": "", "namespaced": true, "kind": "PodExecOptions",
             "verbs": ["create", "get"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
             "verbs": ["get", "patch", "update"]},
        ],
    })
}

/// The OpenAPI v3 root: kubectl reads it to learn whether the server
/// validates fields itself (then it sends `fieldValidation=Strict` instead
/// of validating against the schemas).
pub fn openapi_v3_root() -> Value {
    let mut paths = json!({"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=k8s-mock"}});
    for group in [sandboxes::SANDBOX_GROUP, sandboxes::EXTENSIONS_GROUP] {
        let gv = format!("apis/{group}/{}", sandboxes::VERSION);
        paths[&gv] = json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=k8s-mock")});
    }
    json!({"paths": paths})
}

/// The same for an agent-sandbox group: each kind's PATCH.
pub fn openapi_v3_group(group: &str) -> Value {
    let mut paths = json!({});
    for kind in sandboxes::KINDS.iter().filter(|k| k.group == group) {
        let path = format!(
            "/apis/{group}/{}/namespaces/{{namespace}}/{}/{{name}}",
            sandboxes::VERSION,
            kind.plural
        );
        let gvk = json!({"group": group, "version": sandboxes::VERSION, "kind": kind.kind});
        paths[&path] = patch_operation(gvk);
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": GIT_VERSION}, "paths": paths, "components": {"schemas": {}}})
}

fn patch_operation(gvk: Value) -> Value {
    let parameters = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
    ]);
    json!({"patch": {
        "parameters": parameters,
        "responses": {},
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": gvk,
    }})
}

/// Just enough of core/v1's OpenAPI v3 document for that check, which
/// looks at the pod's PATCH operation for a `fieldValidation` parameter
/// (the mock serves no PATCH, and ignores unknown fields).
pub fn openapi_v3_core() -> Value {
    let gvk = json!({"group": "", "version": "v1", "kind": "Pod"});
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": patch_operation(gvk)},
        "components": {"schemas": {}},
    })
}
