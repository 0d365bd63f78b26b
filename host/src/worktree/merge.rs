//! merge-to-head: bring a branch's commits into the host's checked-out branch.
//! Fast-forward when possible, else a merge commit; the checkout is "safe",
//! so a file the user changed locally is never overwritten.
//!
//! The checkout writes the merged files before the target branch moves. A
//! process killed in between would leave them as stray changes in the
//! user's working tree, so an intent record (`sanddune-merge-to-head` in the
//! checkout's git dir) names the move first; [`finish_interrupted`] rolls
//! it forward from `sanddune gc` or the next merge.

use std::path::{Path, PathBuf};

use git2::build::CheckoutBuilder;
use git2::{BranchType, Commit, ErrorCode, FileMode, ObjectType, Oid, Repository, Signature};
use serde::{Deserialize, Serialize};

use super::lock::clear_stale_git_locks;
use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The target already contains the branch.
    UpToDate,
    FastForward(String),
    MergeCommit(String),
    /// The branch conflicts with the target in these paths; nothing changed.
    Conflicted(Vec<String>),
}

/// A merge-to-head under way: `target` (a ref) moves from `from` to `to`.
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    target: String,
    from: String,
    to: String,
    branch: String,
}

fn err(what: &str, e: git2::Error) -> Error {
    Error::Other(anyhow::anyhow!("merge-to-head: {what}: {}", e.message()))
}

fn intent_path(repo: &Repository) -> PathBuf {
    repo.path().join("sanddune-merge-to-head")
}

/// Merge, or report the conflicting paths without changing anything. A
/// merge a killed process left unfinished is finished first.
pub fn merge_into_head(repo: &Repository, branch: &str) -> Result<MergeOutcome> {
    if let Some(done) = finish_interrupted(repo)? {
        tracing::info!(branch = %done.branch, target = %done.target, "finished a merge-to-head a killed run began");
    }
    let head = repo.head().map_err(|e| err("read HEAD", e))?;
    let target_name = head.shorthand().unwrap_or("HEAD").to_string();
    let ours = head.peel_to_commit().map_err(|e| err("read HEAD", e))?;
    let theirs = repo
        .find_branch(branch, BranchType::Local)
        .and_then(|b| b.get().peel_to_commit())
        .map_err(|e| err("read branch", e))?;
    // Gate on "ahead of the target", not on "committed this run".
    if ours.id() == theirs.id()
        || repo
            .graph_descendant_of(ours.id(), theirs.id())
            .unwrap_or(false)
    {
        return Ok(MergeOutcome::UpToDate);
    }
    let intent = |to: Oid| Intent {
        target: head.name().unwrap_or("HEAD").to_string(),
        from: ours.id().to_string(),
        to: to.to_string(),
        branch: branch.to_string(),
    };
    if repo
        .graph_descendant_of(theirs.id(), ours.id())
        .unwrap_or(false)
    {
        let message = format!("sanddune: fast-forward to {branch}");
        move_target(repo, &intent(theirs.id()), &theirs, &target_name, &message)?;
        return Ok(MergeOutcome::FastForward(theirs.id().to_string()));
    }
    let mut index = repo
        .merge_commits(&ours, &theirs, None)
        .map_err(|e| err("merge", e))?;
    if index.has_conflicts() {
        let conflicts = index.conflicts().map_err(|e| err("read conflicts", e))?;
        let mut paths: Vec<String> = conflicts
            .filter_map(|c| c.ok())
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|entry| String::from_utf8_lossy(&entry.path).into_owned())
            .collect();
        paths.dedup();
        return Ok(MergeOutcome::Conflicted(paths));
    }
    let tree_id = index
        .write_tree_to(repo)
        .map_err(|e| err("write tree", e))?;
    let tree = repo.find_tree(tree_id).map_err(|e| err("write tree", e))?;
    let sig = repo
        .signature()
        .or_else(|_| Signature::now("sanddune", "sanddune@localhost"))
        .map_err(|e| err("signature", e))?;
    let message = format!("Merge branch '{branch}' into {target_name}");
    let merge_id = repo
        .commit(None, &sig, &sig, &message, &tree, &[&ours, &theirs])
        .map_err(|e| err("commit", e))?;
    let merge = repo.find_commit(merge_id).map_err(|e| err("commit", e))?;
    move_target(repo, &intent(merge_id), &merge, &target_name, &message)?;
    Ok(MergeOutcome::MergeCommit(merge_id.to_string()))
}

