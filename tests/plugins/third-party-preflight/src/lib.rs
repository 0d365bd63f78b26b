//! A third party's sandbox provider of the current contract whose
//! `preflight` checks a credential and an option of its own, so the tests
//! see the host run a component's up-front checks exactly as a built-in's:
//! exit 2, the provider's words, nothing created. Bind-mount: commands run
//! with `sh` in the host worktree, which is granted read-write.

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../../wit",
    // The world imports wasi:http; unused here.
    generate_all,
});

use std::fs;

use exports::sanddune::plugin::sandbox_provider::{
    Command, ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox,
    PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::process::{self, SpawnOptions};
use sanddune::plugin::types::{CapabilityRequest, EnvVar};

/// The credential it reads from its granted env.
const TOKEN: &str = "THIRD_PARTY_TOKEN";

struct Provider;

impl Guest for Provider {
    type Sandbox = Worktree;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "third-party-preflight".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A bind-mount provider that needs a token and a region".into(),
            kind: SandboxKind::BindMount,
            config: vec![ConfigOption {
                name: "region".into(),
                description: "where its sandboxes would run: eu or us".into(),
                default_value: Some("eu".into()),
            }],
            capabilities: [
                ("program", "sh"),
                ("worktree", "read-write"),
                ("env", TOKEN),
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

    fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
        match std::env::var(TOKEN) {
            Ok(token) if token.starts_with("tp_") => {}
            Ok(_) => {
                return Err(PreflightError::Credentials(format!(
                    "{TOKEN} is not a third-party token (they start with tp_)"
                )));
            }
            Err(_) => {
                return Err(PreflightError::Credentials(format!("{TOKEN} is not set")));
            }
        }
        for (key, value) in &options.config {
            match (key.as_str(), value.as_str()) {
                ("region", "eu" | "us") => {}
                ("region", other) => {
                    return Err(PreflightError::Options(format!(
                        "region must be eu or us, not `{other}`"
                    )));
                }
                (other, _) => {
                    return Err(PreflightError::Options(format!("no option `{other}`")));
                }
            }
        }
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
    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

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
    Err(format!("third-party-preflight does not {what}"))
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

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

export!(Provider);
