//! The `logging` capability: plugin diagnostics into the host's `tracing`,
//! bounded so a plugin cannot flood the host's log.

use wasmtime::Result;

use super::PluginState;
use crate::plugin::bindings::logging::{Host, Level};

/// Call tracing of the generated WASI bindings, always off: at trace level
/// it prints the arguments of every guest call, among them request paths
/// with their queries and environment values, which may carry credentials.
const QUIET_TARGETS: &[&str] = &[
    "wasmtime_wasi::p2::bindings",
    "wasmtime_wasi_http::p2::bindings",
];

/// The host's log filter: `directives` (`SANDDUNE_LOG`; `warn` when absent
/// or invalid) with the WASI bindings' call tracing off whatever they say.
pub fn host_filter(directives: Option<&str>) -> tracing_subscriber::EnvFilter {
    let mut filter = directives
        .and_then(|d| tracing_subscriber::EnvFilter::try_new(d).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    for target in QUIET_TARGETS {
        filter = filter.add_directive(format!("{target}=off").parse().expect("a valid directive"));
    }
    filter
}

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