/// Check `to` out and move the target branch to it, with the intent on disk
/// in between.
fn move_target(
    repo: &Repository,
    intent: &Intent,
    to: &Commit,
    target_name: &str,
    message: &str,
) -> Result<()> {
    // A git command that holds the index (a `git commit` waiting on its
    // editor) would fail the checkout after it wrote the files: refuse
    // before writing any.
    let index_lock = repo.path().join("index.lock");
    if index_lock.exists() {
        return Err(Error::Agent(format!(
            "cannot update `{target_name}`: another git command holds {}; nothing changed; the agent's commits are kept on `{}`: merge them when it is done",
            index_lock.display(),
            intent.branch
        )));
    }
    let path = intent_path(repo);
    write_intent(&path, intent)?;
    if let Err(e) = repo.checkout_tree(to.as_object(), Some(CheckoutBuilder::new().safe())) {
        // A conflict is found before anything is written; any other
        // failure (a full disk) may have written part: leave that to
        // finish_interrupted.
        let written = if e.code() == ErrorCode::Conflict {
            let _ = std::fs::remove_file(&path);
            "nothing changed"
        } else {
            "`sanddune gc` finishes the merge once the cause is fixed"
        };
        return Err(Error::Agent(format!(
            "cannot update `{target_name}`: {} (local changes in the way?); {written}; the agent's commits are kept on `{}`",
            e.message(),
            intent.branch
        )));
    }
    let from = Oid::from_str(&intent.from).map_err(|e| err("read intent", e))?;
    repo.reference_matching(&intent.target, to.id(), true, from, message)
        .map_err(|e| err("update target branch", e))?;
    remove_if_present(&path)
}

