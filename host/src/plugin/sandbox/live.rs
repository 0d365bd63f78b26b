//! One live sandbox: its provider instance, how a call goes into it, and
//! how it ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::{CLOSING, flatten, instantiate, with_refusals};
use crate::capability::containers::snapshot::{Kept, Snapshot};
use crate::capability::containers::{Containment, LimitHit};
use crate::capability::{Brokered, Grants, PluginState};
use crate::error::{Error, Result};
use crate::plugin::api::CreateOptions;
use crate::plugin::wit::SandboxBindings;
use crate::plugin::{Plugin, begin_call};

/// A live sandbox. Close it with `close`; dropping it unclosed still kills
/// its processes and removes its scratch directory.
pub struct Sandbox {
    pub(super) store: Store<PluginState>,
    bindings: SandboxBindings,
    handle: ResourceAny,
    pub(super) name: String,
    worktree_path: String,
    scratch: Option<PathBuf>,
    closed: bool,
    /// Set on a lane: the state it attached to. A lane never tears the
    /// sandbox down.
    lane: Option<String>,
    /// A file that says this sandbox is up (see `run::sandbox_record`): removed
    /// once `close` has torn it down.
    record: Option<PathBuf>,
    /// The provider's `state`, once asked: what a fresh instance attaches to.
    state: Option<String>,
    /// Why this instance was given up (a call that would not end); no call
    /// goes into it again.
    pub(super) abandoned: Option<String>,
    /// A call is under way; still set at the next call, it was dropped
    /// half-way, which leaves the instance unable to take another.
    in_flight: bool,
    /// What made this sandbox, so lanes can attach to it.
    pub(super) origin: Origin,
}

/// What made a sandbox, so a fresh instance can attach to it.
#[derive(Clone)]
pub(super) struct Origin {
    pub(super) plugin: Plugin,
    pub(super) grants: Grants,
    pub(super) options: CreateOptions,
}

impl Sandbox {
    /// The sandbox a provider instance created or re-opened, owned: `close`
    /// tears it down.
    pub(super) async fn owned(
        store: Store<PluginState>,
        bindings: SandboxBindings,
        handle: ResourceAny,
        name: String,
        scratch: Option<PathBuf>,
        origin: Origin,
    ) -> Result<Sandbox> {
        let mut sandbox = Sandbox {
            store,
            bindings,
            handle,
            name,
            worktree_path: String::new(),
            scratch,
            closed: false,
            lane: None,
            record: None,
            state: None,
            abandoned: None,
            in_flight: false,
            origin,
        };
        let (bindings, store, handle) = sandbox.begin()?;
        let r = bindings.worktree_path(store, handle).await;
        sandbox.worktree_path = sandbox.end("worktree-path", r)?;
        // Asked now, while the instance surely answers: a fresh instance
        // attaches to it if this one has to be given up.
        sandbox.state().await?;
        Ok(sandbox)
    }

    /// The repository's path inside the sandbox.
    pub fn worktree_path(&self) -> &str {
        &self.worktree_path
    }

    pub fn provider_name(&self) -> &str {
        &self.name
    }

    /// The user's limits and egress policy on this sandbox, when its
    /// provider runs containers or jails through the host (which applies
    /// them).
    pub fn containment(&self) -> Option<&Containment> {
        let grants = &self.origin.grants;
        grants
            .containers
            .as_ref()
            .or(grants.jail.as_ref())
            .map(|g| &g.containment)
    }

    /// The resource limits this sandbox's containers have hit.
    pub async fn limit_hits(&self) -> Vec<LimitHit> {
        match &self.origin.grants.containers {
            Some(grant) => self.store.data().containers.limit_hits(grant).await,
            None => vec![],
        }
    }

    /// Stop everything this sandbox runs without tearing it down, so what it
    /// wrote can be read as final before `close`. True only when the host
    /// knows it is all stopped: every process runs in a container the
    /// provider made through the host, each is paused, the provider runs no
    /// host process and may reach no network or cluster. False otherwise:
    /// only `close` stops it then.
    pub async fn stop(&mut self) -> bool {
        let grants = &self.origin.grants;
        let knowable = self.lane.is_none()
            && !self.closed
            && self.abandoned.is_none()
            && grants.http.is_none()
            && grants.pods.is_none()
            && self.store.data().brokered.is_idle();
        knowable && self.store.data().containers.pause_all().await
    }

