//! The `docker` and `podman` sandbox providers (bind-mount): one container per
//! sandbox, created through the host's confined `containers` capability,
//! never through the engine's CLI.
//!
//! The worktree is mounted at its host path. The repository's git dir is not
//! mounted: the host lays the agent's own git dir where the worktree's `.git`
//! points (ADR 0025), so the agent commits without reaching the host's. The
//! agent runs as a non-root user whose UID/GID
//! match the host user's: Docker needs an image built for that UID (checked
//! before anything runs), Podman maps it with a keep-id user namespace.
//!
//! The podman crate builds this file with the `podman` feature.

use std::fs;

wit_bindgen::generate!({
    world: "sandbox-plugin",
    path: "../../wit",
    // wasi:http, for providers that reach the network; unused here.
    generate_all,
});

use exports::sanddune::plugin::sandbox_provider::{
    Command, ConfigOption, ContainerEngine, CreateOptions, ExecRequest, ExecResult, FileStat,
    Guest, GuestSandbox, PreflightError, PreflightOptions, ProviderInfo, Sandbox, SandboxKind,
};
use sanddune::plugin::containers::{
    self, ContainerSpec, Engine, ExecOptions, ExecStatus, InteractiveExecOptions, Mount,
};
use sanddune::plugin::output::OutputSink;
use sanddune::plugin::types::{CapabilityRequest, EnvVar};

#[cfg(not(feature = "podman"))]
mod flavour {
    use super::{ContainerEngine, Engine};
    pub const NAME: &str = "docker";
    pub const TITLE: &str = "Docker";
    pub const ENGINE: Engine = Engine::Docker;
    pub const DECLARED: ContainerEngine = ContainerEngine::Docker;
    pub const BUILD_HINT: &str = "sanddune docker build-image";
    pub const START_HINT: &str = "start Docker, or set DOCKER_HOST to the socket it listens on (unix:///path/to/docker.sock)";
}

#[cfg(feature = "podman")]
mod flavour {
    use super::{ContainerEngine, Engine};
    pub const NAME: &str = "podman";
    pub const TITLE: &str = "Podman";
    pub const ENGINE: Engine = Engine::Podman;
    pub const DECLARED: ContainerEngine = ContainerEngine::Podman;
    pub const BUILD_HINT: &str = "sanddune podman build-image";
    pub const START_HINT: &str = "start it (`systemctl --user start podman.socket`, or `podman system service`), or set CONTAINER_HOST to the socket it listens on (unix:///path/to/podman.sock)";
}

/// The sandbox user's home; the default image creates it.
const DEFAULT_HOME: &str = "/home/agent";
/// The user the images sanddune builds run the agent as.
const AGENT_USER: &str = "agent";
/// The label those images carry with `agent`'s `UID:GID`.
const AGENT_IDS_LABEL: &str = "sanddune.agent-ids";

struct Provider;

fn option(name: &str, description: &str, default: Option<&str>) -> ConfigOption {
    ConfigOption {
        name: name.into(),
        description: description.into(),
        default_value: default.map(Into::into),
    }
}

impl Guest for Provider {
    type Sandbox = ContainerSandbox;

    fn describe() -> ProviderInfo {
        let user_default = if cfg!(feature = "podman") {
            "your host UID:GID (keep-id user namespace when rootless)"
        } else {
            "agent"
        };
        ProviderInfo {
            name: flavour::NAME.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: format!(
                "Runs the agent in a {} container with the worktree bind-mounted, \
                 as a non-root user matching your host UID/GID",
                flavour::NAME
            ),
            kind: SandboxKind::BindMount,
            config: vec![
                option(
                    "image",
                    &format!("image to run; build one with `{}`", flavour::BUILD_HINT),
                    Some("sanddune:<repo-dir-name>"),
                ),
                option(
                    "user",
                    "user the agent runs as; its UID/GID must match yours",
                    Some(user_default),
                ),
                option("home", "HOME inside the container", Some(DEFAULT_HOME)),
                option(
                    "mount",
                    "extra bind mount SOURCE:TARGET or SOURCE:TARGET:ro (repeatable); \
                     SOURCE may be absolute, ~/..., or relative to the current directory",
                    None,
                ),
                option(
                    "network",
                    "network to attach (repeatable, or comma-separated)",
                    None,
                ),
                option(
                    "selinux-label",
                    "z: relabel bind mounts for SELinux (shared); none: leave labels alone",
                    Some("z"),
                ),
            ],
            capabilities: [("scratch-dir", ""), ("containers", "")]
                .into_iter()
                .map(|(kind, value)| CapabilityRequest {
                    kind: kind.into(),
                    value: value.into(),
                })
                .collect(),
            container_engine: Some(flavour::DECLARED),
            snapshots: false,
        }
    }

