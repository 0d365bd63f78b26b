//! A sandbox provider built against the frozen `sanddune:plugin@0.7.0`
//! (`wit/v0.7/`), so CI proves a component of that version still loads and
//! runs. Bind-mount: commands run with `sh` in the host worktree, which is
//! granted read-write; file operations use it directly.

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../../wit/v0.7",
    // 0.7's world imports wasi:http; unused here.
    generate_all,
});

use std::fs;

use exports::sanddune::plugin::sandbox_provider::{
    Command, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox, PreflightError,
    PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::process::{self, SpawnOptions};
use sanddune::plugin::types::{CapabilityRequest, EnvVar};

struct Provider;

impl Guest for Provider {
    type Sandbox = Worktree;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "v0-7-sandbox".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A 0.7 bind-mount provider for the contract-version tests".into(),
            kind: SandboxKind::BindMount,
            config: vec![],
            capabilities: [("program", "sh"), ("worktree", "read-write")]
                .into_iter()
                .map(|(kind, value)| CapabilityRequest {
                    kind: kind.into(),
                    value: value.into(),
                })
                .collect(),
            container_engine: None,
        }
    }

    /// 0.7's up-front check: nothing to check for a worktree and `sh`.
    fn preflight(_options: PreflightOptions) -> Result<(), PreflightError> {
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        Ok(Sandbox::new(Worktree {
            root: options.host_worktree_path,
            env: options.env,
        }))
    }

    fn attach(state: String, options: CreateOptions) -> Result<Sandbox, String> {
        Ok(Sandbox::new(Worktree {
            root: state,
            env: options.env,
        }))
    }

    /// Its sandboxes are the host worktree: nothing outlives the run.
    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

struct Worktree {
    root: String,
    env: Vec<EnvVar>,
}

impl Worktree {
    fn resolve(&self, path: &str) -> String {
        if path.starts_with('/') {
            path.into()
        } else {
            format!("{}/{path}", self.root)
        }
    }
}

fn unsupported<T>(what: &str) -> Result<T, String> {
    Err(format!("v0-7-sandbox does not {what}"))
}

impl GuestSandbox for Worktree {
    fn worktree_path(&self) -> String {
        self.root.clone()
    }

    fn state(&self) -> String {
        self.root.clone()
    }

    fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        // Only `sh` is granted: an argv runs as `sh -c 'exec "$@"' sh ARGV`.
        let args = match request.command {
            Command::Shell(line) => vec!["-c".into(), line],
            Command::Argv(argv) => ["-c", "exec \"$@\"", "sh"]
                .into_iter()
                .map(String::from)
                .chain(argv)
                .collect(),
        };
        let mut env = self.env.clone();
        env.extend(request.env);
        let child = process::spawn(&SpawnOptions {
            program: "sh".into(),
            args,
            cwd: Some(request.cwd.map_or(self.root.clone(), |c| self.resolve(&c))),
            env,
            timeout_ms: request.timeout_ms,
            terminal: false,
        })?;
        if let Some(stdin) = request.stdin {
            child.write_stdin(&stdin)?;
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

    fn interactive_exec(&self, _request: ExecRequest) -> Result<i32, String> {
        unsupported("run interactive commands")
    }

    fn copy_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        unsupported("copy in")
    }

    fn copy_file_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        unsupported("copy in")
    }

    fn copy_file_out(&self, _sandbox_path: String, _host_path: String) -> Result<(), String> {
        unsupported("copy out")
    }

    fn read_file(&self, path: String) -> Result<Vec<u8>, String> {
        fs::read(self.resolve(&path)).map_err(|e| format!("{path}: {e}"))
    }

    fn write_file(&self, path: String, data: Vec<u8>) -> Result<(), String> {
        fs::write(self.resolve(&path), data).map_err(|e| format!("{path}: {e}"))
    }

    fn stat(&self, path: String) -> Result<FileStat, String> {
        let m = fs::symlink_metadata(self.resolve(&path)).map_err(|e| format!("{path}: {e}"))?;
        Ok(FileStat {
            is_file: m.is_file(),
            is_directory: m.is_dir(),
            is_symlink: Some(m.is_symlink()),
            size: Some(m.len()),
            mtime_ms: None,
        })
    }

    fn read_dir(&self, path: String) -> Result<Vec<String>, String> {
        let entries = fs::read_dir(self.resolve(&path)).map_err(|e| format!("{path}: {e}"))?;
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: String) -> Result<bool, String> {
        Ok(fs::symlink_metadata(self.resolve(&path)).is_ok())
    }

    fn mkdir(&self, path: String, recursive: bool) -> Result<(), String> {
        let p = self.resolve(&path);
        let r = if recursive {
            fs::create_dir_all(p)
        } else {
            fs::create_dir(p)
        };
        r.map_err(|e| format!("{path}: {e}"))
    }

    fn remove(&self, path: String, recursive: bool, force: bool) -> Result<(), String> {
        let p = self.resolve(&path);
        let r = match fs::symlink_metadata(&p) {
            Err(_) if force => return Ok(()),
            Ok(m) if m.is_dir() && recursive => fs::remove_dir_all(&p),
            Ok(m) if m.is_dir() => fs::remove_dir(&p),
            _ => fs::remove_file(&p),
        };
        r.map_err(|e| format!("{path}: {e}"))
    }

    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

export!(Provider);
