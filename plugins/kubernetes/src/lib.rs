//! The `kubernetes` sandbox provider: each sandbox is one pod, created (or
//! claimed from an agent-sandbox SandboxTemplate) through the host's
//! confined `pods` capability. The provider never sees the cluster's
//! credentials and cannot leave the namespace the user chose: the host
//! reads the kubeconfig, labels the pods and checks every call.
//!
//! An isolated provider: the host syncs the repository into `workdir` and
//! the commits out through exec and the file calls, which ride the API
//! server's exec stream. Options are checked in `config`, and the scripts
//! that hand the env to a TTY command are in `env_files`, both natively
//! tested.

pub mod config;
pub mod env_files;

#[cfg(target_arch = "wasm32")]
mod component {
    use std::cell::Cell;
    use std::fs;

    wit_bindgen::generate!({ world: "sandbox-plugin", path: "../../wit", generate_all });

    use exports::sanddune::plugin::sandbox_provider::{
        Command, ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest,
        GuestSandbox, PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
    };
    use sanddune::plugin::output::OutputSink;
    use sanddune::plugin::pods::{self, ExecOptions, PodSpec};
    use sanddune::plugin::types::{CapabilityRequest, EnvVar};
    use sanddune_cloud_http::shell_fs::{self, ShellFs};
    use serde_json::json;

    use crate::config::{OPTIONS, Options};
    use crate::env_files;

    struct Provider;

    impl Guest for Provider {
        type Sandbox = PodSandbox;

        fn describe() -> ProviderInfo {
            ProviderInfo {
                name: "kubernetes".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Runs the agent in a Kubernetes pod (one per sandbox) with your kubeconfig, confined to one namespace; the repository is synced in and the commits out".into(),
                kind: SandboxKind::Isolated,
                config: OPTIONS
                    .iter()
                    .map(|(name, description, default)| ConfigOption {
                        name: name.to_string(),
                        description: description.to_string(),
                        default_value: default.map(String::from),
                    })
                    .collect(),
                capabilities: [("pods", ""), ("scratch-dir", "")]
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

        /// The options, before anything is created. The cluster is not
        /// asked: a context that does not answer is named by `create`.
        fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
            Options::parse(&options.config)
                .map(drop)
                .map_err(PreflightError::Options)
        }

        fn create(options: CreateOptions) -> Result<Sandbox, String> {
            let o = Options::parse(&options.config)?;
            pods::connect()?;
            let timeout = o.start_timeout.as_millis() as u64;
            let pod = match &o.template {
                Some(template) => pods::claim(template, timeout)?,
                None => pods::create(
                    &PodSpec {
                        image: o.image.clone().unwrap_or_default(),
                        // PID 1 only keeps the pod alive; delete ends it at once.
                        command: vec!["sleep".into(), "infinity".into()],
                        // The env goes with each exec, never in the spec,
                        // which whoever may get pods can read.
                        env: vec![],
                        workdir: None,
                        cpus: o.cpus.clone(),
                        memory: o.memory.clone(),
                        service_account: o.service_account.clone(),
                        node_selector: o.node_selector.clone(),
                        runtime_class: o.runtime_class.clone(),
                        image_pull_secrets: o.image_pull_secrets.clone(),
                        active_deadline_seconds: Some(o.ttl.as_secs()),
                        labels: vec![],
                        namespace: None,
                        privileged: false,
                        host_network: false,
                        host_pid: false,
                        host_paths: vec![],
                        cap_add: vec![],
                    },
                    timeout,
                )?,
            };
            let sandbox = PodSandbox::new(pod, o.workdir, &options);
            let made =
                sandbox.run_script_ok("create the workdir", shell_fs::MKDIR_P, &[&sandbox.workdir]);
            if let Err(e) = made {
                let _ = pods::remove(&sandbox.pod);
                return Err(format!("pod `{}`: {e}", sandbox.pod));
            }
            Ok(Sandbox::new(sandbox))
        }

        /// The run's pods, by the labels the host gave them.
        /// It keeps no snapshots (`snapshots: false`): the host never asks.
        fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
            Err(format!(
                "this provider keeps no snapshots, so it has no {id}"
            ))
        }

        fn find(options: CreateOptions) -> Result<Vec<String>, String> {
            pods::connect()?;
            let workdir = workdir_of(&options);
            Ok(pods::list()?
                .into_iter()
                .map(|pod| state(&pod, &workdir))
                .collect())
        }

