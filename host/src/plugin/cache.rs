//! Compiled components cached on disk, so that loading a plugin a second time
//! costs a file map instead of a compile.
//!
//! Entries are keyed by the component's sha256 and the engine's compatibility
//! hash (wasmtime version and settings), and live in a directory only
//! sanddune writes: `Component::deserialize_file` trusts what it maps.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

/// Where cached components live: $SANDDUNE_CACHE_DIR, else
/// $XDG_CACHE_HOME/sanddune/components, else ~/.cache/sanddune/components.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SANDDUNE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("sanddune/components"))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ComponentCache {
    /// `dir: None` disables the disk cache (every load compiles).
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    /// The compiled component for `bytes`, from the cache when present.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> Result<Component> {
        self.load_hashed(engine, &sha256_hex(bytes), || Ok(Cow::Borrowed(bytes)))
    }

    /// The compiled component of the source whose sha256 is `sha256`, from
    /// the cache when present; `bytes` is asked for only to compile it, so
    /// a cached load reads and hashes nothing.
    pub fn load_hashed<'a>(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: impl FnOnce() -> Result<Cow<'a, [u8]>>,
    ) -> Result<Component> {
        let Some(dir) = &self.dir else {
            return Ok(Component::new(engine, &*bytes()?)?);
        };
        let path = dir.join(format!("{sha256}-{}.cwasm", self.engine_key));
        if path.exists() {
            // SAFETY: files in this directory are written only by `store`
            // below, from components wasmtime compiled with this engine config.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!("ignoring unreadable cache entry {}: {e}", path.display()),
            }
        }
        let component = Component::new(engine, &*bytes()?)?;
        if let Err(e) = store(dir, &path, &component) {
            tracing::warn!(
                "cannot cache the compiled component in {}: {e:#}",
                dir.display()
            );
        }
        Ok(component)
    }
}

fn store(dir: &Path, path: &Path, component: &Component) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(tmp.path(), component.serialize()?)?;
    tmp.persist(path)?;
    Ok(())
}
