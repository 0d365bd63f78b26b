//! The `bubblewrap` sandbox provider (bind-mount): every command runs on the
//! host's own programs in a bubblewrap jail that the host builds through the
//! `jail` capability (contract 0.7, ADR 0036). No container engine, no
//! image: the worktree is bound read-write at its host path, the jail's
//! HOME and `/tmp` are directories in the scratch dir, and the rest of the
//! machine is the system directories, read-only. What the jail holds
//! besides the binds asked for here (namespaces, the network, the agent's
//! own git dir over the repository's) is the host's to decide.
//!
//! Layout: `<scratch>/home` is HOME (at the same path in the jail),
//! `<scratch>/tmp` is `/tmp`. File operations use std::fs on the scratch
//! dir and the worktree, both preopened at their host paths.

mod paths;

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
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
use sanddune::plugin::jail::{self, Bind, JailOptions};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::types::{CapabilityRequest, EnvVar};

struct Provider;

impl Guest for Provider {
    type Sandbox = JailSandbox;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "bubblewrap".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "Runs the agent on this machine's own programs in a bubblewrap jail: \
                          the worktree read-write, the system read-only, a private HOME and \
                          /tmp, no view of your home; no container engine needed"
                .into(),
            kind: SandboxKind::BindMount,
            config: vec![ConfigOption {
                name: "mount".into(),
                description: "extra bind SOURCE:TARGET or SOURCE:TARGET:ro (repeatable), \
                              e.g. an agent CLI installed under your home, at the same path"
                    .into(),
                default_value: None,
            }],
            capabilities: [
                ("jail", ""),
                ("scratch-dir", ""),
                ("worktree", "read-write"),
            ]
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

    /// The options parse, and bubblewrap builds a jail here.
    fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
        mounts(&options.config).map_err(PreflightError::Options)?;
        jail::probe().map_err(PreflightError::Host)?;
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        let sandbox = JailSandbox::new(&options)?;
        for dir in [&sandbox.home, &sandbox.tmp] {
            fs::create_dir(dir).map_err(|e| format!("creating {dir}: {e}"))?;
        }
        Ok(Sandbox::new(sandbox))
    }

    /// Empty: a jail dies with the host's process, and the scratch dir that
    /// holds its HOME is found and removed by the run id in its name.
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
        let sandbox = JailSandbox::new(&options)?;
        if paths::normalize(&state) != sandbox.scratch {
            return Err(format!(
                "not this run's bubblewrap sandbox: {state} (its scratch dir is {})",
                sandbox.scratch
            ));
        }
        if !Path::new(&sandbox.home).is_dir() {
            return Err(format!("sandbox {state} does not exist"));
        }
        Ok(Sandbox::new(sandbox))
    }
}

/// The user's `mount` options (the host has made each SOURCE absolute) as
/// binds; any other option is refused.
fn mounts(config: &[(String, String)]) -> Result<Vec<Bind>, String> {
    let mut binds = Vec::new();
    for (key, value) in config {
        if key != "mount" {
            return Err(format!(
                "bubblewrap has no option `{key}` (it takes `mount`; `egress` is the host's)"
            ));
        }
        let mut parts = value.splitn(3, ':');
        let (source, target, mode) = (parts.next(), parts.next(), parts.next());
        let (Some(source), Some(target)) = (source, target) else {
            return Err(format!(
                "mount `{value}`: expected SOURCE:TARGET or SOURCE:TARGET:ro"
            ));
        };
        let read_only = match mode {
            None | Some("rw") => false,
            Some("ro") => true,
            Some(other) => {
                return Err(format!("mount `{value}`: `{other}` is not `ro` or `rw`"));
            }
        };
        if !target.starts_with('/') {
            return Err(format!(
                "mount `{value}`: the target `{target}` is not an absolute path"
            ));
        }
        binds.push(Bind {
            source: source.into(),
            target: paths::normalize(target),
            read_only,
        });
    }
    Ok(binds)
}

