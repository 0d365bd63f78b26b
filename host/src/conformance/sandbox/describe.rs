//! What the provider says it is, and the outgoing HTTP it asks for.

use std::time::Duration;

use super::Checked;
use super::support::shell;
use crate::capability::HttpGrant;
use crate::plugin::sandbox::{SandboxKind, SandboxProvider, SandboxSpec};

pub(super) fn describe(provider: &SandboxProvider) -> Checked {
    let info = provider.info();
    ensure!(
        !info.name.trim().is_empty(),
        "describe returned an empty name"
    );
    ensure!(
        !info.version.trim().is_empty(),
        "describe returned an empty version"
    );
    let kind = match info.kind {
        SandboxKind::BindMount => "bind-mount",
        SandboxKind::Isolated => "isolated",
    };
    Ok(kind.into())
}

/// Every origin it declares, or that its `http-option` options hold under
/// the kit's `--sandbox-opt`s, is one the host can grant:
/// `https://host[:port]` (plain http for loopback only), nothing after the
/// authority.
pub(super) fn http_origins(provider: &SandboxProvider, config: &[(String, String)]) -> Checked {
    let origins = provider.http_origins(config)?;
    HttpGrant::parse(&origins)?;
    Ok(origins.join(", "))
}

/// How long a provider may take to give up when its requests are refused.
pub(super) const REFUSAL_WAIT: Duration = Duration::from_secs(60);

/// With every request refused, the provider returns errors rather than
/// trapping or hanging: a sandbox it still creates answers or fails cleanly.
pub(super) async fn http_refusal(provider: &SandboxProvider, spec: &SandboxSpec) -> Checked {
    let trapped = |e: &crate::Error| e.to_string().contains(" stopped in ");
    let created = tokio::time::timeout(REFUSAL_WAIT, provider.create_refusing_http(spec))
        .await
        .map_err(|_| format!("create did not return within {REFUSAL_WAIT:?} with HTTP refused"))?;
    let mut sandbox = match created {
        Err(e) if trapped(&e) => {
            return Err(format!("it trapped instead of returning an error: {e}"));
        }
        Err(e) => return Ok(format!("create failed cleanly: {e}")),
        Ok(sandbox) => sandbox,
    };
    let ran = tokio::time::timeout(REFUSAL_WAIT, sandbox.exec(shell("true"), |_| {})).await;
    let _ = sandbox.close().await;
    match ran {
        Err(_) => Err(format!(
            "exec did not return within {REFUSAL_WAIT:?} with HTTP refused"
        )),
        Ok(Err(e)) if trapped(&e) => {
            Err(format!("exec trapped instead of returning an error: {e}"))
        }
        Ok(Err(e)) => Ok(format!("exec failed cleanly: {e}")),
        Ok(Ok(_)) => Ok("it needs no HTTP to create and exec".into()),
    }
}
