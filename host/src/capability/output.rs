//! The `output` capability: where a sandbox provider's exec streams each line,
//! so the host forwards it to whoever consumes the exec (the agent's stream
//! parser, the run log) while the command still runs.

use tokio::sync::mpsc;

/// Which output stream a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// One line of output, without its trailing newline, lossily decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputLine {
    pub stream: OutputStream,
    pub text: String,
}

/// The guest's `output-sink` resource.
pub struct OutputSink {
    pub(crate) tx: mpsc::Sender<OutputLine>,
}

impl OutputSink {
    pub async fn write(&self, line: OutputLine) {
        // Waiting here is the back-pressure: a consumer that fell behind slows
        // the provider instead of growing host memory. A gone consumer drops.
        let _ = self.tx.send(line).await;
    }
}