    /// The options parse, the engine answers, and the image is in it (a
    /// run never pulls one).
    fn preflight(options: PreflightOptions) -> Result<(), PreflightError> {
        let config = Config::parse(&options.host_git_dir, &options.config)
            .map_err(PreflightError::Options)?;
        containers::connect(flavour::ENGINE).map_err(|e| {
            PreflightError::Host(format!(
                "no {} engine answers ({e}): {}",
                flavour::TITLE,
                flavour::START_HINT
            ))
        })?;
        match containers::image_exists(&config.image) {
            Ok(false) => Err(PreflightError::Host(format!(
                "image `{}` is not in {}: build it with `{}` (a run never pulls one), or name another with --sandbox-opt image=NAME",
                config.image,
                flavour::NAME,
                flavour::BUILD_HINT
            ))),
            // Not knowing is not a refusal: `create` says more.
            Ok(true) | Err(_) => Ok(()),
        }
    }

    fn create(options: CreateOptions) -> Result<Sandbox, String> {
        let config = Config::parse(&options.host_git_dir, &options.config)?;
        let engine = containers::connect(flavour::ENGINE)?;
        if !containers::image_exists(&config.image)? {
            return Err(format!(
                "image `{}` is not in {}: build it with `{}` (nothing is pulled)",
                config.image,
                flavour::NAME,
                flavour::BUILD_HINT
            ));
        }
        let mut env = vec![EnvVar {
            key: "HOME".into(),
            value: config.home.clone(),
        }];
        env.extend(options.env.iter().cloned());
        let worktree = options.host_worktree_path.clone();
        let mut mounts = vec![bind(&worktree, &worktree, false, config.relabel)];
        mounts.extend(config.mounts.iter().cloned());
        let user = match &config.user {
            Some(user) => user.clone(),
            None if cfg!(feature = "podman") => format!("{}:{}", engine.host_uid, engine.host_gid),
            None => AGENT_USER.into(),
        };
        // keep-id maps the host user onto the same UID inside; rootful Podman
        // runs as root already and refuses keep-id.
        let userns = (cfg!(feature = "podman") && engine.rootless).then(|| "keep-id".to_string());
        let id = containers::create(&ContainerSpec {
            image: config.image.clone(),
            cmd: vec![],
            // PID 1 only keeps the container alive; removal kills it at once.
            entrypoint: Some(vec!["sleep".into(), "infinity".into()]),
            user: Some(user.clone()),
            workdir: Some(worktree.clone()),
            env,
            mounts,
            networks: config.networks.clone(),
            labels: vec![],
            userns,
            privileged: false,
            cap_add: vec![],
            devices: vec![],
            pid_mode: None,
            ipc_mode: None,
            network_mode: None,
        })?;
        let sandbox = ContainerSandbox {
            id,
            worktree,
            scratch: options.scratch_dir.clone(),
        };
        if let Err(e) = sandbox.check_user(&user, &config.image, engine.host_uid, engine.host_gid) {
            let _ = containers::remove(&sandbox.id);
            return Err(e);
        }
        Ok(Sandbox::new(sandbox))
    }

    /// The run's containers, by the labels the host gave them.
    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn remove_snapshot(_options: CreateOptions, id: String) -> Result<(), String> {
        Err(format!(
            "this provider keeps no snapshots, so it has no {id}"
        ))
    }

    fn find(_options: CreateOptions) -> Result<Vec<String>, String> {
        containers::connect(flavour::ENGINE)?;
        containers::list()
    }

