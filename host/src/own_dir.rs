//! sanddune's own directories in a repository (`.sanddune/logs`,
//! `.sanddune/worktrees`, an agent git dir), which an agent can write:
//! under the head branch strategy its worktree is the repository root, and
//! a container's agent git dir is its own. So a name there may be a
//! symlink the agent planted to a file of the user's (`~/.bashrc`), a FIFO
//! that blocks whoever reads it, or a directory swapped for a link. Files
//! there are made and read through a handle on the directory, opened one
//! component at a time without following a link, and never through a link
//! or into something that is not a regular file.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::error::{Error, Result};

/// One of sanddune's own directories, held open.
#[derive(Debug)]
pub struct OwnDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl OwnDir {
    /// Open `dir`, whose last `own` components (`.sanddune/logs`: 2) are
    /// sanddune's, without following a link in them; with `create`, make
    /// those that are missing. What is above them is the caller's (the
    /// repository root), opened as it is.
    pub fn open(dir: &Path, own: usize, create: bool) -> Result<Self> {
        let names: Vec<_> = dir.components().collect();
        let (above, own) = names.split_at(names.len().saturating_sub(own));
        let base: PathBuf = above.iter().collect();
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base.as_path()
        };
        if create {
            std::fs::create_dir_all(base)
                .map_err(|e| Error::Other(anyhow::anyhow!("create {}: {e}", base.display())))?;
        }
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
        let mut fd = rustix::fs::open(base, flags, Mode::empty())
            .map_err(|e| Error::Other(anyhow::anyhow!("open {}: {e}", base.display())))?;
        let mut path = base.to_path_buf();
        for name in own {
            path.push(name);
            let open = |fd: &OwnedFd| {
                rustix::fs::openat(
                    fd,
                    name.as_os_str(),
                    flags | OFlags::NOFOLLOW,
                    Mode::empty(),
                )
            };
            let opened = match open(&fd) {
                Err(rustix::io::Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&fd, name.as_os_str(), Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => open(&fd),
                        Err(e) => Err(e),
                    }
                }
                other => other,
            };
            fd = opened.map_err(|e| match e {
                rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => not_own(&path),
                e => Error::Other(anyhow::anyhow!("open {}: {e}", path.display())),
            })?;
        }
        Ok(Self { fd, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Create `name` for appending, only if nothing has that name: never
    /// through a link, never into an existing file (`AlreadyExists`).
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let flags = OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(0o666))?;
        Ok(File::from(fd))
    }

    /// Open `name` for reading if it is a regular file; a link, a FIFO or
    /// anything else is refused, naming it.
    pub fn open_regular(&self, name: &str) -> Result<File> {
        let path = self.path.join(name);
        open_regular_at(&self.fd, name, &path)?.ok_or_else(|| {
            Error::Other(anyhow::anyhow!(
                "cannot read {}: it does not exist",
                path.display()
            ))
        })
    }

    /// What is at `name`, without following a link; None when nothing is.
    pub fn kind(&self, name: &str) -> Option<FileType> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode))
    }

    /// Remove the file `name` (a link itself, not what it names).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// The regular file at `relative` (`/`-separated) below this directory,
    /// opened without following a link anywhere on the way or waiting on a
    /// FIFO.
    pub fn open_below(&self, relative: &str) -> io::Result<File> {
        let (dirs, name) = relative.rsplit_once('/').unwrap_or(("", relative));
        let dir = self.dir_below(dirs)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(
            dir.as_ref().unwrap_or(&self.fd),
            plain(name)?,
            flags,
            Mode::empty(),
        )?;
        if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{relative} is not a regular file"),
            ));
        }
        Ok(File::from(fd))
    }

    /// The whole of [`OwnDir::open_below`]'s file, refused past `cap`
    /// bytes; None when it, or a directory on its way, does not exist.
    pub fn read_below(&self, relative: &str, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let file = match self.open_below(relative) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(file, cap + 1), &mut bytes)?;
        if bytes.len() as u64 > cap {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{relative} is over {cap} bytes"),
            ));
        }
        Ok(Some(bytes))
    }

    /// The names in the directory `relative` below this one, opened as
    /// [`OwnDir::open_below`] opens; none when it does not exist.
    pub fn names_below(&self, relative: &str) -> io::Result<Vec<String>> {
        let dir = match self.dir_below(relative) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        let fd = match dir {
            Some(fd) => fd,
            None => rustix::fs::openat(
                &self.fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?,
        };
        let mut names = vec![];
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// The directory `relative` below this one, opened one component at a
    /// time without following a link; None for this one itself.
    fn dir_below(&self, relative: &str) -> io::Result<Option<OwnedFd>> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut dir: Option<OwnedFd> = None;
        for name in relative.split('/').filter(|n| !n.is_empty()) {
            let next = rustix::fs::openat(
                dir.as_ref().unwrap_or(&self.fd),
                plain(name)?,
                flags,
                Mode::empty(),
            )?;
            dir = Some(next);
        }
        Ok(dir)
    }
}

