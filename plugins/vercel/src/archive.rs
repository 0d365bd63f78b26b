//! What `fs/write` takes: a gzipped tar whose entry names are relative to
//! the `x-cwd` header (`/`), with each entry's permissions in its mode.
//! The deflate stream uses stored blocks only: what goes through here is
//! mostly git bundles, which are compressed already, and a plugin that does
//! no compression stays small and fast.

/// One file for the archive. `path` is absolute inside the sandbox.
pub struct Entry<'a> {
    pub path: &'a str,
    pub data: &'a [u8],
    pub mode: u32,
}

/// A gzipped tar of `entries`, names relative to `/`.
pub fn tar_gz(entries: &[Entry<'_>]) -> Result<Vec<u8>, String> {
    gzip_stored(&tar(entries)?)
}

pub fn tar(entries: &[Entry<'_>]) -> Result<Vec<u8>, String> {
    // Files written now are modified now (an mtime of 0 would confuse
    // tools such as make in the sandbox).
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut out = Vec::new();
    for entry in entries {
        let name = entry.path.trim_start_matches('/');
        if name.is_empty() || name.split('/').any(|c| c == "..") {
            return Err(format!("cannot write {:?}: not a file path", entry.path));
        }
        let (prefix, short) = split_name(name);
        if short.is_none() {
            // GNU long name: a pseudo-entry holding the name, then the file.
            let mut long = name.as_bytes().to_vec();
            long.push(0);
            out.extend(header(
                "././@LongLink",
                "",
                long.len() as u64,
                0o644,
                b'L',
                0,
            ));
            out.extend(&long);
            pad(&mut out);
        }
        let short_name = short.unwrap_or(&name[name.len().saturating_sub(99)..]);
        out.extend(header(
            short_name,
            prefix,
            entry.data.len() as u64,
            entry.mode & 0o7777,
            b'0',
            mtime,
        ));
        out.extend_from_slice(entry.data);
        pad(&mut out);
    }
    out.extend([0u8; 1024]);
    Ok(out)
}

/// ustar name and prefix, or None when the name needs a GNU long name.
fn split_name(name: &str) -> (&str, Option<&str>) {
    if name.len() <= 100 {
        return ("", Some(name));
    }
    for (i, _) in name.match_indices('/') {
        let (prefix, rest) = (&name[..i], &name[i + 1..]);
        if prefix.len() <= 155 && rest.len() <= 100 && !rest.is_empty() {
            return (prefix, Some(rest));
        }
    }
    ("", None)
}

fn pad(out: &mut Vec<u8>) {
    let rem = out.len() % 512;
    if rem != 0 {
        out.resize(out.len() + 512 - rem, 0);
    }
}

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

fn header(name: &str, prefix: &str, size: u64, mode: u32, kind: u8, mtime: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], mode as u64);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // The checksum is computed with its own field as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

/// gzip (RFC 1952) around a deflate stream of stored blocks (RFC 1951 3.2.4).
pub fn gzip_stored(data: &[u8]) -> Result<Vec<u8>, String> {
    if data.len() as u64 > u32::MAX as u64 {
        return Err("archive larger than 4 GiB".into());
    }
    let mut out = Vec::with_capacity(data.len() + data.len() / 65535 * 5 + 32);
    out.extend([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    let mut chunks = data.chunks(65535).peekable();
    if chunks.peek().is_none() {
        out.extend([1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        out.push(last as u8);
        let len = chunk.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend(crc32(data).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    Ok(out)
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *slot = c;
    }
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// The system's gzip and tar read what we write: contents, modes, long
    /// names, a file larger than one stored block, and an empty file.
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
    fn gzip_of_nothing_is_valid() {
        let gz = gzip_stored(b"").unwrap();
        let out = Command::new("sh")
            .args(["-c", "gzip -dc | wc -c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(&gz)?;
                c.wait_with_output()
            })
            .unwrap();
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
