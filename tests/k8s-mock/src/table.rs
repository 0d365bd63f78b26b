//! `meta.k8s.io/v1 Table`, what kubectl asks for (`Accept: ...;as=Table`)
//! to print `kubectl get pods`: the server's columns, as the real API's
//! pod printer fills them.

use serde_json::{Value, json};

/// Whether the client asks for a Table first.
pub fn wanted(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',')
            .next()
            .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
    })
}

pub fn pods(pods: &[Value], rv: u64, now: u64) -> Value {
    let column = |name: &str, format: &str, priority: u8| json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority});
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": [
            column("Name", "name", 0),
            column("Ready", "", 0),
            column("Status", "", 0),
            column("Restarts", "", 0),
            column("Age", "", 0),
            column("IP", "", 1),
            column("Node", "", 1),
            column("Nominated Node", "", 1),
            column("Readiness Gates", "", 1),
        ],
        "rows": pods.iter().map(|p| row(p, now)).collect::<Vec<_>>(),
    })
}

fn row(pod: &Value, now: u64) -> Value {
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let state = &statuses
        .first()
        .map(|c| c["state"].clone())
        .unwrap_or_default();
    let status = state["waiting"]["reason"]
        .as_str()
        .or(state["terminated"]["reason"].as_str())
        .or(pod["status"]["phase"].as_str())
        .unwrap_or("Pending");
    let created = pod["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(crate::time::parse)
        .unwrap_or(now);
    json!({
        "cells": [
            pod["metadata"]["name"],
            format!("{ready}/{total}"),
            status,
            "0",
            age(now.saturating_sub(created)),
            pod["status"]["podIP"].as_str().unwrap_or("<none>"),
            pod["spec"]["nodeName"].as_str().unwrap_or("<none>"),
            "<none>",
            "<none>",
        ],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": pod["metadata"],
        },
    })
}

/// kubectl's human duration, to its coarsest steps.
fn age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}
