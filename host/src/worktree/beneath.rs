//! Reading files under a directory that someone else can write (an agent's
//! git dir): every component is opened without following a symlink, only
//! regular files are read, never a FIFO or a device, and never more than a
//! cap. What such a directory holds is an attacker's input.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Open `root` itself as a directory, refusing a symlink.
pub(super) fn open_dir(root: &Path) -> io::Result<File> {
    let c = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    // SAFETY: a valid C string; the descriptor is owned by the File.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// One component under `dir`, not followed if it is a symlink.
fn open_at(dir: &File, name: &str, directory: bool) -> io::Result<File> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a plain file name"),
        ));
    }
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
    // O_NONBLOCK: opening a FIFO must not wait for a writer.
    let mut flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    if directory {
        flags |= libc::O_DIRECTORY;
    }
    // SAFETY: a valid directory descriptor and C string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as in `open_dir`.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The regular file at `relative` (`/`-separated) under `root`, opened
/// without following a symlink anywhere on the way.
pub(super) fn open_file(root: &File, relative: &str) -> io::Result<File> {
    let mut parts: Vec<&str> = relative.split('/').collect();
    let last = parts.pop().unwrap_or_default();
    let mut dir: Option<File> = None;
    for part in parts {
        let next = open_at(dir.as_ref().unwrap_or(root), part, true)?;
        dir = Some(next);
    }
    let file = open_at(dir.as_ref().unwrap_or(root), last, false)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{relative} is not a regular file"),
        ));
    }
    Ok(file)
}

/// The whole of [`open_file`]'s file, refused past `cap` bytes. `None`
/// when it does not exist.
pub(super) fn read(root: &File, relative: &str, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let file = match open_file(root, relative) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{relative} is over {cap} bytes"),
        ));
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_and_refuses_symlinks_fifos_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let secret = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(secret.path(), "secret").unwrap();
        std::fs::create_dir_all(dir.path().join("objects/ab")).unwrap();
        std::fs::write(dir.path().join("objects/ab/cd"), "object").unwrap();
        std::os::unix::fs::symlink(secret.path(), dir.path().join("objects/ab/link")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("objects"), dir.path().join("linked")).unwrap();
        let fifo = CString::new(dir.path().join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let root = open_dir(dir.path()).unwrap();

        assert_eq!(
            read(&root, "objects/ab/cd", 100).unwrap().unwrap(),
            b"object"
        );
        assert!(read(&root, "objects/ab/missing", 100).unwrap().is_none());
        assert!(read(&root, "objects/ab/link", 100).is_err(), "a symlink");
        assert!(read(&root, "linked/ab/cd", 100).is_err(), "a symlinked dir");
        assert!(
            read(&root, "fifo", 100).is_err(),
            "a FIFO, without blocking"
        );
        assert!(read(&root, "../x", 100).is_err());
        assert!(read(&root, "objects/ab/cd", 3).is_err(), "over the cap");
        assert!(open_dir(&dir.path().join("linked")).is_err());
    }
}