fn write_intent(path: &Path, intent: &Intent) -> Result<()> {
    let io = |e: std::io::Error| {
        Error::Other(anyhow::anyhow!(
            "merge-to-head: write {}: {e}",
            path.display()
        ))
    };
    // Renamed into place: the record is whole or absent.
    let partial = path.with_extension("partial");
    let text = serde_json::to_vec(intent).map_err(|e| Error::Other(e.into()))?;
    std::fs::write(&partial, text).map_err(io)?;
    std::fs::rename(&partial, path).map_err(io)
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Other(anyhow::anyhow!(
            "merge-to-head: remove {}: {e}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// A merge-to-head a killed process began, now finished: `branch` merged
/// into `target` at `commit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedMerge {
    pub branch: String,
    pub target: String,
    pub commit: String,
}

/// Finish the merge-to-head an interrupted process left (see the module
/// note): write the rest of its checkout and move the target branch. Every
/// path the merge changes must still be as before it or as after it: a
/// path edited since is never overwritten, and then this is an error that
/// names it and leaves the record in place. A record whose target has moved
/// on since is dropped. Call under the git lock.
pub fn finish_interrupted(repo: &Repository) -> Result<Option<FinishedMerge>> {
    let path = intent_path(repo);
    let Ok(text) = std::fs::read(&path) else {
        return Ok(None);
    };
    let intent: Intent = serde_json::from_slice(&text).map_err(|e| {
        Error::Other(anyhow::anyhow!(
            "merge-to-head: {} is not a merge record ({e}): remove it",
            path.display()
        ))
    })?;
    let oid = |s: &str| Oid::from_str(s).map_err(|e| err("read intent", e));
    let (from, to) = (oid(&intent.from)?, oid(&intent.to)?);
    let current = repo.refname_to_id(&intent.target).ok();
    if current != Some(from) {
        if current != Some(to) {
            tracing::warn!(target = %intent.target, "dropping an interrupted merge-to-head: its target has moved on");
        }
        remove_if_present(&path)?;
        return Ok(None);
    }
    let old = repo
        .find_commit(from)
        .and_then(|c| c.tree())
        .map_err(|e| err("read target", e))?;
    let new_commit = repo.find_commit(to).map_err(|e| err("read merge", e))?;
    let new = new_commit.tree().map_err(|e| err("read merge", e))?;
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(|e| err("diff", e))?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| Error::Other(anyhow::anyhow!("merge-to-head: a bare repository")))?;
    let mut checkout = CheckoutBuilder::new();
    checkout.force().disable_pathspec_match(true);
    let mut edited = Vec::new();
    for delta in diff.deltas() {
        let (before, after) = (delta.old_file(), delta.new_file());
        if before.mode() == FileMode::Commit || after.mode() == FileMode::Commit {
            continue; // a submodule's pointer: no file of its own
        }
        let Some(rel) = after.path().or(before.path()) else {
            continue;
        };
        let on_disk = blob_on_disk(&workdir.join(rel));
        let state = |file: &git2::DiffFile| (!file.id().is_zero()).then(|| file.id());
        if on_disk != state(&before)
            && on_disk != state(&after)
            && !state(&after).is_some_and(|id| cut_short(repo, &workdir.join(rel), id))
        {
            edited.push(rel.display().to_string());
        }
        checkout.path(rel);
    }
    if !edited.is_empty() {
        return Err(Error::Agent(format!(
            "a merge of `{}` into `{}` was interrupted, and since then {} changed: check {}, then remove {} (the agent's commits are kept on `{}`)",
            intent.branch,
            intent.target,
            edited.join(", "),
            if edited.len() == 1 { "it" } else { "them" },
            path.display(),
            intent.branch
        )));
    }
    // The killed process may have held git's own locks.
    let recorded = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_err(|e| Error::Other(anyhow::anyhow!("read {}: {e}", path.display())))?;
    let ref_dir = if intent.target == "HEAD" {
        repo.path()
    } else {
        repo.commondir()
    };
    clear_stale_git_locks(
        &[
            repo.path().join("index.lock"),
            ref_dir.join(format!("{}.lock", intent.target)),
        ],
        recorded,
        "finish an interrupted merge-to-head",
    )?;
    if diff.deltas().len() > 0 {
        repo.checkout_tree(new_commit.as_object(), Some(&mut checkout))
            .map_err(|e| err("finish checkout", e))?;
    }
    let message = format!("sanddune: finish merging {} (interrupted)", intent.branch);
    repo.reference_matching(&intent.target, to, true, from, &message)
        .map_err(|e| err("update target branch", e))?;
    remove_if_present(&path)?;
    Ok(Some(FinishedMerge {
        branch: intent.branch,
        target: intent.target,
        commit: intent.to,
    }))
}

/// The blob id of what is at `path` in the working tree (None if nothing;
/// a directory hashes as nothing a tree holds).
/// The file is one the killed checkout had begun writing: git writes a
/// file in place, so it holds the start of the new blob, maybe nothing.
fn cut_short(repo: &Repository, path: &Path, blob: Oid) -> bool {
    let (Ok(blob), Ok(meta)) = (repo.find_blob(blob), std::fs::symlink_metadata(path)) else {
        return false;
    };
    meta.is_file()
        && meta.len() < blob.size() as u64
        && std::fs::read(path).is_ok_and(|data| blob.content().starts_with(&data))
}

fn blob_on_disk(path: &Path) -> Option<Oid> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        Oid::hash_object(ObjectType::Blob, target.as_os_str().as_encoded_bytes()).ok()
    } else if meta.is_file() {
        Oid::hash_file(ObjectType::Blob, path).ok()
    } else {
        Some(Oid::ZERO_SHA1)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    /// A repository on `main` with one commit, and a branch `agent` that
    /// adds `notes/a.md` and changes `shared.txt`.
    fn repo_with_branch() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        commit_main_and_agent(&repo);
        repo.set_head("refs/heads/main").unwrap();
        repo.checkout_head(Some(CheckoutBuilder::new().force()))
            .unwrap();
        std::fs::write(dir.path().join("mine.txt"), "the user's\n").unwrap();
        (dir, repo)
    }

    fn commit_main_and_agent(repo: &Repository) {
        let sig = Signature::now("t", "t@example.com").unwrap();
        let base = {
            let mut builder = repo.treebuilder(None).unwrap();
            let blob = repo.blob(b"one\n").unwrap();
            builder.insert("shared.txt", blob, 0o100644).unwrap();
            let tree = repo.find_tree(builder.write().unwrap()).unwrap();
            let id = repo
                .commit(Some("refs/heads/main"), &sig, &sig, "c", &tree, &[])
                .unwrap();
            repo.find_commit(id).unwrap()
        };
        let mut notes = repo.treebuilder(None).unwrap();
        notes
            .insert("a.md", repo.blob(b"note\n").unwrap(), 0o100644)
            .unwrap();
        let notes = notes.write().unwrap();
        let mut builder = repo.treebuilder(Some(&base.tree().unwrap())).unwrap();
        builder.insert("notes", notes, 0o040000).unwrap();
        builder
            .insert("shared.txt", repo.blob(b"two\n").unwrap(), 0o100644)
            .unwrap();
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        repo.commit(
            Some("refs/heads/agent"),
            &sig,
            &sig,
            "agent",
            &tree,
            &[&base],
        )
        .unwrap();
    }

    /// What a process killed between its checkout and moving the branch
    /// leaves: the files written, `main` where it was, the record on disk.
    fn interrupt_fast_forward(repo: &Repository) -> Oid {
        let agent = repo.find_branch("agent", BranchType::Local).unwrap();
        let to = agent.get().peel_to_commit().unwrap();
        let from = repo.head().unwrap().peel_to_commit().unwrap().id();
        let intent = Intent {
            target: "refs/heads/main".into(),
            from: from.to_string(),
            to: to.id().to_string(),
            branch: "agent".into(),
        };
        write_intent(&intent_path(repo), &intent).unwrap();
        repo.checkout_tree(to.as_object(), Some(CheckoutBuilder::new().safe()))
            .unwrap();
        to.id()
    }

    fn status(repo: &Repository) -> Vec<String> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true);
        let statuses = repo.statuses(Some(&mut opts)).unwrap();
        statuses
            .iter()
            .map(|s| s.path().unwrap().to_string())
            .collect()
    }

    #[test]
    fn an_interrupted_merge_is_finished_and_the_users_files_stay() {
        let (dir, repo) = repo_with_branch();
        let to = interrupt_fast_forward(&repo);
        assert!(status(&repo).contains(&"notes/a.md".to_string()));

        let done = finish_interrupted(&repo).unwrap().unwrap();
        assert_eq!(
            (done.branch.as_str(), done.commit),
            ("agent", to.to_string())
        );
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), to);
        assert_eq!(status(&repo), ["mine.txt"]);
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
        assert_eq!(read("shared.txt"), "two\n");
        assert_eq!(read("mine.txt"), "the user's\n");
        assert!(!intent_path(&repo).exists());
        assert_eq!(
            finish_interrupted(&repo).unwrap(),
            None,
            "nothing left to do"
        );
    }

    #[test]
    fn git_locks_the_killed_process_left_are_cleared() {
        let (_dir, repo) = repo_with_branch();
        let to = interrupt_fast_forward(&repo);
        let locks = [
            repo.path().join("index.lock"),
            repo.path().join("refs/heads/main.lock"),
        ];
        for lock in &locks {
            std::fs::write(lock, "").unwrap();
        }
        finish_interrupted(&repo).unwrap().unwrap();
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), to);
        assert!(locks.iter().all(|l| !l.exists()));
    }

    #[test]
    fn a_lock_older_than_the_record_is_another_commands_and_stays() {
        let (_dir, repo) = repo_with_branch();
        let from = repo.refname_to_id("refs/heads/main").unwrap();
        interrupt_fast_forward(&repo);
        let lock = repo.path().join("index.lock");
        let file = std::fs::File::create(&lock).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();

        let e = finish_interrupted(&repo).unwrap_err().to_string();
        assert!(e.contains("index.lock") && e.contains("sanddune gc"), "{e}");
        assert!(lock.exists());
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), from);
        assert!(intent_path(&repo).exists());
    }

    #[test]
    fn the_next_merge_finishes_an_interrupted_one_first() {
        let (_dir, repo) = repo_with_branch();
        let to = interrupt_fast_forward(&repo);
        assert_eq!(
            merge_into_head(&repo, "agent").unwrap(),
            MergeOutcome::UpToDate
        );
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), to);
        assert_eq!(status(&repo), ["mine.txt"]);
    }

    /// Killed while git wrote the files: a new file created but empty, a
    /// changed one half-written. Both are the merge's own, and finished.
    #[test]
    fn files_the_killed_checkout_left_half_written_are_finished() {
        let (dir, repo) = repo_with_branch();
        let to = interrupt_fast_forward(&repo);
        std::fs::write(dir.path().join("notes/a.md"), "").unwrap();
        std::fs::write(dir.path().join("shared.txt"), "tw").unwrap();

        finish_interrupted(&repo).unwrap().unwrap();
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), to);
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
        assert_eq!(read("notes/a.md"), "note\n");
        assert_eq!(read("shared.txt"), "two\n");
        assert_eq!(status(&repo), ["mine.txt"]);
    }

    #[test]
    fn a_path_edited_since_is_named_and_never_overwritten() {
        let (dir, repo) = repo_with_branch();
        let from = repo.refname_to_id("refs/heads/main").unwrap();
        interrupt_fast_forward(&repo);
        std::fs::write(dir.path().join("shared.txt"), "edited by hand\n").unwrap();

        let e = finish_interrupted(&repo).unwrap_err().to_string();
        assert!(e.contains("shared.txt") && e.contains("`agent`"), "{e}");
        assert!(
            e.contains("sanddune-merge-to-head"),
            "says what to remove: {e}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("shared.txt")).unwrap(),
            "edited by hand\n"
        );
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), from);
        assert!(
            intent_path(&repo).exists(),
            "the record stays until resolved"
        );
    }

    #[test]
    fn a_record_whose_target_moved_on_is_dropped() {
        let (_dir, repo) = repo_with_branch();
        interrupt_fast_forward(&repo);
        let head = repo.head().unwrap().peel_to_commit().unwrap();
        let sig = Signature::now("t", "t@example.com").unwrap();
        let moved = repo
            .commit(
                Some("refs/heads/main"),
                &sig,
                &sig,
                "user",
                &head.tree().unwrap(),
                &[&head],
            )
            .unwrap();

        assert_eq!(finish_interrupted(&repo).unwrap(), None);
        assert_eq!(repo.refname_to_id("refs/heads/main").unwrap(), moved);
        assert!(!intent_path(&repo).exists());
    }

    #[test]
    fn a_torn_record_is_an_error_naming_the_file() {
        let (_dir, repo) = repo_with_branch();
        std::fs::write(intent_path(&repo), "{\"target\":").unwrap();
        let e = finish_interrupted(&repo).unwrap_err().to_string();
        assert!(
            e.contains("sanddune-merge-to-head") && e.contains("remove it"),
            "{e}"
        );
    }
}
