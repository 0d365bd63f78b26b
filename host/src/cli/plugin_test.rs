//! `sanddune plugin test`: the conformance kit, one line per check and a
//! non-zero exit when any check fails.

use std::path::PathBuf;

use clap::Args;

use crate::conformance::{self, Options};
use crate::error::{Error, Result};
use crate::plugin::PluginRef;

#[derive(Args)]
pub struct PluginTestArgs {
    /// A built-in plugin name or a component file.
    plugin: String,
    /// KEY=VALUE; repeatable. Options for the sandbox provider's `create`.
    #[arg(long = "sandbox-opt", value_parser = super::key_value)]
    sandbox_opt: Vec<(String, String)>,
    /// A real run's agent stdout (one event per line), to check the usage
    /// events an agent provider's parser makes of it.
    #[arg(long)]
    transcript: Option<PathBuf>,
    #[command(flatten)]
    approval: super::ApprovalArgs,
}

pub async fn plugin_test(args: PluginTestArgs) -> Result<()> {
    let runtime = args.approval.runtime()?;
    let options = Options {
        sandbox_config: args.sandbox_opt,
        transcript: args.transcript,
    };
    let report =
        conformance::test_plugin(&runtime, &PluginRef::parse(&args.plugin), &options).await?;
    println!("{} `{}`:", report.kind.noun(), report.plugin);
    for line in report.lines() {
        println!("{line}");
    }
    match report.failures() {
        0 => {
            println!("all {} checks passed or were skipped", report.checks.len());
            Ok(())
        }
        n => Err(Error::Plugin(format!(
            "`{}` failed {n} of {} conformance checks",
            args.plugin,
            report.checks.len()
        ))),
    }
}
