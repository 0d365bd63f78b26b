//! The `jail` capability (contract 0.7): host programs run in a bubblewrap
//! jail whose command line the host builds (ADR 0036). The provider names
//! the program, its env, its cwd and which granted paths to bind; the host
//! decides what else the jail holds (the system directories read-only, a
//! private HOME and `/tmp` in the provider's scratch dir, new namespaces,
//! no capabilities), its network (the user's egress policy, through the
//! sandbox's link as for containers: ADR 0031), and lays the agent's own git
//! dir over the repository's (ADR 0025). A provider cannot widen any of it.

use std::path::{Path, PathBuf};

use super::PluginState;
use super::containers::{ContainerGrant, Containment, Mount, checked_binds};
use super::egress::PROXY_PORT;
use super::link::{MOUNT as LINK_MOUNT, SandboxLink};
use super::process::Child;

/// The host's variables a jailed program gets; HOME and TMPDIR are the
/// jail's.
const PASSED_ENV: &[&str] = &["PATH", "USER", "LOGNAME", "LANG", "TERM"];

/// System directories every jail sees read-only, when the machine has them.
const SYSTEM_DIRS: &[&str] = &["/usr", "/etc", "/opt"];

/// Top-level entries that merged-/usr systems make links into `/usr`, and
/// others keep as directories: a link is recreated, a directory bound.
const SYSTEM_LINKS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Where a resolver's files live when `/etc/resolv.conf` links out of
/// `/etc`: bound under `egress=allow-all`, the one policy with DNS.
const RESOLVER_DIRS: &[&str] = &["/run/systemd/resolve", "/run/resolvconf"];

/// Under the terminal, bwrap ignores the keyboard's signals (it would die of
/// a Ctrl-C, and the jail with it) and the program gets them back: `env`
/// resets them to their defaults before it runs the program.
const KEYBOARD_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP];
const DEFAULT_SIGNALS: [&str; 2] = ["env", "--default-signal=INT,QUIT,TSTP"];

/// What to run in a jail (the WIT's `jail-options`).
#[derive(Clone, Debug, Default)]
pub struct JailOptions {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    pub binds: Vec<Mount>,
    pub timeout_ms: Option<u64>,
    pub terminal: bool,
}

/// What a jail on this machine is (the WIT's `jail-info`).
#[derive(Clone, Debug)]
pub struct JailInfo {
    pub version: String,
}

/// One plugin instance's jails: the link they share, opened at the first
/// spawn that needs it and closed with the instance.
#[derive(Default)]
pub struct JailState {
    link: Option<SandboxLink>,
}

