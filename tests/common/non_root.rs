//! sanddune as a non-root user, as most people run it, shared by
//! `tests/non_root.rs` (docker and podman) and `tests/bubblewrap.rs`: the
//! user, a repository they own, `sanddune` run as them, and the hostile
//! agent's attack on the git dir made as them.
//!
//! Needs root (the tests switch user with runuser) and the user that
//! `tests/images/non-root-user.sh` sets up, named in
//! SANDDUNE_TEST_NON_ROOT_USER (`.ci/run` does both). Without it each test
//! is ignored, with the reason; with `CI` set that is a failure.

use std::path::Path;
use std::process::{Command, Output};

use super::trials::skip;
use super::{TestRepo, stderr};

/// The non-root user and its runtime dir, when set up.
#[derive(Clone)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub runtime_dir: String,
}

pub fn user() -> User {
    let name = std::env::var("SANDDUNE_TEST_NON_ROOT_USER").ok();
    let uid = name.as_ref().and_then(|n| {
        let out = Command::new("id").args(["-u", n]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    });
    match (name, uid) {
        (Some(name), Some(uid)) => User {
            name,
            uid,
            runtime_dir: format!("/run/user/{uid}"),
        },
        _ => skip(
            "no non-root test user (run tests/images/non-root-user.sh as root and set SANDDUNE_TEST_NON_ROOT_USER)",
        ),
    }
}

/// A test repository the user owns.
pub fn repo_of(user: &User) -> TestRepo {
    let repo = TestRepo::new();
    for dir in [repo.path(), repo.home.path()] {
        let out = Command::new("chown")
            .args(["-R", &format!("{}:", user.name)])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    repo
}

/// `sanddune` as the user in its repository: its own runtime dir (where
/// rootless Podman's socket is) and its own component cache.
pub fn sanddune_as(user: &User, repo: &TestRepo, args: &[&str]) -> Output {
    sanddune_as_with(user, repo, args, &[])
}

/// [`sanddune_as`] with `env` set too, as the user's shell would have it.
pub fn sanddune_as_with(
    user: &User,
    repo: &TestRepo,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = repo.command(args);
    cmd.envs(env.iter().copied());
    cmd.env("XDG_RUNTIME_DIR", &user.runtime_dir)
        .env("SANDDUNE_CACHE_DIR", repo.home.path().join("cache"))
        .env_remove("CONTAINER_HOST")
        .env_remove("DOCKER_HOST");
    let line = format!(
        "cd '{}' && {}",
        repo.path().display(),
        super::shell_line(&cmd)
    );
    Command::new("runuser")
        .args(["-u", &user.name, "--", "sh", "-c", &line])
        .output()
        .unwrap()
}

/// git as root (the test) in the user's repository.
pub fn git(repo: &TestRepo, args: &[&str]) -> String {
    super::git(
        repo.path(),
        &[&["-c", "safe.directory=*"][..], args].concat(),
    )
}

/// Paths under `dir` that the user does not own.
pub fn not_owned_by(user: &User, dir: &Path) -> Vec<String> {
    let out = Command::new("find")
        .arg(dir)
        .args(["-not", "-user", &user.uid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

pub fn branch(prefix: &str) -> String {
    format!("{prefix}-{}", std::process::id())
}

/// The hostile agent's attack on the git dir (`common::hostile`), run as
/// the user by the fake claude in sandbox `provider` with `options(repo)`
/// (each a `--sandbox-opt`: the image, the mounts that give the fake its
/// HOME and itself): it changes nothing on the host and nothing it planted
/// runs, in the run's git calls or the user's next ones.
pub fn a_planted_hook_never_runs_as_the_user(
    provider: &str,
    options: &dyn Fn(&TestRepo) -> Vec<String>,
    strategy: &[&str],
) {
    use super::hostile::*;
    let user = user();
    let (repo, markers) = hostile_repo();
    for dir in [repo.path(), repo.home.path(), markers.path()] {
        let out = Command::new("chown")
            .args(["-R", &format!("{}:", user.name)])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let before = git_dir_state(&repo);
    let prompt = format!(
        "add a note\nFAKE:run:sh attack.sh {}",
        markers.path().display()
    );
    let mut args = vec![
        "run",
        "--sandbox",
        provider,
        "--agent",
        "claude-code",
        "--prompt",
        &prompt,
        "--json",
    ];
    let options = options(&repo);
    for o in &options {
        args.extend(["--sandbox-opt", o.as_str()]);
    }
    args.extend_from_slice(strategy);
    let out = sanddune_as(&user, &repo, &args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("attack done"), "the attack ran: {text}");
    assert!(
        !text.contains("SECRET-TOKEN-42"),
        "the credential leaked: {text}"
    );
    let branch = match strategy {
        ["--branch", name] => *name,
        _ => "main",
    };
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%s", branch]),
        "Add a note"
    );
    assert_eq!(git_dir_state(&repo), before, "the git dir changed");
    assert_eq!(markers_left(markers.path()), Vec::<String>::new());
    let as_user = |args: &[&str]| {
        let out = Command::new("runuser")
            .args(["-u", &user.name, "--", "git", "-C"])
            .arg(repo.path())
            .args(args)
            .env("HOME", repo.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    users_next_git_commands(&repo, &as_user);
    assert_eq!(markers_left(markers.path()), Vec::<String>::new());
}

/// As the user (in the docker group, on rootless Podman, in a jail), the
/// proxied policies hold as they do for root, in sandbox `provider` with
/// `options(repo)`: the listed loopback server is reached through the
/// proxy, another is refused and counted, and a raw TCP connect (a program
/// that ignores the proxy variables) reaches nothing; `deny-all` refuses
/// the listed one too; `none` has no proxy.
pub fn egress_policies_hold_as_the_user(
    provider: &str,
    options: &dyn Fn(&TestRepo) -> Vec<String>,
) {
    let user = user();
    let repo = repo_of(&user);
    // On every address: the proxy reaches them at the host's loopback, a
    // raw connect would have to use the host's routable address.
    let any = std::net::Ipv4Addr::UNSPECIFIED.into();
    let listed = format!("127.0.0.1:{}", super::servers::serve(any, "listed"));
    let other = format!("127.0.0.1:{}", super::servers::serve(any, "other"));
    let raw = format!(
        "{}:{}",
        super::servers::host_address(),
        listed.rsplit_once(':').unwrap().1
    );
    let (host, port) = raw.rsplit_once(':').unwrap();
    // `--noproxy ''`: the proxy variables leave 127.0.0.1 out, meaning the
    // sandbox's own loopback; these servers are on the host's.
    let prompt = format!(
        "fix the typo\nFAKE:run:curl -sS --noproxy '' --max-time 20 http://{listed}/\n\
         FAKE:run:curl -s --noproxy '' --max-time 20 -o /dev/null -w %{{http_code}} http://{other}/\n\
         FAKE:run:python3 -c 'import socket; socket.create_connection((\"{host}\", {port}), timeout=5)' 2>&1 | tail -n 1"
    );
    let options = options(&repo);
    let run = |policy: &str| {
        let branch = branch(&format!(
            "{provider}-egress-{}",
            policy.replace([':', '.'], "-")
        ));
        let mut args = vec![
            "run",
            "--sandbox",
            provider,
            "--agent",
            "claude-code",
            "--prompt",
            &prompt,
            "--branch",
            &branch,
        ];
        for o in &options {
            args.extend(["--sandbox-opt", o.as_str()]);
        }
        let egress = format!("egress={policy}");
        args.extend(["--sandbox-opt", &egress, "--json"]);
        let out = sanddune_as(&user, &repo, &args);
        assert!(out.status.success(), "egress={policy}: {}", stderr(&out));
        let result: serde_json::Value =
            serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(
            git(&repo, &["log", "-1", "--format=%s", &branch]),
            "Fix typo in README"
        );
        result
    };

    let result = run(&listed);
    let text = result["stdout"].as_str().unwrap();
    assert!(
        text.contains("listed (exit 0)"),
        "the listed server: {text}"
    );
    assert!(text.contains(" 403 (exit 0)"), "the other server: {text}");
    assert!(
        text.contains("Network is unreachable"),
        "a raw connect: {text}"
    );
    let denied = result["deniedEgress"].as_array().unwrap();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        format!(
            "{}:{}",
            denied[0]["host"].as_str().unwrap(),
            denied[0]["port"]
        ),
        other
    );

    let result = run("deny-all");
    let text = result["stdout"].as_str().unwrap();
    assert!(
        !text.contains("listed (exit 0)"),
        "deny-all reached it: {text}"
    );
    assert!(text.contains("Network is unreachable"), "{text}");
    assert_eq!(result["deniedEgress"].as_array().unwrap().len(), 2);

    let result = run("none");
    let text = result["stdout"].as_str().unwrap();
    assert!(
        !text.contains("listed (exit 0)") && !text.contains(" 403"),
        "{text}"
    );
}
