//! Packs of a branch for an isolated sandbox's sync in. The first sync sends
//! the objects of the commits the sandbox gets (by default the tip alone:
//! its commit and its whole tree) and names the shallow ones, so what
//! crosses grows with the tree, not with the history; the sandbox's
//! repository is then what `git clone --depth N` would make, with the
//! host's exact commits. A later sync of a sandbox that has a commit sends
//! a thin pack of what the branch gained since. Git's own `pack-objects`
//! writes both: it reuses the repository's compressed objects and deltas.

use std::collections::{HashSet, VecDeque};
use std::fs::File;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use git2::{Oid, Repository};

use super::{git_command, git_err};
use crate::error::{Error, Result};

/// How much of the branch's history a sandbox gets
/// (`--sandbox-opt history=N|full`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// The tip and its ancestors fewer than N parent steps away, as
    /// `git clone --depth N`.
    Depth(NonZeroU32),
    /// Everything reachable from the tip.
    Full,
}

impl Default for History {
    fn default() -> Self {
        History::Depth(NonZeroU32::MIN)
    }
}

impl std::str::FromStr for History {
    type Err = String;

    fn from_str(value: &str) -> std::result::Result<Self, String> {
        if value == "full" {
            return Ok(History::Full);
        }
        value
            .parse::<NonZeroU32>()
            .map(History::Depth)
            .map_err(|_| {
                format!("history `{value}`: expected a number of commits (1 or more) or `full`")
            })
    }
}

/// A pack written for a sandbox with its index, ready to be laid in its
/// `.git/objects/pack/` as they are (so the sandbox runs no `index-pack`):
/// the two files, their size, and the commits in the pack whose parents
/// are not (the sandbox's `.git/shallow`).
#[derive(Debug)]
pub struct Pack {
    /// `pack-<hash>.pack`, the name it keeps in the sandbox.
    pub pack: PathBuf,
    /// `pack-<hash>.idx`.
    pub index: PathBuf,
    pub bytes: u64,
    pub shallow: Vec<String>,
}

/// The commits within `depth` of `tip` (breadth first, each at its shortest
/// distance), and those of them with a parent left out.
pub fn shallow_cut(
    tip: Oid,
    depth: u32,
    mut parents: impl FnMut(Oid) -> Result<Vec<Oid>>,
) -> Result<(Vec<Oid>, Vec<Oid>)> {
    let mut included = vec![tip];
    let mut seen = HashSet::from([tip]);
    let mut queue = VecDeque::from([(tip, 1u32)]);
    let mut edges = Vec::new();
    while let Some((commit, level)) = queue.pop_front() {
        let ps = parents(commit)?;
        if level < depth {
            for p in &ps {
                if seen.insert(*p) {
                    included.push(*p);
                    queue.push_back((*p, level + 1));
                }
            }
        }
        edges.push((commit, ps));
    }
    let shallow = edges
        .into_iter()
        .filter(|(_, ps)| ps.iter().any(|p| !seen.contains(p)))
        .map(|(c, _)| c)
        .collect();
    Ok((included, shallow))
}

/// Write into the directory `out` the pack, and its index, that a sandbox
/// with nothing needs for `tip` of the repository at `dir`.
pub fn pack_branch(dir: &Path, tip: &str, history: History, out: &Path) -> Result<Pack> {
    let (revs, shallow): (Vec<String>, Vec<String>) = match history {
        History::Full => (vec![tip.to_string()], vec![]),
        History::Depth(depth) => {
            let repo = Repository::open(dir).map_err(|e| git_err("open worktree", e))?;
            let tip = Oid::from_str(tip).map_err(|e| git_err("read the branch", e))?;
            let (included, shallow) = shallow_cut(tip, depth.get(), |c| {
                let commit = repo
                    .find_commit(c)
                    .map_err(|e| git_err("read a commit", e))?;
                Ok(commit.parent_ids().collect())
            })?;
            let mut revs = vec!["--no-walk".to_string()];
            revs.extend(included.iter().map(Oid::to_string));
            (revs, shallow.iter().map(Oid::to_string).collect())
        }
    };
    // rev-list names every object of those commits (--no-walk: of those
    // commits only, each with its whole tree); pack-objects packs them.
    let list = out.join("objects");
    let mut args = vec!["rev-list", "--objects"];
    args.extend(revs.iter().map(String::as_str));
    run_to_file(dir, &args, None, &list)?;
    // No delta search among the tree's files (`--window=0`): it rarely
    // shrinks one tree and took more than half the time on the benchmark's;
    // the repository's own deltas are still reused. Written as
    // `pack-<hash>.pack` and `.idx`, the hash printed.
    let base = out.join("pack");
    let base = base.to_str().ok_or_else(|| {
        Error::Other(anyhow::anyhow!(
            "a sync directory that is not UTF-8: {}",
            out.display()
        ))
    })?;
    let printed = out.join("hash");
    run_to_file(
        dir,
        &["pack-objects", "-q", "--window=0", base],
        Some(&list),
        &printed,
    )?;
    let hash = std::fs::read_to_string(&printed)
        .map_err(|e| Error::Other(anyhow::anyhow!("read {}: {e}", printed.display())))?;
    let hash = hash.trim();
    if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Other(anyhow::anyhow!(
            "git pack-objects named no pack: `{hash}`"
        )));
    }
    let _ = std::fs::remove_file(&list);
    let pack = out.join(format!("pack-{hash}.pack"));
    let index = out.join(format!("pack-{hash}.idx"));
    Ok(Pack {
        bytes: size(&pack)? + size(&index)?,
        pack,
        index,
        shallow,
    })
}

