//! The `test-isolated` sandbox provider: an isolated sandbox that is just a
//! directory under the granted scratch dir, with commands run directly on the
//! host through `sh`. For tests and demos: no isolation beyond the directory.
//!
//! Layout: `<scratch>/sbx-<16 hex>/` is the sandbox; its `repo/` is the
//! worktree the host syncs the repository into, its `home/` the HOME of every
//! command. File operations use std::fs
//! (the scratch dir is preopened at the same path); everything that touches a
//! host path outside it (commands, copies) goes through the `process`
//! capability.

mod paths;

use std::fs;
use std::io::ErrorKind;
use std::time::UNIX_EPOCH;

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../wit",
    // wasi:http, for providers that reach the network; unused here.
    generate_all,
});

use exports::sanddune::plugin::sandbox_provider::{
    Command, ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox,
    PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::process::{self, Child, SpawnOptions};
use sanddune::plugin::types::{CapabilityRequest, EnvVar};

struct Provider;

impl Guest for Provider {
    type Sandbox = IsolatedSandbox;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "test-isolated".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Runs commands directly on the host in a temp directory \
                          (for tests and demos; no isolation beyond the directory)"
                .into(),
            kind: SandboxKind::Isolated,
            config: Vec::<ConfigOption>::new(),
            capabilities: [("program", "sh"), ("scratch-dir", "")]
                .into_iter()
                .map(|(kind, value)| CapabilityRequest {
                    kind: kind.into(),
                    value: value.into(),
                })
                .collect(),
            container_engine: None,
            snapshots: false,
        }
    }

    /// Nothing to check beyond the `sh` the host finds on PATH.
    fn preflight(_options: PreflightOptions) -> Result<(), PreflightError> {
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        let scratch = scratch_dir(&options)?;
        let dir = format!("{scratch}/sbx-{}", random_hex()?);
        // create_dir, not create_dir_all: the scratch dir must already exist,
        // and an existing sandbox dir must never be reused.
        fs::create_dir(&dir).map_err(|e| format!("creating sandbox dir {dir}: {e}"))?;
        let sandbox = IsolatedSandbox::new(dir, options.env);
        // Empty: the host fills it with `git init` and a bundle.
        fs::create_dir(&sandbox.worktree)
            .map_err(|e| format!("creating {}: {e}", sandbox.worktree))?;
        fs::create_dir(sandbox.home()).map_err(|e| format!("creating {}: {e}", sandbox.home()))?;
        Ok(Sandbox::new(sandbox))
    }

    /// Empty: a sandbox is a directory in the run's scratch dir, which the
    /// host finds and removes by the run id in its name.
    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        Ok(vec![])
    }

    fn attach(state: String, options: CreateOptions) -> Result<Sandbox, String> {
        let scratch = scratch_dir(&options)?;
        let dir = paths::normalize(&state);
        let name = dir.strip_prefix(&format!("{scratch}/")).unwrap_or("");
        if !name.starts_with("sbx-") || name.contains('/') {
            return Err(format!(
                "not a test-isolated sandbox under {scratch}: {state}"
            ));
        }
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => Ok(Sandbox::new(IsolatedSandbox::new(dir, options.env))),
            _ => Err(format!("sandbox {state} does not exist")),
        }
    }
}

/// The granted scratch dir, normalised; every sandbox lives directly under it.
fn scratch_dir(options: &CreateOptions) -> Result<String, String> {
    if let Some((key, _)) = options.config.first() {
        return Err(format!("test-isolated has no option {key:?}"));
    }
    match &options.scratch_dir {
        Some(dir) => Ok(paths::normalize(dir)),
        None => Err("test-isolated needs the scratch-dir capability".into()),
    }
}

/// 16 hex digits from `wasi:random` (through getrandom, whose wasm32-wasip2
/// backend calls `wasi:random/random.get-random-u64`).
fn random_hex() -> Result<String, String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

struct IsolatedSandbox {
    /// `<scratch>/sbx-<hex>`: the confinement root.
    dir: String,
    /// `<dir>/repo`.
    worktree: String,
    /// `create-options.env`, applied to every exec.
    env: Vec<EnvVar>,
}

