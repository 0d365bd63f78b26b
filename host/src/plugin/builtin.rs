//! The built-in plugins, compiled by host/build.rs and embedded in the binary.

/// (name, component bytes) of every built-in plugin.
pub const BUILTIN: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

pub fn get(name: &str) -> Option<&'static [u8]> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}
