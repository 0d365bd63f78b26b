//! The built-in plugins, compiled by host/build.rs and embedded in the binary.
//! Their list lives in one place, `BUILTIN` in host/build.rs.

/// One built-in plugin: its component and that component's sha256, taken at
/// build time.
pub struct Builtin {
    pub name: &'static str,
    pub bytes: &'static [u8],
    pub sha256: &'static str,
}

pub const BUILTIN: &[Builtin] = include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

pub fn get(name: &str) -> Option<&'static [u8]> {
    find(name).map(|b| b.bytes)
}

pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|b| b.name).collect()
}

/// The built-in whose component is exactly `bytes`, if any.
pub fn identical(bytes: &[u8]) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|b| b.bytes.len() == bytes.len() && b.bytes == bytes)
        .map(|b| b.name)
}