    fn attach(state: String, options: CreateOptions) -> Result<Sandbox, String> {
        containers::connect(flavour::ENGINE)?;
        // The host refuses any container this plugin did not create for the run.
        if !containers::list()?.contains(&state) {
            return Err(format!(
                "container {state} is not one of this run's {} sandboxes",
                flavour::NAME
            ));
        }
        Ok(Sandbox::new(ContainerSandbox {
            id: state,
            worktree: options.host_worktree_path,
            scratch: options.scratch_dir,
        }))
    }
}

fn bind(source: &str, target: &str, read_only: bool, relabel: bool) -> Mount {
    Mount {
        source: source.into(),
        target: target.into(),
        read_only,
        selinux_relabel: relabel,
    }
}

/// The provider's options, parsed and checked.
struct Config {
    image: String,
    user: Option<String>,
    home: String,
    mounts: Vec<Mount>,
    networks: Vec<String>,
    relabel: bool,
}

impl Config {
    fn parse(host_git_dir: &str, options: &[(String, String)]) -> Result<Self, String> {
        let mut config = Config {
            image: default_image(host_git_dir),
            user: None,
            home: DEFAULT_HOME.into(),
            mounts: vec![],
            networks: vec![],
            relabel: true,
        };
        let mut mount_specs = Vec::new();
        for (key, value) in options {
            match key.as_str() {
                "image" => config.image = value.clone(),
                "user" => config.user = Some(value.clone()),
                "home" => config.home = value.clone(),
                // The host has already resolved SOURCE to an absolute path.
                "mount" => mount_specs.push(value.clone()),
                "network" => config.networks.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(String::from),
                ),
                "selinux-label" => {
                    config.relabel = match value.as_str() {
                        "z" => true,
                        "none" => false,
                        other => {
                            return Err(format!("selinux-label must be z or none, not `{other}`"));
                        }
                    }
                }
                other => {
                    return Err(format!(
                        "{} has no option `{other}` (options: image, user, home, mount, network, selinux-label)",
                        flavour::NAME
                    ));
                }
            }
        }
        for spec in mount_specs {
            let parts: Vec<&str> = spec.split(':').collect();
            let (source, target, read_only) = match parts.as_slice() {
                [s, t] => (*s, *t, false),
                [s, t, "ro"] => (*s, *t, true),
                [s, t, "rw"] => (*s, *t, false),
                _ => {
                    return Err(format!(
                        "mount `{spec}`: expected SOURCE:TARGET or SOURCE:TARGET:ro"
                    ));
                }
            };
            if !target.starts_with('/') {
                return Err(format!(
                    "mount `{spec}`: the target must be an absolute path in the container"
                ));
            }
            config
                .mounts
                .push(bind(source, target, read_only, config.relabel));
        }
        Ok(config)
    }
}

/// `sanddune:<repo-dir-name>`, from the repository's git dir (`<repo>/.git`).
fn default_image(git_dir: &str) -> String {
    let trimmed = git_dir.trim_end_matches('/');
    let repo = trimmed.strip_suffix("/.git").unwrap_or(trimmed);
    let name = repo.rsplit('/').next().unwrap_or("repo");
    // Image names are lower case; other characters become `-`.
    let tag: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '_' | '-') => c,
            _ => '-',
        })
        .collect();
    format!("sanddune:{}", tag.trim_start_matches(['.', '-']))
}

struct ContainerSandbox {
    id: String,
    /// The worktree's path, the same on the host and in the container.
    worktree: String,
    /// The granted scratch dir, where file reads and writes are staged.
    scratch: Option<String>,
}

