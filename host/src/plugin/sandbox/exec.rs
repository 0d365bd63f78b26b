//! A sandbox's `exec`: output streamed as it comes, and a provider that
//! will not end a command given up.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::live::Sandbox;
use crate::capability::output::{OutputLine, OutputSink, OutputStream};
use crate::error::{Error, Result};
use crate::plugin::api::ExecRequest;

/// How long a provider has to end a command after its timeout, or after
/// the host killed it, before the host gives up on its instance.
const ABANDON_GRACE: Duration = Duration::from_secs(10);

/// Output kept per stream of one exec; lines past it still stream to the
/// consumer, they are just not accumulated.
pub const MAX_CAPTURED_BYTES: usize = 16 << 20;

/// What one exec produced.
#[derive(Clone, Debug, Default)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    /// Run a command; `on_line` sees each output line as it arrives.
    pub async fn exec(
        &mut self,
        request: ExecRequest,
        mut on_line: impl FnMut(&OutputLine) + Send,
    ) -> Result<ExecOutput> {
        let (tx, mut rx) = mpsc::channel::<OutputLine>(256);
        let sink = self
            .store
            .data_mut()
            .table
            .push(OutputSink { tx })
            .map_err(|e| Error::Other(e.into()))?;
        let mut out = ExecOutput::default();
        let mut collect = |line: OutputLine, out: &mut ExecOutput| {
            on_line(&line);
            let buf = match line.stream {
                OutputStream::Stdout => &mut out.stdout,
                OutputStream::Stderr => &mut out.stderr,
            };
            if buf.len() + line.text.len() < MAX_CAPTURED_BYTES {
                buf.push_str(&line.text);
                buf.push('\n');
            } else if !buf.ends_with("[output truncated]\n") {
                buf.push_str("[output truncated]\n");
            }
        };
        let sink_rep = wasmtime::component::Resource::<OutputSink>::new_borrow(sink.rep());
        // The provider is trusted to end the command at its timeout and
        // when killed; one that does not (slow-loris output, a loop that
        // sleeps) is given up after a grace, so it cannot hang the run.
        let brokered = self.canceller();
        let started = Instant::now();
        let timeout = request.timeout_ms.map(Duration::from_millis);
        let result = {
            let call = async {
                let (bindings, store, handle) = self.begin()?;
                Ok::<_, Error>(bindings.exec(store, handle, request, sink_rep).await)
            };
            tokio::pin!(call);
            let mut watch = tokio::time::interval(Duration::from_millis(100));
            let mut killed: Option<Instant> = None;
            loop {
                tokio::select! {
                    r = &mut call => break Ok(r),
                    Some(line) = rx.recv() => collect(line, &mut out),
                    _ = watch.tick() => {
                        if killed.is_none() && brokered.is_cancelled() {
                            killed = Some(Instant::now());
                        }
                        if killed.is_some_and(|k| k.elapsed() > ABANDON_GRACE) {
                            break Err("was killed");
                        }
                        if timeout.is_some_and(|t| started.elapsed() > t + ABANDON_GRACE) {
                            break Err("reached its timeout");
                        }
                    }
                }
            }
        };
        let result = match result {
            Ok(result) => result,
            Err(when) => {
                // Dropping the call cancelled it mid-way: the instance can
                // take no other call, but a fresh one can still close it.
                let why = format!(
                    "sandbox provider `{}` did not end a command {} s after it {when}; sanddune gave up on it",
                    self.name,
                    ABANDON_GRACE.as_secs()
                );
                self.abandoned = Some(why.clone());
                brokered.kill_all();
                return Err(Error::Plugin(why));
            }
        };
        let _ = self.store.data_mut().table.delete(sink);
        while let Ok(line) = rx.try_recv() {
            collect(line, &mut out);
        }
        let result = self.end("exec", result?)?;
        out.exit_code = result.exit_code;
        out.timed_out = result.timed_out;
        Ok(out)
    }
}
