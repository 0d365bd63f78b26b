//! What `fs/write` takes: a gzipped tar whose entry names are relative to
//! the `x-cwd` header (`/`), with each entry's permissions in its mode.
//! Written with the `tar` and `flate2` crates. Compressed only where it
//! pays: what goes through here is mostly git packs and bundles, which are
//! compressed already, so a sample of the archive decides between
//! deflating it and storing it as it is.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

/// One file for the archive. `path` is absolute inside the sandbox.
pub struct Entry<'a> {
    pub path: &'a str,
    pub data: &'a [u8],
    pub mode: u32,
}

/// A gzipped tar of `entries`, names relative to `/`.
pub fn tar_gz(entries: &[Entry<'_>]) -> Result<Vec<u8>, String> {
    let tar = tar(entries)?;
    let level = if compresses(&tar) {
        Compression::fast()
    } else {
        Compression::none()
    };
    let mut gz = GzEncoder::new(Vec::with_capacity(tar.len() / 2 + 64), level);
    gz.write_all(&tar)
        .and_then(|_| gz.finish())
        .map_err(|e| format!("gzip: {e}"))
}

pub fn tar(entries: &[Entry<'_>]) -> Result<Vec<u8>, String> {
    // Files written now are modified now (an mtime of 0 would confuse
    // tools such as make in the sandbox).
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let name = entry.path.trim_start_matches('/');
        if name.is_empty() || name.split('/').any(|c| c == "..") {
            return Err(format!("cannot write {:?}: not a file path", entry.path));
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(entry.data.len() as u64);
        header.set_mode(entry.mode & 0o7777);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        // append_data writes a GNU long-name entry for names past 100 bytes.
        builder
            .append_data(&mut header, name, entry.data)
            .map_err(|e| format!("archiving {}: {e}", entry.path))?;
    }
    builder.into_inner().map_err(|e| format!("archive: {e}"))
}

/// Whether deflating `data` is worth its time: a 64 KiB sample from its
/// middle must shrink by a tenth. Text does by far; packs do not.
fn compresses(data: &[u8]) -> bool {
    const SAMPLE: usize = 64 * 1024;
    let start = data.len().saturating_sub(SAMPLE) / 2;
    let sample = &data[start..data.len().min(start + SAMPLE)];
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), Compression::fast());
    match z.write_all(sample).and_then(|_| z.finish()) {
        Ok(out) => out.len() * 10 < sample.len() * 9,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// The system's gzip and tar read what we write: contents, modes, long
    /// names, a large file, and an empty file.
    #[test]
    fn system_tar_extracts_the_archive() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(90));
        let longer = format!("x/{}", "y".repeat(200));
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let archive = tar_gz(&[
            Entry {
                path: "/a/b/hello.txt",
                data: b"hello\n",
                mode: 0o644,
            },
            Entry {
                path: "/run.sh",
                data: b"#!/bin/sh\necho hi\n",
                mode: 0o755,
            },
            Entry {
                path: &format!("/{long}"),
                data: b"long",
                mode: 0o600,
            },
            Entry {
                path: &format!("/{longer}"),
                data: b"longer",
                mode: 0o644,
            },
            Entry {
                path: "/big.bin",
                data: &big,
                mode: 0o644,
            },
            Entry {
                path: "/empty",
                data: b"",
                mode: 0o644,
            },
        ])
        .unwrap();
        let mut child = Command::new("tar")
            .args(["-xzf", "-", "-C"])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&archive).unwrap();
        assert!(child.wait().unwrap().success());
        let p = dir.path();
        assert_eq!(std::fs::read(p.join("a/b/hello.txt")).unwrap(), b"hello\n");
        assert_eq!(std::fs::read(p.join(&long)).unwrap(), b"long");
        assert_eq!(std::fs::read(p.join(&longer)).unwrap(), b"longer");
        assert_eq!(std::fs::read(p.join("big.bin")).unwrap(), big);
        assert_eq!(std::fs::read(p.join("empty")).unwrap(), b"");
        use std::os::unix::fs::PermissionsExt;
        let mode = |f: &str| std::fs::metadata(p.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("run.sh"), 0o755);
        assert_eq!(mode(&long), 0o600);
    }

    #[test]
    fn text_is_deflated_and_incompressible_data_is_stored() {
        let text = "let value = node.parent();\n".repeat(20_000);
        let gz = tar_gz(&[Entry {
            path: "/src/lib.rs",
            data: text.as_bytes(),
            mode: 0o644,
        }])
        .unwrap();
        assert!(gz.len() * 20 < text.len(), "{} of {}", gz.len(), text.len());
        let mut state = 1u64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 33) as u8
            })
            .collect();
        let gz = tar_gz(&[Entry {
            path: "/in.pack",
            data: &noise,
            mode: 0o644,
        }])
        .unwrap();
        // Stored: the data plus tar's and gzip's framing, nothing more.
        assert!(gz.len() < noise.len() + 4096, "{}", gz.len());
    }

    #[test]
    fn an_empty_archive_is_valid() {
        let gz = tar_gz(&[]).unwrap();
        let out = Command::new("sh")
            .args(["-c", "gzip -dc | tar -tf - | wc -l"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(&gz)?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    }

    #[test]
    fn parent_references_are_refused() {
        let err = tar(&[Entry {
            path: "/a/../etc/x",
            data: b"",
            mode: 0o644,
        }])
        .unwrap_err();
        assert!(err.contains("not a file path"), "{err}");
    }
}
