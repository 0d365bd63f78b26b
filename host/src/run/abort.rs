//! Cancelling a run from outside: a library caller's handle, Ctrl-C in the
//! CLI, `sanddune stop` (through the live-runs registry).

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Cancels a run. Cloning shares the handle.
#[derive(Clone, Default)]
pub struct AbortHandle {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The handles this one is aborted with (see [`child`](Self::child)
    /// and [`either`]); the reason of the first that was aborted is its.
    parents: Vec<AbortHandle>,
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
            parents: vec![self.clone()],
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn reason(&self) -> String {
        let own = self.reason.lock().unwrap().clone();
        own.or_else(|| {
            let parent = self.parents.iter().find(|p| p.is_aborted())?;
            Some(parent.reason())
        })
        .unwrap_or_else(|| "aborted".into())
    }

    pub async fn aborted(&self) {
        self.token.cancelled().await
    }
}

/// A handle aborted alone, or with `a` or `b`: a run whose sandbox part and
/// agent part came with different handles. Watching `b` takes a task,
/// which ends with the returned guard (none when `a` and `b` are one).
pub fn either(a: &AbortHandle, b: &AbortHandle) -> (AbortHandle, Option<AbortOnDropHandle<()>>) {
    let mut child = a.child();
    if Arc::ptr_eq(&a.reason, &b.reason) {
        return (child, None);
    }
    child.parents.push(b.clone());
    let (token, b) = (child.token.clone(), b.clone());
    let watch = tokio::spawn(async move {
        tokio::select! {
            () = b.aborted() => token.cancel(),
            () = token.cancelled() => {}
        }
    });
    (child, Some(AbortOnDropHandle::new(watch)))
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

    #[tokio::test]
    async fn either_aborts_with_each_of_two_handles() {
        let (a, b) = (AbortHandle::new(), AbortHandle::new());
        let (run, guard) = either(&a, &b);
        assert!(guard.is_some(), "two handles are watched");
        b.abort("stopped by the agent's handle");
        tokio::time::timeout(std::time::Duration::from_secs(5), run.aborted())
            .await
            .expect("b aborts the run");
        assert_eq!(run.reason(), "stopped by the agent's handle");
        assert!(!a.is_aborted());

        let (run, guard) = either(&a, &a.clone());
        assert!(guard.is_none(), "one handle needs no watch");
        a.abort("interrupted (Ctrl-C)");
        assert!(run.is_aborted());
        assert_eq!(run.reason(), "interrupted (Ctrl-C)");
    }
}
