//! `sanddune plugin add | list | remove | update`: installed plugins and the
//! grants their users approved.

use std::io::{IsTerminal, Read, Write};

use clap::Args;

use crate::capability::Capabilities;
use crate::error::{Error, Result};
use crate::plugin::agent::AgentProvider;
use crate::plugin::approval::{self, FileApproval};
use crate::plugin::sandbox::SandboxProvider;
use crate::plugin::store::{self, Record};
use crate::plugin::{Plugin, PluginKind, PluginRuntime, RuntimeConfig, builtin, cache};

/// Largest component `plugin add` downloads.
const MAX_DOWNLOAD: u64 = 256 << 20;

#[derive(Args)]
pub struct AddArgs {
    /// A component file, or an https URL (with --sha256).
    source: String,
    /// The component's expected sha256 (required for a URL).
    #[arg(long)]
    sha256: Option<String>,
    /// Install under this name instead of the one the plugin gives itself.
    #[arg(long)]
    name: Option<String>,
    /// Approve everything the plugin asks for, without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Approve only this (repeatable): program=NAME, scratch-dir,
    /// worktree=read-only|read-write, env=KEY, containers,
    /// http=https://HOST[:PORT].
    #[arg(long = "grant", conflicts_with = "yes")]
    grants: Vec<String>,
    /// Let this plugin win over the built-in of the same name.
    #[arg(long)]
    shadow_builtin: bool,
}

#[derive(Args)]
pub struct UpdateArgs {
    /// The installed plugin.
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::installed_plugins))]
    name: String,
    /// Update from here instead of the recorded source.
    #[arg(long)]
    from: Option<String>,
    #[arg(long)]
    sha256: Option<String>,
    /// Approve what the new version asks for beyond the old approval.
    #[arg(long, short = 'y')]
    yes: bool,
}

#[derive(Args)]
pub struct RemoveArgs {
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(super::completions::installed_plugins))]
    name: String,
}

#[derive(Args)]
pub struct ExportArgs {
    /// The built-in provider (see `sanddune plugin list` for installed ones).
    name: String,
    /// Where to write it (default: NAME.wasm in the current directory).
    #[arg(long, short = 'o')]
    output: Option<std::path::PathBuf>,
    /// Replace the file when it exists.
    #[arg(long)]
    force: bool,
}

/// Write a built-in's component, byte for byte: named on the command line,
/// the file is that built-in again (same grants, no approval asked).
pub fn export(args: ExportArgs) -> Result<()> {
    let bytes = builtin::get(&args.name).ok_or_else(|| {
        Error::input(format!(
            "`{}` is not a built-in plugin (built-ins: {})",
            args.name,
            builtin::names().join(", ")
        ))
    })?;
    let path = args
        .output
        .unwrap_or_else(|| format!("{}.wasm", args.name).into());
    if path.exists() && !args.force {
        return Err(Error::input(format!(
            "{} exists: pass --force to replace it",
            path.display()
        )));
    }
    std::fs::write(&path, bytes)
        .map_err(|e| Error::input(format!("cannot write {}: {e}", path.display())))?;
    println!(
        "wrote the built-in `{}` to {} ({} bytes, sha256 {})",
        args.name,
        path.display(),
        bytes.len(),
        cache::sha256_hex(bytes)
    );
    Ok(())
}

fn runtime() -> Result<(PluginRuntime, store::PluginStore)> {
    let config = RuntimeConfig::default();
    let dir = config.store_dir.clone().ok_or_else(|| {
        Error::input(
            "no directory for installed plugins: set HOME, XDG_DATA_HOME or SANDDUNE_DATA_DIR",
        )
    })?;
    Ok((PluginRuntime::new(config)?, store::PluginStore::open(dir)))
}

