//! The capability imports of a WIT version, implemented once: each method
//! converts the version's records into the capability's host-owned types
//! and calls the capability (`crate::capability`). Expanded inside a version
//! module, where `types`, `logging`, `output`, `process` and `containers`
//! name that version's generated interfaces; `$extra` holds the
//! `containers` functions only some versions have.

macro_rules! host_imports {
    ({ $($extra:tt)* }) => {
        use crate::capability::PluginState;
        use crate::capability::output::{OutputLine, OutputSink, OutputStream};
        use crate::capability::process::{Child, SpawnOptions};
        use wasmtime::component::Resource;

        fn env_pairs(env: Vec<types::EnvVar>) -> Vec<(String, String)> {
            env.into_iter().map(|v| (v.key, v.value)).collect()
        }

        impl From<types::OutputLine> for OutputLine {
            fn from(l: types::OutputLine) -> Self {
                let stream = match l.stream {
                    types::OutputStream::Stdout => OutputStream::Stdout,
                    types::OutputStream::Stderr => OutputStream::Stderr,
                };
                Self { stream, text: l.text }
            }
        }

        impl From<OutputLine> for types::OutputLine {
            fn from(l: OutputLine) -> Self {
                let stream = match l.stream {
                    OutputStream::Stdout => types::OutputStream::Stdout,
                    OutputStream::Stderr => types::OutputStream::Stderr,
                };
                Self { stream, text: l.text }
            }
        }

        impl types::Host for PluginState {}

        impl logging::Host for PluginState {
            async fn log(&mut self, level: logging::Level, message: String) -> wasmtime::Result<()> {
                let level = match level {
                    logging::Level::Trace => tracing::Level::TRACE,
                    logging::Level::Debug => tracing::Level::DEBUG,
                    logging::Level::Info => tracing::Level::INFO,
                    logging::Level::Warn => tracing::Level::WARN,
                    logging::Level::Error => tracing::Level::ERROR,
                };
                PluginState::log(self, level, &message);
                Ok(())
            }
        }

        impl output::Host for PluginState {}

        impl output::HostOutputSink for PluginState {
            async fn write(&mut self, sink: Resource<OutputSink>, line: types::OutputLine) -> wasmtime::Result<()> {
                self.table.get(&sink)?.write(line.into()).await;
                Ok(())
            }

            async fn drop(&mut self, sink: Resource<OutputSink>) -> wasmtime::Result<()> {
                self.table.delete(sink)?;
                Ok(())
            }
        }

        impl process::Host for PluginState {
            async fn spawn(&mut self, o: process::SpawnOptions) -> wasmtime::Result<Result<Resource<Child>, String>> {
                let options = SpawnOptions {
                    program: o.program,
                    args: o.args,
                    cwd: o.cwd,
                    env: env_pairs(o.env),
                    timeout_ms: o.timeout_ms,
                    terminal: o.terminal,
                };
                match PluginState::spawn(self, options) {
                    Ok(child) => Ok(Ok(self.table.push(child)?)),
                    Err(e) => Ok(Err(e)),
                }
            }
        }

        impl process::HostChild for PluginState {
            async fn write_stdin(&mut self, child: Resource<Child>, data: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
                Ok(self.table.get(&child)?.write_stdin(data))
            }

            async fn close_stdin(&mut self, child: Resource<Child>) -> wasmtime::Result<()> {
                self.table.get_mut(&child)?.close_stdin();
                Ok(())
            }

            async fn read_line(&mut self, child: Resource<Child>) -> wasmtime::Result<Option<types::OutputLine>> {
                Ok(self.table.get_mut(&child)?.read_line().await.map(Into::into))
            }

            async fn wait(&mut self, child: Resource<Child>) -> wasmtime::Result<process::ExitStatus> {
                let s = self.table.get_mut(&child)?.wait().await;
                Ok(process::ExitStatus { code: s.code, timed_out: s.timed_out, killed: s.killed })
            }

            async fn kill(&mut self, child: Resource<Child>) -> wasmtime::Result<()> {
                self.table.get(&child)?.kill();
                Ok(())
            }

            async fn drop(&mut self, child: Resource<Child>) -> wasmtime::Result<()> {
                self.table.delete(child)?;
                Ok(())
            }
        }

        impl containers::Host for PluginState {
            async fn connect(&mut self, engine: containers::Engine) -> wasmtime::Result<Result<containers::EngineInfo, String>> {
                let engine = match engine {
                    containers::Engine::Docker => cap_containers::Engine::Docker,
                    containers::Engine::Podman => cap_containers::Engine::Podman,
                };
                Ok(self.containers_connect(engine).await.map(|i| containers::EngineInfo {
                    version: i.version,
                    host_uid: i.host_uid,
                    host_gid: i.host_gid,
                    rootless: i.rootless,
                }))
            }

            async fn image_exists(&mut self, image: String) -> wasmtime::Result<Result<bool, String>> {
                Ok(self.containers_image_exists(image).await)
            }

            async fn create(&mut self, s: containers::ContainerSpec) -> wasmtime::Result<Result<String, String>> {
                let spec = cap_containers::ContainerSpec {
                    image: s.image,
                    cmd: s.cmd,
                    entrypoint: s.entrypoint,
                    user: s.user,
                    workdir: s.workdir,
                    env: env_pairs(s.env),
                    mounts: s.mounts.into_iter().map(|m| cap_containers::Mount {
                        source: m.source,
                        target: m.target,
                        read_only: m.read_only,
                        selinux_relabel: m.selinux_relabel,
                    }).collect(),
                    networks: s.networks,
                    labels: s.labels,
                    userns: s.userns,
                    privileged: s.privileged,
                    cap_add: s.cap_add,
                    devices: s.devices,
                    pid_mode: s.pid_mode,
                    ipc_mode: s.ipc_mode,
                    network_mode: s.network_mode,
                };
                Ok(self.containers_create(spec).await)
            }

            async fn exec(
                &mut self,
                container: String,
                o: containers::ExecOptions,
                sink: Option<Resource<OutputSink>>,
            ) -> wasmtime::Result<Result<containers::ExecStatus, String>> {
                let tx = match &sink {
                    Some(sink) => Some(self.table.get(sink)?.tx.clone()),
                    None => None,
                };
                let options = cap_containers::ExecOptions {
                    argv: o.argv,
                    env: env_pairs(o.env),
                    user: o.user,
                    workdir: o.workdir,
                    stdin: o.stdin,
                    timeout_ms: o.timeout_ms,
                };
                Ok(self.containers_exec(container, options, tx).await.map(|s| containers::ExecStatus {
                    code: s.code,
                    timed_out: s.timed_out,
                    killed: s.killed,
                    stdout: s.stdout,
                    stderr: s.stderr,
                }))
            }

            async fn copy_in(&mut self, container: String, host_path: String, container_path: String) -> wasmtime::Result<Result<(), String>> {
                Ok(self.containers_copy_in(container, host_path, container_path).await)
            }

            async fn copy_file_out(&mut self, container: String, container_path: String, host_path: String) -> wasmtime::Result<Result<(), String>> {
                Ok(self.containers_copy_file_out(container, container_path, host_path).await)
            }

            async fn remove(&mut self, container: String) -> wasmtime::Result<Result<(), String>> {
                Ok(self.containers_remove(container).await)
            }

            async fn list(&mut self) -> wasmtime::Result<Result<Vec<String>, String>> {
                Ok(self.containers_list().await)
            }

            $($extra)*
        }
    };
}

