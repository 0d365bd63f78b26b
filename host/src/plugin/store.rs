//! Installed plugins: third-party components added with `sanddune plugin
//! add`, each kept beside a record of its hash and of the grants the user
//! approved. `<dir>/<name>.wasm` and `<dir>/<name>.toml`; the record is
//! written last, so a plugin is installed exactly when its record exists.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::bindings::types::{Capabilities, DirectoryAccess};
use super::cache::sha256_hex;
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

/// What the user approved for a plugin; it never gets more at run time.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Approved {
    pub programs: Vec<String>,
    pub scratch_dir: bool,
    /// "none", "read-only" or "read-write".
    pub worktree: String,
    pub hosts: Vec<String>,
    pub env_keys: Vec<String>,
    pub containers: bool,
}

fn access_name(a: DirectoryAccess) -> &'static str {
    match a {
        DirectoryAccess::None => "none",
        DirectoryAccess::ReadOnly => "read-only",
        DirectoryAccess::ReadWrite => "read-write",
    }
}

fn access_rank(name: &str) -> u8 {
    match name {
        "read-write" => 2,
        "read-only" => 1,
        _ => 0,
    }
}

impl Approved {
    /// Everything `caps` asks for.
    pub fn all_of(caps: &Capabilities) -> Self {
        Self {
            programs: caps.programs.clone(),
            scratch_dir: caps.scratch_dir,
            worktree: access_name(caps.worktree).into(),
            hosts: caps.hosts.clone(),
            env_keys: caps.env_keys.clone(),
            containers: caps.containers,
        }
    }

    /// The approval as a capabilities record.
    pub fn as_capabilities(&self) -> Capabilities {
        Capabilities {
            programs: self.programs.clone(),
            scratch_dir: self.scratch_dir,
            worktree: match self.worktree.as_str() {
                "read-write" => DirectoryAccess::ReadWrite,
                "read-only" => DirectoryAccess::ReadOnly,
                _ => DirectoryAccess::None,
            },
            hosts: self.hosts.clone(),
            env_keys: self.env_keys.clone(),
            containers: self.containers,
        }
    }

    /// What `caps` asks for beyond this approval, in words; empty when
    /// nothing.
    pub fn missing(&self, caps: &Capabilities) -> Vec<String> {
        let mut more = Vec::new();
        for p in caps.programs.iter().filter(|p| !self.programs.contains(p)) {
            more.push(format!("program `{p}`"));
        }
        if caps.scratch_dir && !self.scratch_dir {
            more.push("a scratch dir".into());
        }
        let wanted = access_name(caps.worktree);
        if access_rank(wanted) > access_rank(&self.worktree) {
            more.push(format!("{wanted} access to the worktree"));
        }
        for h in caps.hosts.iter().filter(|h| !self.hosts.contains(h)) {
            more.push(format!("host `{h}`"));
        }
        for k in caps.env_keys.iter().filter(|k| !self.env_keys.contains(k)) {
            more.push(format!("env key `{k}`"));
        }
        if caps.containers && !self.containers {
            more.push("the container capability".into());
        }
        more
    }

    /// `caps` cut down to this approval: what the plugin really gets.
    pub fn restrict(&self, caps: &Capabilities) -> Capabilities {
        let worktree = if access_rank(access_name(caps.worktree)) <= access_rank(&self.worktree) {
            caps.worktree
        } else if self.worktree == "read-only" {
            DirectoryAccess::ReadOnly
        } else {
            DirectoryAccess::None
        };
        Capabilities {
            programs: keep(&caps.programs, &self.programs),
            scratch_dir: caps.scratch_dir && self.scratch_dir,
            worktree,
            hosts: keep(&caps.hosts, &self.hosts),
            env_keys: keep(&caps.env_keys, &self.env_keys),
            containers: caps.containers && self.containers,
        }
    }

    /// One `--grant` item: `program=NAME`, `scratch-dir`,
    /// `worktree=read-only|read-write`, `host=NAME`, `env=KEY`, `containers`.
    pub fn grant(&mut self, spec: &str) -> Result<()> {
        match spec.split_once('=') {
            Some(("program", p)) if !p.is_empty() => self.programs.push(p.into()),
            Some(("host", h)) if !h.is_empty() => self.hosts.push(h.into()),
            Some(("env", k)) if !k.is_empty() => self.env_keys.push(k.into()),
            Some(("worktree", a @ ("read-only" | "read-write"))) => self.worktree = a.into(),
            None if spec == "scratch-dir" => self.scratch_dir = true,
            None if spec == "containers" => self.containers = true,
            _ => {
                return Err(Error::input(format!(
                    "`{spec}` is not a grant: use program=NAME, scratch-dir, worktree=read-only|read-write, host=NAME, env=KEY or containers"
                )));
            }
        }
        Ok(())
    }
}

fn keep(asked: &[String], approved: &[String]) -> Vec<String> {
    asked
        .iter()
        .filter(|a| approved.contains(a))
        .cloned()
        .collect()
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
    pub grants: Approved,
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

    /// An installed plugin's record and bytes; refused when the stored
    /// component no longer matches the hash it was approved with.
    pub fn get(&self, name: &str) -> Result<Option<(Record, Vec<u8>)>> {
        let Some(record) = self.record(name)? else {
            return Ok(None);
        };
        let (wasm, _) = self.paths(name);
        let bytes = std::fs::read(&wasm).map_err(|e| {
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
        Ok(Some((record, bytes)))
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
        let text = toml::to_string(record).map_err(|e| Error::Other(e.into()))?;
        write_atomic(&self.dir, &wasm, bytes)?;
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

    fn caps() -> Capabilities {
        Capabilities {
            programs: vec!["sh".into(), "git".into()],
            scratch_dir: true,
            worktree: DirectoryAccess::ReadWrite,
            hosts: vec![],
            env_keys: vec!["TOKEN".into()],
            containers: false,
        }
    }

    #[test]
    fn an_approval_cuts_requests_down_and_names_what_is_missing() {
        let mut approved = Approved {
            worktree: "none".into(),
            ..Approved::default()
        };
        for g in ["program=sh", "worktree=read-only", "env=TOKEN"] {
            approved.grant(g).unwrap();
        }
        let got = approved.restrict(&caps());
        assert_eq!(got.programs, ["sh"]);
        assert!(!got.scratch_dir);
        assert_eq!(got.worktree, DirectoryAccess::ReadOnly);
        assert_eq!(got.env_keys, ["TOKEN"]);
        assert_eq!(
            approved.missing(&caps()),
            [
                "program `git`",
                "a scratch dir",
                "read-write access to the worktree"
            ]
        );
        assert!(Approved::all_of(&caps()).missing(&caps()).is_empty());
        assert!(approved.grant("programs=sh").is_err());
    }

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