/// The component bytes from a file or a URL, checked against `sha256`.
fn fetch(source: &str, sha256: Option<&str>) -> Result<Vec<u8>> {
    let url = source.starts_with("https://") || source.starts_with("http://");
    let bytes = if url {
        if sha256.is_none() {
            return Err(Error::input(format!(
                "a plugin from a URL needs its hash: pass --sha256 HEX (the publisher's sha256 of {source})"
            )));
        }
        if source.starts_with("http://") && !loopback(source) {
            return Err(Error::input(format!(
                "{source} is plain http: only https URLs (or a loopback address) are fetched"
            )));
        }
        let response = ureq::get(source)
            .call()
            .map_err(|e| Error::input(format!("cannot download {source}: {e}")))?;
        let mut bytes = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_DOWNLOAD + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::input(format!("cannot download {source}: {e}")))?;
        if bytes.len() as u64 > MAX_DOWNLOAD {
            return Err(Error::input(format!(
                "{source} is larger than {} MiB: not a plugin",
                MAX_DOWNLOAD >> 20
            )));
        }
        bytes
    } else {
        std::fs::read(source).map_err(|e| Error::input(format!("cannot read {source}: {e}")))?
    };
    if let Some(expected) = sha256 {
        let got = cache::sha256_hex(&bytes);
        if !got.eq_ignore_ascii_case(expected.trim()) {
            return Err(Error::input(format!(
                "{source} has sha256 {got}, not the {expected} you pinned: refused, nothing was installed"
            )));
        }
    }
    Ok(bytes)
}

