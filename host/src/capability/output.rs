//! The `output` capability: where a sandbox provider's exec streams each line,
//! so the host forwards it to whoever consumes the exec (the agent's stream
//! parser, the run log) while the command still runs.

use tokio::sync::mpsc;

/// Longest line handed to a plugin; longer output is split.
pub const MAX_LINE_BYTES: usize = 16 << 20;

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

/// Splits one stream's chunks into lines, none longer than MAX_LINE_BYTES.
#[derive(Default)]
pub(crate) struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    pub(crate) fn push(
        &mut self,
        mut chunk: &[u8],
        stream: OutputStream,
        out: &mut Vec<OutputLine>,
    ) {
        while !chunk.is_empty() {
            let room = MAX_LINE_BYTES - self.buf.len();
            match chunk.iter().position(|b| *b == b'\n') {
                Some(i) if i <= room => {
                    self.buf.extend_from_slice(&chunk[..i]);
                    chunk = &chunk[i + 1..];
                    out.push(self.take(stream));
                }
                _ if chunk.len() >= room => {
                    self.buf.extend_from_slice(&chunk[..room]);
                    chunk = &chunk[room..];
                    out.push(self.take(stream));
                }
                _ => {
                    self.buf.extend_from_slice(chunk);
                    chunk = &[];
                }
            }
        }
    }

    pub(crate) fn finish(&mut self, stream: OutputStream, out: &mut Vec<OutputLine>) {
        if !self.buf.is_empty() {
            out.push(self.take(stream));
        }
    }

    fn take(&mut self, stream: OutputStream) -> OutputLine {
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        OutputLine { stream, text }
    }
}
