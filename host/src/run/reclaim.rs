//! What `sanddune gc` does with the sandbox records (`sandbox_record`) of runs
//! whose process is gone: it re-opens the isolated sandbox, brings its new
//! commits onto the run's branch, and closes it. Of a bind-mount sandbox
//! (whose commits are on the host already, and whose containers gc removes
//! by their labels) only the scratch dir is left to remove; a run killed
//! inside `create` is reached through the provider's `find`.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::plan;
use super::sandbox_record::{DIR, Record};
use super::sync::sandbox_sh;
use crate::capability::containers::owner_alive;
use crate::error::{Error, Result};
use crate::plugin::sandbox::{CLOSING, Sandbox, SandboxProvider, SandboxSpec, scratch_prefix};
use crate::plugin::{PluginRef, PluginRuntime};
use crate::worktree::Repo;

/// What `gc` did with one recorded sandbox of a dead run.
pub enum Reclaimed {
    /// Its commits up to `head` are on `branch` (or on `<branch>-recovered`
    /// beside a kept worktree), and it is closed.
    Recovered {
        provider: String,
        run_id: String,
        branch: String,
        head: String,
    },
    /// It had nothing the host lacks; it is closed.
    Closed { provider: String, run_id: String },
    /// Its run died inside `create`; the provider found `count` sandboxes
    /// of the run (`find`), and each is closed.
    Found {
        provider: String,
        run_id: String,
        count: usize,
    },
    /// Nothing in it to bring out: a bind-mount sandbox (its commits are on
    /// the host, its containers go with the orphaned ones), or one whose run
    /// died inside `create`. Its scratch dir and record are removed.
    Cleared { provider: String, run_id: String },
    /// It could not be reached or closed; the record stays for the next gc
    /// unless `forget` was given.
    Failed {
        provider: String,
        run_id: String,
        error: Error,
        forgotten: bool,
    },
}

/// Re-open, recover and close every recorded sandbox whose run's process is
/// gone. With `forget`, a sandbox that cannot be reached is dropped from
/// the records (the commits it made since its last sync are then lost).
pub async fn reclaim(repo: &Repo, runtime: &PluginRuntime, forget: bool) -> Vec<Reclaimed> {
    let Ok(entries) = std::fs::read_dir(repo.git_dir().join(DIR)) else {
        return vec![];
    };
    let paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    // Scratch dirs records name: a record of the same run made while a
    // create was killed must leave these alone.
    let named: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| serde_json::from_slice::<Record>(&std::fs::read(p).ok()?).ok())
        .filter_map(|r| r.scratch)
        .collect();
    let mut done = Vec::new();
    for path in paths {
        let closing = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => false,
            Some(CLOSING) => true,
            _ => continue,
        };
        let Ok(file) = std::fs::File::open(&path) else {
            continue; // closed meanwhile
        };
        // One gc per record: another one reclaiming it holds this lock.
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        let Ok(record) = serde_json::from_reader::<_, Record>(&file) else {
            continue; // not one sanddune wrote
        };
        if owner_alive(&record.owner) || !path.exists() {
            continue;
        }
        crate::capability::link::remove_left_by(&record.run_id, &record.tmp_dir);
        let (provider, run_id) = (record.provider.clone(), record.run_id.clone());
        done.push(
            match reclaim_one(repo, runtime, &record, &path, &named).await {
                Ok(done) => done,
                // Its close had begun: what is left of it is gone or going.
                Err(_) if closing => {
                    forget_record(&path, &record);
                    Reclaimed::Closed { provider, run_id }
                }
                Err(error) => {
                    if forget {
                        forget_record(&path, &record);
                    }
                    Reclaimed::Failed {
                        provider,
                        run_id,
                        error,
                        forgotten: forget,
                    }
                }
            },
        );
    }
    done
}

fn forget_record(path: &Path, record: &Record) {
    let _ = std::fs::remove_file(path);
    if let Some(scratch) = own_scratch(record) {
        let _ = std::fs::remove_dir_all(scratch);
    }
}

/// The record's scratch dir, if it is one sanddune made. gc deletes it and
/// kills what works in it, so a record naming any other directory (the
/// user's home, a link to it: only a forged record does) gets neither.
fn own_scratch(record: &Record) -> Option<&Path> {
    record
        .scratch
        .as_deref()
        .filter(|scratch| is_scratch_of(record, scratch))
}

/// Whether `dir` is named as sanddune names a scratch dir of the record's
/// run, directly in the run's temp dir, and is a directory, not a link.
fn is_scratch_of(record: &Record, dir: &Path) -> bool {
    let plain = |s: &str| !s.is_empty() && !s.contains('/') && s != "." && s != "..";
    let prefix = scratch_prefix(&record.provider_name, &record.run_id);
    plain(&record.provider_name)
        && plain(&record.run_id)
        && dir.parent() == Some(record.tmp_dir.as_path())
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix) && n != prefix)
        && std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())
}

