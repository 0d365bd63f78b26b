//! What a run leaves to do once its result is known: its sandbox's close.
//!
//! Removing a container takes about as long as the agent's first exec, and
//! nothing in the result depends on it once the sandbox is stopped (see
//! `SandboxHandle::stopped`). So [`super::PlannedRun::run_to_result`] hands
//! the close back as a [`Closing`] and the caller prints the result first.
//! Until it is finished the live-runs record says `closing` and the
//! sandbox record stays, so a process killed in between leaves the sandbox
//! to `sanddune gc`, like any killed run's.

use super::log::RunLog;
use super::registry::{self, Live};
use crate::error::Result;
use crate::plugin::sandbox::Sandbox;

/// A run's sandbox close, left for after its result. [`Closing::finish`]
/// does it; dropped unfinished, it is done in the background on the
/// runtime (and left to `sanddune gc` if the process ends first).
#[must_use = "finish() closes the run's sandbox"]
pub struct Closing {
    sandbox: Option<Sandbox>,
    live: Option<Live>,
    log: RunLog,
}

impl Closing {
    pub(super) fn new(sandbox: Option<Sandbox>, live: Option<Live>, log: RunLog) -> Self {
        if sandbox.is_some()
            && let Some(live) = &live
        {
            live.set_state(registry::State::Closing);
        }
        Self { sandbox, live, log }
    }

    /// Nothing was left to do: the sandbox closed before the result.
    pub fn is_done(&self) -> bool {
        self.sandbox.is_none()
    }

    /// Close the sandbox. A failure is also in the run log; the sandbox's
    /// record then says it is closing, and `sanddune gc` finishes it.
    pub async fn finish(mut self) -> Result<()> {
        let Some(mut sandbox) = self.sandbox.take() else {
            return Ok(());
        };
        let timings = self.log.timings().clone();
        let closed = timings
            .time("sandbox close (after the result)", sandbox.close())
            .await;
        if let Err(e) = &closed {
            self.log.line(&format!(
                "warning: the sandbox did not close after the result: {e} (`sanddune gc` removes what is left)"
            ));
        }
        self.live = None;
        closed
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        let Some(mut sandbox) = self.sandbox.take() else {
            return;
        };
        let live = self.live.take();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = sandbox.close().await;
                drop(live);
            });
        }
        // No runtime: the sandbox's own drop kills its processes and its
        // containers' removal is left to gc.
    }
}
