//! The cluster a grant speaks to: the user's kubeconfig (the file kubectl
//! reads) or, inside a pod, the in-cluster config; and the API's errors in
//! words that name the context, the server, the user and the verb.

use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use super::{ClusterInfo, PodGrant};

/// A connected cluster and what errors name.
#[derive(Clone)]
pub(super) struct Cluster {
    pub(super) client: Client,
    pub(super) context: String,
    /// Reached by the in-cluster config of the pod sanddune runs in (its
    /// `context` is only a word then).
    pub(super) in_cluster: bool,
    pub(super) server: String,
    /// The kubeconfig user (or the pod's service account).
    pub(super) user: String,
    pub(super) namespace: String,
}

impl Cluster {
    /// `e`, from `verb` on `resource`, as the user should read it.
    pub(super) fn error(&self, verb: &str, resource: &str, e: kube::Error) -> String {
        match e {
            kube::Error::Api(status) => match status.code {
                401 => format!(
                    "the API server of context `{}` ({}) did not accept the credentials of kubeconfig user `{}` (401 Unauthorized): log in again or refresh the token, then retry",
                    self.context, self.server, self.user
                ),
                403 if status.message.contains("exceeded quota") => format!(
                    "namespace `{}` has no quota left for another pod: {}",
                    self.namespace, status.message
                ),
                403 => format!(
                    "kubeconfig user `{}` may not {verb} {resource} in namespace `{}` (403 Forbidden): {}",
                    self.user, self.namespace, status.message
                ),
                _ => format!("{verb} {resource}: {} ({})", status.message, status.reason),
            },
            other => format!(
                "cannot reach the API server of context `{}` at {}: {}",
                self.context,
                self.server,
                root_cause(&other)
            ),
        }
    }
}

/// The innermost error: what a connection failure is actually about.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if std::ptr::eq(cause, e) {
        e.to_string()
    } else {
        format!("{e}: {cause}")
    }
}

/// Connect as `grant` says and check the API server answers and the
/// namespace exists.
pub(super) async fn connect(grant: &PodGrant) -> Result<(Cluster, ClusterInfo), String> {
    let (config, context, user) = load(grant).await?;
    let in_cluster = from_pod();
    let namespace = grant
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let client = Client::try_from(config)
        .map_err(|e| format!("a client for context `{context}` ({server}): {e}"))?;
    let cluster = Cluster {
        client,
        context,
        in_cluster,
        server,
        user,
        namespace,
    };
    let version = cluster
        .client
        .apiserver_version()
        .await
        .map_err(|e| cluster.error("get", "the server's version", e))?;
    if let Some(warning) = untested_release(&version.major, &version.minor) {
        // Once per process: a fan-out connects once per item.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "the API server of context `{}` ({}) is Kubernetes {}: {warning}",
                cluster.context,
                cluster.server,
                version.git_version
            )
        });
    }
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    match namespaces.get_opt(&cluster.namespace).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(format!(
                "namespace `{}` does not exist in context `{}` ({}): create it (kubectl create namespace {}) or choose another with --sandbox-opt namespace=NAME",
                cluster.namespace, cluster.context, cluster.server, cluster.namespace
            ));
        }
        // A user who may not read namespaces may still own one.
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        Err(e) => return Err(cluster.error("get", "namespaces", e)),
    }
    let info = ClusterInfo {
        context: cluster.context.clone(),
        server: cluster.server.clone(),
        namespace: cluster.namespace.clone(),
        version: version.git_version,
    };
    Ok((cluster, info))
}

/// The oldest and the newest Kubernetes release the provider is tested on
/// (docs/providers/kubernetes.md says how).
const TESTED: [(u32, u32); 2] = [(1, 20), (1, 36)];

/// Why release `major`.`minor` (as `/version` gives them: `"1"`, `"20+"`)
/// is outside the tested range; None inside it, or when it says no number.
fn untested_release(major: &str, minor: &str) -> Option<String> {
    let number = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
    let release = (number(major)?, number(minor)?);
    let [(old_major, old_minor), (new_major, new_minor)] = TESTED;
    let range = format!("sanddune is tested on {old_major}.{old_minor} to {new_major}.{new_minor}");
    if release < TESTED[0] {
        Some(format!(
            "{range}; older releases may lack what it relies on (pods/exec over WebSocket, Pod fields), so upgrade the cluster if a run fails"
        ))
    } else if release > TESTED[1] {
        Some(format!(
            "{range}; a newer release should work, and a failure is worth reporting with this version"
        ))
    } else {
        None
    }
}

/// What a cluster reached by the in-cluster config is called.
const IN_CLUSTER: &str = "in-cluster";

/// Whether the cluster is reached by the in-cluster config: sanddune runs
/// in a pod and no kubeconfig names another.
fn from_pod() -> bool {
    let from_file = std::env::var_os("KUBECONFIG").is_some()
        || std::env::home_dir().is_some_and(|h| h.join(".kube/config").exists());
    !from_file && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

/// The config for the grant's context, with that context's name and user.
async fn load(grant: &PodGrant) -> Result<(Config, String, String), String> {
    if from_pod() {
        if let Some(context) = &grant.context {
            return Err(format!(
                "context={context}: there is no kubeconfig here, only the in-cluster config of the pod sanddune runs in"
            ));
        }
        let config = Config::incluster().map_err(|e| format!("the in-cluster config: {e}"))?;
        return Ok((
            config,
            IN_CLUSTER.into(),
            "the pod's service account".into(),
        ));
    }
    let kubeconfig = Kubeconfig::read().map_err(|e| {
        format!(
            "cannot read your kubeconfig (KUBECONFIG, else ~/.kube/config: the file kubectl reads): {e}"
        )
    })?;
    let context = match grant
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
    {
        Some(c) => c,
        None => {
            return Err(
                "your kubeconfig has no current context: choose one with --sandbox-opt context=NAME"
                    .into(),
            );
        }
    };
    let Some(named) = kubeconfig.contexts.iter().find(|c| c.name == context) else {
        let known: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        return Err(format!(
            "context `{context}` is not in your kubeconfig; it has: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    let user = named
        .context
        .as_ref()
        .and_then(|c| c.user.clone())
        .unwrap_or_else(|| "(none)".into());
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| format!("context `{context}` of your kubeconfig: {e}"))?;
    Ok((config, context, user))
}

/// The context and namespace a grant with no options would use, read from
/// the kubeconfig without reaching the cluster; None without one.
pub fn default_target() -> Option<(String, String)> {
    let kubeconfig = Kubeconfig::read().ok()?;
    let context = kubeconfig.current_context.clone()?;
    let namespace = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref()?.namespace.clone())
        .unwrap_or_else(|| "default".into());
    Some((context, namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_outside_the_tested_range_is_named() {
        assert_eq!(untested_release("1", "20"), None);
        assert_eq!(untested_release("1", "28+"), None);
        assert_eq!(untested_release("1", "36"), None);
        let old = untested_release("1", "19+").unwrap();
        assert!(old.contains("tested on 1.20 to 1.36"), "{old}");
        assert!(old.contains("upgrade"), "{old}");
        let new = untested_release("1", "37").unwrap();
        assert!(new.contains("newer release"), "{new}");
        assert_eq!(untested_release("", "x"), None);
    }
}
