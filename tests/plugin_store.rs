//! Installed plugins through the real binary: `plugin add` from a file and
//! from a loopback HTTP server with a sha256 pin, approval, grants enforced
//! at run time, tampering, escalation on update, list and remove.

mod common;

use std::io::{Read, Write};

use common::trials::{self, skip, trial};
use common::{TestRepo, plugin_file, stderr, stdout};

fn component(name: &str) -> String {
    plugin_file(name).display().to_string()
}

fn sha256(path: &str) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn store_dir(repo: &TestRepo) -> std::path::PathBuf {
    repo.home.path().join(".local/share/sanddune/plugins")
}

fn installed(repo: &TestRepo) -> Vec<String> {
    std::fs::read_dir(store_dir(repo))
        .map(|d| {
            let mut names: Vec<String> = d
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        })
        .unwrap_or_default()
}

fn ok(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out)
}

fn refused(out: &std::process::Output, expected: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(
        stderr(out).contains(expected),
        "wanted `{expected}` in: {}",
        stderr(out)
    );
}

fn an_installed_sandbox_provider_runs_by_name_with_what_was_approved() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    let out = repo.sanddune(&["plugin", "add", &iso, "--name", "my-iso", "--yes"]);
    assert!(
        ok(&out).contains("use it as --sandbox my-iso"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("asks for: program=sh, scratch-dir"),
        "{}",
        stderr(&out)
    );
    let list = ok(&repo.sanddune(&["plugin", "list"]));
    assert!(
        list.contains("my-iso") && list.contains("program=sh"),
        "{list}"
    );

    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "my-iso",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--json",
    ]);
    ok(&out);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]),
        "Fix typo in README"
    );
}

fn grants_are_enforced_after_install() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    ok(&repo.sanddune(&[
        "plugin",
        "add",
        &iso,
        "--name",
        "half",
        "--grant",
        "scratch-dir",
    ]));
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "half",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("may not run `sh`: it was granted no programs"),
        "{}",
        stderr(&out)
    );
    assert!(repo.calls("claude").is_empty());
}

fn bad_installs_are_refused_and_nothing_is_half_installed() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    let text = repo.home.path().join("notes.wasm");
    std::fs::write(&text, "not wasm").unwrap();
    let core = component("sanddune-test-plugin-not-a-plugin");
    let future = component("sanddune-test-plugin-future-api");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // Non-interactive without --yes or --grant: nobody approved it.
        (vec![&iso, "--name", "x"], "pass --yes"),
        (
            vec![&iso, "--name", "x", "--sha256", "00ff"],
            "not the 00ff you pinned",
        ),
        (vec![&iso], "is a built-in plugin"),
        (
            vec![&iso, "--name", "Bad/Name", "--yes"],
            "not a usable plugin name",
        ),
        (
            vec![&iso, "--name", "x", "--grant", "containers"],
            "does not ask for containers",
        ),
        (
            vec![&iso, "--name", "x", "--grant", "root"],
            "unknown capability `root`",
        ),
        (
            vec![text.to_str().unwrap(), "--yes"],
            "not a WebAssembly component",
        ),
        (vec![&core, "--yes"], "not a sanddune plugin"),
        (vec![&future, "--yes"], "rebuild the plugin"),
        (
            vec!["https://127.0.0.1:9/x.wasm", "--yes"],
            "needs its hash",
        ),
        (
            vec!["http://example.com/x.wasm", "--sha256", "00", "--yes"],
            "only https URLs",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["plugin", "add"];
        all.extend(args);
        refused(&repo.sanddune(&all), expected);
    }
    assert!(installed(&repo).is_empty(), "{:?}", installed(&repo));
}

/// Serve `body` once per connection on loopback; returns the URL.
fn serve(body: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/plugin.wasm",
        listener.local_addr().unwrap().port()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/wasm\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    url
}

