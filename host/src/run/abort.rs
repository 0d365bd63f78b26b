//! Cancelling a run from outside: a library caller's handle, Ctrl-C in the
//! CLI, `sanddune stop` (through the live-runs registry).

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Cancels a run. Cloning shares the handle.
#[derive(Clone, Default)]
pub struct AbortHandle {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The reason of the handle this one is a [`child`](Self::child) of.
    parent_reason: Option<Arc<Mutex<Option<String>>>>,
}

impl AbortHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Abort the run; it fails with `reason`, verbatim. The first reason wins.
    pub fn abort(&self, reason: impl Into<String>) {
        self.reason
            .lock()
            .unwrap()
            .get_or_insert_with(|| reason.into());
        self.token.cancel();
    }

    /// A handle aborted with this one that can also be aborted alone: one
    /// workflow item's run, stopped without stopping the others.
    pub fn child(&self) -> Self {
        Self {
            token: self.token.child_token(),
            reason: Arc::new(Mutex::new(None)),
            parent_reason: Some(self.reason.clone()),
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn reason(&self) -> String {
        let own = self.reason.lock().unwrap().clone();
        own.or_else(|| self.parent_reason.as_ref()?.lock().unwrap().clone())
            .unwrap_or_else(|| "aborted".into())
    }

    pub async fn aborted(&self) {
        self.token.cancelled().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_aborts_alone_and_with_its_parent() {
        let parent = AbortHandle::new();
        let (one, two) = (parent.child(), parent.child());
        one.abort("stopped");
        assert!(one.is_aborted() && !parent.is_aborted() && !two.is_aborted());
        assert_eq!(one.reason(), "stopped");
        parent.abort("interrupted (Ctrl-C)");
        assert!(two.is_aborted());
        assert_eq!(two.reason(), "interrupted (Ctrl-C)");
        assert_eq!(one.reason(), "stopped");
    }
}
