//! What a branch changed since it left another, and the branch bookkeeping
//! of work that lands later (best-of-N: candidates judged by their diffs,
//! the losers' branches deleted on request).

use git2::{BranchType, DiffFormat, DiffOptions, Oid};
use serde::Serialize;

use super::lock::GitLock;
use super::{Repo, git_err};
use crate::error::{Error, Result};

/// The size of a branch's change: files touched, lines added and removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffStat {
    pub files: usize,
    pub insertions: usize,
    pub deletions: usize,
}

impl DiffStat {
    /// Lines changed: added plus removed.
    pub fn lines(&self) -> usize {
        self.insertions + self.deletions
    }
}

impl Repo {
    /// The diff from where `branch` left `base` (their merge base) to its tip.
    fn branch_diff(&self, base: &str, branch: &str) -> Result<git2::Diff<'_>> {
        let tip =
            Oid::from_str(&self.branch_head(branch)?).map_err(|e| git_err("read branch", e))?;
        let base = Oid::from_str(base).map_err(|e| git_err("read base", e))?;
        let from = self
            .repo
            .merge_base(base, tip)
            .map_err(|e| git_err("find the merge base", e))?;
        let tree = |oid| {
            self.repo
                .find_commit(oid)
                .and_then(|c| c.tree())
                .map_err(|e| git_err("read tree", e))
        };
        let (old, new) = (tree(from)?, tree(tip)?);
        let mut options = DiffOptions::new();
        options.context_lines(3);
        self.repo
            .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut options))
            .map_err(|e| git_err("diff", e))
    }

    /// How much `branch` changed since it left commit `base`.
    pub fn diff_stat(&self, base: &str, branch: &str) -> Result<DiffStat> {
        let stats = self
            .branch_diff(base, branch)?
            .stats()
            .map_err(|e| git_err("diff stats", e))?;
        Ok(DiffStat {
            files: stats.files_changed(),
            insertions: stats.insertions(),
            deletions: stats.deletions(),
        })
    }

    /// The patch of `branch` since it left `base`, cut at `max_bytes` (and
    /// whether it was cut). Binary files show as "Binary files differ".
    pub fn diff_patch(&self, base: &str, branch: &str, max_bytes: usize) -> Result<(String, bool)> {
        let diff = self.branch_diff(base, branch)?;
        let mut out = Vec::new();
        let mut cut = false;
        diff.print(DiffFormat::Patch, |_, _, line| {
            let content = line.content();
            if out.len() + content.len() + 1 > max_bytes {
                cut = true;
                return false;
            }
            if matches!(line.origin(), '+' | '-' | ' ') {
                out.push(line.origin() as u8);
            }
            out.extend_from_slice(content);
            true
        })
        .or_else(|e| {
            if cut {
                Ok(())
            } else {
                Err(git_err("print diff", e))
            }
        })?;
        Ok((String::from_utf8_lossy(&out).into_owned(), cut))
    }

    /// Whether a local branch of that name exists.
    pub fn branch_exists(&self, branch: &str) -> bool {
        self.repo.find_branch(branch, BranchType::Local).is_ok()
    }

    /// Create `branch` at commit `at`; refused when it exists.
    pub fn create_branch(&self, branch: &str, at: &str) -> Result<()> {
        let _git = GitLock::acquire(&self.git_dir())?;
        if self.branch_exists(branch) {
            return Err(Error::input(format!(
                "the branch `{branch}` exists already"
            )));
        }
        let commit = Oid::from_str(at)
            .and_then(|oid| self.repo.find_commit(oid))
            .map_err(|e| git_err("read commit", e))?;
        self.repo
            .branch(branch, &commit, false)
            .map(drop)
            .map_err(|e| git_err("create branch", e))
    }

    /// Delete the branches under `prefix` that hold nothing the checked-out
    /// branch lacks and that no worktree has checked out (what a killed
    /// best-of leaves: its judge's branch, a candidate that never
    /// committed). A branch with commits of its own is kept. Returns the
    /// names deleted.
    pub fn delete_spent_branches(&self, prefix: &str) -> Result<Vec<String>> {
        let _git = GitLock::acquire(&self.git_dir())?;
        let head = self
            .repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(|e| git_err("read HEAD", e))?
            .id();
        let checked_out = self.checked_out_branches();
        let branches = self
            .repo
            .branches(Some(BranchType::Local))
            .map_err(|e| git_err("list branches", e))?;
        let mut deleted = Vec::new();
        for (mut branch, _) in branches.flatten() {
            let Some(name) = branch.name().ok().flatten().map(String::from) else {
                continue;
            };
            let Some(tip) = branch.get().target() else {
                continue;
            };
            let spent = tip == head || self.repo.graph_descendant_of(head, tip).unwrap_or(false);
            if name.starts_with(prefix) && spent && !checked_out.contains(&name) {
                branch.delete().map_err(|e| git_err("delete branch", e))?;
                deleted.push(name);
            }
        }
        Ok(deleted)
    }

    /// The branches checked out in the repository and each linked worktree.
    fn checked_out_branches(&self) -> Vec<String> {
        let head_of = |repo: &git2::Repository| {
            repo.head()
                .ok()
                .and_then(|h| h.shorthand().ok().map(String::from))
        };
        let mut names: Vec<String> = head_of(&self.repo).into_iter().collect();
        // Names that are not UTF-8 are skipped: sanddune makes none.
        let worktrees = self.repo.worktrees().ok();
        let linked = worktrees.iter().flat_map(|w| w.iter());
        for name in linked.flatten().flatten() {
            if let Some(head) = self
                .repo
                .find_worktree(name)
                .ok()
                .and_then(|w| git2::Repository::open_from_worktree(&w).ok())
                .and_then(|r| head_of(&r))
            {
                names.push(head);
            }
        }
        names
    }

    /// Delete `branch`. git refuses a branch checked out in a worktree.
    pub fn delete_branch(&self, branch: &str) -> Result<()> {
        let _git = GitLock::acquire(&self.git_dir())?;
        self.repo
            .find_branch(branch, BranchType::Local)
            .and_then(|mut b| b.delete())
            .map_err(|e| git_err("delete branch", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &std::path::Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn a_branch_diff_counts_from_its_merge_base() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "initial"]);
        let base = git(dir, &["rev-parse", "HEAD"]);
        let repo = Repo::discover(dir).unwrap();
        repo.create_branch("topic", &base).unwrap();
        assert!(repo.create_branch("topic", &base).is_err(), "exists");
        git(dir, &["checkout", "-q", "topic"]);
        std::fs::write(dir.join("a.txt"), "one\n2\nthree\nfour\n").unwrap();
        std::fs::write(dir.join("b.txt"), "new\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "change"]);
        git(dir, &["checkout", "-q", "main"]);
        // main moves on: the topic's diff still counts from where it left.
        std::fs::write(dir.join("c.txt"), "main only\n").unwrap();
        git(dir, &["add", "."]);
        git(dir, &["commit", "-qm", "main moves"]);
        let main = git(dir, &["rev-parse", "HEAD"]);
        let stat = repo.diff_stat(&main, "topic").unwrap();
        assert_eq!(
            stat,
            DiffStat {
                files: 2,
                insertions: 3,
                deletions: 1
            }
        );
        assert_eq!(stat.lines(), 4);
        let (patch, cut) = repo.diff_patch(&base, "topic", 1 << 20).unwrap();
        assert!(!cut);
        assert!(
            patch.contains("+four\n") && patch.contains("-two\n"),
            "{patch}"
        );
        assert!(patch.contains("+++ b/b.txt"), "{patch}");
        let (short, cut) = repo.diff_patch(&base, "topic", 40).unwrap();
        assert!(cut && short.len() <= 40, "{short}");
        repo.delete_branch("topic").unwrap();
        assert!(!repo.branch_exists("topic"));
        assert!(repo.delete_branch("main").is_err(), "checked out");
    }
}
