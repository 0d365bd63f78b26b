//! Filesystem grants: the directories a plugin sees through
//! wasi:filesystem (the worktree read-only or read-write, its scratch dir
//! read-write), each preopened at its own host path so paths mean the same
//! on both sides, and the env it sees through wasi:cli/environment. Sockets
//! stay closed: the network is the `http` capability's.

use std::path::Path;

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::Grants;
use crate::error::{Error, Result};

/// One directory a plugin sees.
#[derive(Debug, PartialEq, Eq)]
pub struct Preopen<'a> {
    pub path: &'a Path,
    /// The path the guest opens it by: the host path itself.
    pub guest: &'a str,
    pub writable: bool,
}

/// The directories `grants` give, in grant order with the scratch dir
/// last; a path the guest could not name (not UTF-8) is an error naming it.
pub fn preopens(grants: &Grants) -> std::result::Result<Vec<Preopen<'_>>, String> {
    let scratch = grants.scratch_dir.as_ref().map(|p| (p, true));
    grants
        .directories
        .iter()
        .map(|(p, w)| (p, *w))
        .chain(scratch)
        .map(|(path, writable)| {
            let guest = path
                .to_str()
                .ok_or_else(|| format!("non-UTF-8 path {}", path.display()))?;
            Ok(Preopen {
                path,
                guest,
                writable,
            })
        })
        .collect()
}

/// The WASI context of one plugin instance: its env and its directories,
/// nothing else.
pub fn wasi_ctx(plugin: &str, grants: &Grants) -> Result<WasiCtx> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    for (key, value) in &grants.env {
        wasi.env(key, value);
    }
    for dir in preopens(grants).map_err(Error::input)? {
        let perms = if dir.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        wasi.preopened_dir(dir.path, dir.guest, perms)
            .map_err(|e| {
                Error::Other(anyhow::anyhow!(
                    "cannot grant {} to `{plugin}`: {e}",
                    dir.path.display()
                ))
            })?;
    }
    Ok(wasi.build())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn dir(path: &str, writable: bool) -> (PathBuf, bool) {
        (PathBuf::from(path), writable)
    }

    #[test]
    fn each_grant_gives_exactly_its_directories() {
        let table: &[(Grants, &[(&str, bool)])] = &[
            (Grants::default(), &[]),
            (
                Grants {
                    directories: vec![dir("/repo/wt", false)],
                    ..Grants::default()
                },
                &[("/repo/wt", false)],
            ),
            (
                Grants {
                    directories: vec![dir("/repo/wt", true)],
                    scratch_dir: Some("/tmp/scratch".into()),
                    ..Grants::default()
                },
                &[("/repo/wt", true), ("/tmp/scratch", true)],
            ),
            (
                Grants {
                    scratch_dir: Some("/tmp/scratch".into()),
                    ..Grants::default()
                },
                &[("/tmp/scratch", true)],
            ),
        ];
        for (grants, want) in table {
            let got: Vec<(&str, bool)> = preopens(grants)
                .unwrap()
                .iter()
                .map(|p| {
                    assert_eq!(
                        p.path,
                        Path::new(p.guest),
                        "the guest path is the host path"
                    );
                    (p.guest, p.writable)
                })
                .collect();
            assert_eq!(&got, want, "{grants:?}");
        }
    }

    #[test]
    fn a_path_the_guest_cannot_name_is_refused_naming_it() {
        use std::os::unix::ffi::OsStrExt;
        let bad = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/\xff"));
        let grants = Grants {
            scratch_dir: Some(bad),
            ..Grants::default()
        };
        let err = preopens(&grants).unwrap_err();
        assert!(err.starts_with("non-UTF-8 path /tmp/"), "{err}");
    }
}