/// `containers.exec-interactive` (since 0.2), for a version's `$extra`.
macro_rules! exec_interactive {
    () => {
        async fn exec_interactive(
            &mut self,
            container: String,
            options: containers::InteractiveExecOptions,
        ) -> wasmtime::Result<Result<i32, String>> {
            let options = cap_containers::InteractiveExecOptions {
                argv: options.argv,
                env: env_pairs(options.env),
                user: options.user,
                workdir: options.workdir,
            };
            Ok(self.containers_exec_interactive(container, options).await)
        }
    };
}

/// The `pods` capability (since 0.5), for a version whose world imports it;
/// `pods` and `cap_pods` name that version's interface and the capability.
macro_rules! pods_imports {
    () => {
        impl pods::Host for PluginState {
            async fn connect(&mut self) -> wasmtime::Result<Result<pods::ClusterInfo, String>> {
                Ok(self.pods_connect().await.map(|i| pods::ClusterInfo {
                    context: i.context,
                    server: i.server,
                    namespace: i.namespace,
                    version: i.version,
                }))
            }

            async fn create(
                &mut self,
                s: pods::PodSpec,
                timeout_ms: u64,
            ) -> wasmtime::Result<Result<String, String>> {
                let spec = cap_pods::PodSpec {
                    image: s.image,
                    command: s.command,
                    env: env_pairs(s.env),
                    workdir: s.workdir,
                    cpus: s.cpus,
                    memory: s.memory,
                    service_account: s.service_account,
                    node_selector: s.node_selector,
                    runtime_class: s.runtime_class,
                    image_pull_secrets: s.image_pull_secrets,
                    active_deadline_seconds: s.active_deadline_seconds,
                    labels: s.labels,
                    namespace: s.namespace,
                    privileged: s.privileged,
                    host_network: s.host_network,
                    host_pid: s.host_pid,
                    host_paths: s.host_paths,
                    cap_add: s.cap_add,
                };
                Ok(self.pods_create(spec, timeout_ms).await)
            }

            async fn claim(
                &mut self,
                template: String,
                timeout_ms: u64,
            ) -> wasmtime::Result<Result<String, String>> {
                Ok(self.pods_claim(template, timeout_ms).await)
            }

            async fn exec(
                &mut self,
                pod: String,
                o: pods::ExecOptions,
                sink: Option<Resource<OutputSink>>,
            ) -> wasmtime::Result<Result<pods::ExecStatus, String>> {
                let tx = match &sink {
                    Some(sink) => Some(self.table.get(sink)?.tx.clone()),
                    None => None,
                };
                let options = cap_pods::ExecOptions {
                    argv: o.argv,
                    env: env_pairs(o.env),
                    workdir: o.workdir,
                    stdin: o.stdin,
                    timeout_ms: o.timeout_ms,
                };
                Ok(self
                    .pods_exec(pod, options, tx)
                    .await
                    .map(|s| pods::ExecStatus {
                        code: s.code,
                        timed_out: s.timed_out,
                        killed: s.killed,
                        stdout: s.stdout,
                        stderr: s.stderr,
                    }))
            }

            async fn exec_interactive(
                &mut self,
                pod: String,
                argv: Vec<String>,
                workdir: Option<String>,
            ) -> wasmtime::Result<Result<i32, String>> {
                Ok(self.pods_exec_interactive(pod, argv, workdir).await)
            }

            async fn copy_in(
                &mut self,
                pod: String,
                host_path: String,
                pod_path: String,
            ) -> wasmtime::Result<Result<(), String>> {
                Ok(self.pods_copy_in(pod, host_path, pod_path).await)
            }

            async fn copy_file_out(
                &mut self,
                pod: String,
                pod_path: String,
                host_path: String,
            ) -> wasmtime::Result<Result<(), String>> {
                Ok(self.pods_copy_file_out(pod, pod_path, host_path).await)
            }

            async fn remove(&mut self, pod: String) -> wasmtime::Result<Result<(), String>> {
                Ok(self.pods_remove(pod).await)
            }

            async fn list(&mut self) -> wasmtime::Result<Result<Vec<String>, String>> {
                Ok(self.pods_list().await)
            }
        }
    };
}