struct JailSandbox {
    /// The granted scratch dir: the sandbox's state.
    scratch: String,
    /// `<scratch>/home`, HOME in the jail, at the same path.
    home: String,
    /// `<scratch>/tmp`, `/tmp` in the jail.
    tmp: String,
    /// The worktree, bound read-write at its host path.
    worktree: String,
    /// Every jail's binds: the worktree, then the user's mounts.
    binds: Vec<Bind>,
    /// `create-options.env`, applied to every exec.
    env: Vec<EnvVar>,
}

impl JailSandbox {
    fn new(options: &CreateOptions) -> Result<Self, String> {
        let scratch = options
            .scratch_dir
            .as_deref()
            .map(paths::normalize)
            .ok_or("bubblewrap needs the scratch-dir capability")?;
        let worktree = paths::normalize(&options.host_worktree_path);
        let mut binds = vec![Bind {
            source: worktree.clone(),
            target: worktree.clone(),
            read_only: false,
        }];
        binds.extend(mounts(&options.config)?);
        Ok(JailSandbox {
            home: format!("{scratch}/home"),
            tmp: format!("{scratch}/tmp"),
            scratch,
            worktree,
            binds,
            env: options.env.clone(),
        })
    }

    /// A path as the jail sees it (absolute, or relative to the worktree),
    /// as the host path the provider opens: in HOME, the worktree, or
    /// `/tmp`, checked in the order the jail's binds cover each other.
    fn resolve(&self, path: &str) -> Result<String, String> {
        let full = if path.starts_with('/') {
            paths::normalize(path)
        } else {
            // Relative to the worktree, and inside it: a `../` that climbs
            // out is an attempt, not a way to name HOME or /tmp.
            let full = paths::normalize(&format!("{}/{path}", self.worktree));
            if paths::below(&self.worktree, &full).is_none() {
                return Err(format!(
                    "path confinement violation: {path} climbs out of the worktree {}",
                    self.worktree
                ));
            }
            full
        };
        if paths::below(&self.home, &full).is_some()
            || paths::below(&self.worktree, &full).is_some()
        {
            return Ok(full);
        }
        if let Some(rest) = paths::below("/tmp", &full) {
            return Ok(if rest.is_empty() {
                self.tmp.clone()
            } else {
                format!("{}/{rest}", self.tmp)
            });
        }
        Err(format!(
            "path confinement violation: {path} is outside the sandbox (its worktree {}, HOME and /tmp)",
            self.worktree
        ))
    }

    /// The jail that runs `request`.
    fn jail_options(&self, request: &ExecRequest, terminal: bool) -> Result<JailOptions, String> {
        if request.sudo {
            return Err(
                "bubblewrap runs every command as you: a jail has no root, so a `sudo` command (a hook with sudo = true) needs docker or podman"
                    .into(),
            );
        }
        let cwd = match &request.cwd {
            None => self.worktree.clone(),
            Some(cwd) if cwd.starts_with('/') => paths::normalize(cwd),
            Some(cwd) => paths::normalize(&format!("{}/{cwd}", self.worktree)),
        };
        let argv = match &request.command {
            Command::Shell(line) => vec!["sh".into(), "-c".into(), line.clone()],
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(argv) => argv.clone(),
        };
        Ok(JailOptions {
            argv,
            cwd,
            env: self.env.iter().chain(&request.env).cloned().collect(),
            binds: self.binds.clone(),
            timeout_ms: request.timeout_ms,
            terminal,
        })
    }
}

impl GuestSandbox for JailSandbox {
    fn worktree_path(&self) -> String {
        self.worktree.clone()
    }

    fn state(&self) -> String {
        self.scratch.clone()
    }

    fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        let child = jail::spawn(&self.jail_options(&request, false)?)?;
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
        let child = jail::spawn(&self.jail_options(&request, true)?)?;
        Ok(child.wait().code.unwrap_or(-1))
    }

    /// `host_path` is in the scratch dir (the host stages what the provider
    /// cannot open); a directory's contents land in `dest` itself.
    fn copy_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        let dest = self.resolve(&sandbox_path)?;
        copy_tree(Path::new(&host_path), Path::new(&dest))
            .map_err(|e| format!("copying {host_path} to {dest}: {e}"))
    }

    fn copy_file_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        let dest = self.resolve(&sandbox_path)?;
        copy_file(Path::new(&host_path), Path::new(&dest))
            .map_err(|e| format!("copying {host_path} to {dest}: {e}"))
    }

    fn copy_file_out(&self, sandbox_path: String, host_path: String) -> Result<(), String> {
        let src = self.resolve(&sandbox_path)?;
        copy_file(Path::new(&src), Path::new(&host_path))
            .map_err(|e| format!("copying {src} to {host_path}: {e}"))
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

    /// Nothing to stop: every command's jail ended with it (a program an
    /// agent left running ended with the jail's PID namespace). The host
    /// removes the scratch dir, HOME and `/tmp` with it.
    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Copy one file, creating `to`'s parents.
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::copy(from, to).map(drop)
}

/// Copy a file, or a directory's contents into `to`; a link is copied as
/// the file it names (the staged tree the host hands over has none).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    if !fs::metadata(from)?.is_dir() {
        return copy_file(from, to);
    }
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

// The export glue only links as a wasm component; natively the logic is
// still compiled and tested.
#[cfg(target_arch = "wasm32")]
export!(Provider);

#[cfg(test)]
mod tests {
    use super::*;

    fn options(config: &[(&str, &str)]) -> CreateOptions {
        CreateOptions {
            run_id: "r".into(),
            name: "n".into(),
            host_worktree_path: "/tmp/w/repo".into(),
            host_git_dir: "/tmp/w/repo/.git".into(),
            branch: "b".into(),
            env: vec![],
            config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            scratch_dir: Some("/tmp/sanddune-bubblewrap-r-x".into()),
            snapshot: None,
        }
    }

    #[test]
    fn paths_resolve_to_home_the_worktree_or_the_jails_tmp() {
        let s = JailSandbox::new(&options(&[])).unwrap();
        assert_eq!(s.resolve("a/b").unwrap(), "/tmp/w/repo/a/b");
        assert_eq!(
            s.resolve("/tmp/sanddune-bubblewrap-r-x/home/.claude/x")
                .unwrap(),
            "/tmp/sanddune-bubblewrap-r-x/home/.claude/x"
        );
        // The worktree lies under /tmp here; it is its own bind.
        assert_eq!(s.resolve("/tmp/w/repo/f").unwrap(), "/tmp/w/repo/f");
        assert_eq!(
            s.resolve("/tmp/prompt.txt").unwrap(),
            "/tmp/sanddune-bubblewrap-r-x/tmp/prompt.txt"
        );
        assert!(s.resolve("/etc/passwd").unwrap_err().contains("outside"));
        assert!(
            s.resolve("../../../etc")
                .unwrap_err()
                .contains("climbs out")
        );
        assert!(
            s.resolve("../../../tmp/x")
                .unwrap_err()
                .contains("climbs out")
        );
    }

    #[test]
    fn mounts_parse_and_other_options_are_refused() {
        let binds = mounts(&[("mount".into(), "/opt/tools:/tools:ro".into())]).unwrap();
        assert_eq!(binds[0].source, "/opt/tools");
        assert_eq!(binds[0].target, "/tools");
        assert!(binds[0].read_only);
        assert!(
            mounts(&[("mount".into(), "/a:rel".into())])
                .unwrap_err()
                .contains("absolute")
        );
        assert!(mounts(&[("mount".into(), "/a:/b:xx".into())]).is_err());
        assert!(
            mounts(&[("image".into(), "x".into())])
                .unwrap_err()
                .contains("no option `image`")
        );
    }

    #[test]
    fn sudo_is_refused_and_a_shell_line_runs_in_sh() {
        let s = JailSandbox::new(&options(&[])).unwrap();
        let mut request = ExecRequest {
            command: Command::Shell("echo hi".into()),
            cwd: None,
            env: vec![],
            stdin: None,
            sudo: false,
            timeout_ms: None,
        };
        let jail = s.jail_options(&request, false).unwrap();
        assert_eq!(jail.argv, ["sh", "-c", "echo hi"]);
        assert_eq!(jail.cwd, "/tmp/w/repo");
        request.sudo = true;
        assert!(
            s.jail_options(&request, false)
                .unwrap_err()
                .contains("no root")
        );
    }
}