        fn attach(state: String, options: CreateOptions) -> Result<Sandbox, String> {
            let value: serde_json::Value = serde_json::from_str(&state)
                .map_err(|e| format!("kubernetes: not a sandbox state: {e}"))?;
            let (Some(pod), Some(workdir)) = (value["pod"].as_str(), value["workdir"].as_str())
            else {
                return Err("kubernetes: the sandbox state names no pod".into());
            };
            pods::connect()?;
            // The host refuses every call on a pod this plugin did not
            // create for the run.
            Ok(Sandbox::new(PodSandbox::new(
                pod.into(),
                workdir.into(),
                &options,
            )))
        }
    }

    fn workdir_of(options: &CreateOptions) -> String {
        Options::parse(&options.config)
            .map(|o| o.workdir)
            .unwrap_or_else(|_| "/home/agent/workspace".into())
    }

    fn state(pod: &str, workdir: &str) -> String {
        json!({"pod": pod, "workdir": workdir}).to_string()
    }

    pub struct PodSandbox {
        pod: String,
        workdir: String,
        /// The run's env, which every exec gets (the host sends it on the
        /// exec's stdin): never in a pod's spec, and a claimed pod's spec
        /// is the template's.
        env: Vec<EnvVar>,
        scratch: Option<String>,
        /// Names the scratch files of this instance's file calls.
        files: Cell<u64>,
    }

    impl PodSandbox {
        fn new(pod: String, workdir: String, options: &CreateOptions) -> Self {
            PodSandbox {
                pod,
                workdir,
                env: options.env.clone(),
                scratch: options.scratch_dir.clone(),
                files: Cell::new(0),
            }
        }

        /// A fresh path in the scratch dir for one file call.
        fn scratch_file(&self) -> Result<String, String> {
            let dir = self
                .scratch
                .as_deref()
                .ok_or("kubernetes: no scratch dir was granted")?;
            let n = self.files.get() + 1;
            self.files.set(n);
            Ok(format!("{dir}/file-{}-{n}", self.pod))
        }

        fn exec_options(&self, request: &ExecRequest) -> Result<ExecOptions, String> {
            if request.sudo {
                return Err("kubernetes: a command as root (sudo) is not possible: the pod runs as its image's user and Kubernetes exec cannot switch user".into());
            }
            let argv = match &request.command {
                Command::Argv(argv) => argv.clone(),
                Command::Shell(line) => vec!["sh".into(), "-c".into(), line.clone()],
            };
            let mut env = self.env.clone();
            env.extend(request.env.iter().cloned());
            Ok(ExecOptions {
                argv,
                env,
                workdir: Some(
                    request
                        .cwd
                        .as_deref()
                        .map(|c| self.resolve(c))
                        .unwrap_or_else(|| self.workdir.clone()),
                ),
                stdin: request.stdin.clone(),
                timeout_ms: request.timeout_ms,
            })
        }

        /// `argv` run with `env` on a TTY: a plain exec saves the env to
        /// files the TTY command's shell loads (see `env_files`).
        fn env_from_files(
            &self,
            env: Vec<EnvVar>,
            argv: Vec<String>,
        ) -> Result<Vec<String>, String> {
            let mut save = vec![
                "sh".to_string(),
                "-c".into(),
                env_files::SAVE.into(),
                "sanddune-env".into(),
            ];
            save.extend(env.iter().map(|e| e.key.clone()));
            let status = pods::exec(
                &self.pod,
                &ExecOptions {
                    argv: save,
                    env,
                    workdir: None,
                    stdin: None,
                    timeout_ms: None,
                },
                None,
            )?;
            let dir = status.stdout.trim();
            if status.code != Some(0) || dir.is_empty() {
                return Err(format!(
                    "cannot hand the run's env to the interactive command in pod `{}` (it needs `mktemp` in the image): {}",
                    self.pod,
                    status.stderr.trim()
                ));
            }
            let mut load = vec![
                "sh".to_string(),
                "-c".into(),
                env_files::LOAD.into(),
                "sanddune-env".into(),
                dir.to_string(),
            ];
            load.extend(argv);
            Ok(load)
        }
    }