/// The `jail` capability (since 0.7), for a version whose world imports it;
/// `jail` names that version's interface.
macro_rules! jail_imports {
    () => {
        impl jail::Host for PluginState {
            async fn probe(&mut self) -> wasmtime::Result<Result<jail::JailInfo, String>> {
                let probe = match self.jail_probe() {
                    Ok(probe) => probe,
                    Err(e) => return Ok(Err(e)),
                };
                Ok(probe.await.map(|i| jail::JailInfo { version: i.version }))
            }

            async fn spawn(
                &mut self,
                o: jail::JailOptions,
            ) -> wasmtime::Result<Result<Resource<Child>, String>> {
                let options = crate::capability::jail::JailOptions {
                    argv: o.argv,
                    cwd: o.cwd,
                    env: env_pairs(o.env),
                    binds: o
                        .binds
                        .into_iter()
                        .map(|b| crate::capability::containers::Mount {
                            source: b.source,
                            target: b.target,
                            read_only: b.read_only,
                            selinux_relabel: false,
                        })
                        .collect(),
                    timeout_ms: o.timeout_ms,
                    terminal: o.terminal,
                };
                match self.jail_spawn(options) {
                    Ok(child) => Ok(Ok(self.table.push(child)?)),
                    Err(e) => Ok(Err(e)),
                }
            }
        }
    };
}