async fn reclaim_one(
    repo: &Repo,
    runtime: &PluginRuntime,
    record: &Record,
    path: &Path,
    named: &[PathBuf],
) -> Result<Reclaimed> {
    let (provider, run_id) = (record.provider.clone(), record.run_id.clone());
    if let Some(scratch) = &record.scratch
        && own_scratch(record).is_none()
        && std::fs::symlink_metadata(scratch).is_ok()
    {
        return Err(Error::input(format!(
            "its record names {} as its scratch dir, which sanddune did not make: gc leaves it alone",
            scratch.display()
        )));
    }
    let Some(state) = &record.state else {
        return reclaim_unfinished_create(repo, runtime, record, path, named).await;
    };
    if let Some(scratch) = own_scratch(record) {
        kill_strays(scratch).await;
    }
    let Some(base) = &record.base else {
        forget_record(path, record);
        return Ok(Reclaimed::Cleared { provider, run_id });
    };
    let (loaded, spec) = load_for(repo, runtime, record).await?;
    let scratch = own_scratch(record).map(Path::to_path_buf);
    let mut sandbox = loaded.reopen(&spec, state, scratch).await?;
    sandbox.remove_on_close(path.to_path_buf());
    let recovered = match bring_out_commits(&mut sandbox, repo, record, base).await {
        Ok(recovered) => recovered,
        Err(e) => {
            // Not closed: its commits stay in it for the next gc.
            sandbox.detach();
            return Err(e);
        }
    };
    sandbox.close().await?;
    Ok(match recovered {
        Some(head) => Reclaimed::Recovered {
            provider,
            run_id,
            branch: record.branch.clone(),
            head,
        },
        None => Reclaimed::Closed { provider, run_id },
    })
}