    impl ShellFs for PodSandbox {
        fn run_script(&self, script: &str, args: &[&str]) -> Result<(i32, String, String), String> {
            let mut argv = vec!["sh".to_string(), "-c".into(), script.into(), "sh".into()];
            argv.extend(args.iter().map(|a| a.to_string()));
            let status = pods::exec(
                &self.pod,
                &ExecOptions {
                    argv,
                    env: self.env.clone(),
                    workdir: None,
                    stdin: None,
                    timeout_ms: None,
                },
                None,
            )?;
            Ok((status.code.unwrap_or(-1), status.stdout, status.stderr))
        }

        fn worktree(&self) -> &str {
            &self.workdir
        }
    }

    impl GuestSandbox for PodSandbox {
        fn worktree_path(&self) -> String {
            self.workdir.clone()
        }

        fn state(&self) -> String {
            state(&self.pod, &self.workdir)
        }

        fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
            let options = self.exec_options(&request)?;
            let status = pods::exec(&self.pod, &options, Some(sink))?;
            Ok(ExecResult {
                exit_code: status.code.unwrap_or(-1),
                timed_out: status.timed_out,
            })
        }

        fn interactive_exec(&self, request: ExecRequest) -> Result<i32, String> {
            let options = self.exec_options(&request)?;
            let argv = if options.env.is_empty() {
                options.argv
            } else {
                self.env_from_files(options.env, options.argv)?
            };
            pods::exec_interactive(&self.pod, &argv, options.workdir.as_deref())
        }

        fn copy_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
            pods::copy_in(&self.pod, &host_path, &self.resolve(&sandbox_path))
        }

        fn copy_file_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
            // The host makes the missing parents as it extracts.
            pods::copy_in(&self.pod, &host_path, &self.resolve(&sandbox_path))
        }

        fn copy_file_out(&self, sandbox_path: String, host_path: String) -> Result<(), String> {
            pods::copy_file_out(&self.pod, &self.resolve(&sandbox_path), &host_path)
        }

        fn read_file(&self, path: String) -> Result<Vec<u8>, String> {
            let file = self.scratch_file()?;
            pods::copy_file_out(&self.pod, &self.resolve(&path), &file)?;
            let data = fs::read(&file).map_err(|e| format!("reading {file}: {e}"));
            let _ = fs::remove_file(&file);
            data
        }

        fn write_file(&self, path: String, data: Vec<u8>) -> Result<(), String> {
            let file = self.scratch_file()?;
            fs::write(&file, &data).map_err(|e| format!("writing {file}: {e}"))?;
            let r = pods::copy_in(&self.pod, &file, &self.resolve(&path));
            let _ = fs::remove_file(&file);
            r
        }

        fn stat(&self, path: String) -> Result<FileStat, String> {
            let s = ShellFs::stat(self, &path)?;
            Ok(FileStat {
                is_file: s.is_file,
                is_directory: s.is_directory,
                is_symlink: Some(s.is_symlink),
                size: s.size,
                mtime_ms: s.mtime_ms,
            })
        }

        fn read_dir(&self, path: String) -> Result<Vec<String>, String> {
            ShellFs::read_dir(self, &path)
        }

        fn exists(&self, path: String) -> Result<bool, String> {
            ShellFs::exists(self, &path)
        }

        fn mkdir(&self, path: String, recursive: bool) -> Result<(), String> {
            let script = if recursive {
                shell_fs::MKDIR_P
            } else {
                shell_fs::MKDIR
            };
            let full = self.resolve(&path);
            self.run_script_ok(&format!("mkdir {path}"), script, &[&full])
                .map(drop)
        }

        fn remove(&self, path: String, recursive: bool, force: bool) -> Result<(), String> {
            let full = self.resolve(&path);
            let flag = |b: bool| if b { "1" } else { "0" };
            self.run_script_ok(
                &format!("remove {path}"),
                shell_fs::REMOVE,
                &[&full, flag(recursive), flag(force)],
            )
            .map(drop)
        }

        /// It keeps no snapshots (`snapshots: false`): the host never asks.
        fn keep(&self, _name: String) -> Result<String, String> {
            Err("this provider keeps no snapshots".into())
        }

        fn close(&self) -> Result<(), String> {
            // Idempotent: a pod already gone is no error.
            pods::remove(&self.pod)
        }
    }

    export!(Provider);
}