/// `name` if it is one plain path component.
fn plain(name: &str) -> io::Result<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a plain file name"),
        ));
    }
    Ok(name)
}

/// Whether one of the last `own` components of `path` is a link.
pub fn linked(path: &Path, own: usize) -> bool {
    path.ancestors().take(own).any(|p| p.is_symlink())
}

/// Read the file at `path` if it is a regular file, without following a
/// link at its last component or blocking on a FIFO; None when nothing is
/// there.
pub fn read_regular(path: &Path) -> Result<Option<Vec<u8>>> {
    let Some(mut file) = open_regular_at(rustix::fs::CWD, path, path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut file, &mut bytes)
        .map_err(|e| Error::Other(anyhow::anyhow!("read {}: {e}", path.display())))?;
    Ok(Some(bytes))
}

/// `name` in `dir` (spelled `path` in errors) opened for reading if it is a
/// regular file; None when nothing has that name.
fn open_regular_at(
    dir: impl rustix::fd::AsFd,
    name: impl rustix::path::Arg,
    path: &Path,
) -> Result<Option<File>> {
    // NONBLOCK: opening a FIFO for reading would wait for a writer.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => return Err(not_regular(path, "a symlink")),
        Err(e) => {
            return Err(Error::Other(anyhow::anyhow!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let kind = rustix::fs::fstat(&fd)
        .map(|st| FileType::from_raw_mode(st.st_mode))
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot read {}: {e}", path.display())))?;
    if kind != FileType::RegularFile {
        return Err(not_regular(path, "not a regular file"));
    }
    Ok(Some(File::from(fd)))
}

fn not_own(path: &Path) -> Error {
    Error::input(format!(
        "{} is a symlink or not a directory: sanddune makes its own files there and follows no link in it (an agent may have planted it); remove it and run again",
        path.display()
    ))
}

fn not_regular(path: &Path, what: &str) -> Error {
    Error::input(format!(
        "{} is {what}: sanddune reads and writes only regular files it made there (an agent may have planted it); remove it and run again",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(dir: &Path) -> PathBuf {
        let marker = dir.join("marker");
        std::fs::write(&marker, "untouched").unwrap();
        marker
    }

    #[test]
    fn missing_own_directories_are_made() {
        let root = tempfile::tempdir().unwrap();
        let dir = OwnDir::open(&root.path().join(".sanddune/logs"), 2, true).unwrap();
        assert_eq!(dir.path(), root.path().join(".sanddune/logs"));
        assert!(root.path().join(".sanddune/logs").is_dir());
        dir.create_new("a.log").unwrap();
        assert!(root.path().join(".sanddune/logs/a.log").is_file());
    }

    #[test]
    fn a_symlinked_own_directory_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(".sanddune")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join(".sanddune/logs")).unwrap();
        let err = OwnDir::open(&root.path().join(".sanddune/logs"), 2, true).unwrap_err();
        assert!(
            err.to_string().contains(".sanddune/logs is a symlink"),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
        // And a symlinked `.sanddune` one level up.
        let root = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join(".sanddune")).unwrap();
        let err = OwnDir::open(&root.path().join(".sanddune/logs"), 2, true).unwrap_err();
        assert!(err.to_string().contains(".sanddune is a symlink"), "{err}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_planted_link_is_never_created_through() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let marker = marker(outside.path());
        let dir = OwnDir::open(&root.path().join(".sanddune/logs"), 2, true).unwrap();
        std::os::unix::fs::symlink(&marker, dir.path().join("run.log")).unwrap();
        let err = dir.create_new("run.log").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "untouched");
        assert_eq!(dir.kind("run.log"), Some(FileType::Symlink));
        dir.remove("run.log").unwrap();
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "untouched");
    }

    #[test]
    fn a_link_among_the_own_components_is_seen() {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join(".sanddune/worktrees/run-1");
        std::fs::create_dir_all(&own).unwrap();
        assert!(!linked(&own, 3));
        std::fs::rename(root.path().join(".sanddune"), root.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(root.path().join("moved"), root.path().join(".sanddune"))
            .unwrap();
        assert!(linked(&own, 3));
        assert!(!linked(&own, 2));
    }

    #[test]
    fn below_a_directory_only_regular_files_are_read_and_no_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = marker(outside.path());
        std::fs::create_dir_all(dir.path().join("objects/ab")).unwrap();
        std::fs::write(dir.path().join("objects/ab/cd"), "object").unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("objects/ab/link")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("objects"), dir.path().join("linked")).unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let root = OwnDir::open(dir.path(), 0, false).unwrap();

        assert_eq!(
            root.read_below("objects/ab/cd", 100).unwrap().unwrap(),
            b"object"
        );
        assert!(
            root.read_below("objects/ab/missing", 100)
                .unwrap()
                .is_none()
        );
        assert!(root.read_below("missing/ab/cd", 100).unwrap().is_none());
        assert!(
            root.read_below("objects/ab/link", 100).is_err(),
            "a symlink"
        );
        assert!(
            root.read_below("linked/ab/cd", 100).is_err(),
            "a symlinked dir"
        );
        assert!(
            root.read_below("fifo", 100).is_err(),
            "a FIFO, without blocking"
        );
        assert!(root.read_below("../x", 100).is_err());
        assert!(root.read_below("objects/ab/cd", 3).is_err(), "over the cap");
        let mut names = root.names_below("objects/ab").unwrap();
        names.sort();
        assert_eq!(names, ["cd", "link"]);
        assert!(root.names_below("linked/ab").is_err());
        assert!(root.names_below("nothing").unwrap().is_empty());
    }

    #[test]
    fn only_regular_files_are_read() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let marker = marker(outside.path());
        let dir = OwnDir::open(&root.path().join(".sanddune/logs"), 2, true).unwrap();
        std::fs::write(dir.path().join("ok.log"), "fine").unwrap();
        std::os::unix::fs::symlink(&marker, dir.path().join("link.log")).unwrap();
        let fifo = dir.path().join("fifo.log");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );

        let mut ok = String::new();
        io::Read::read_to_string(&mut dir.open_regular("ok.log").unwrap(), &mut ok).unwrap();
        assert_eq!(ok, "fine");
        let err = dir.open_regular("link.log").unwrap_err().to_string();
        assert!(err.contains("link.log is a symlink"), "{err}");
        // Returns at once: a FIFO is not waited on.
        let err = dir.open_regular("fifo.log").unwrap_err().to_string();
        assert!(err.contains("fifo.log is not a regular file"), "{err}");
        assert!(read_regular(&fifo).is_err());
        assert!(read_regular(&dir.path().join("link.log")).is_err());
        assert_eq!(
            read_regular(&dir.path().join("ok.log")).unwrap().unwrap(),
            b"fine"
        );
        assert_eq!(read_regular(&dir.path().join("gone.log")).unwrap(), None);
    }
}
