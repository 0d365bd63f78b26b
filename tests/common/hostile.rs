//! A hostile agent's attack on the host through the git dir, shared by
//! `tests/hostile_agent.rs` (as root) and `tests/non_root.rs` (as a user):
//! the script, a repository that holds it, and what to check afterwards.

use std::path::Path;

use super::TestRepo;

/// The attack, committed into the test repository so that every worktree
/// has it. `$1` is the marker directory. It plants, in every git dir the
/// sandbox can name: hooks, `core.fsmonitor`, `core.hooksPath`, a filter
/// and a textconv driver (with `info/attributes` and a tracked
/// `.gitattributes`), a pager, an ssh command, an include and a
/// `config.worktree`; it rewrites a
/// linked worktree's `.git` file, its own or another run's; and it looks
/// for the credential the user keeps in the repository's config.
pub const ATTACK: &str = r#"m=$1
g=$(git rev-parse --absolute-git-dir)
c=$(cd "$(git rev-parse --git-common-dir)" && pwd)
for d in "$g" "$c"; do
  mkdir -p "$d/hooks" "$d/info"
  for h in post-index-change pre-commit post-commit post-checkout post-merge reference-transaction pre-auto-gc fsmonitor-watchman; do
    printf '#!/bin/sh\ntouch %s/hook-%s\n' "$m" "$h" > "$d/hooks/$h" && chmod +x "$d/hooks/$h"
  done
  git config --file "$d/config" core.fsmonitor "touch $m/fsmonitor; true"
  git config --file "$d/config" core.hooksPath "$d/hooks"
  git config --file "$d/config" filter.evil.clean "touch $m/filter; cat"
  git config --file "$d/config" filter.evil.smudge "touch $m/filter; cat"
  git config --file "$d/config" diff.evil.textconv "touch $m/textconv; cat"
  git config --file "$d/config" core.pager "touch $m/pager; cat"
  git config --file "$d/config" core.sshCommand "touch $m/ssh; ssh"
  printf '[core]\n\tfsmonitor = touch %s/include\n' "$m" > "$d/evil-include"
  git config --file "$d/config" extensions.worktreeConfig true
  printf '[core]\n\tfsmonitor = touch %s/worktree-config\n' "$m" > "$d/config.worktree"
  git config --file "$d/config" include.path "$d/evil-include"
  echo '* filter=evil diff=evil' > "$d/info/attributes"
done
if [ -f .git ]; then printf 'gitdir: %s\n' "$PWD/evil" > .git 2>/dev/null && echo "rewrote .git"; fi
for f in .sanddune/worktrees/*/.git; do [ -f "$f" ] && printf 'gitdir: %s\n' "$PWD/evil" > "$f" 2>/dev/null && echo "rewrote $f"; done
echo "seen credential: $(grep -rhs SECRET-TOKEN-42 "$g" "$c" | head -1)"
echo "attack done""#;

/// A repository with the attack committed, a credential in its config
/// (as `git config http.extraheader` keeps one), and the marker directory.
pub fn hostile_repo() -> (TestRepo, tempfile::TempDir) {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("attack.sh"), ATTACK).unwrap();
    std::fs::write(
        repo.path().join(".gitattributes"),
        "*.txt filter=evil diff=evil\n",
    )
    .unwrap();
    repo.git(&["add", "attack.sh", ".gitattributes"]);
    repo.git(&["commit", "-q", "-m", "the attack"]);
    repo.git(&[
        "config",
        "http.extraheader",
        "AUTHORIZATION: bearer SECRET-TOKEN-42",
    ]);
    // Another run's worktree, which a head run's agent must not reach.
    repo.git(&[
        "worktree",
        "add",
        "-q",
        ".sanddune/worktrees/other",
        "-b",
        "other",
    ]);
    let markers = tempfile::tempdir().unwrap();
    (repo, markers)
}

/// What of the git dir makes git run something: its config, hooks and
/// attributes (sanddune itself writes only `info/exclude`, objects and refs).
pub fn git_dir_state(repo: &TestRepo) -> Vec<(String, String)> {
    let git = repo.path().join(".git");
    let mut files = vec![];
    for part in ["config", "hooks", "info/attributes"] {
        collect(&git.join(part), &git, &mut files);
    }
    // And where another worktree's git points.
    let other = repo.path().join(".sanddune/worktrees/other/.git");
    files.push((
        "other/.git".into(),
        std::fs::read_to_string(other).unwrap_or_default(),
    ));
    files.sort();
    files
}

fn collect(path: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            collect(&entry.unwrap().path(), root, out);
        }
    } else if let Ok(bytes) = std::fs::read(path) {
        let name = path.strip_prefix(root).unwrap().display().to_string();
        out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
    }
}

pub fn markers_left(markers: &Path) -> Vec<String> {
    std::fs::read_dir(markers)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The user's ordinary git commands after the run (through `git`, as the
/// user), each of which would run a planted hook, fsmonitor, filter,
/// textconv or include.
pub fn users_next_git_commands(repo: &TestRepo, git: &dyn Fn(&[&str]) -> String) {
    std::fs::write(repo.path().join("user.txt"), "the user's file\n").unwrap();
    git(&["status"]);
    git(&["add", "user.txt"]);
    git(&["commit", "-q", "-m", "the user's commit"]);
    git(&["diff", "HEAD~1", "--textconv"]);
    git(&["log", "-p", "-1"]);
    git(&["checkout", "-q", "-b", "after-the-run"]);
}