fn loopback(url: &str) -> bool {
    let host = url
        .trim_start_matches("http://")
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

/// What a component is and asks for.
struct Described {
    plugin: Plugin,
    kind: &'static str,
    name: String,
    version: String,
    /// Sandbox providers ask for capabilities; agent providers get none.
    requests: Option<crate::capability::Capabilities>,
}

async fn describe(runtime: &PluginRuntime, bytes: &[u8], source: &str) -> Result<Described> {
    let plugin = runtime.load_bytes(bytes, source, None)?;
    Ok(match plugin.kind {
        PluginKind::Sandbox => {
            let p = SandboxProvider::from_plugin(plugin).await?;
            let info = p.info().clone();
            Described {
                plugin: p.plugin().clone(),
                kind: "sandbox",
                name: info.name,
                version: info.version,
                requests: Some(info.capabilities),
            }
        }
        PluginKind::Agent => {
            let a = AgentProvider::from_plugin(plugin).await?;
            let info = a.info().clone();
            Described {
                plugin: a.plugin().clone(),
                kind: "agent",
                name: info.name,
                version: info.version,
                requests: None,
            }
        }
    })
}

fn show(d: &Described, source: &str) {
    let mut err = std::io::stderr();
    let _ = writeln!(
        err,
        "{} provider `{}` {} (sanddune:plugin@{}, sha256 {})\n  from {source}",
        d.kind, d.name, d.version, d.plugin.api_version, d.plugin.sha256
    );
    match &d.requests {
        Some(caps) => {
            let asks = caps.items();
            let _ = writeln!(
                err,
                "  asks for: {}",
                if asks.is_empty() {
                    "nothing".into()
                } else {
                    asks.join(", ")
                }
            );
        }
        None => {
            let _ = writeln!(
                err,
                "  asks for: nothing (agent providers are granted nothing)"
            );
        }
    }
    let _ = writeln!(err, "  imports:  {}", d.plugin.imports().join(", "));
}

pub async fn add(args: AddArgs) -> Result<()> {
    let (runtime, store) = runtime()?;
    let bytes = fetch(&args.source, args.sha256.as_deref())?;
    let described = describe(&runtime, &bytes, &args.source).await?;
    let name = args.name.clone().unwrap_or_else(|| described.name.clone());
    store::check_name(&name)?;
    if builtin::get(&name).is_some() && !args.shadow_builtin {
        return Err(Error::input(format!(
            "`{name}` is a built-in plugin: install this one under another name (--name) or let it win over the built-in (--shadow-builtin)"
        )));
    }
    if store.record(&name)?.is_some() {
        return Err(Error::input(format!(
            "a plugin named `{name}` is installed already: `sanddune plugin update {name} --from {}` replaces it",
            args.source
        )));
    }
    show(&described, &args.source);
    let requested = described.requests.clone();
    let grants = match &requested {
        None => Capabilities::default(),
        Some(caps) => {
            let policy = FileApproval::from_flags(args.yes, &args.grants)?;
            approval::approve(&name, caps, &policy).map_err(|e| match policy {
                // Asked and declined: say that nothing changed.
                FileApproval::Ask if std::io::stdin().is_terminal() => {
                    Error::input("not approved: nothing was installed")
                }
                _ => e,
            })?
        }
    };
    let record = Record {
        name: name.clone(),
        kind: described.kind.into(),
        version: described.version.clone(),
        api_version: described.plugin.api_version.clone(),
        sha256: described.plugin.sha256.clone(),
        source: args.source.clone(),
        shadows_builtin: args.shadow_builtin,
        grants,
        stamp: None,
    };
    store.put(&record, &bytes)?;
    println!(
        "installed {} provider `{name}` {}; use it as --{} {name}",
        record.kind, record.version, record.kind
    );
    Ok(())
}

pub async fn update(args: UpdateArgs) -> Result<()> {
    let (runtime, store) = runtime()?;
    let old = store.record(&args.name)?.ok_or_else(|| {
        Error::input(format!(
            "no installed plugin named `{}` (see `sanddune plugin list`)",
            args.name
        ))
    })?;
    let source = args.from.clone().unwrap_or_else(|| old.source.clone());
    let bytes = fetch(&source, args.sha256.as_deref())?;
    let described = describe(&runtime, &bytes, &source).await?;
    if described.kind != old.kind {
        return Err(Error::input(format!(
            "`{}` is installed as a {} provider, and {source} is not one: refused",
            args.name, old.kind
        )));
    }
    if described.plugin.sha256 == old.sha256 {
        println!("`{}` is up to date ({})", args.name, old.version);
        return Ok(());
    }
    show(&described, &source);
    let mut grants = old.grants.clone();
    if let Some(caps) = &described.requests {
        let more = old.grants.missing(caps);
        if !more.is_empty() {
            eprintln!("  beyond what you approved before: {}", more.join(", "));
            let approved = args.yes
                || (std::io::stdin().is_terminal()
                    && approval::confirm(&format!(
                        "approve the new requests of `{}`?",
                        args.name
                    ))?);
            if !approved {
                return Err(Error::input(format!(
                    "the new version of `{}` asks for more ({}) and was not approved (--yes approves it): the installed version stays",
                    args.name,
                    more.join(", ")
                )));
            }
            grants = caps.clone();
        }
    }
    let record = Record {
        version: described.version.clone(),
        api_version: described.plugin.api_version.clone(),
        sha256: described.plugin.sha256.clone(),
        source,
        grants,
        ..old
    };
    store.put(&record, &bytes)?;
    println!("updated `{}` to {}", record.name, record.version);
    Ok(())
}

pub fn list() -> Result<()> {
    let (_, store) = runtime()?;
    let records = store.list()?;
    if records.is_empty() {
        println!("no installed plugins ({})", store.dir().display());
        return Ok(());
    }
    for r in records {
        let mut granted = r.grants.items();
        if granted.is_empty() {
            granted.push("nothing".into());
        }
        println!(
            "{:<20} {:<8} {:<10} {}  granted: {}{}",
            r.name,
            r.kind,
            r.version,
            &r.sha256[..12],
            granted.join(", "),
            if r.shadows_builtin {
                " (shadows the built-in)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

pub fn remove(args: RemoveArgs) -> Result<()> {
    let (_, store) = runtime()?;
    if !store.remove(&args.name)? {
        return Err(Error::input(format!(
            "no installed plugin named `{}` (see `sanddune plugin list`)",
            args.name
        )));
    }
    println!("removed `{}`", args.name);
    Ok(())
}
