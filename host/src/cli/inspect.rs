//! `sanddune plugin inspect`: what a plugin says it is, what it asks for,
//! and what its component really imports.

use clap::Args;

use crate::capability::DirectoryAccess;
use crate::error::Result;
use crate::plugin::agent::AgentProvider;
use crate::plugin::sandbox::{SandboxKind, SandboxProvider};
use crate::plugin::{Plugin, PluginKind, PluginRef, PluginRuntime, RuntimeConfig};

#[derive(Args)]
pub struct InspectArgs {
    /// A built-in or installed plugin name, or a component file.
    plugin: String,
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

pub async fn inspect(args: InspectArgs) -> Result<()> {
    let runtime = PluginRuntime::new(RuntimeConfig::default())?;
    let plugin = runtime.load(&PluginRef::parse(&args.plugin), None)?;
    let header = |p: &Plugin| {
        println!("source:       {}", p.source);
        println!("sha256:       {}", p.sha256);
        println!(
            "api:          sanddune:plugin@{} (contract {}; this sanddune speaks {})",
            p.api_version,
            p.api,
            crate::plugin::ApiVersion::supported()
        );
        if let crate::plugin::Approval::Approved(approved) = &p.approval {
            let granted = approved.items();
            println!(
                "approved:     {} (installed; it gets no more than this)",
                if granted.is_empty() {
                    "nothing".into()
                } else {
                    granted.join(", ")
                }
            );
        }
    };
    match plugin.kind {
        PluginKind::Sandbox => {
            let provider = SandboxProvider::from_plugin(plugin).await?;
            let info = provider.info();
            println!("sandbox provider `{}` {}", info.name, info.version);
            println!("  {}", info.description);
            header(provider.plugin());
            let kind = match info.kind {
                SandboxKind::BindMount => "bind-mount (default branch strategy: head)",
                SandboxKind::Isolated => "isolated (default branch strategy: merge-to-head)",
            };
            println!("kind:         {kind}");
            println!("options:");
            if info.config.is_empty() {
                println!("  none");
            }
            for opt in &info.config {
                let default = opt
                    .default_value
                    .as_deref()
                    .map(|d| format!(" (default {d})"))
                    .unwrap_or_default();
                println!("  {}{default}: {}", opt.name, opt.description);
            }
            let caps = &info.capabilities;
            if caps.containers {
                // Taken by the host before the provider sees them (ADR 0022).
                println!(
                    "containment (applied by the host, docs/security.md): egress=allow-all|none|deny-all|DOMAINS, cpus=N, memory=SIZE, pids=N, disk=SIZE"
                );
                println!(
                    "snapshot (kept by the host, docs/guide/snapshots.md): snapshot=auto|off, snapshot.inputs=PATH[,PATH...]"
                );
            } else if caps.jail {
                // A jail takes the egress policy; limits it refuses (ADR 0036).
                println!(
                    "containment (applied by the host, docs/security.md): egress=allow-all|none|deny-all|DOMAINS"
                );
            }
            println!("requests:");
            println!("  programs:   {}", list(&caps.programs));
            println!(
                "  scratch dir: {}",
                if caps.scratch_dir { "yes" } else { "no" }
            );
            let worktree = match caps.worktree {
                DirectoryAccess::None => "no",
                DirectoryAccess::ReadOnly => "read-only",
                DirectoryAccess::ReadWrite => "read-write",
            };
            println!("  worktree:   {worktree}");
            if !caps.http.is_empty() || caps.http_options.is_empty() {
                println!("  http:       {}", list(&caps.http));
            }
            for option in &caps.http_options {
                let default = info
                    .config
                    .iter()
                    .find(|o| &o.name == option)
                    .and_then(|o| o.default_value.as_deref())
                    .map(|d| format!(" (default {d})"))
                    .unwrap_or_default();
                println!("  http:       the origin of option `{option}`{default}");
            }
            println!("  env keys:   {}", list(&caps.env_keys));
            println!(
                "  containers: {}",
                if caps.containers { "yes" } else { "no" }
            );
            if caps.pods {
                // The user's choice, read by the host (ADR 0024).
                let target = match crate::capability::pods::default_target() {
                    Some((context, namespace)) => {
                        format!("namespace `{namespace}` of context `{context}`")
                    }
                    None => "no kubeconfig found".into(),
                };
                println!(
                    "  pods:       yes, through your kubeconfig in one namespace: by default {target}; --sandbox-opt context= and namespace= choose another"
                );
                println!(
                    "              verbs: create, get, list, delete pods; create pods/exec; create, get, list, delete sandboxclaims; every pod labelled with the run and refused privileged, hostPath, hostNetwork, hostPID and added capabilities"
                );
            }
            if caps.jail {
                println!(
                    "  jail:       yes: bubblewrap, which the host builds: the system read-only, HOME and /tmp in the scratch dir, the worktree and declared mounts, the agent's own git dir, new namespaces, no capabilities"
                );
            }
            print_imports(provider.plugin());
        }
        PluginKind::Agent => {
            let agent = AgentProvider::from_plugin(plugin).await?;
            let info = agent.info();
            println!("agent provider `{}` {}", info.name, info.version);
            println!("  {}", info.description);
            header(agent.plugin());
            println!("program:      {}", info.program);
            println!(
                "model:        {}",
                info.default_model
                    .as_deref()
                    .unwrap_or("(the agent's default)")
            );
            println!(
                "sessions:     {}",
                if info.session_files {
                    "resumable session files"
                } else {
                    "no session files"
                }
            );
            println!("options:");
            if info.options.is_empty() {
                println!("  none");
            }
            for opt in &info.options {
                let allowed = if opt.allowed_values.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", opt.allowed_values.join("|"))
                };
                println!("  {}{allowed}: {}", opt.name, opt.description);
            }
            println!("env:");
            if info.env.is_empty() {
                println!("  none");
            }
            for req in &info.env {
                println!("  {}: {}", req.any_of.join(" or "), req.description);
            }
            println!("optional env: {}", list(&info.optional_env));
            // What a container sandbox's egress=deny-all or domain list
            // lets through for this agent (ADR 0022): what it declares.
            let hosts: Vec<String> = info
                .egress_hosts
                .iter()
                .cloned()
                .chain(["the host of each http(s) URL in its env".to_string()])
                .collect();
            println!("egress hosts: {}", hosts.join(", "));
            print_imports(agent.plugin());
        }
    }
    Ok(())
}

fn print_imports(plugin: &Plugin) {
    println!("imports (what the component can call):");
    for import in plugin.imports() {
        println!("  {import}");
    }
}
