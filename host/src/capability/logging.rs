//! The `logging` capability: plugin diagnostics into the host's `tracing`,
//! bounded so a plugin cannot flood the host's log.

use wasmtime::Result;

use super::PluginState;
use crate::plugin::bindings::logging::{Host, Level};

const MAX_MESSAGE_BYTES: usize = 64 << 10;
const MAX_MESSAGES_PER_CALL: u64 = 10_000;

impl Host for PluginState {
    async fn log(&mut self, level: Level, message: String) -> Result<()> {
        self.log_messages += 1;
        if self.log_messages > MAX_MESSAGES_PER_CALL {
            if self.log_messages == MAX_MESSAGES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, "too many log messages in one call; dropping the rest");
            }
            return Ok(());
        }
        let message = truncate(&message, MAX_MESSAGE_BYTES);
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

/// At most `max` bytes, cut on a char boundary, with a marker when cut.
pub fn truncate(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes truncated]", &text[..end], text.len() - end).into()
}
