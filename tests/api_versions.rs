//! Components built against an older release of the WIT package keep
//! loading and running: the test guests are built from the frozen
//! `wit/v0.1/` to `wit/v0.7/` snapshots, the built-ins from the current
//! `wit/`. The WASI packages the frozen releases import stay the ones
//! they were released with.

mod common;

use common::{TestRepo, plugin_file, stderr, stdout};

/// The frozen releases, each with a sandbox and an agent test guest.
const FROZEN: [&str; 7] = ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"];
/// The current release, which the built-ins speak.
const CURRENT: &str = "0.8";
const ALL: [&str; 8] = [
    FROZEN[0], FROZEN[1], FROZEN[2], FROZEN[3], FROZEN[4], FROZEN[5], FROZEN[6], CURRENT,
];

/// The `kind` ("sandbox" or "agent") provider of contract `version`: a test
/// guest of a frozen release, a built-in of the current one.
fn provider(version: &str, kind: &str) -> String {
    match (version, kind) {
        (CURRENT, "sandbox") => "test-isolated".into(),
        (CURRENT, _) => "demo".into(),
        _ => guest(version, kind),
    }
}

fn guest(version: &str, kind: &str) -> String {
    let dashed = version.replace('.', "-");
    plugin_file(&format!("sanddune-test-plugin-v{dashed}-{kind}"))
        .display()
        .to_string()
}

/// The file the agent of `version` commits for a one-line `prompt`, and
/// what it holds.
fn committed(version: &str, prompt: &str) -> (String, String) {
    if version == CURRENT {
        ("DEMO.md".into(), format!("- {prompt}"))
    } else {
        (format!("V{}.md", version.replace('.', "")), prompt.into())
    }
}

/// A run with the sandbox and the agent of those versions, on a branch of
/// its own: the agent's commit lands there, as the user.
fn runs_and_commits(repo: &TestRepo, sandbox: &str, agent: &str) {
    let branch = format!("sandbox-{sandbox}-agent-{agent}").replace('.', "-");
    let prompt = format!("written by a {agent} agent in a {sandbox} sandbox");
    let mut args = vec![
        "run".to_string(),
        "--sandbox".into(),
        provider(sandbox, "sandbox"),
        "--agent".into(),
        provider(agent, "agent"),
        "--prompt".into(),
        prompt.clone(),
        "--branch".into(),
        branch.clone(),
    ];
    if sandbox != CURRENT {
        // A guest file gets exactly what it asks for, item by item.
        for item in ["program=sh", "worktree=read-write"] {
            args.extend(["--grant".into(), item.into()]);
        }
    }
    let out = repo.sanddune(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let what = format!("{sandbox} sandbox + {agent} agent");
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("main..{branch}")]),
        "1",
        "{what}"
    );
    let (file, text) = committed(agent, &prompt);
    assert_eq!(
        repo.git(&["show", &format!("{branch}:{file}")]),
        text,
        "{what}"
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>", &branch]),
        format!("{} <{}>", common::USER_NAME, common::USER_EMAIL),
        "{what}"
    );
}

#[test]
fn plugin_inspect_names_the_contract_version_of_each_component() {
    let repo = TestRepo::new();
    for version in ALL {
        for kind in ["sandbox", "agent"] {
            let plugin = provider(version, kind);
            let out = repo.sanddune(&["plugin", "inspect", &plugin]);
            let text = stdout(&out);
            assert!(out.status.success(), "{plugin}: {}", stderr(&out));
            for expected in [
                format!("sanddune:plugin@{version}.0"),
                format!("contract {version}"),
                "speaks 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8".into(),
            ] {
                assert!(text.contains(&expected), "{plugin}: {text}");
            }
        }
    }
    // 0.1's capabilities record and 0.2's request list read as the same
    // items.
    for version in FROZEN {
        let out = repo.sanddune(&["plugin", "inspect", &guest(version, "sandbox")]);
        let text = stdout(&out);
        assert!(text.contains("programs:   sh"), "{version}: {text}");
        assert!(text.contains("worktree:   read-write"), "{version}: {text}");
    }
}

#[test]
fn a_sandbox_and_an_agent_of_each_frozen_release_run_end_to_end_and_commit() {
    let repo = TestRepo::new();
    for version in FROZEN {
        runs_and_commits(&repo, version, version);
    }
}

#[test]
fn a_sandbox_and_an_agent_of_different_releases_run_together() {
    let repo = TestRepo::new();
    for sandbox in ALL {
        for agent in ALL.into_iter().filter(|a| *a != sandbox) {
            runs_and_commits(&repo, sandbox, agent);
        }
    }
}

