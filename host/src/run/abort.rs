//! Cancelling a run from outside: a library caller's handle, Ctrl-C in the CLI.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Cancels a run. Cloning shares the handle.
#[derive(Clone, Default)]
pub struct AbortHandle {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
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

    pub fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| "aborted".into())
    }

    pub async fn aborted(&self) {
        self.token.cancelled().await
    }
}