    /// The prepared snapshot this sandbox's container may start from or be
    /// kept as (`snapshot=auto`, ADR 0035).
    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.origin.grants.containers.as_ref()?.snapshot.clone()
    }

    /// Commit the sandbox's container as its snapshot, which holds worktree
    /// files when `worktree_files`: a failure says why, and changes nothing
    /// else.
    pub async fn keep_snapshot(&mut self, worktree_files: bool) -> Result<Kept> {
        let Some(grant) = &self.origin.grants.containers else {
            return Err(Error::Plugin(format!(
                "sandbox `{}` runs no container to keep",
                self.name
            )));
        };
        let keep = self
            .store
            .data()
            .containers
            .keep_snapshot(grant, worktree_files);
        keep.await.map_err(Error::Plugin)
    }

    /// Keep the sandbox as a snapshot of its provider's (since 0.8, ADR
    /// 0038) named `name`, and return the provider's id of it. The provider
    /// may have put another sandbox in its place, so the worktree path and
    /// state are asked again (the caller updates the record gc reads).
    pub async fn keep(&mut self, name: &str) -> Result<String> {
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.keep(store, handle, name).await;
        let id = self.end("keep", r)?;
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.worktree_path(store, handle).await;
        self.worktree_path = self.end("worktree-path", r)?;
        self.state = None;
        self.state().await?;
        Ok(id)
    }

    /// Kills what this sandbox's provider is running, from anywhere: its
    /// current call returns and the sandbox stays usable.
    pub fn canceller(&self) -> Brokered {
        self.store.data().brokered.clone()
    }

    /// The provider's opaque handle on this sandbox (e.g. a container id).
    pub async fn state(&mut self) -> Result<String> {
        if let Some(state) = &self.state {
            return Ok(state.clone());
        }
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.state(store, handle).await;
        let state = self.end("state", r)?;
        self.state = Some(state.clone());
        Ok(state)
    }

    /// Another handle on this same sandbox, in a fresh instance of the
    /// provider (through `attach`), so commands can run side by side: one
    /// instance serves one call at a time. Closing a lane, or dropping it,
    /// kills only what the lane runs; the sandbox stays up.
    pub async fn lane(&mut self) -> Result<Sandbox> {
        let state = match &self.lane {
            Some(state) => state.clone(),
            None => self.state().await?,
        };
        Self::attached(
            self.origin.clone(),
            self.name.clone(),
            self.worktree_path.clone(),
            state,
        )
        .await
    }

    /// A sandbox in a fresh instance of its provider, as a lane. (Owned
    /// arguments: a `&Sandbox` held across an await is not `Send`.)
    async fn attached(
        origin: Origin,
        name: String,
        worktree_path: String,
        state: String,
    ) -> Result<Sandbox> {
        let (mut store, bindings) =
            instantiate(&origin.plugin, &name, origin.grants.clone()).await?;
        begin_call(&mut store);
        let attached = bindings.attach(&mut store, &state, &origin.options).await;
        let handle = flatten(&name, "attach", attached)?;
        Ok(Sandbox {
            store,
            bindings,
            handle,
            name,
            worktree_path,
            scratch: None,
            closed: false,
            lane: Some(state.clone()),
            record: None,
            state: Some(state),
            abandoned: None,
            in_flight: false,
            origin,
        })
    }

    /// Ready the instance for a call and lend what the call needs: refused
    /// when the sandbox is closed or its instance given up. Pair with `end`.
    pub(super) fn begin(
        &mut self,
    ) -> Result<(&SandboxBindings, &mut Store<PluginState>, ResourceAny)> {
        if self.closed {
            return Err(Error::Plugin(format!("sandbox `{}` is closed", self.name)));
        }
        self.note_dropped_call();
        if let Some(why) = &self.abandoned {
            return Err(Error::Plugin(why.clone()));
        }
        begin_call(&mut self.store);
        self.in_flight = true;
        Ok((&self.bindings, &mut self.store, self.handle))
    }

    /// The answer of the call `begin` began, as one error naming `what`
    /// with what the host refused during it. A call dropped before its
    /// `end` leaves `in_flight` set, which gives the instance up.
    pub(super) fn end<T>(
        &mut self,
        what: &str,
        r: wasmtime::Result<Result<T, String>>,
    ) -> Result<T> {
        self.in_flight = false;
        flatten(&self.name, what, r)
            .map_err(|e| with_refusals(e, self.store.data().http.take_refusals()))
    }

    /// Tear the sandbox down (a lane: only stop what it runs). Idempotent.
    pub async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.lane.is_some() {
            self.closed = true;
            self.cleanup();
            return Ok(());
        }
        // A record says "closing" from here on: a kill during the close
        // leaves a sandbox gc need only finish closing.
        if let Some(record) = self.record.take() {
            let closing = record.with_extension(CLOSING);
            self.record = std::fs::rename(&record, &closing).ok().map(|_| closing);
        }
        self.note_dropped_call();
        let r = match (&self.abandoned, self.state.clone()) {
            (None, _) => self.close_instance().await,
            // A fresh instance closes what the abandoned one cannot.
            (Some(_), Some(state)) => match Self::attached(
                self.origin.clone(),
                self.name.clone(),
                self.worktree_path.clone(),
                state,
            )
            .await
            {
                Ok(mut fresh) => {
                    let r = fresh.close_instance().await;
                    fresh.closed = true;
                    r
                }
                Err(e) => Err(e),
            },
            (Some(why), None) => Err(Error::Plugin(why.clone())),
        };
        self.closed = true;
        // Containers the provider did not remove go now, whatever it did.
        self.store.data_mut().containers.remove_all().await;
        self.store.data_mut().pods.remove_all().await;
        self.cleanup();
        if r.is_ok()
            && let Some(record) = self.record.take()
        {
            let _ = std::fs::remove_file(record);
        }
        r
    }

    /// The provider's `close` on this instance's sandbox.
    async fn close_instance(&mut self) -> Result<()> {
        let (bindings, store, handle) = self.begin()?;
        let r = bindings.close(store, handle).await;
        self.end("close", r)
    }

    /// A call whose future was dropped before it ended (a caller's own
    /// timeout) left the instance mid-call: give it up like one that would
    /// not end.
    fn note_dropped_call(&mut self) {
        if self.in_flight && self.abandoned.is_none() {
            self.abandoned = Some(format!(
                "sandbox provider `{}` was left in the middle of a call; sanddune gave up on it",
                self.name
            ));
        }
    }

    /// Let go of this handle and leave the sandbox up, its scratch dir
    /// included: `sanddune gc` leaves one it could not recover for its
    /// next pass.
    pub fn detach(mut self) {
        self.closed = true;
        self.scratch = None;
    }

    /// The host directory granted to the provider as its scratch dir.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch.as_deref()
    }

    /// Remove `record` once `close` has torn this sandbox down. While it is
    /// up the file stays for `sanddune gc`; during the close, and when the
    /// close failed, it is renamed to end in [`CLOSING`].
    pub fn remove_on_close(&mut self, record: PathBuf) {
        self.record = Some(record);
    }

    /// The record `remove_on_close` was given.
    pub fn record(&self) -> Option<&Path> {
        self.record.as_deref()
    }

    /// Call the provider's `close` on a sandbox `close` already closed:
    /// `close` itself never calls twice, so this is how the conformance kit
    /// checks that the provider's close is idempotent.
    pub async fn close_again(&mut self) -> Result<()> {
        if !self.closed || self.lane.is_some() {
            return Err(Error::Plugin(format!(
                "close_again on sandbox `{}` before close",
                self.name
            )));
        }
        begin_call(&mut self.store);
        let r = self.bindings.close(&mut self.store, self.handle).await;
        flatten(&self.name, "close", r)
    }

    /// Leave the sandbox's containers running for the run that will claim
    /// them (a warm container, ADR 0037): nothing is torn down but the
    /// scratch dir, which a claiming run gets anew.
    pub fn park(mut self) {
        self.closed = true;
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    fn cleanup(&mut self) {
        self.store.data().brokered.kill_all();
        let containers = self.store.data_mut().containers.remove_all();
        let pods = self.store.data_mut().pods.remove_all();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(containers);
            rt.spawn(pods);
        }
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if !self.closed && self.lane.is_none() {
            tracing::warn!(
                "sandbox `{}` dropped without close; killing its processes",
                self.name
            );
        }
        if !self.closed {
            self.cleanup();
        }
    }
}