/// `sh -c script` with the script's arguments as `$0`, `$1`, ... never
/// quoted into the script itself.
fn sh(script: &str, args: &[&str]) -> Vec<String> {
    let mut argv = vec!["sh".to_string(), "-c".into(), script.into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

impl ContainerSandbox {
    /// Run a helper command as the sandbox user and return its output.
    fn run(&self, argv: Vec<String>) -> Result<ExecStatus, String> {
        containers::exec(
            &self.id,
            &ExecOptions {
                argv,
                env: vec![],
                user: None,
                workdir: Some(self.worktree.clone()),
                stdin: None,
                timeout_ms: Some(60_000),
            },
            None,
        )
    }

    /// Run a helper that must succeed; its stderr becomes the error.
    fn run_ok(&self, what: &str, argv: Vec<String>) -> Result<String, String> {
        let status = self.run(argv)?;
        if status.code == Some(0) {
            Ok(status.stdout)
        } else {
            Err(format!("{what}: {}", status.stderr.trim()))
        }
    }

    /// The container user's UID/GID must be the host user's, or the agent's
    /// files in the bind-mounted worktree belong to someone else.
    fn check_user(&self, user: &str, image: &str, uid: u32, gid: u32) -> Result<(), String> {
        let ids = match self
            .ids_from_label(user, image)
            .or_else(|| self.ids_from_files(user))
        {
            Some(ids) => ids.to_vec(),
            None => self
                .run_ok("checking the container user", sh("id -u; id -g", &[]))?
                .lines()
                .map(String::from)
                .collect(),
        };
        if ids == [uid.to_string(), gid.to_string()] {
            return Ok(());
        }
        Err(format!(
            "the container user `{user}` of image `{image}` is UID:GID {}, but you are {uid}:{gid} on the host, \
             so files the agent writes in the worktree would belong to another user. \
             Rebuild the image for your user with `{}` (it passes AGENT_UID={uid} and AGENT_GID={gid}), \
             or choose a matching user with --sandbox-opt user=...",
            ids.join(":"),
            flavour::BUILD_HINT
        ))
    }

    /// The ids of the image's `agent` user, as the Dockerfiles sanddune
    /// writes label them (`sanddune.agent-ids=UID:GID`): an image inspect
    /// instead of copying /etc/passwd out. None for another user or an
    /// image without the label.
    fn ids_from_label(&self, user: &str, image: &str) -> Option<[String; 2]> {
        if user != AGENT_USER {
            return None;
        }
        let label = containers::image_label(image, AGENT_IDS_LABEL).ok()??;
        let (uid, gid) = label.split_once(':')?;
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (numeric(uid) && numeric(gid)).then(|| [uid.to_string(), gid.to_string()])
    }

    /// The UID and GID `user` (`name`, `uid`, `name:group`, `uid:gid`) gets
    /// in the container, from the image's /etc/passwd and /etc/group copied
    /// out through the scratch dir: an archive call costs a fraction of the
    /// `id` exec, on every run. None when the files do not say (then `id`).
    fn ids_from_files(&self, user: &str) -> Option<[String; 2]> {
        let scratch = self.scratch.as_ref()?;
        let read = |path: &str| -> Option<String> {
            let host = format!("{scratch}/user-check");
            containers::copy_file_out(&self.id, path, &host).ok()?;
            let text = fs::read_to_string(&host).ok();
            let _ = fs::remove_file(&host);
            text
        };
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (who, group) = match user.split_once(':') {
            Some((who, group)) => (who, Some(group)),
            None => (user, None),
        };
        let passwd = read("/etc/passwd")?;
        // name:password:uid:gid:...; a numeric user is matched by its uid.
        let entry = passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() >= 4 && (f[0] == who || (numeric(who) && f[2] == who)));
        let uid = if numeric(who) {
            who.to_string()
        } else {
            entry.as_ref()?[2].to_string()
        };
        let gid = match group {
            Some(group) if numeric(group) => group.to_string(),
            Some(group) => read("/etc/group")?
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|f| f.len() >= 3 && f[0] == group)?[2]
                .to_string(),
            None => entry?[3].to_string(),
        };
        (numeric(&uid) && numeric(&gid)).then_some([uid, gid])
    }

    /// `path` relative to the worktree, as an absolute container path.
    fn resolve(&self, path: &str) -> String {
        if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{}/{path}", self.worktree.trim_end_matches('/'))
        }
    }

    fn exec_options(&self, request: &ExecRequest) -> Result<ExecOptions, String> {
        let argv = match &request.command {
            Command::Argv(argv) if argv.is_empty() => return Err("empty argv".into()),
            Command::Argv(argv) => argv.clone(),
            Command::Shell(line) => vec!["sh".into(), "-c".into(), line.clone()],
        };
        Ok(ExecOptions {
            argv,
            env: request.env.clone(),
            user: request.sudo.then(|| "root".to_string()),
            workdir: Some(
                request
                    .cwd
                    .as_deref()
                    .map_or(self.worktree.clone(), |c| self.resolve(c)),
            ),
            stdin: request.stdin.clone(),
            timeout_ms: request.timeout_ms,
        })
    }

    /// A fresh file name in the scratch dir, for staging copies.
    fn staging(&self) -> Result<String, String> {
        let scratch = self
            .scratch
            .as_deref()
            .ok_or("no scratch dir was granted")?;
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(format!("{scratch}/stage-{hex}"))
    }
}

