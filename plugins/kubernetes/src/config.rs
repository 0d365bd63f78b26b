//! The provider's options, checked before anything is created.

use std::time::Duration;

/// (name, description, default) of every option.
pub const OPTIONS: &[(&str, &str, Option<&str>)] = &[
    (
        "context",
        "kubeconfig context (the host reads it; your credentials never reach the provider)",
        Some("the current context"),
    ),
    (
        "namespace",
        "namespace the pods live in (the host confines them to it)",
        Some("the context's, else default"),
    ),
    (
        "image",
        "image the cluster can pull, with sh, head, git, tar and the agent's CLI (required unless template= is given)",
        None,
    ),
    (
        "service-account",
        "service account of the pod; without one the pod gets no token for the cluster",
        None,
    ),
    (
        "node-selector",
        "KEY=VALUE[,KEY=VALUE...]: nodes the pod may run on",
        None,
    ),
    (
        "runtime-class",
        "RuntimeClass for stronger isolation (gvisor, kata)",
        None,
    ),
    (
        "cpus",
        "CPU request and limit, a Kubernetes quantity (2, 500m)",
        None,
    ),
    (
        "memory",
        "memory request and limit, a Kubernetes quantity (4Gi, 512Mi)",
        None,
    ),
    (
        "image-pull-secret",
        "secret(s) for a private registry, comma-separated",
        None,
    ),
    (
        "ttl",
        "how long the cluster lets the pod live (activeDeadlineSeconds), so a pod orphaned by a dead laptop ends anyway: 90s, 30m, 6h",
        Some("6h"),
    ),
    (
        "template",
        "an agent-sandbox SandboxTemplate: claim a pod from it (and its warm pool) instead of creating one",
        None,
    ),
    (
        "start-timeout",
        "how long to wait for the pod to be ready",
        Some("5m"),
    ),
    (
        "workdir",
        "where the repository goes in the pod",
        Some("/home/agent/workspace"),
    ),
];

/// The options of one sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub image: Option<String>,
    pub service_account: Option<String>,
    pub node_selector: Vec<(String, String)>,
    pub runtime_class: Option<String>,
    pub cpus: Option<String>,
    pub memory: Option<String>,
    pub image_pull_secrets: Vec<String>,
    pub ttl: Duration,
    pub template: Option<String>,
    pub start_timeout: Duration,
    pub workdir: String,
}

impl Options {
    pub fn parse(config: &[(String, String)]) -> Result<Options, String> {
        let mut o = Options {
            ttl: Duration::from_secs(6 * 3600),
            start_timeout: Duration::from_secs(300),
            workdir: "/home/agent/workspace".into(),
            ..Default::default()
        };
        let mut pod_keys = Vec::new();
        for (key, value) in config {
            let bad = |why: &str| format!("kubernetes: {key}={value}: {why}");
            let value = value.trim();
            // What a SandboxTemplate decides (a claim takes no deadline either).
            if !matches!(
                key.as_str(),
                "context" | "namespace" | "template" | "start-timeout" | "workdir"
            ) {
                pod_keys.push(key.clone());
            }
            match key.as_str() {
                // The host reads these two.
                "context" | "namespace" => {}
                "image" => o.image = Some(nonempty(value).ok_or_else(|| bad("empty"))?),
                "service-account" => {
                    o.service_account = Some(nonempty(value).ok_or_else(|| bad("empty"))?)
                }
                "node-selector" => {
                    for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
                        let (k, v) = pair
                            .split_once('=')
                            .ok_or_else(|| bad("expected KEY=VALUE[,KEY=VALUE...]"))?;
                        o.node_selector.push((k.trim().into(), v.trim().into()));
                    }
                }
                "runtime-class" => {
                    o.runtime_class = Some(nonempty(value).ok_or_else(|| bad("empty"))?)
                }
                "cpus" => o.cpus = Some(quantity(value).map_err(|e| bad(&e))?),
                // `m` is a thousandth: 512m of memory is half a byte.
                "memory" if value.ends_with('m') => {
                    return Err(bad(
                        "`m` means thousandths of a byte: write Mi (512Mi) or M",
                    ));
                }
                "memory" => o.memory = Some(quantity(value).map_err(|e| bad(&e))?),
                "image-pull-secret" => o.image_pull_secrets.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                ),
                "ttl" => o.ttl = duration(value).map_err(|e| bad(&e))?,
                "template" => o.template = Some(nonempty(value).ok_or_else(|| bad("empty"))?),
                "start-timeout" => o.start_timeout = duration(value).map_err(|e| bad(&e))?,
                "workdir" if value.starts_with('/') && value.len() > 1 => {
                    o.workdir = value.trim_end_matches('/').into()
                }
                "workdir" => return Err(bad("an absolute path in the pod")),
                _ => {
                    let known: Vec<&str> = OPTIONS.iter().map(|(n, _, _)| *n).collect();
                    return Err(format!(
                        "kubernetes: unknown option `{key}`; it takes {}",
                        known.join(", ")
                    ));
                }
            }
        }
        match (&o.template, &o.image) {
            (Some(template), _) if !pod_keys.is_empty() => {
                pod_keys.dedup();
                return Err(format!(
                    "kubernetes: template={template} gives the pod; {} would be ignored: set them in the SandboxTemplate",
                    pod_keys.join(", ")
                ));
            }
            (None, None) => {
                return Err("kubernetes needs --sandbox-opt image=IMAGE: an image the cluster can pull, with sh, head, git, tar and the agent's CLI (or template=NAME for an agent-sandbox SandboxTemplate)".into());
            }
            _ => {}
        }
        Ok(o)
    }
}