fn a_url_install_is_pinned_by_its_hash() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    let url = serve(std::fs::read(&iso).unwrap());
    refused(
        &repo.sanddune(&[
            "plugin",
            "add",
            &url,
            "--name",
            "web",
            "--yes",
            "--sha256",
            &"0".repeat(64),
        ]),
        "you pinned",
    );
    assert!(installed(&repo).is_empty());
    ok(&repo.sanddune(&[
        "plugin",
        "add",
        &url,
        "--name",
        "web",
        "--yes",
        "--sha256",
        &sha256(&iso),
    ]));
    assert_eq!(installed(&repo), ["web.toml", "web.wasm"]);
}

fn a_tampered_component_is_refused() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    ok(&repo.sanddune(&["plugin", "add", &iso, "--name", "iso2", "--yes"]));
    let stored = store_dir(&repo).join("iso2.wasm");
    std::fs::copy(component("sanddune-test-plugin-hostile"), &stored).unwrap();
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "iso2",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
    ]);
    refused(&out, "was changed on disk");
    assert!(repo.calls("claude").is_empty());
}

fn an_update_that_asks_for_more_needs_approval_again() {
    let repo = TestRepo::new();
    let hostile = component("sanddune-test-plugin-hostile");
    let iso = component("sanddune-plugin-test-isolated");
    ok(&repo.sanddune(&["plugin", "add", &hostile, "--name", "p", "--yes"]));
    let before = std::fs::read_to_string(store_dir(&repo).join("p.toml")).unwrap();
    let out = repo.sanddune(&["plugin", "update", "p", "--from", &iso]);
    refused(&out, "asks for more (scratch-dir) and was not approved");
    assert_eq!(
        std::fs::read_to_string(store_dir(&repo).join("p.toml")).unwrap(),
        before
    );
    // The same version again is nothing to do.
    assert!(ok(&repo.sanddune(&["plugin", "update", "p"])).contains("up to date"));
    ok(&repo.sanddune(&["plugin", "update", "p", "--from", &iso, "--yes"]));
    let after = std::fs::read_to_string(store_dir(&repo).join("p.toml")).unwrap();
    assert!(
        after.contains("scratch-dir = true") && after.contains(&sha256(&iso)),
        "{after}"
    );
    // An agent provider cannot replace a sandbox provider.
    refused(
        &repo.sanddune(&[
            "plugin",
            "update",
            "p",
            "--from",
            &component("sanddune-plugin-demo"),
        ]),
        "is installed as a sandbox provider",
    );
}

fn remove_uninstalls_and_the_name_stops_resolving() {
    let repo = TestRepo::new();
    let iso = component("sanddune-plugin-test-isolated");
    ok(&repo.sanddune(&["plugin", "add", &iso, "--name", "gone", "--yes"]));
    assert!(ok(&repo.sanddune(&["plugin", "remove", "gone"])).contains("removed `gone`"));
    assert!(installed(&repo).is_empty());
    refused(
        &repo.sanddune(&["plugin", "remove", "gone"]),
        "no installed plugin named `gone`",
    );
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "gone",
        "--agent",
        "claude-code",
        "--prompt",
        "x",
    ]);
    refused(&out, "no plugin named `gone`");
}

fn an_installed_plugin_can_shadow_a_built_in_when_asked() {
    let repo = TestRepo::new();
    let hostile = component("sanddune-test-plugin-hostile");
    ok(&repo.sanddune(&[
        "plugin",
        "add",
        &hostile,
        "--name",
        "test-isolated",
        "--shadow-builtin",
        "--yes",
    ]));
    // The hostile provider is bind-mount: head is its default, so the
    // commit lands on main directly, no worktree involved.
    let out = repo.sanddune(&[
        "run",
        "--sandbox",
        "test-isolated",
        "--agent",
        "claude-code",
        "--prompt",
        "fix the typo",
        "--json",
    ]);
    ok(&out);
    assert_eq!(
        repo.calls("claude")[0]["cwd"],
        repo.path().canonicalize().unwrap().to_str().unwrap(),
        "the installed bind-mount provider ran, not the built-in"
    );
}

