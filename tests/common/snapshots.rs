//! The trial of a provider that keeps snapshots itself (contract 0.8, ADR
//! 0038), through `sanddune run` as a user runs it, for any such provider
//! on its mock: the first run with `snapshot=auto` runs its set-up and
//! keeps the sandbox; the next starts from it and skips the set-up, with
//! what the set-up wrote in the worktree; a snapshot gone on the
//! provider's side is forgotten and made again; a changed input makes
//! another; `snapshot rm` and gc's age remove them through the provider.

use std::process::Output;

use super::{TestRepo, stderr, stdout};

/// A provider on its mock.
pub struct Kept<'a> {
    /// Its name, as `snapshot ls` prints it.
    pub name: &'a str,
    /// `sanddune run` on the mock with these extra arguments.
    pub run: &'a dyn Fn(&[&str]) -> Output,
    /// The env a remover needs (the provider's credentials).
    pub credentials: &'a [(&'a str, &'a str)],
    /// The ids of the snapshots the mock holds, not deleted.
    pub live: &'a dyn Fn() -> Vec<String>,
    /// Remove one on the provider's side, as if it expired.
    pub expire: &'a dyn Fn(&str) -> bool,
}

pub fn skip_the_set_up_until_gone_or_changed(repo: &TestRepo, provider: &Kept) {
    let seen = tempfile::tempdir().unwrap();
    let (runs_file, stamps_file) = (seen.path().join("runs"), seen.path().join("stamps"));
    let write = |path: &str, text: &str| {
        let path = repo.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".gitignore", "deps/\n");
    write("deps.lock", "left-pad 1.0\n");
    // The mocks run commands on this machine, so the set-up can count its
    // runs in a file of the test's.
    write(
        ".sanddune/config.toml",
        &format!(
            r#"[sandboxOptions]
snapshot = "auto"
"snapshot.inputs" = "deps.lock"

[[hooks.sandbox.onSandboxReady]]
command = "mkdir -p deps && date +%s%N > deps/stamp && echo ran >> {}"
"#,
            runs_file.display()
        ),
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "a lockfile and a set-up"]);
    let runs = || {
        std::fs::read_to_string(&runs_file)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let stamps = || {
        std::fs::read_to_string(&stamps_file)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // The agent writes down the set-up's stamp it finds in its worktree.
    let run = |name: &str| {
        let prompt = format!(
            "{name}\nFAKE:run: cat deps/stamp >> {}",
            stamps_file.display()
        );
        let out = (provider.run)(&["--prompt", &prompt, "--trust", "--log", "terminal"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let ls = || {
        let out = repo.sanddune(&["snapshot", "ls"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .filter(|l| l.starts_with(provider.name))
            .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let ids = |live: Vec<String>| {
        let mut live = live;
        live.sort();
        live
    };

    let first = run("first");
    assert!(
        first.contains("snapshot: kept the prepared sandbox as snapshot "),
        "{first}"
    );
    assert_eq!(runs(), 1);
    let kept = (provider.live)();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(ls(), kept);
    assert_eq!(stamps().len(), 1, "the agent found the set-up's files");

    // The next run starts from it: no set-up, the set-up's files there.
    let second = run("second");
    assert!(
        second.contains(&format!(
            "snapshot: started from snapshot {}: its set-up (1 sandbox hook(s)) is skipped",
            kept[0]
        )),
        "{second}"
    );
    assert_eq!(runs(), 1, "the set-up did not run again");
    assert_eq!(stamps().len(), 2);
    assert_eq!(stamps()[1], stamps()[0]);
    assert_eq!((provider.live)(), kept, "nothing new kept");
    assert_eq!(repo.calls("claude").len(), 2);

    // Gone on the provider's side (expired): the run says so, runs the
    // set-up and keeps another.
    assert!((provider.expire)(&kept[0]));
    let third = run("third");
    assert!(
        third.contains(&format!(
            "warning: snapshot: the sandbox did not start from snapshot {}",
            kept[0]
        )),
        "{third}"
    );
    assert_eq!(runs(), 2);
    let renewed = (provider.live)();
    assert_eq!(renewed.len(), 1, "{renewed:?}");
    assert_ne!(renewed, kept);
    assert_eq!(ls(), renewed);

    // A changed input makes another, beside it.
    write("deps.lock", "left-pad 1.1\n");
    repo.git(&["commit", "-qam", "bump"]);
    let fourth = run("fourth");
    assert!(
        fourth.contains("snapshot: kept the prepared sandbox"),
        "{fourth}"
    );
    assert_eq!(runs(), 3);
    let both = ls();
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(ids((provider.live)()), ids(both.clone()));

    // rm removes one through the provider (with the remover's
    // credentials); gc removes those past the age given.
    let remover = |args: &[&str]| {
        let mut cmd = repo.command(args);
        cmd.envs(provider.credentials.iter().copied());
        cmd.output().unwrap()
    };
    let out = remover(&["snapshot", "rm", &both[1]]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("removed {} snapshot {}", provider.name, both[1])),
        "{}",
        stdout(&out)
    );
    assert_eq!(ls(), &both[..1]);
    assert_eq!((provider.live)(), &both[..1]);
    let out = remover(&["gc", "--snapshot-max-age", "1d"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ls().len(), 1, "none is a day old");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = remover(&["gc", "--snapshot-max-age", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("removed {} snapshot {}", provider.name, both[0])),
        "{}",
        stdout(&out)
    );
    assert!(ls().is_empty());
    assert!((provider.live)().is_empty());
}