impl IsolatedSandbox {
    fn new(dir: String, env: Vec<EnvVar>) -> Self {
        let worktree = format!("{dir}/repo");
        IsolatedSandbox { dir, worktree, env }
    }

    /// `<dir>/home`: the sandbox user's HOME, so what an agent keeps in its
    /// home (sessions, config) stays inside the sandbox like in a container.
    fn home(&self) -> String {
        format!("{}/home", self.dir)
    }

    /// `path` (relative to the worktree) as an absolute path inside the sandbox.
    fn resolve(&self, path: &str) -> Result<String, String> {
        paths::confine(&self.dir, &self.worktree, path).ok_or_else(|| {
            format!(
                "path confinement violation: {path} is outside the sandbox {}",
                self.dir
            )
        })
    }

    /// Spawn options for `request`: `sh -c`, confined cwd, sandbox env.
    fn spawn_options(&self, request: &ExecRequest, terminal: bool) -> Result<SpawnOptions, String> {
        let cwd = match &request.cwd {
            None => self.worktree.clone(),
            Some(cwd) => paths::confine(&self.dir, &self.worktree, cwd).ok_or_else(|| {
                format!(
                    "path confinement violation: cwd {cwd} is outside the sandbox {}",
                    self.dir
                )
            })?,
        };
        let script = match &request.command {
            Command::Shell(line) => line.clone(),
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(argv) => {
                let words: Vec<String> = argv.iter().map(|a| paths::shell_quote(a)).collect();
                format!("exec {}", words.join(" "))
            }
        };
        let mut args = vec!["-c".to_string()];
        if request.sudo {
            // The script travels as $0 so it is never re-quoted.
            args.push(
                r#"if [ "$(id -u)" = 0 ]; then exec sh -c "$0"; else exec sudo -n sh -c "$0"; fi"#
                    .into(),
            );
        }
        args.push(script);
        Ok(SpawnOptions {
            program: "sh".into(),
            args,
            cwd: Some(cwd),
            env: std::iter::once(EnvVar {
                key: "HOME".into(),
                value: self.home(),
            })
            .chain(self.env.iter().cloned())
            .chain(request.env.iter().cloned())
            .collect(),
            timeout_ms: request.timeout_ms,
            terminal,
        })
    }
}

impl GuestSandbox for IsolatedSandbox {
    fn worktree_path(&self) -> String {
        self.worktree.clone()
    }

    fn state(&self) -> String {
        self.dir.clone()
    }

    fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        let child = process::spawn(&self.spawn_options(&request, false)?)?;
        if let Some(data) = request.stdin.filter(|d| !d.is_empty()) {
            // Never run the command without its stdin: an agent would get an
            // empty prompt.
            if let Err(e) = child.write_stdin(&data) {
                child.kill();
                child.wait();
                return Err(format!("writing stdin: {e}"));
            }
        }
        child.close_stdin();
        while let Some(line) = child.read_line() {
            sink.write(&line);
        }
        let status = child.wait();
        Ok(ExecResult {
            exit_code: status.code.unwrap_or(-1),
            timed_out: status.timed_out,
        })
    }

    fn interactive_exec(&self, request: ExecRequest) -> Result<i32, String> {
        if request.stdin.as_ref().is_some_and(|d| !d.is_empty()) {
            return Err(
                "interactive-exec cannot deliver stdin bytes: the terminal is stdin".into(),
            );
        }
        let child = process::spawn(&self.spawn_options(&request, true)?)?;
        Ok(child.wait().code.unwrap_or(-1))
    }

    fn copy_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        let dest = self.resolve(&sandbox_path)?;
        // A directory's contents land in `dest` itself, never in `dest/<name>`.
        run_sh(
            &format!("copying {host_path} to {dest}"),
            r#"if [ -d "$0" ]; then mkdir -p "$1" && cp -R -- "$0"/. "$1"; else mkdir -p "$(dirname "$1")" && cp -- "$0" "$1"; fi"#,
            &host_path,
            &dest,
        )
    }

    fn copy_file_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        let dest = self.resolve(&sandbox_path)?;
        run_sh(
            &format!("copying {host_path} to {dest}"),
            COPY_FILE,
            &host_path,
            &dest,
        )
    }

    fn copy_file_out(&self, sandbox_path: String, host_path: String) -> Result<(), String> {
        let src = self.resolve(&sandbox_path)?;
        run_sh(
            &format!("copying {src} to {host_path}"),
            COPY_FILE,
            &src,
            &host_path,
        )
    }

    fn read_file(&self, path: String) -> Result<Vec<u8>, String> {
        fs::read(self.resolve(&path)?).map_err(|e| format!("reading {path}: {e}"))
    }

    fn write_file(&self, path: String, data: Vec<u8>) -> Result<(), String> {
        fs::write(self.resolve(&path)?, data).map_err(|e| format!("writing {path}: {e}"))
    }

    fn stat(&self, path: String) -> Result<FileStat, String> {
        let full = self.resolve(&path)?;
        let link = fs::symlink_metadata(&full).map_err(|e| format!("stat {path}: {e}"))?;
        // Follow a symlink for the rest; a dangling one reports itself.
        let meta = fs::metadata(&full).unwrap_or_else(|_| link.clone());
        Ok(FileStat {
            is_file: meta.is_file(),
            is_directory: meta.is_dir(),
            is_symlink: Some(link.file_type().is_symlink()),
            size: Some(meta.len()),
            mtime_ms: meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64),
        })
    }

    fn read_dir(&self, path: String) -> Result<Vec<String>, String> {
        let entries =
            fs::read_dir(self.resolve(&path)?).map_err(|e| format!("reading {path}: {e}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| format!("reading {path}: {e}"))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: String) -> Result<bool, String> {
        match fs::symlink_metadata(self.resolve(&path)?) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("stat {path}: {e}")),
        }
    }

    fn mkdir(&self, path: String, recursive: bool) -> Result<(), String> {
        let full = self.resolve(&path)?;
        let made = if recursive {
            fs::create_dir_all(full)
        } else {
            fs::create_dir(full)
        };
        made.map_err(|e| format!("mkdir {path}: {e}"))
    }

    fn remove(&self, path: String, recursive: bool, force: bool) -> Result<(), String> {
        let full = self.resolve(&path)?;
        let meta = match fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if force && e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("removing {path}: {e}")),
        };
        // A symlink is removed itself, never followed.
        let removed = if !meta.is_dir() {
            fs::remove_file(&full)
        } else if recursive {
            fs::remove_dir_all(&full)
        } else {
            // Fails on a non-empty directory before removing anything.
            fs::remove_dir(&full)
        };
        removed.map_err(|e| format!("removing {path}: {e}"))
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        // One `rm -rf`: removing a big checkout file by file through WASI
        // took most of a second. Removing what is gone is no error.
        run_sh("removing the sandbox", REMOVE_DIR, &self.dir, "")
    }
}

/// Copies one file from `$0` to `$1`, creating `$1`'s parents.
const COPY_FILE: &str = r#"mkdir -p "$(dirname "$1")" && cp -- "$0" "$1""#;

/// Removes the directory `$0` and everything in it.
const REMOVE_DIR: &str = r#"rm -rf -- "$0""#;

/// Run `sh -c script a0 a1` (the paths arrive as `$0`/`$1`, never quoted into
/// the script), failing with `what` and its output when it exits non-zero.
fn run_sh(what: &str, script: &str, a0: &str, a1: &str) -> Result<(), String> {
    let child: Child = process::spawn(&SpawnOptions {
        program: "sh".into(),
        args: vec!["-c".into(), script.into(), a0.into(), a1.into()],
        cwd: None,
        env: vec![],
        timeout_ms: None,
        terminal: false,
    })?;
    child.close_stdin();
    let mut output = Vec::new();
    while let Some(line) = child.read_line() {
        output.push(line.text);
    }
    let status = child.wait();
    if status.code == Some(0) {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({:?}): {}",
            status.code,
            output.join("\n")
        ))
    }
}

// The export glue only links as a wasm component; natively the logic is
// still compiled and tested.
#[cfg(target_arch = "wasm32")]
export!(Provider);
