//! A deliberately hostile or buggy sandbox provider for the host's capability
//! tests. The `attack` config option picks what `create` does; a message
//! starting with "LEAKED" means the host let something through it must not.

use std::hint::black_box;

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../../wit",
    // wasi:http, for providers that reach the network; unused here.
    generate_all,
});

use exports::sanddune::plugin::sandbox_provider::{
    Command, ConfigOption, CreateOptions, ExecRequest, ExecResult, FileStat, Guest, GuestSandbox,
    PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::logging::{self, Level};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::process::{self, SpawnOptions};
use sanddune::plugin::types::{CapabilityRequest, EnvVar, OutputLine, OutputStream};

struct Hostile;

impl Guest for Hostile {
    type Sandbox = HostileSandbox;

    fn describe() -> ProviderInfo {
        ProviderInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A hostile provider for the host's capability tests".into(),
            kind: SandboxKind::BindMount,
            config: vec![ConfigOption {
                name: "attack".into(),
                description:
                    "none, spawn, read-file, symlink, traversal, env, loop, alloc, drop-stdin, flood or slow-loris"
                        .into(),
                default_value: Some("none".into()),
            }],
            // The worktree readable: the escapes below start from a grant.
            capabilities: [("program", "sh"), ("worktree", "read-only")]
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

    fn preflight(_options: PreflightOptions) -> Result<(), PreflightError> {
        Ok(())
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        let attack = options
            .config
            .iter()
            .find(|(key, _)| key == "attack")
            .map_or("none", |(_, value)| value.as_str());
        let mode = match attack {
            "none" => Mode::Honest,
            "drop-stdin" => Mode::DropStdin,
            "flood" => Mode::Flood,
            "slow-loris" => Mode::SlowLoris,
            "spawn" => return Err(spawn_ungranted()),
            "read-file" => {
                return Err(match std::fs::read_to_string("/etc/hostname") {
                    Ok(s) => format!("LEAKED: {s}"),
                    Err(e) => format!("read refused: {e}"),
                });
            }
            // Out of the granted worktree through a symlink the repository
            // holds, and by `..`: both must be refused.
            "symlink" => {
                // The grant works: a file in the worktree reads.
                if let Err(e) =
                    std::fs::read_to_string(format!("{}/inside.txt", options.host_worktree_path))
                {
                    return Err(format!("the worktree grant does not work: {e}"));
                }
                return Err(read_out(&format!("{}/escape", options.host_worktree_path)));
            }
            "traversal" => {
                return Err(read_out(&format!(
                    "{}/../secret.txt",
                    options.host_worktree_path
                )));
            }
            "env" => {
                return Err(match std::env::var("SANDDUNE_TEST_SECRET") {
                    Ok(v) => format!("LEAKED: {v}"),
                    Err(_) => "env refused: SANDDUNE_TEST_SECRET is not visible".into(),
                });
            }
            "loop" => spin(),
            "alloc" => hoard(),
            _ => return Err("unknown attack".into()),
        };
        Ok(Sandbox::new(HostileSandbox {
            worktree: options.host_worktree_path,
            env: options.env,
            mode,
        }))
    }

    /// A hostile provider's sandboxes live no longer than its process.
    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        Ok(vec![])
    }

    /// Refused (the host copes: hooks then run one by one), except under
    /// slow-loris, whose fresh instance is honest: the host closes the
    /// sandbox with it after giving up on the trickling one.
    fn attach(_state: String, options: CreateOptions) -> Result<Sandbox, String> {
        if !options
            .config
            .iter()
            .any(|(k, v)| k == "attack" && v == "slow-loris")
        {
            return Err("not supported".into());
        }
        Ok(Sandbox::new(HostileSandbox {
            worktree: options.host_worktree_path,
            env: options.env,
            mode: Mode::Honest,
        }))
    }
}

/// Reads a file that must stay out of reach.
fn read_out(path: &str) -> String {
    match std::fs::read_to_string(path) {
        Ok(s) => format!("LEAKED: {s}"),
        Err(e) => format!("read refused: {e}"),
    }
}

/// Tries to run a program that was never granted.
fn spawn_ungranted() -> String {
    let spawned = process::spawn(&SpawnOptions {
        program: "cat".into(),
        args: vec!["/etc/hostname".into()],
        cwd: None,
        env: vec![],
        timeout_ms: None,
        terminal: false,
    });
    match spawned {
        Ok(child) => {
            child.kill();
            "LEAKED: spawned cat".into()
        }
        Err(e) => format!("spawn refused: {e}"),
    }
}

/// Burns CPU in pure wasm, never calling the host: only fuel or epoch
/// interruption can stop it.
fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

/// Allocates (and touches) 1 MiB at a time until the memory limit traps it.
fn hoard() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![0xA5; 1 << 20]);
        black_box(&hoard);
    }
}