/// Keeping snapshots came with 0.8: a provider of 0.7 keeps none, so a
/// run that asks it for one is refused before anything is created, and the
/// provider never sees the option.
#[test]
fn a_0_7_provider_keeps_no_snapshot_and_the_run_is_refused_up_front() {
    let repo = TestRepo::new();
    let sandbox = guest("0.7", "sandbox");
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        &sandbox,
        "--agent",
        "demo",
        "--prompt",
        "x",
        "--sandbox-opt",
        "snapshot=auto",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "sandbox provider `v0-7-sandbox` cannot keep a snapshot (snapshot=auto): it keeps none itself (its contract is older than 0.8, or it says so)"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        repo.git(&["branch", "--list"]).lines().count(),
        1,
        "no branch was made"
    );
}

/// A run killed inside `create` leaves a record with no state; `find`
/// (since 0.3) is gc's way to its sandbox. A 0.2 provider has no `find`,
/// and gc clears its record all the same.
#[test]
fn gc_clears_the_record_of_a_0_2_provider_that_has_no_find() {
    let repo = TestRepo::new();
    let records = repo.path().join(".git/sanddune-sandboxes");
    std::fs::create_dir(&records).unwrap();
    // Where the run made scratch dirs: gc removes the run's.
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp
        .path()
        .join("sanddune-v0-2-sandbox-killed-in-create-0123");
    std::fs::create_dir(&scratch).unwrap();
    // As `run::sandbox_record` writes it before `create`, of a process that is
    // gone (there is no pid 0 in /proc).
    let record = serde_json::json!({
        "owner": "0:0",
        "provider": guest("0.2", "sandbox"),
        "providerName": "v0-2-sandbox",
        "runId": "killed-in-create",
        "name": "run",
        "worktree": repo.path(),
        "branch": "main",
        "config": [],
        "tmpDir": tmp.path(),
        "state": null,
        "scratch": null,
        "base": null,
    });
    let file = records.join("killed-in-create.json");
    std::fs::write(&file, record.to_string()).unwrap();
    // --yes: the provider is a component file, should gc load it.
    let out = repo.sanddune(&["gc", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("cleared run killed-in-create's"),
        "{}",
        stdout(&out)
    );
    assert!(!file.exists() && !scratch.exists(), "{}", stdout(&out));
}

/// The WASI packages (`wasi:*@0.2.12`) every frozen release from 0.2 on
/// imports, as released: what `cd wit/v0.5/deps && sha256sum *.wit` printed.
const WASI_0_2_12: &str = "\
fb6ac5d23fcaf3d231142a3c2f9bb1e9bc1fe5af6f1f329f6b1a5555ce0d3873  cli.wit
6ed8aa65bb8cbe224a0b2cbac9fc1b3bd25bdb17eda5ae0d23c983ed31c447cc  clocks.wit
e675f261017bf9b4fa7df5b9701023fe0249ede71021ac1bf978748e62edcda8  filesystem.wit
4bbd58f509700a6637385611f183c5bd5984d81feef85e29dfdc05ebd283045a  http.wit
96e206d00076fa0480df32c5bcf255a3fa4862805ac2f6b8537a781cce54f433  io.wit
48578c40213d5cab6650980905fa146a0be8c39c4433ee5e7e00637b87dbe08f  random.wit
ad38dbf3b0bbdf34c0f2b608edcbfee04d71b443a63faff1f5e0053c3f84b377  sockets.wit
";

/// A frozen release reads its WASI packages through `wit/vX.Y/deps`, a link
/// to the one shared copy (ADR 0028). That copy must not change under it.
#[test]
fn each_frozen_release_links_to_the_wasi_packages_it_was_released_with() {
    use sha2::{Digest, Sha256};
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let released: Vec<(&str, &str)> = WASI_0_2_12
        .lines()
        .map(|line| line.split_once("  ").unwrap())
        .collect();
    for version in FROZEN {
        let deps = wit.join(format!("v{version}/deps"));
        if version == "0.1" {
            assert!(!deps.exists(), "0.1 imports no WASI package");
            continue;
        }
        assert!(
            deps.symlink_metadata().is_ok_and(|m| m.is_symlink()),
            "{}: a frozen release links its deps (`ln -s ../deps`), it does not copy them",
            deps.display()
        );
        let mut files: Vec<String> = std::fs::read_dir(&deps)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let expected: Vec<&str> = released.iter().map(|(_, file)| *file).collect();
        assert_eq!(files, expected, "{version}: the files in deps/");
        for (sha256, file) in &released {
            let bytes = std::fs::read(deps.join(file)).unwrap();
            let got: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                got, *sha256,
                "{version}: deps/{file} is not the one {version} was released with. \
                 A change to the WASI packages is a new contract version, and the \
                 frozen releases keep theirs (docs/plugins/contract-versions.md)"
            );
        }
    }
}