/// A run killed inside `create`: the host never learnt its sandbox's state.
/// The scratch dirs it made for the run go, and every sandbox the provider
/// `find`s for the run (0.3 on) is re-opened and closed.
async fn reclaim_unfinished_create(
    repo: &Repo,
    runtime: &PluginRuntime,
    record: &Record,
    path: &Path,
    named: &[PathBuf],
) -> Result<Reclaimed> {
    let (provider, run_id) = (record.provider.clone(), record.run_id.clone());
    for dir in std::fs::read_dir(&record.tmp_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = dir.path();
        if is_scratch_of(record, &dir) && !named.contains(&dir) {
            kill_strays(&dir).await;
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let (loaded, spec) = load_for(repo, runtime, record).await?;
    let found = loaded.find(&spec).await?.unwrap_or_default();
    let mut closed = 0;
    for state in &found {
        match loaded.reopen(&spec, state, None).await {
            Ok(mut sandbox) => {
                sandbox.close().await?;
                closed += 1;
            }
            // Gone since `find`: dockerd rolls back a create whose client
            // died mid-request (found by kill -9 at seeded points).
            Err(e) => {
                if loaded
                    .find(&spec)
                    .await?
                    .unwrap_or_default()
                    .contains(state)
                {
                    return Err(e);
                }
            }
        }
    }
    forget_record(path, record);
    Ok(if closed == 0 {
        Reclaimed::Cleared { provider, run_id }
    } else {
        Reclaimed::Found {
            provider,
            run_id,
            count: closed,
        }
    })
}

/// The record's provider, loaded, and the spec its run gave it, with the
/// env it declares read from gc's own environment.
pub(super) async fn load_for(
    repo: &Repo,
    runtime: &PluginRuntime,
    record: &Record,
) -> Result<(SandboxProvider, SandboxSpec)> {
    let (loaded, env) = load_provider(repo, runtime, &record.provider).await?;
    let spec = SandboxSpec {
        run_id: record.run_id.clone(),
        name: record.name.clone(),
        worktree: record.worktree.clone(),
        git_dir: repo.git_dir(),
        branch: record.branch.clone(),
        env,
        config: record.config.clone(),
        side_by_side: 1,
        git_shield: record.git_shield.clone(),
        gateway: None,
        setup: vec![],
        pool: None,
        snapshot: None,
    };
    Ok((loaded, spec))
}

/// The provider a run named as `source`, loaded, with the env it declares
/// read from this process's environment (gc's, `snapshot rm`'s).
pub(super) async fn load_provider(
    repo: &Repo,
    runtime: &PluginRuntime,
    source: &str,
) -> Result<(SandboxProvider, Vec<(String, String)>)> {
    let loaded = SandboxProvider::load(runtime, &PluginRef::parse(source)).await?;
    let env = plan::resolve_env(
        repo.root(),
        Default::default(),
        loaded.capabilities().env_keys,
        &[],
        &[],
        &[],
    )?;
    Ok((loaded, env.into_iter().collect()))
}

/// Bundle the sandbox's commits the host may lack (those since `base`) and
/// hand them to the repository.
async fn bring_out_commits(
    sandbox: &mut Sandbox,
    repo: &Repo,
    record: &Record,
    base: &str,
) -> Result<Option<String>> {
    let base = super::sync::q(base);
    // Nothing when sync in never finished (no HEAD) or HEAD is base or
    // behind it; without base (rewritten history) the whole of HEAD.
    let script = format!(
        "head=$(git rev-parse -q --verify HEAD) || exit 0; \
         if git cat-file -e {base}^{{commit}} 2>/dev/null; then \
           git merge-base --is-ancestor HEAD {base} && exit 0; \
           git bundle create -q .git/sanddune-gc.bundle HEAD ^{base}; \
         else git bundle create -q .git/sanddune-gc.bundle HEAD; fi && echo bundled"
    );
    if sandbox_sh(sandbox, script).await?.stdout.trim() != "bundled" {
        return Ok(None);
    }
    let tmp = tempfile::tempdir().map_err(|e| Error::Other(e.into()))?;
    let bundle = tmp.path().join("gc.bundle");
    let inside = format!("{}/.git/sanddune-gc.bundle", sandbox.worktree_path());
    sandbox.copy_file_out(&inside, &bundle).await?;
    repo.recover_sandbox_commits(&record.worktree, &record.branch, &bundle)
        .map(Some)
}

/// Processes the dead run started in its sandbox's scratch dir outlive it
/// (an agent still committing, its git): kill them, so the
/// sandbox holds still while gc bundles its commits and closes it. A
/// scratch dir is sanddune's alone (see [`own_scratch`]), so whatever works
/// in it is the run's.
async fn kill_strays(scratch: &Path) {
    let Ok(scratch) = scratch.canonicalize() else {
        return;
    };
    for _ in 0..50 {
        let strays: Vec<i32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(&scratch))
            })
            .collect();
        if strays.is_empty() {
            return;
        }
        for pid in strays {
            // SAFETY: signals to processes that work in the dead run's
            // scratch dir, and to their groups.
            // A group is killed whole only when its leader is one of them.
            unsafe {
                if libc::getpgid(pid) == pid {
                    libc::kill(-pid, libc::SIGKILL);
                }
                libc::kill(pid, libc::SIGKILL);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tmp: &Path, scratch: &Path) -> Record {
        Record {
            owner: "1:1".into(),
            provider: "test-isolated".into(),
            provider_name: "test-isolated".into(),
            run_id: "1795786815-ab12".into(),
            name: "run".into(),
            worktree: tmp.to_path_buf(),
            branch: "main".into(),
            config: vec![],
            tmp_dir: tmp.to_path_buf(),
            state: Some("sbx".into()),
            scratch: Some(scratch.to_path_buf()),
            base: None,
            git_shield: None,
        }
    }

    #[test]
    fn only_a_scratch_dir_named_and_placed_as_sanddune_makes_them_is_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp
            .path()
            .join("sanddune-test-isolated-1795786815-ab12-x7Yz");
        std::fs::create_dir(&own).unwrap();
        assert_eq!(own_scratch(&record(tmp.path(), &own)), Some(own.as_path()));

        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let nested = home.join("sanddune-test-isolated-1795786815-ab12-x7Yz");
        std::fs::create_dir(&nested).unwrap();
        let linked = tmp
            .path()
            .join("sanddune-test-isolated-1795786815-ab12-link");
        std::os::unix::fs::symlink(&home, &linked).unwrap();
        let bare_prefix = tmp.path().join("sanddune-test-isolated-1795786815-ab12-");
        std::fs::create_dir(&bare_prefix).unwrap();
        for (why, scratch) in [
            ("a directory of the user's", home.as_path()),
            ("not directly in the temp dir", nested.as_path()),
            ("a link", linked.as_path()),
            ("the prefix alone", bare_prefix.as_path()),
            ("the filesystem root", Path::new("/")),
        ] {
            assert_eq!(own_scratch(&record(tmp.path(), scratch)), None, "{why}");
        }
        // A provider or run id that is not a plain name makes any prefix.
        let mut forged = record(tmp.path(), &own);
        forged.provider_name = String::new();
        forged.run_id = "..".into();
        assert_eq!(own_scratch(&forged), None);
    }
}