fn plugin_new_scaffolds_projects_that_build_into_working_components() {
    let repo = TestRepo::new();
    let dir = repo.home.path().join("projects");
    std::fs::create_dir(&dir).unwrap();
    // One target dir for every run of this test: the dependencies build once.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
    for (name, kind, world) in [
        ("acme-box", "sandbox", "sandbox provider"),
        ("acme-agent", "agent", "agent provider"),
    ] {
        let out = repo.sanddune(&[
            "plugin",
            "new",
            name,
            "--kind",
            kind,
            "--dir",
            dir.to_str().unwrap(),
        ]);
        assert!(ok(&out).contains("cargo build --release --target wasm32-wasip2"));
        let project = dir.join(name);
        assert!(project.join("wit/worlds.wit").is_file() && project.join("README.md").is_file());
        let build = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&build.stderr)
        );
        let wasm = target.join(format!(
            "wasm32-wasip2/release/{}.wasm",
            name.replace('-', "_")
        ));
        let text = ok(&repo.sanddune(&["plugin", "inspect", wasm.to_str().unwrap()]));
        // Built against the current contract (a sandbox provider of 0.3
        // exports `find`).
        let current = format!("contract {}", sanddune::plugin::ApiVersion::CURRENT);
        for expected in [format!("{world} `{name}`"), current] {
            assert!(text.contains(&expected), "{text}");
        }
    }
    // An existing directory is never overwritten.
    let out = repo.sanddune(&[
        "plugin",
        "new",
        "acme-box",
        "--kind",
        "agent",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    refused(&out, "exists already");
}

/// Skip the test unless `program` is on PATH.
fn require_tool(program: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    if !found {
        skip(format!("{program} is not on PATH (.ci/run installs it)"));
    }
}

fn plugin_new_in_python_and_javascript_builds_components() {
    let repo = TestRepo::new();
    let dir = repo.home.path().join("projects");
    std::fs::create_dir(&dir).unwrap();
    let languages = [
        ("py-box", "sandbox", "python", "componentize-py"),
        ("js-bot", "agent", "js", "componentize-js"),
    ];
    for (_, _, _, program) in languages {
        require_tool(program);
    }
    for (name, kind, lang, _) in languages {
        let d = dir.to_str().unwrap();
        ok(&repo.sanddune(&[
            "plugin", "new", name, "--kind", kind, "--lang", lang, "--dir", d,
        ]));
        let build = std::process::Command::new("sh")
            .arg(dir.join(name).join("build.sh"))
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&build.stderr)
        );
        let wasm = std::fs::read(dir.join(name).join(format!("{name}.wasm"))).unwrap();
        assert!(wasm.starts_with(b"\0asm"), "{name}: a wasm file");
    }
    let out = repo.sanddune(&["plugin", "new", "x", "--kind", "agent", "--lang", "python"]);
    refused(&out, "the Python template is a sandbox provider");
}

fn main() -> std::process::ExitCode {
    trials::run(vec![
        trial!(an_installed_sandbox_provider_runs_by_name_with_what_was_approved),
        trial!(grants_are_enforced_after_install),
        trial!(bad_installs_are_refused_and_nothing_is_half_installed),
        trial!(a_url_install_is_pinned_by_its_hash),
        trial!(a_tampered_component_is_refused),
        trial!(an_update_that_asks_for_more_needs_approval_again),
        trial!(remove_uninstalls_and_the_name_stops_resolving),
        trial!(an_installed_plugin_can_shadow_a_built_in_when_asked),
        trial!(plugin_new_scaffolds_projects_that_build_into_working_components),
        trial!(plugin_new_in_python_and_javascript_builds_components),
    ])
}
