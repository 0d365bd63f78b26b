//! The `logging` capability: plugin diagnostics into the host's `tracing`,
//! bounded so a plugin cannot flood the host's log.

use tracing::Level;

use super::PluginState;

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

impl PluginState {
    /// Record one of the plugin's diagnostics, prefixed with its name.
    pub fn log(&mut self, level: Level, message: &str) {
        self.log_messages += 1;
        if self.log_messages > MAX_MESSAGES_PER_CALL {
            if self.log_messages == MAX_MESSAGES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, "too many log messages in one call; dropping the rest");
            }
            return;
        }
        let message = truncate(message, MAX_MESSAGE_BYTES);
        let plugin = &*self.plugin;
        match level {
            Level::TRACE => tracing::trace!(plugin, "{message}"),
            Level::DEBUG => tracing::debug!(plugin, "{message}"),
            Level::INFO => tracing::info!(plugin, "{message}"),
            Level::WARN => tracing::warn!(plugin, "{message}"),
            Level::ERROR => tracing::error!(plugin, "{message}"),
        }
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