impl PluginState {
    /// The probe of this instance's jails (see [`probe`]), when it may have
    /// them. It needs no scratch dir: a preflight has none.
    pub fn jail_probe(
        &self,
    ) -> Result<impl Future<Output = Result<JailInfo, String>> + Send + 'static, String> {
        if self.grants.jail.is_none() {
            return Err(self.not_granted());
        }
        Ok(probe())
    }

    /// Start `options.argv` in a new jail.
    pub fn jail_spawn(&mut self, options: JailOptions) -> Result<Child, String> {
        let (grant, scratch) = self.jail_grant()?;
        let (grant, scratch) = (grant.clone(), scratch.to_path_buf());
        let home = jail_dir(&scratch, "home")?;
        let tmp = jail_dir(&scratch, "tmp")?;
        if options.argv.first().is_none_or(String::is_empty) {
            return Err("refused: an empty argv".into());
        }
        check_jail_path("cwd", &options.cwd)?;
        for bind in &options.binds {
            if Path::new(&bind.target) == Path::new("/") {
                return Err(format!(
                    "refused: bind of `{}` over the jail's root",
                    bind.source
                ));
            }
        }
        let mut binds = checked_binds(&options.binds, &grant)?;
        // bwrap mounts in order, so a bind must come after the one it lies
        // in (the shield's objects inside the agent git dir); an engine
        // sorts them the same way.
        binds.sort_by_key(|b| b.target.components().count());
        let containment = &grant.containment;
        let shares_network = !containment.decides_network();
        if self.jail.link.is_none() && !shares_network {
            let (egress, gateway) = (&containment.egress_log, &containment.gateway);
            if egress.is_some() || gateway.is_some() {
                self.jail.link = Some(
                    SandboxLink::open(&grant.run_id, egress.clone(), gateway.clone())
                        .map_err(|e| format!("cannot open the sandbox's link to the host: {e}"))?,
                );
            }
        }
        let link = self.jail.link.as_ref().filter(|_| !shares_network);

        let mut args = namespaces(options.terminal, !shares_network);
        args.extend(system_args());
        if shares_network {
            for dir in RESOLVER_DIRS {
                args.extend(["--ro-bind-try".into(), dir.to_string(), dir.to_string()]);
            }
        }
        args.extend(bind_args("--bind", &tmp, Path::new("/tmp")));
        args.extend(bind_args("--bind", &home, &home));
        if let Some(link) = link {
            args.extend(bind_args("--ro-bind", link.dir(), Path::new(LINK_MOUNT)));
        }
        for bind in &binds {
            let how = if bind.read_only {
                "--ro-bind"
            } else {
                "--bind"
            };
            args.extend(bind_args(how, &bind.source, &bind.target));
        }
        args.extend(["--chdir".into(), options.cwd.clone(), "--".into()]);
        if options.terminal {
            args.extend(DEFAULT_SIGNALS.map(String::from));
        }
        if let Some(link) = link {
            // The forwarder listens in the jail's own network namespace,
            // then runs the program and ends with it.
            args.extend(link.forwarder_argv());
            args.push("--".into());
        }
        args.extend(options.argv.iter().cloned());

        let bwrap = find_bwrap()?;
        let mut cmd = tokio::process::Command::new(&bwrap);
        cmd.args(&args).env_clear();
        for key in PASSED_ENV {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        for (key, value) in &options.env {
            cmd.env(key, value);
        }
        cmd.env("HOME", &home).env("TMPDIR", "/tmp");
        if containment.egress_log.is_some() && link.is_some() {
            let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
            for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                cmd.env(key, &proxy);
            }
            cmd.env("NO_PROXY", "localhost,127.0.0.1,::1")
                .env("no_proxy", "localhost,127.0.0.1,::1");
        }
        die_with_sanddune(&mut cmd, options.terminal);
        super::process::start(self, cmd, "bwrap", options.terminal, options.timeout_ms)
    }

    fn not_granted(&self) -> String {
        format!(
            "plugin `{}` may not run programs in a jail: it was not granted `jail`",
            self.plugin
        )
    }

    fn jail_grant(&self) -> Result<(&ContainerGrant, &Path), String> {
        let grant = self
            .grants
            .jail
            .as_ref()
            .ok_or_else(|| self.not_granted())?;
        let scratch = self.grants.scratch_dir.as_deref().ok_or_else(|| {
            format!(
                "plugin `{}` needs `scratch-dir` for a jail's HOME and /tmp",
                self.plugin
            )
        })?;
        Ok((grant, scratch))
    }
}

/// bubblewrap's version once a fixed jail ran `true`: the check a
/// provider's preflight makes.
async fn probe() -> Result<JailInfo, String> {
    let bwrap = find_bwrap()?;
    let version = output(&bwrap, &["--version"]).await?;
    let version = version
        .trim()
        .strip_prefix("bubblewrap ")
        .unwrap_or(version.trim())
        .to_string();
    let mut args = namespaces(false, true);
    args.extend(system_args());
    args.extend(["--".into(), "true".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    output(&bwrap, &args).await.map_err(|e| {
        format!(
            "bubblewrap {version} cannot build a jail here ({e}): user namespaces may be off for your user; enable them (`sysctl kernel.unprivileged_userns_clone=1`, or on Ubuntu `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
        )
    })?;
    Ok(JailInfo { version })
}

/// Whether a jail under the provider options `config` shares the host's
/// network: under `egress=allow-all` (the default) with no set-up policy
/// of its own. Otherwise it has a network of its own, with the link.
pub fn shares_host_network(config: &[(String, String)]) -> bool {
    Containment::take_from(&mut config.to_vec()).is_ok_and(|c| !c.decides_network())
}

/// The namespaces and process settings of every jail: its own user, PID,
/// IPC, UTS and cgroup namespaces (and network unless it shares the
/// host's), no capabilities, gone when bwrap goes, and a session of its own
/// (so it cannot push keystrokes into the user's terminal) unless it gets
/// the terminal.
fn namespaces(terminal: bool, own_network: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sanddune",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
    ]
    .map(String::from)
    .into();
    if own_network {
        args.push("--unshare-net".into());
    }
    if !terminal {
        args.push("--new-session".into());
    }
    args
}

/// The system directories read-only, `/dev` and a new `/proc`.
fn system_args() -> Vec<String> {
    let mut args = Vec::new();
    for dir in SYSTEM_DIRS {
        if Path::new(dir).is_dir() {
            args.extend(["--ro-bind".into(), dir.to_string(), dir.to_string()]);
        }
    }
    for entry in SYSTEM_LINKS {
        let path = Path::new(entry);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    args.extend([
                        "--symlink".into(),
                        target.display().to_string(),
                        entry.to_string(),
                    ]);
                }
            }
            Ok(m) if m.is_dir() => {
                args.extend(["--ro-bind".into(), entry.to_string(), entry.to_string()]);
            }
            _ => {}
        }
    }
    args.extend(["--dev", "/dev", "--proc", "/proc"].map(String::from));
    args
}

