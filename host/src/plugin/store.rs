//! Installed plugins: third-party components added with `sanddune plugin
//! add`, each kept beside a record of its hash and of the grants the user
//! approved. `<dir>/<name>.wasm` and `<dir>/<name>.toml`; the record is
//! written last, so a plugin is installed exactly when its record exists.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cache::sha256_hex;
use crate::capability::Capabilities;
use crate::error::{Error, Result};

/// The plugin store's directory: `$SANDDUNE_DATA_DIR`, else
/// `$XDG_DATA_HOME/sanddune/plugins`, else `~/.local/share/sanddune/plugins`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SANDDUNE_DATA_DIR") {
        return Some(PathBuf::from(dir).join("plugins"));
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(base.join("sanddune/plugins"))
}

/// One installed plugin.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Record {
    pub name: String,
    /// "sandbox" or "agent".
    pub kind: String,
    pub version: String,
    pub api_version: String,
    pub sha256: String,
    /// Where it came from (a file path or a URL), for `plugin update`.
    pub source: String,
    /// Resolves before the built-in of the same name.
    #[serde(default)]
    pub shadows_builtin: bool,
    /// What the user approved (the `--grant` items); it never gets more at
    /// run time.
    pub grants: Capabilities,
    /// The component file as written at install: while it is unchanged,
    /// a load trusts `sha256` without reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<FileStamp>,
}

/// Size and modification time of a stored component.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: u128,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        let mtime = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(Self {
            size: meta.len(),
            mtime_ns: mtime.as_nanos(),
        })
    }
}

/// An installed component's bytes, checked against the hash it was
/// approved with: a component changed on disk is refused.
pub fn read_installed(record: &Record, wasm: &Path) -> Result<Vec<u8>> {
    let name = &record.name;
    let bytes = std::fs::read(wasm).map_err(|e| {
        Error::input(format!(
            "installed plugin `{name}` has no component at {} ({e}): reinstall it with `sanddune plugin add`",
            wasm.display()
        ))
    })?;
    let sha = sha256_hex(&bytes);
    if sha != record.sha256 {
        return Err(Error::input(format!(
            "installed plugin `{name}` was changed on disk: {} has sha256 {sha}, but {} was approved; it is refused (reinstall it with `sanddune plugin add`)",
            wasm.display(),
            record.sha256
        )));
    }
    Ok(bytes)
}

pub struct PluginStore {
    dir: PathBuf,
}

/// A plugin name fit for a file name and a `--sandbox` / `--agent` value.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::input(format!(
            "`{name}` is not a usable plugin name: use lowercase letters, digits, `-` and `_` (pick one with --name)"
        )))
    }
}

impl PluginStore {
    pub fn open(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{name}.wasm")),
            self.dir.join(format!("{name}.toml")),
        )
    }

    /// The record of `name`, if installed.
    pub fn record(&self, name: &str) -> Result<Option<Record>> {
        if check_name(name).is_err() {
            return Ok(None);
        }
        let (_, record) = self.paths(name);
        let text = match std::fs::read_to_string(&record) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::input(format!(
                    "cannot read {}: {e}",
                    record.display()
                )));
            }
        };
        toml::from_str(&text)
            .map(Some)
            .map_err(|e| Error::input(format!("{} is damaged: {e}", record.display())))
    }

    /// An installed plugin's record and component path. While the file is
    /// as it was installed (size and mtime), its recorded hash is trusted
    /// without reading it; otherwise it is read and checked now, and a
    /// changed component is refused.
    pub fn locate(&self, name: &str) -> Result<Option<(Record, PathBuf)>> {
        let Some(record) = self.record(name)? else {
            return Ok(None);
        };
        let (wasm, _) = self.paths(name);
        let stamp = FileStamp::of(&wasm);
        if stamp.is_none() || record.stamp.is_none() || stamp != record.stamp {
            read_installed(&record, &wasm)?;
        }
        Ok(Some((record, wasm)))
    }

    pub fn list(&self) -> Result<Vec<Record>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => {
                return Err(Error::input(format!(
                    "cannot read {}: {e}",
                    self.dir.display()
                )));
            }
        };
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            if let Some(name) = path.file_stem().and_then(|s| s.to_str())
                && let Some(record) = self.record(name)?
            {
                records.push(record);
            }
        }
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    /// Store a plugin: the component first, then its record, each by rename.
    pub fn put(&self, record: &Record, bytes: &[u8]) -> Result<()> {
        check_name(&record.name)?;
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::Other(anyhow::anyhow!("create {}: {e}", self.dir.display())))?;
        let (wasm, meta) = self.paths(&record.name);
        write_atomic(&self.dir, &wasm, bytes)?;
        let record = Record {
            stamp: FileStamp::of(&wasm),
            ..record.clone()
        };
        let text = toml::to_string(&record).map_err(|e| Error::Other(e.into()))?;
        write_atomic(&self.dir, &meta, text.as_bytes())
    }

    /// Remove `name`; false when it was not installed.
    pub fn remove(&self, name: &str) -> Result<bool> {
        if self.record(name)?.is_none() {
            return Ok(false);
        }
        let (wasm, meta) = self.paths(name);
        // The record first: a half-removed plugin is no longer installed.
        for path in [meta, wasm] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::Other(anyhow::anyhow!(
                        "remove {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Ok(true)
    }
}

fn write_atomic(dir: &Path, to: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::Other(anyhow::anyhow!("create a file in {}: {e}", dir.display())))?;
    std::fs::write(tmp.path(), bytes)
        .and_then(|_| tmp.persist(to).map(|_| ()).map_err(|e| e.error))
        .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", to.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for ok in ["my-sandbox", "a_1"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "A", "-x", "a/b", "a.b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
