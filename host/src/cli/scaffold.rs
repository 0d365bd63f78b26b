//! `sanddune plugin new`: a buildable provider project to start from. The
//! templates are sources the tests run: for Rust the built-in `test-isolated`
//! (sandbox) and `demo` (agent), for Python and JavaScript the examples in
//! `examples/`, each with the WIT package beside it.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use crate::error::{Error, Result};
use crate::plugin::store::check_name;

/// The WIT package, as the project gets it.
const WIT: &[(&str, &str)] = &[
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("process.wit", include_str!("../../../wit/process.wit")),
    (
        "containers.wit",
        include_str!("../../../wit/containers.wit"),
    ),
    ("pods.wit", include_str!("../../../wit/pods.wit")),
    ("jail.wit", include_str!("../../../wit/jail.wit")),
    ("sandbox.wit", include_str!("../../../wit/sandbox.wit")),
    ("agent.wit", include_str!("../../../wit/agent.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
    // The WASI packages the worlds import (wasi:http and what it uses).
    ("deps/cli.wit", include_str!("../../../wit/deps/cli.wit")),
    (
        "deps/clocks.wit",
        include_str!("../../../wit/deps/clocks.wit"),
    ),
    (
        "deps/filesystem.wit",
        include_str!("../../../wit/deps/filesystem.wit"),
    ),
    ("deps/http.wit", include_str!("../../../wit/deps/http.wit")),
    ("deps/io.wit", include_str!("../../../wit/deps/io.wit")),
    (
        "deps/random.wit",
        include_str!("../../../wit/deps/random.wit"),
    ),
    (
        "deps/sockets.wit",
        include_str!("../../../wit/deps/sockets.wit"),
    ),
];

/// An example's files: (file name in the project, content).
type Template = &'static [(&'static str, &'static str)];

const PYTHON_SANDBOX: Template = &[
    (
        "app.py",
        include_str!("../../../examples/python-sandbox/app.py"),
    ),
    (
        "sandbox_provider.py",
        include_str!("../../../examples/python-sandbox/sandbox_provider.py"),
    ),
    (
        "paths.py",
        include_str!("../../../examples/python-sandbox/paths.py"),
    ),
    (
        "build.sh",
        include_str!("../../../examples/python-sandbox/build.sh"),
    ),
];

const JS_AGENT: Template = &[
    (
        "agent.js",
        include_str!("../../../examples/js-agent/agent.js"),
    ),
    (
        "build.sh",
        include_str!("../../../examples/js-agent/build.sh"),
    ),
];

const SANDBOX_LIB: &str = include_str!("../../../plugins/test-isolated/src/lib.rs");
const SANDBOX_PATHS: &str = include_str!("../../../plugins/test-isolated/src/paths.rs");
const AGENT_LIB: &str = include_str!("../../../plugins/demo/src/lib.rs");

#[derive(Clone, Copy, ValueEnum)]
pub enum Kind {
    Sandbox,
    Agent,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    Rust,
    /// componentize-py; sandbox providers (from examples/python-sandbox).
    Python,
    /// componentize-js; agent providers (from examples/js-agent).
    Js,
}

#[derive(Args)]
pub struct NewArgs {
    /// The provider's name (lowercase letters, digits, `-`, `_`); also the
    /// project directory. Rust: either kind; Python: a sandbox provider;
    /// JavaScript: an agent provider.
    name: String,
    #[arg(long, value_enum)]
    kind: Kind,
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Where to create the project directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
}

/// `wit/` of a new project.
fn wit_files() -> Vec<(String, String)> {
    WIT.iter()
        .map(|(file, text)| (format!("wit/{file}"), text.to_string()))
        .collect()
}

/// A project from one of the examples: renamed, its build script pointed
/// at the project's own WIT and writing `<name>.wasm` beside it.
fn example_files(name: &str, template: Template, example: &str) -> Vec<(String, String)> {
    let mut files = wit_files();
    for (file, text) in template {
        let text = text
            .replace(&format!("\"{example}\""), &format!("\"{name}\""))
            .replace("$here/../../wit", "$here/wit")
            .replace(
                &format!("$here/../../target/examples/{example}.wasm"),
                &format!("$here/{name}.wasm"),
            );
        files.push((file.to_string(), text));
    }
    files.push((
        "README.md".into(),
        format!(
            "# {name}\n\nA sanddune provider that starts as a copy of `examples/{example}` in the\n\
             sanddune repository, with the WIT package in `wit/`. Build it with\n\
             `./build.sh` (the example's README names the tool to install); the component\n\
             is `{name}.wasm`. Check it with `sanddune plugin test ./{name}.wasm`, then\n\
             `sanddune plugin add ./{name}.wasm`.\n"
        ),
    ));
    files
}

/// The project's files: (relative path, content).
fn files(name: &str, kind: Kind) -> Vec<(String, String)> {
    let crate_name = name.replace('-', "_");
    let mut files = wit_files();
    let (lib, extra_deps, world, from) = match kind {
        Kind::Sandbox => (
            SANDBOX_LIB.replace("\"test-isolated\"", &format!("\"{name}\"")),
            "# Sandbox names come from wasi:random.\ngetrandom = \"0.4\"\n",
            "sandbox-plugin",
            "test-isolated",
        ),
        Kind::Agent => (
            AGENT_LIB.replace("\"demo\"", &format!("\"{name}\"")),
            "serde_json = \"1\"\n",
            "agent-plugin",
            "demo",
        ),
    };
    files.push((
        "src/lib.rs".into(),
        lib.replace("path: \"../../wit\"", "path: \"wit\""),
    ));
    if let Kind::Sandbox = kind {
        files.push(("src/paths.rs".into(), SANDBOX_PATHS.into()));
    }
    files.push((
        "Cargo.toml".into(),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
             [lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n\
             [dependencies]\nwit-bindgen = \"0.63\"\n{extra_deps}\n\
             [profile.release]\nopt-level = \"s\"\nlto = true\n\n\
             # A project of its own, even inside another workspace.\n[workspace]\n"
        ),
    ));
    files.push(("README.md".into(), readme(name, &crate_name, world, from)));
    files.push((".gitignore".into(), "/target\n".into()));
    files
}

/// `sanddune:plugin@X.Y.Z`: the package line of the WIT the project gets.
fn package() -> &'static str {
    WIT.iter()
        .flat_map(|(_, text)| text.lines())
        .find_map(|l| {
            l.strip_prefix("package ")
                .filter(|p| p.starts_with("sanddune:"))
        })
        .map(|p| p.trim_end_matches(';'))
        .expect("the WIT names its package")
}

fn readme(name: &str, crate_name: &str, world: &str, from: &str) -> String {
    format!(
        "# {name}\n\n\
         A sanddune provider in the `{world}` world of `wit/` (the WIT package\n\
         `{package}`). It starts as a copy of the built-in `{from}`:\n\
         change `src/lib.rs` to make it yours. `describe` declares what it needs;\n\
         the host grants no more.\n\n\
         ## Build\n\n\
         \x20   rustup target add wasm32-wasip2\n\
         \x20   cargo build --release --target wasm32-wasip2\n\n\
         The component is `target/wasm32-wasip2/release/{crate_name}.wasm`.\n\n\
         ## Use\n\n\
         \x20   sanddune plugin inspect target/wasm32-wasip2/release/{crate_name}.wasm\n\
         \x20   sanddune plugin add target/wasm32-wasip2/release/{crate_name}.wasm\n\
         \x20   sanddune run --{kind} {name} ...\n",
        package = package(),
        kind = if world == "sandbox-plugin" {
            "sandbox"
        } else {
            "agent"
        },
    )
}

pub fn new(args: NewArgs) -> Result<()> {
    check_name(&args.name)?;
    let files = match (args.lang, args.kind) {
        (Lang::Rust, kind) => files(&args.name, kind),
        (Lang::Python, Kind::Sandbox) => {
            example_files(&args.name, PYTHON_SANDBOX, "python-sandbox")
        }
        (Lang::Js, Kind::Agent) => example_files(&args.name, JS_AGENT, "js-agent"),
        (Lang::Python, Kind::Agent) | (Lang::Js, Kind::Sandbox) => {
            return Err(Error::input(
                "the Python template is a sandbox provider and the JavaScript one an agent provider (from examples/); for the other kind start from --lang rust, or from the WIT in any component-model language",
            ));
        }
    };
    let root = args.dir.join(&args.name);
    if root.exists() {
        return Err(Error::input(format!(
            "{} exists already: pick another name or --dir; nothing was written",
            root.display()
        )));
    }
    write_all(&root, &files)?;
    println!("created {}", root.display());
    match args.lang {
        Lang::Rust => println!(
            "  cd {} && rustup target add wasm32-wasip2 && cargo build --release --target wasm32-wasip2",
            root.display()
        ),
        Lang::Python | Lang::Js => println!("  cd {} && ./build.sh", root.display()),
    }
    Ok(())
}

/// Write every file, or nothing: a failure removes the half-made project.
fn write_all(root: &Path, files: &[(String, String)]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let written = files.iter().try_for_each(|(path, text)| {
        let full = root.join(path);
        // Build scripts stay runnable.
        let mode = if path.ends_with(".sh") { 0o755 } else { 0o644 };
        std::fs::create_dir_all(full.parent().unwrap_or(root))
            .and_then(|_| std::fs::write(&full, text))
            .and_then(|_| std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)))
            .map_err(|e| Error::Other(anyhow::anyhow!("write {}: {e}", full.display())))
    });
    if written.is_err() {
        let _ = std::fs::remove_dir_all(root);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_carries_every_wit_file() {
        // The current package and its deps; the frozen `vX.Y/` snapshots
        // are the host's business.
        let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut on_disk: Vec<String> = ["", "deps/"]
            .into_iter()
            .flat_map(|sub| {
                std::fs::read_dir(wit.join(sub))
                    .unwrap()
                    .map(|e| e.unwrap())
                    .filter(|e| e.file_type().unwrap().is_file())
                    .map(move |e| format!("{sub}{}", e.file_name().to_string_lossy()))
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = WIT.iter().map(|(f, _)| f.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk, "add the new WIT file to scaffold::WIT");
    }

    #[test]
    fn the_example_templates_build_from_their_own_wit() {
        for (template, example, source) in [
            (PYTHON_SANDBOX, "python-sandbox", "app.py"),
            (JS_AGENT, "js-agent", "agent.js"),
        ] {
            let files = example_files("acme", template, example);
            let text = |f: &str| &files.iter().find(|(p, _)| p == f).unwrap().1;
            assert!(text(source).contains("\"acme\""), "{example}: renamed");
            assert!(
                !text(source).contains(&format!("\"{example}\"")),
                "{example}"
            );
            let build = text("build.sh");
            assert!(
                build.contains("$here/wit") && !build.contains("../../"),
                "{build}"
            );
            assert!(build.contains("$here/acme.wasm"), "{build}");
            assert!(files.iter().any(|(p, _)| p == "wit/worlds.wit"));
        }
    }

    #[test]
    fn the_templates_are_renamed_and_point_at_their_own_wit() {
        for kind in [Kind::Sandbox, Kind::Agent] {
            let files = files("acme-box", kind);
            let lib = &files.iter().find(|(p, _)| p == "src/lib.rs").unwrap().1;
            assert!(lib.contains("name: \"acme-box\".into()"), "{lib}");
            assert!(lib.contains("path: \"wit\""));
            assert!(!lib.contains("../../wit"));
            // The README names the package the project builds against.
            let readme = &files.iter().find(|(p, _)| p == "README.md").unwrap().1;
            let current = format!("`sanddune:plugin@{}.", crate::plugin::ApiVersion::CURRENT);
            assert!(readme.contains(&current), "{readme}");
        }
    }
}