fn nonempty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// A Kubernetes quantity: a decimal number with an optional suffix.
fn quantity(value: &str) -> Result<String, String> {
    const SUFFIXES: &[&str] = &[
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, suffix) = value.split_at(split);
    let numeric = !number.is_empty()
        && number.parse::<f64>().is_ok_and(|n| n > 0.0)
        && !number.ends_with('.');
    if numeric && SUFFIXES.contains(&suffix) {
        Ok(value.to_string())
    } else {
        Err("not a Kubernetes quantity (e.g. 2, 500m, 512Mi, 4Gi)".into())
    }
}

/// `90s`, `30m`, `6h`, `1d` or bare seconds.
fn duration(value: &str) -> Result<Duration, String> {
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| "not a duration (e.g. 90s, 30m, 6h)".to_string())?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => return Err("not a duration (e.g. 90s, 30m, 6h)".into()),
    };
    if seconds == 0 {
        return Err("must be more than 0".into());
    }
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Options, String> {
        let config: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Options::parse(&config)
    }

    #[test]
    fn an_image_is_needed_and_the_defaults_are_safe() {
        let err = parse(&[]).unwrap_err();
        assert!(err.contains("image=IMAGE"), "{err}");
        let o = parse(&[("image", "ghcr.io/me/agent:1"), ("namespace", "agents")]).unwrap();
        assert_eq!(o.ttl, Duration::from_secs(6 * 3600));
        assert_eq!(o.workdir, "/home/agent/workspace");
    }

    #[test]
    fn quantities_durations_and_selectors_are_checked() {
        let o = parse(&[
            ("image", "i"),
            ("cpus", "500m"),
            ("memory", "4Gi"),
            ("ttl", "30m"),
            ("start-timeout", "90"),
            ("node-selector", "pool=agents, zone=a"),
            ("image-pull-secret", "a,b"),
        ])
        .unwrap();
        assert_eq!(o.cpus.as_deref(), Some("500m"));
        assert_eq!(o.ttl, Duration::from_secs(1800));
        assert_eq!(o.start_timeout, Duration::from_secs(90));
        assert_eq!(
            o.node_selector,
            [
                ("pool".into(), "agents".into()),
                ("zone".into(), "a".into())
            ]
        );
        assert_eq!(o.image_pull_secrets, ["a", "b"]);
        for (key, value, want) in [
            ("memory", "lots", "memory=lots: not a Kubernetes quantity"),
            ("memory", "512m", "write Mi"),
            ("cpus", "-1", "cpus=-1"),
            ("ttl", "soon", "ttl=soon: not a duration"),
            ("ttl", "0", "more than 0"),
            ("node-selector", "pool", "KEY=VALUE"),
            ("workdir", "rel", "absolute path"),
            ("flavour", "x", "unknown option `flavour`"),
        ] {
            let err = parse(&[("image", "i"), (key, value)]).unwrap_err();
            assert!(err.contains(want), "{key}={value}: {err}");
        }
    }

    #[test]
    fn a_template_gives_the_pod_so_pod_options_beside_it_are_refused() {
        let o = parse(&[("template", "python"), ("start-timeout", "1m")]).unwrap();
        assert_eq!(o.template.as_deref(), Some("python"));
        let err = parse(&[("template", "python"), ("ttl", "1h")]).unwrap_err();
        assert!(err.contains("ttl would be ignored"), "{err}");
        let err = parse(&[("template", "python"), ("image", "i"), ("cpus", "1")]).unwrap_err();
        assert!(err.contains("image, cpus would be ignored"), "{err}");
    }
}
