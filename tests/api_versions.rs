//! Components built against an older release of the WIT package keep
//! loading and running: the v0-1 test guests are built from the frozen
//! `wit/v0.1/` snapshot, the built-ins from the current `wit/`.

mod common;

use common::{TestRepo, plugin_file, stderr, stdout};

fn v0_1(kind: &str) -> String {
    plugin_file(&format!("sanddune-test-plugin-v0-1-{kind}"))
        .display()
        .to_string()
}

#[test]
fn plugin_inspect_names_the_contract_version_of_each_component() {
    let repo = TestRepo::new();
    for (file, version, contract) in [
        (v0_1("sandbox"), "sanddune:plugin@0.1.0", "contract 0.1"),
        (v0_1("agent"), "sanddune:plugin@0.1.0", "contract 0.1"),
        (
            plugin_file("sanddune-plugin-test-isolated")
                .display()
                .to_string(),
            "sanddune:plugin@0.3.0",
            "contract 0.3",
        ),
    ] {
        let out = repo.sanddune(&["plugin", "inspect", &file]);
        let text = stdout(&out);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        assert!(text.contains(version), "{file}: {text}");
        assert!(text.contains(contract), "{file}: {text}");
        assert!(text.contains("speaks 0.1, 0.2, 0.3"), "{file}: {text}");
    }
    // 0.1's capabilities record reads as the same request items.
    let out = repo.sanddune(&["plugin", "inspect", &v0_1("sandbox")]);
    let text = stdout(&out);
    assert!(text.contains("programs:   sh"), "{text}");
    assert!(text.contains("worktree:   read-write"), "{text}");
}

#[test]
fn a_0_1_sandbox_and_a_0_1_agent_run_end_to_end_and_commit() {
    let repo = TestRepo::new();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        &v0_1("sandbox"),
        "--agent",
        &v0_1("agent"),
        "--prompt",
        "written by a 0.1 agent",
        "--branch",
        "from-0-1",
        // Exactly what it asks for, item by item.
        "--grant",
        "program=sh",
        "--grant",
        "worktree=read-write",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        repo.git(&["show", "from-0-1:V01.md"]),
        "written by a 0.1 agent"
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>", "from-0-1"]),
        format!("{} <{}>", common::USER_NAME, common::USER_EMAIL)
    );
}

#[test]
fn a_0_1_agent_runs_in_a_0_2_sandbox_and_the_other_way_round() {
    let repo = TestRepo::new();
    for (sandbox, agent, branch) in [
        ("test-isolated".to_string(), v0_1("agent"), "mixed-a"),
        (v0_1("sandbox"), "demo".to_string(), "mixed-b"),
    ] {
        let out = repo.sanddune(&[
            "run",
            "--sandbox",
            &sandbox,
            "--agent",
            &agent,
            "--prompt",
            "mixed versions",
            "--branch",
            branch,
            "--yes",
        ]);
        assert!(
            out.status.success(),
            "{sandbox} + {agent}: {}",
            stderr(&out)
        );
        assert_eq!(
            repo.git(&["rev-list", "--count", &format!("main..{branch}")]),
            "1"
        );
    }
}
