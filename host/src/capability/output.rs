//! The host side of `output-sink`: a sandbox provider's exec streams each
//! line here, and the host forwards it to whoever consumes the exec
//! (the agent's stream parser, the run log) while the command still runs.

use tokio::sync::mpsc;
use wasmtime::Result;
use wasmtime::component::Resource;

use super::PluginState;
use crate::plugin::bindings::output::{Host, HostOutputSink};
use crate::plugin::bindings::types::OutputLine;

pub struct OutputSink {
    pub(crate) tx: mpsc::Sender<OutputLine>,
}

impl Host for PluginState {}

impl HostOutputSink for PluginState {
    async fn write(&mut self, sink: Resource<OutputSink>, line: OutputLine) -> Result<()> {
        let tx = self.table.get(&sink)?.tx.clone();
        // Waiting here is the back-pressure: a consumer that fell behind slows
        // the provider instead of growing host memory. A gone consumer drops.
        let _ = tx.send(line).await;
        Ok(())
    }

    async fn drop(&mut self, sink: Resource<OutputSink>) -> Result<()> {
        self.table.delete(sink)?;
        Ok(())
    }
}