fn bind_args(how: &str, source: &Path, target: &Path) -> [String; 3] {
    [
        how.to_string(),
        source.display().to_string(),
        target.display().to_string(),
    ]
}

/// `<scratch>/<name>`, which the provider made: a directory, not a link
/// (bwrap would follow one anywhere).
fn jail_dir(scratch: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = scratch.join(name);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(format!(
            "refused: the jail's {name} `{}` is not a directory",
            dir.display()
        )),
        Err(e) => Err(format!(
            "the jail's {name} `{}` does not exist ({e}): create it in the scratch dir first",
            dir.display()
        )),
    }
}

/// An absolute path in the jail with no `..`.
fn check_jail_path(what: &str, path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if !p.is_absolute() || p.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(format!(
            "refused: {what} `{path}` is not an absolute path without `..`"
        ));
    }
    Ok(())
}

/// `bwrap` on the host's PATH.
fn find_bwrap() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "bubblewrap (`bwrap`) is not on PATH: install it (Debian and Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; Arch: `pacman -S bubblewrap`)".into()
        })
}

/// Should sanddune die without ending the jail (SIGKILL gives it no chance),
/// bwrap gets SIGKILL too, and `--die-with-parent` ends everything inside.
/// Under the terminal bwrap ignores the keyboard's signals (see
/// [`KEYBOARD_SIGNALS`]).
fn die_with_sanddune(cmd: &mut tokio::process::Command, terminal: bool) {
    // SAFETY: prctl and signal are async-signal-safe. The death signal
    // follows the thread that forks: a runtime worker, alive as long as
    // the run.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if terminal {
                for signal in KEYBOARD_SIGNALS {
                    libc::signal(signal, libc::SIG_IGN);
                }
            }
            Ok(())
        });
    }
}

/// stdout of `program args`, or an error with its stderr.
async fn output(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jail_has_its_own_namespaces_and_a_session_unless_it_gets_the_terminal() {
        let piped = namespaces(false, true);
        for flag in [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
        ] {
            assert!(piped.iter().any(|a| a == flag), "{flag} in {piped:?}");
        }
        let shared = namespaces(true, false);
        assert!(
            !shared
                .iter()
                .any(|a| a == "--unshare-net" || a == "--new-session")
        );
    }

    #[test]
    fn the_system_is_read_only_and_the_home_is_not_there() {
        let args = system_args();
        assert!(args.windows(3).any(|w| w == ["--ro-bind", "/usr", "/usr"]));
        assert!(!args.iter().any(|a| a == "--bind"));
        let home = std::env::var("HOME").unwrap_or_default();
        if !home.is_empty() && home != "/" {
            assert!(!args.iter().any(|a| a == &home), "{args:?}");
        }
    }

    #[test]
    fn paths_in_the_jail_are_absolute_without_parents() {
        assert!(check_jail_path("cwd", "/w/repo").is_ok());
        assert!(check_jail_path("cwd", "w/repo").is_err());
        assert!(check_jail_path("cwd", "/w/../etc").is_err());
    }

    #[test]
    fn a_jail_dir_that_is_a_link_is_refused() {
        let scratch = tempfile::tempdir().unwrap();
        assert!(
            jail_dir(scratch.path(), "home")
                .unwrap_err()
                .contains("does not exist")
        );
        std::os::unix::fs::symlink("/etc", scratch.path().join("home")).unwrap();
        assert!(
            jail_dir(scratch.path(), "home")
                .unwrap_err()
                .contains("not a directory")
        );
        std::fs::create_dir(scratch.path().join("tmp")).unwrap();
        assert!(jail_dir(scratch.path(), "tmp").is_ok());
    }
}
