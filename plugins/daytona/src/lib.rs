//! The `daytona` sandbox provider: each sandbox is a Daytona sandbox,
//! created through the Daytona API and driven through its toolbox API (a
//! session per provider instance; each exec an async command whose log is
//! followed until its exit code), all through the host's `wasi:http`
//! capability. An isolated provider: the host syncs the repository in and
//! the commits out through exec and the file calls.
//!
//! The API logic lives in plain modules (`api`, `logs`, `command`,
//! `multipart`, `config`, `provider`) tested natively against the loopback
//! mock; the transport (`sanddune-cloud-http`, shared with `vercel`) and the
//! WIT glue below are thin.

pub mod api;
pub mod command;
pub mod config;
pub mod logs;
pub mod multipart;
pub mod provider;
#[cfg(not(target_arch = "wasm32"))]
pub use sanddune_cloud_http::native;
pub use sanddune_cloud_http::shell_fs;
pub use sanddune_cloud_http::transport;

#[cfg(target_arch = "wasm32")]
mod component {
    use std::fs;
    use std::path::Path;

    wit_bindgen::generate!({ world: "sandbox-plugin", path: "../../wit", generate_all });

    use exports::sanddune::plugin::sandbox_provider::{
        Command, ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest,
        GuestSandbox, PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
    };
    use sanddune::plugin::output::OutputSink;
    use sanddune::plugin::types::{CapabilityRequest, OutputLine, OutputStream};
    use sanddune_cloud_http::shell_fs::ShellFs;
    use sanddune_cloud_http::wasi_http::WasiHttp;

    use crate::config::{ENV_KEYS, OPTIONS};
    use crate::logs::Stream;
    use crate::provider::{self, DaytonaSandbox, ExecSpec};

    struct Provider;

    fn env_lookup(key: &str) -> Option<String> {
        std::env::var(key).ok()
    }

    fn env_pairs(options: &CreateOptions) -> Vec<(String, String)> {
        options
            .env
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect()
    }

    impl Guest for Provider {
        type Sandbox = Daytona;

        fn describe() -> ProviderInfo {
            // Two origins, both configuration: the API's (`api-url`) and the
            // toolbox proxy's the sandboxes answer on (`toolbox-url`, which
            // depends on the region). The scratch dir is where the host
            // stages the files it copies in and out; the env keys are the
            // credentials.
            let mut capabilities = vec![
                CapabilityRequest {
                    kind: "http-option".into(),
                    value: "api-url".into(),
                },
                CapabilityRequest {
                    kind: "http-option".into(),
                    value: "toolbox-url".into(),
                },
                CapabilityRequest {
                    kind: "scratch-dir".into(),
                    value: String::new(),
                },
            ];
            capabilities.extend(ENV_KEYS.iter().map(|k| CapabilityRequest {
                kind: "env".into(),
                value: k.to_string(),
            }));
            ProviderInfo {
                name: "daytona".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Daytona: each sandbox is a Daytona sandbox in Daytona's cloud (or your own Daytona), billed to the organization of your API key".into(),
                kind: SandboxKind::Isolated,
                config: OPTIONS
                    .iter()
                    .map(|(name, description, default)| ConfigOption {
                        name: name.to_string(),
                        description: description.to_string(),
                        default_value: default.map(str::to_string),
                    })
                    .collect(),
                capabilities,
                container_engine: None,
                snapshots: true,
            }
        }

        /// The credentials and the options, before anything is created.
        fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
            crate::config::credentials(&env_lookup).map_err(PreflightError::Credentials)?;
            crate::config::options(&options.config, &env_lookup)
                .map_err(PreflightError::Options)?;
            Ok(())
        }

        fn create(options: CreateOptions) -> Result<Sandbox, String> {
            let sandbox = DaytonaSandbox::create(
                WasiHttp,
                &env_lookup,
                &options.config,
                (&options.run_id, &options.name),
                env_pairs(&options),
                options.snapshot.as_deref(),
            )?;
            Ok(Sandbox::new(Daytona(sandbox)))
        }

        fn remove_snapshot(options: CreateOptions, id: String) -> Result<(), String> {
            DaytonaSandbox::remove_snapshot(WasiHttp, &env_lookup, &options.config, &id)
        }

        fn find(options: CreateOptions) -> Result<Vec<String>, String> {
            DaytonaSandbox::find(WasiHttp, &env_lookup, &options.config, &options.run_id)
        }

