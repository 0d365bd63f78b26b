//! Whether a path a repository's file names stays inside the repository,
//! for workspace trust and the dev container's readers alike. A leaf
//! module at the bottom of the crate.

use std::path::{Component, Path, PathBuf};

/// Whether `path` is inside the repository at `root` once `..` and
/// symlinks are resolved: a symlink the agent committed that points out of
/// the repository is outside. A path that does not exist is judged by its
/// longest existing ancestor.
pub(crate) fn inside(root: &Path, path: &Path) -> bool {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    let mut rest = Vec::new();
    let mut existing = normal.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let full = rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
            return full.starts_with(&root);
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return false,
        }
    }
}
