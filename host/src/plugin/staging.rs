//! Host files for a provider that cannot open them itself: one granted
//! neither `program` nor `containers` (a cloud provider speaking HTTP), or a
//! `containers` one given a host path outside its grant (a session file
//! under the user's home). `copy-file-in`, `copy-in` and `copy-file-out`
//! name host paths the provider may not open; the host
//! stages them in a fresh directory under the provider's scratch dir
//! (preopened at the same path), hands the provider the staged path, and
//! moves what it wrote to the destination. The provider never sees a host
//! path outside its grant.

use std::io;
use std::path::{Path, PathBuf};

/// A staging directory under the scratch dir, removed on drop.
pub struct Staging {
    dir: tempfile::TempDir,
}

impl Staging {
    pub fn new(scratch: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(".sanddune-transfer-")
            .tempdir_in(scratch)?;
        Ok(Staging { dir })
    }

    /// A copy of `host` (a file, or a directory tree with symlinks
    /// followed) inside the staging dir, under `host`'s own name.
    pub fn stage_in(&self, host: &Path) -> io::Result<PathBuf> {
        let name = host.file_name().unwrap_or_else(|| "staged".as_ref());
        let staged = self.dir.path().join(name);
        copy_tree(host, &staged)?;
        Ok(staged)
    }

    /// Where the provider writes a file that is to end up at a host path.
    pub fn out_path(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Move what the provider wrote at `out_path` to `dest`, creating its
    /// parent directories.
    pub fn deliver(&self, dest: &Path) -> io::Result<()> {
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let out = self.out_path();
        match std::fs::rename(&out, dest) {
            Ok(()) => Ok(()),
            // Another file system: copy.
            Err(_) => std::fs::copy(&out, dest).map(drop),
        }
    }
}

/// Copy a file, or a directory tree following symlinks; a symlink back to
/// a directory being copied is an error rather than an endless copy.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    copy_within(from, to, &mut Vec::new())
}

fn copy_within(from: &Path, to: &Path, ancestors: &mut Vec<PathBuf>) -> io::Result<()> {
    if !std::fs::metadata(from)?.is_dir() {
        return std::fs::copy(from, to).map(drop);
    }
    let real = std::fs::canonicalize(from)?;
    if ancestors.contains(&real) {
        return Err(io::Error::other(format!(
            "{} links back to a directory that contains it",
            from.display()
        )));
    }
    std::fs::create_dir_all(to)?;
    ancestors.push(real);
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        copy_within(&entry.path(), &to.join(entry.file_name()), ancestors)?;
    }
    ancestors.pop();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_trees_are_staged_and_outputs_delivered() {
        let scratch = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(host.path().join("tree/sub")).unwrap();
        std::fs::write(host.path().join("tree/a"), "a").unwrap();
        std::fs::write(host.path().join("tree/sub/b"), "b").unwrap();
        std::fs::write(host.path().join("one.bin"), [0u8, 1, 2]).unwrap();

        let staging = Staging::new(scratch.path()).unwrap();
        let file = staging.stage_in(&host.path().join("one.bin")).unwrap();
        assert!(file.starts_with(scratch.path()));
        assert_eq!(std::fs::read(&file).unwrap(), [0, 1, 2]);
        let tree = staging.stage_in(&host.path().join("tree")).unwrap();
        assert_eq!(std::fs::read_to_string(tree.join("sub/b")).unwrap(), "b");

        std::fs::write(staging.out_path(), "out").unwrap();
        let dest = host.path().join("new/dir/out.txt");
        staging.deliver(&dest).unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "out");

        let dir = file.parent().unwrap().to_path_buf();
        drop(staging);
        assert!(!dir.exists(), "the staging dir goes with it");
    }

    #[test]
    fn a_symlink_loop_is_an_error_not_an_endless_copy() {
        let scratch = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        let tree = host.path().join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::os::unix::fs::symlink(&tree, tree.join("sub/up")).unwrap();
        let staging = Staging::new(scratch.path()).unwrap();
        let e = staging.stage_in(&tree).unwrap_err();
        assert!(e.to_string().contains("links back"), "{e}");
    }
}
