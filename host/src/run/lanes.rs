//! Several commands in one sandbox at once (sandbox hooks, shell
//! expressions). One plugin instance serves one call at a time, so each
//! command gets a lane: a fresh instance attached to the same sandbox.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::abort::AbortHandle;
use crate::capability::Brokered;
use crate::capability::output::OutputLine;
use crate::error::{Error, Result};
use crate::plugin::sandbox::{ExecOutput, ExecRequest, Sandbox};

/// How long killed commands get to return before they are abandoned.
const RETURN_AFTER_KILL: Duration = Duration::from_secs(10);

/// Sees every output line, with the index of the command that printed it.
pub type LineSink = Arc<dyn Fn(usize, &OutputLine) + Send + Sync>;

/// How a batch of commands ended.
#[derive(Debug)]
pub enum Outcome {
    /// Every command exited 0, outputs in request order.
    Done(Vec<ExecOutput>),
    /// The first command to fail (non-zero exit or timeout), by index; the
    /// others were stopped.
    Failed(usize, ExecOutput),
}

fn failed(out: &ExecOutput) -> bool {
    out.exit_code != 0 || out.timed_out
}

/// Run `requests` side by side in `sandbox`, stopping the rest at the first
/// failure or at abort. A provider that cannot attach runs them one after
/// another on `sandbox` itself.
pub async fn exec_all(
    sandbox: &mut Sandbox,
    requests: Vec<ExecRequest>,
    abort: &AbortHandle,
    on_line: LineSink,
) -> Result<Outcome> {
    let mut lanes = Vec::new();
    if requests.len() > 1 {
        for _ in &requests {
            match sandbox.lane().await {
                Ok(lane) => lanes.push(lane),
                Err(e) => {
                    tracing::debug!(
                        "sandbox provider `{}` cannot attach a second instance ({e}); running commands one after another",
                        sandbox.provider_name()
                    );
                    lanes.clear();
                    break;
                }
            }
        }
    }
    if lanes.is_empty() {
        return one_by_one(sandbox, requests, abort, on_line).await;
    }

    let cancellers: Vec<Brokered> = lanes.iter().map(Sandbox::canceller).collect();
    let kill_all = || cancellers.iter().for_each(Brokered::kill_all);
    let count = requests.len();
    let mut set = JoinSet::new();
    for (i, (mut lane, request)) in lanes.into_iter().zip(requests).enumerate() {
        let on_line = on_line.clone();
        set.spawn(async move {
            let out = lane.exec(request, |line| on_line(i, line)).await;
            let _ = lane.close().await;
            (i, out)
        });
    }
    let mut outputs: Vec<Option<ExecOutput>> = (0..count).map(|_| None).collect();
    loop {
        let joined = tokio::select! {
            joined = set.join_next() => joined,
            () = abort.aborted() => {
                kill_all();
                let _ = tokio::time::timeout(RETURN_AFTER_KILL, async {
                    while set.join_next().await.is_some() {}
                })
                .await;
                return Err(Error::Aborted(abort.reason()));
            }
        };
        let Some(joined) = joined else { break };
        let (i, out) =
            joined.map_err(|e| Error::Other(anyhow::anyhow!("a lane task failed: {e}")))?;
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                kill_all();
                return Err(e);
            }
        };
        if failed(&out) {
            kill_all();
            let _ = tokio::time::timeout(RETURN_AFTER_KILL, async {
                while set.join_next().await.is_some() {}
            })
            .await;
            return Ok(Outcome::Failed(i, out));
        }
        outputs[i] = Some(out);
    }
    Ok(Outcome::Done(outputs.into_iter().flatten().collect()))
}

async fn one_by_one(
    sandbox: &mut Sandbox,
    requests: Vec<ExecRequest>,
    abort: &AbortHandle,
    on_line: LineSink,
) -> Result<Outcome> {
    let canceller = sandbox.canceller();
    let mut outputs = Vec::new();
    for (i, request) in requests.into_iter().enumerate() {
        let on_line = on_line.clone();
        let exec = sandbox.exec(request, move |line| on_line(i, line));
        tokio::pin!(exec);
        let out = tokio::select! {
            out = &mut exec => out?,
            () = abort.aborted() => {
                canceller.kill_all();
                let _ = tokio::time::timeout(RETURN_AFTER_KILL, exec).await;
                return Err(Error::Aborted(abort.reason()));
            }
        };
        if failed(&out) {
            return Ok(Outcome::Failed(i, out));
        }
        outputs.push(out);
    }
    Ok(Outcome::Done(outputs))
}