/// Write to `out` a thin pack of what `tip` has that `have` (a commit the
/// sandbox holds, an ancestor of `tip`) lacks; the sandbox completes it
/// from its own objects (`index-pack --fix-thin`). Returns its size.
pub fn pack_since(dir: &Path, tip: &str, have: &str, out: &Path) -> Result<u64> {
    let revs = out.with_extension("revs");
    std::fs::write(&revs, format!("{tip}\n^{have}\n"))
        .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", revs.display())))?;
    run_to_file(
        dir,
        &["pack-objects", "--revs", "--thin", "--stdout", "-q"],
        Some(&revs),
        out,
    )?;
    let _ = std::fs::remove_file(&revs);
    size(out)
}

fn size(path: &Path) -> Result<u64> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Error::Other(anyhow::anyhow!("read {}: {e}", path.display())))
}

/// Run git in `dir` with stdin from a file (or none) and stdout to a file.
fn run_to_file(dir: &Path, args: &[&str], stdin: Option<&Path>, out: &Path) -> Result<()> {
    let io = |what: &Path, e: std::io::Error| {
        Error::Other(anyhow::anyhow!("open {}: {e}", what.display()))
    };
    let mut cmd = git_command(dir, args);
    cmd.stdout(File::create(out).map_err(|e| io(out, e))?);
    cmd.stdin(match stdin {
        Some(path) => Stdio::from(File::open(path).map_err(|e| io(path, e))?),
        None => Stdio::null(),
    });
    let done = cmd
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|child| child.wait_with_output())
        .map_err(|e| {
            Error::input(format!(
                "cannot run git (is it installed and on PATH?): {e}"
            ))
        })?;
    if !done.status.success() {
        return Err(Error::Other(anyhow::anyhow!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&done.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    /// 9 merges 8 and 7, both children of 6, whose parent 5 is the root.
    fn graph(c: Oid) -> Result<Vec<Oid>> {
        let table: &[(u8, &[u8])] = &[
            (9, &[8, 7]), // a merge
            (8, &[6]),
            (7, &[6]),
            (6, &[5]),
            (5, &[]), // the root
        ];
        Ok(table
            .iter()
            .find(|(id, _)| oid(*id) == c)
            .map(|(_, ps)| ps.iter().map(|p| oid(*p)).collect())
            .unwrap_or_default())
    }

    #[test]
    fn depth_one_is_the_tip_alone_and_shallow() {
        let (inc, shallow) = shallow_cut(oid(9), 1, graph).unwrap();
        assert_eq!(inc, [oid(9)]);
        assert_eq!(shallow, [oid(9)]);
    }

    #[test]
    fn depth_counts_parent_steps_through_merges() {
        let (inc, shallow) = shallow_cut(oid(9), 2, graph).unwrap();
        assert_eq!(inc, [oid(9), oid(8), oid(7)]);
        assert_eq!(shallow, [oid(8), oid(7)]);
        let (inc, shallow) = shallow_cut(oid(9), 3, graph).unwrap();
        assert_eq!(inc, [oid(9), oid(8), oid(7), oid(6)]);
        assert_eq!(shallow, [oid(6)]);
    }

    #[test]
    fn a_depth_past_the_root_has_nothing_shallow() {
        let (inc, shallow) = shallow_cut(oid(9), 100, graph).unwrap();
        assert_eq!(inc.len(), 5);
        assert!(shallow.is_empty());
    }

    #[test]
    fn history_parses_numbers_and_full_and_names_what_it_wants() {
        assert_eq!("full".parse::<History>().unwrap(), History::Full);
        assert_eq!(
            "3".parse::<History>().unwrap(),
            History::Depth(NonZeroU32::new(3).unwrap())
        );
        for bad in ["0", "-1", "all", ""] {
            let e = bad.parse::<History>().unwrap_err();
            assert!(e.contains("`full`"), "{e}");
        }
    }
}