        fn attach(state: String, options: CreateOptions) -> Result<Sandbox, String> {
            let sandbox = DaytonaSandbox::attach(
                WasiHttp,
                &env_lookup,
                &options.config,
                &state,
                env_pairs(&options),
            )?;
            Ok(Sandbox::new(Daytona(sandbox)))
        }
    }

    struct Daytona(DaytonaSandbox<WasiHttp>);

    fn spec(request: ExecRequest) -> ExecSpec {
        ExecSpec {
            command: match request.command {
                Command::Argv(argv) => provider::Command::Argv(argv),
                Command::Shell(line) => provider::Command::Shell(line),
            },
            cwd: request.cwd,
            env: request.env.into_iter().map(|e| (e.key, e.value)).collect(),
            stdin: request.stdin,
            sudo: request.sudo,
            timeout_ms: request.timeout_ms,
        }
    }

    /// Every file under `dir` (symlinks followed), as (relative path, bytes).
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), String> {
        let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("reading {}: {e}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if path.is_dir() {
                walk(&path, &child, out)?;
            } else {
                let data =
                    fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                out.push((child, data));
            }
        }
        Ok(())
    }

    fn join(base: &str, rel: &str) -> String {
        if rel.is_empty() {
            base.to_string()
        } else {
            format!("{}/{rel}", base.trim_end_matches('/'))
        }
    }

    impl GuestSandbox for Daytona {
        fn worktree_path(&self) -> String {
            self.0.worktree_path().to_string()
        }

        fn state(&self) -> String {
            self.0.state.encode()
        }

        fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
            let outcome = self.0.exec(spec(request), &mut |stream, text| {
                let stream = match stream {
                    Stream::Stdout => OutputStream::Stdout,
                    Stream::Stderr => OutputStream::Stderr,
                };
                sink.write(&OutputLine { stream, text });
            })?;
            Ok(ExecResult {
                exit_code: outcome.exit_code,
                timed_out: outcome.timed_out,
            })
        }

        fn interactive_exec(&self, _request: ExecRequest) -> Result<i32, String> {
            Err("daytona sandboxes have no terminal sessions in sanddune yet (interactive, attach): the provider does not speak Daytona's PTY sessions; use `sanddune logs -f` to watch the run".into())
        }

        fn copy_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
            let host = Path::new(&host_path);
            if host.is_dir() {
                let mut files = Vec::new();
                walk(host, "", &mut files)?;
                let files = files
                    .into_iter()
                    .map(|(rel, d)| (join(&sandbox_path, &rel), d))
                    .collect();
                self.0.put(files)
            } else {
                self.copy_file_in(host_path, sandbox_path)
            }
        }

        fn copy_file_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
            let data = fs::read(&host_path).map_err(|e| format!("reading {host_path}: {e}"))?;
            self.0.put(vec![(sandbox_path, data)])
        }

        fn copy_file_out(&self, sandbox_path: String, host_path: String) -> Result<(), String> {
            let data = self.0.read_file(&sandbox_path)?;
            if let Some(parent) = Path::new(&host_path).parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| format!("creating {}: {e}", parent.display()))?;
            }
            fs::write(&host_path, data).map_err(|e| format!("writing {host_path}: {e}"))
        }

        fn read_file(&self, path: String) -> Result<Vec<u8>, String> {
            self.0.read_file(&path)
        }

        fn write_file(&self, path: String, data: Vec<u8>) -> Result<(), String> {
            self.0.write_file(&path, &data)
        }

        fn stat(&self, path: String) -> Result<FileStat, String> {
            let s = self.0.stat(&path)?;
            Ok(FileStat {
                is_file: s.is_file,
                is_directory: s.is_directory,
                is_symlink: Some(s.is_symlink),
                size: s.size,
                mtime_ms: s.mtime_ms,
            })
        }

        fn read_dir(&self, path: String) -> Result<Vec<String>, String> {
            self.0.read_dir(&path)
        }

        fn exists(&self, path: String) -> Result<bool, String> {
            self.0.exists(&path)
        }

        fn mkdir(&self, path: String, recursive: bool) -> Result<(), String> {
            self.0.mkdir(&path, recursive)
        }

        fn remove(&self, path: String, recursive: bool, force: bool) -> Result<(), String> {
            self.0.remove(&path, recursive, force)
        }

        /// The sandbox stays as it is: Daytona snapshots it in place.
        fn keep(&self, name: String) -> Result<String, String> {
            self.0.keep(&name)
        }

        fn close(&self) -> Result<(), String> {
            self.0.close()
        }
    }

    export!(Provider);
}