impl GuestSandbox for ContainerSandbox {
    fn worktree_path(&self) -> String {
        self.worktree.clone()
    }

    fn state(&self) -> String {
        self.id.clone()
    }

    fn exec(&self, request: ExecRequest, sink: &OutputSink) -> Result<ExecResult, String> {
        let status = containers::exec(&self.id, &self.exec_options(&request)?, Some(sink))?;
        Ok(ExecResult {
            exit_code: status.code.unwrap_or(-1),
            timed_out: status.timed_out,
        })
    }

    fn interactive_exec(&self, request: ExecRequest) -> Result<i32, String> {
        let o = self.exec_options(&request)?;
        containers::exec_interactive(
            &self.id,
            &InteractiveExecOptions {
                argv: o.argv,
                env: o.env,
                user: o.user,
                workdir: o.workdir,
            },
        )
    }

    fn copy_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        containers::copy_in(&self.id, &host_path, &self.resolve(&sandbox_path))
    }

    fn copy_file_in(&self, host_path: String, sandbox_path: String) -> Result<(), String> {
        let dest = self.resolve(&sandbox_path);
        if let Some((parent, _)) = dest.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
            self.run_ok(
                "creating parent directories",
                sh("mkdir -p -- \"$0\"", &[parent]),
            )?;
        }
        containers::copy_in(&self.id, &host_path, &dest)
    }

    fn copy_file_out(&self, sandbox_path: String, host_path: String) -> Result<(), String> {
        containers::copy_file_out(&self.id, &self.resolve(&sandbox_path), &host_path)
    }

    fn read_file(&self, path: String) -> Result<Vec<u8>, String> {
        let stage = self.staging()?;
        containers::copy_file_out(&self.id, &self.resolve(&path), &stage)?;
        let data = fs::read(&stage).map_err(|e| format!("reading {path}: {e}"));
        let _ = fs::remove_file(&stage);
        data
    }

    fn write_file(&self, path: String, data: Vec<u8>) -> Result<(), String> {
        let stage = self.staging()?;
        fs::write(&stage, data).map_err(|e| format!("writing {path}: {e}"))?;
        let copied = containers::copy_in(&self.id, &stage, &self.resolve(&path));
        let _ = fs::remove_file(&stage);
        copied
    }

    fn stat(&self, path: String) -> Result<FileStat, String> {
        let full = self.resolve(&path);
        let out = self.run_ok(
            &format!("stat {path}"),
            sh(
                r#"stat -L -c '%s %Y %F' -- "$0" 2>/dev/null || stat -c '%s %Y %F' -- "$0" || exit 1; if [ -L "$0" ]; then echo link; else echo file; fi"#,
                &[&full],
            ),
        )?;
        let mut lines = out.lines();
        let first = lines.next().unwrap_or_default();
        let mut fields = first.splitn(3, ' ');
        let size = fields.next().and_then(|s| s.parse().ok());
        let mtime = fields.next().and_then(|s| s.parse::<u64>().ok());
        let kind = fields.next().unwrap_or_default();
        Ok(FileStat {
            is_file: kind.starts_with("regular"),
            is_directory: kind == "directory",
            is_symlink: Some(lines.next() == Some("link")),
            size,
            mtime_ms: mtime.map(|s| s * 1000),
        })
    }

    fn read_dir(&self, path: String) -> Result<Vec<String>, String> {
        let out = self.run_ok(
            &format!("reading {path}"),
            sh(r#"ls -A -1 -- "$0""#, &[&self.resolve(&path)]),
        )?;
        let mut names: Vec<String> = out.lines().map(String::from).collect();
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: String) -> Result<bool, String> {
        let status = self.run(sh(r#"[ -e "$0" ] || [ -L "$0" ]"#, &[&self.resolve(&path)]))?;
        Ok(status.code == Some(0))
    }

    fn mkdir(&self, path: String, recursive: bool) -> Result<(), String> {
        let flag = if recursive { "p" } else { "-" };
        self.run_ok(
            &format!("mkdir {path}"),
            sh(
                r#"if [ "$1" = p ]; then mkdir -p -- "$0"; else mkdir -- "$0"; fi"#,
                &[&self.resolve(&path), flag],
            ),
        )
        .map(drop)
    }

    fn remove(&self, path: String, recursive: bool, force: bool) -> Result<(), String> {
        // A symlink is removed itself; a directory needs `recursive` unless
        // empty; a missing path is an error unless `force`.
        let script = r#"if [ -d "$0" ] && [ ! -L "$0" ]; then
  if [ "$1" = r ]; then rm -rf -- "$0"; else rmdir -- "$0"; fi
elif [ -e "$0" ] || [ -L "$0" ]; then rm -f -- "$0"
elif [ "$2" != f ]; then echo "no such file or directory" >&2; exit 1
fi"#;
        self.run_ok(
            &format!("removing {path}"),
            sh(
                script,
                &[
                    &self.resolve(&path),
                    if recursive { "r" } else { "-" },
                    if force { "f" } else { "-" },
                ],
            ),
        )
        .map(drop)
    }

    /// It keeps no snapshots (`snapshots: false`): the host never asks.
    fn keep(&self, _name: String) -> Result<String, String> {
        Err("this provider keeps no snapshots".into())
    }

    fn close(&self) -> Result<(), String> {
        match containers::remove(&self.id) {
            // Idempotent: a container that is already gone is closed.
            Err(_) if !containers::list()?.contains(&self.id) => Ok(()),
            other => other,
        }
    }
}

// The export glue only links as a wasm component.
#[cfg(target_arch = "wasm32")]
export!(Provider);

#[cfg(test)]
mod tests {
    use super::*;

    const GIT_DIR: &str = "/src/My Repo/.git";

    fn options(config: &[(&str, &str)]) -> Vec<(String, String)> {
        config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_default_image_is_named_for_the_repository_directory() {
        assert_eq!(default_image("/src/My Repo/.git"), "sanddune:my-repo");
        assert_eq!(default_image("/src/app/.git/"), "sanddune:app");
        assert_eq!(default_image("/srv/bare.git"), "sanddune:bare.git");
    }

    #[test]
    fn options_parse_mounts_networks_and_the_selinux_label() {
        let config = Config::parse(
            GIT_DIR,
            &options(&[
                ("mount", "/home/u/.npm:/home/agent/.npm:ro"),
                ("mount", "/data:/data"),
                ("network", "a, b"),
                ("network", "c"),
                ("selinux-label", "none"),
            ]),
        )
        .unwrap();
        assert_eq!(config.image, "sanddune:my-repo");
        assert_eq!(config.networks, ["a", "b", "c"]);
        assert_eq!(config.mounts.len(), 2);
        assert!(config.mounts[0].read_only && !config.mounts[1].read_only);
        assert!(!config.mounts[0].selinux_relabel, "selinux-label=none");
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let err = |config: &[(&str, &str)]| Config::parse(GIT_DIR, &options(config)).err().unwrap();
        assert!(err(&[("imag", "x")]).contains("no option `imag`"));
        assert!(err(&[("mount", "/a")]).contains("SOURCE:TARGET"));
        assert!(err(&[("mount", "/a:rel")]).contains("absolute"));
        assert!(err(&[("mount", "/a:/b:rx")]).contains("SOURCE:TARGET"));
        assert!(err(&[("selinux-label", "Z")]).contains("z or none"));
    }
}