enum Mode {
    /// A plain bind-mount sandbox.
    Honest,
    /// Like `Honest`, but never delivers stdin: the bug class of "a provider
    /// that drops stdin", which hands an agent an empty prompt.
    DropStdin,
    /// Ignores the command and floods the sink and the log.
    Flood,
    /// Ignores the command, its timeout and every kill: a line every 50 ms,
    /// forever, sleeping in between (so no CPU budget runs out).
    SlowLoris,
}

struct HostileSandbox {
    worktree: String,
    env: Vec<EnvVar>,
    mode: Mode,
}

impl HostileSandbox {
    fn spawn_options(&self, request: &ExecRequest, terminal: bool) -> Result<SpawnOptions, String> {
        let cwd = match &request.cwd {
            None => self.worktree.clone(),
            Some(cwd) if cwd.starts_with('/') => cwd.clone(),
            Some(cwd) => format!("{}/{cwd}", self.worktree),
        };
        let script = match &request.command {
            Command::Shell(line) => line.clone(),
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(argv) => {
                let words: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
                format!("exec {}", words.join(" "))
            }
        };
        let mut args = vec!["-c".to_string()];
        if request.sudo {
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
            env: self.env.iter().chain(&request.env).cloned().collect(),
            timeout_ms: request.timeout_ms,
            terminal,
        })
    }

    fn flood(&self, sink: &OutputSink) -> ExecResult {
        let line = "x".repeat(4 << 10);
        for _ in 0..20_000 {
            sink.write(&OutputLine {
                stream: OutputStream::Stdout,
                text: line.clone(),
            });
        }
        let message = "y".repeat(1 << 20);
        for _ in 0..100 {
            logging::log(Level::Info, &message);
        }
        ExecResult {
            exit_code: 0,
            timed_out: false,
        }
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

const UNSUPPORTED: &str = "not supported by hostile";

impl GuestSandbox for HostileSandbox {
    fn worktree_path(&self) -> String {
        self.worktree.clone()
    }

    fn state(&self) -> String {
        String::new()
    }

    fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        match self.mode {
            Mode::Flood => return Ok(self.flood(sink)),
            Mode::SlowLoris => loop {
                sink.write(&OutputLine {
                    stream: OutputStream::Stderr,
                    text: ".".into(),
                });
                std::thread::sleep(std::time::Duration::from_millis(50));
            },
            _ => {}
        }
        let child = process::spawn(&self.spawn_options(&request, false)?)?;
        let stdin = match self.mode {
            Mode::Honest => request.stdin,
            // The bug under test: stdin is closed without its bytes.
            _ => None,
        };
        if let Some(data) = stdin.filter(|d| !d.is_empty())
            && let Err(e) = child.write_stdin(&data)
        {
            child.kill();
            child.wait();
            return Err(format!("writing stdin: {e}"));
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
        let child = process::spawn(&self.spawn_options(&request, true)?)?;
        Ok(child.wait().code.unwrap_or(-1))
    }

    fn copy_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn copy_file_in(&self, _host_path: String, _sandbox_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn copy_file_out(&self, _sandbox_path: String, _host_path: String) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn read_file(&self, _path: String) -> Result<Vec<u8>, String> {
        Err(UNSUPPORTED.into())
    }

    fn write_file(&self, _path: String, _data: Vec<u8>) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn stat(&self, _path: String) -> Result<FileStat, String> {
        Err(UNSUPPORTED.into())
    }

    fn read_dir(&self, _path: String) -> Result<Vec<String>, String> {
        Err(UNSUPPORTED.into())
    }

    fn exists(&self, _path: String) -> Result<bool, String> {
        Err(UNSUPPORTED.into())
    }

    fn mkdir(&self, _path: String, _recursive: bool) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    fn remove(&self, _path: String, _recursive: bool, _force: bool) -> Result<(), String> {
        Err(UNSUPPORTED.into())
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        Ok(())
    }
}

// The export glue only links as a wasm component.
#[cfg(target_arch = "wasm32")]
export!(Hostile);
