//! What a run leaves to do once its result is known: its sandbox's close,
//! the deletion of its removed worktree's files, and its pool's top-up.
//!
//! Removing a container takes about as long as the agent's first exec, and
//! deleting a worktree as long as the tree is big; nothing in the result
//! depends on either once the sandbox is stopped (see
//! `SandboxHandle::stopped`) and the worktree moved aside (`Removed`). So
//! [`super::PlannedRun::run_to_result`] hands them back as a [`Closing`]
//! and the caller prints the result first. Until it is finished the
//! live-runs record says `closing` and the sandbox record stays, so a
//! process killed in between leaves the sandbox to `sanddune gc`, like any
//! killed run's, and the files too.

use super::log::RunLog;
use super::pool::Refill;
use super::registry::{self, Live};
use crate::error::Result;
use crate::plugin::sandbox::Sandbox;
use crate::worktree::Removed;

/// A run's sandbox close and worktree deletion, left for after its result.
/// [`Closing::finish`] does them; dropped unfinished, they are done in the
/// background on the runtime (and left to `sanddune gc` if the process
/// ends first).
#[must_use = "finish() closes the run's sandbox"]
pub struct Closing {
    sandbox: Option<Sandbox>,
    removed: Option<Removed>,
    live: Option<Live>,
    /// The pool's top-up (ADR 0037): after the result, so it takes no CPU
    /// from the agent, and before the process exits, so no container is
    /// left half made.
    refill: Option<Refill>,
    log: RunLog,
}

impl Closing {
    pub(super) fn new(sandbox: Option<Sandbox>, removed: Option<Removed>, log: RunLog) -> Self {
        Self {
            sandbox,
            removed,
            live: None,
            refill: None,
            log,
        }
    }

    /// Top the pool up too.
    pub(super) fn with_refill(mut self, refill: Option<Refill>) -> Self {
        self.refill = refill;
        self
    }

    /// Hold the run's live-runs record until the closing is done.
    pub(super) fn with_live(mut self, live: Option<Live>) -> Self {
        if !self.is_done()
            && let Some(live) = &live
        {
            live.set_state(registry::State::Closing);
        }
        self.live = live;
        self
    }

    /// Nothing was left to do.
    pub fn is_done(&self) -> bool {
        self.sandbox.is_none() && self.removed.is_none() && self.refill.is_none()
    }

    /// Close the sandbox, then delete the removed worktree's files. A
    /// failure is also in the run log; a sandbox's record then says it is
    /// closing, and `sanddune gc` finishes it.
    pub async fn finish(mut self) -> Result<()> {
        let refill = self.refill.take().map(|r| tokio::spawn(r.run()));
        let timings = self.log.timings().clone();
        let mut closed = Ok(());
        if let Some(mut sandbox) = self.sandbox.take() {
            closed = timings
                .time("sandbox close (after the result)", sandbox.close())
                .await;
            if let Err(e) = &closed {
                self.log.line(&format!(
                    "warning: the sandbox did not close after the result: {e} (`sanddune gc` removes what is left)"
                ));
            }
        }
        if let Some(removed) = self.removed.take() {
            let deleted = tokio::task::spawn_blocking(move || removed.delete())
                .await
                .unwrap_or(Ok(()));
            if let Err(e) = &deleted {
                self.log.line(&format!("warning: {e}"));
            }
            closed = closed.and(deleted);
        }
        if let Some(refill) = refill {
            for line in refill.await.unwrap_or_default() {
                self.log.line(&line);
            }
        }
        self.live = None;
        closed
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if self.is_done() {
            return;
        }
        // No runtime: the sandbox's own drop kills its processes; its
        // containers and the removed files are left to gc.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let rest = Closing {
            sandbox: self.sandbox.take(),
            removed: self.removed.take(),
            live: self.live.take(),
            refill: self.refill.take(),
            log: self.log.clone(),
        };
        rt.spawn(async move {
            let _ = rest.finish().await;
        });
    }
}
