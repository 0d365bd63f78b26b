//! `docs/reference/cli.md`: every command of the `sanddune` CLI with its
//! about text, arguments and options, rendered as markdown from the clap
//! definitions themselves, so the page cannot drift from the binary
//! (`tests/cli_reference.rs` compares the two).

use clap::{Arg, ArgAction, Command, CommandFactory};

/// The CLI reference page, from the clap definitions.
pub fn reference_markdown() -> String {
    let mut root = super::Cli::command();
    root.build();
    let mut commands = Vec::new();
    collect(&root, &mut commands);

    let mut out = String::new();
    out.push_str("# CLI reference\n\n");
    out.push_str(
        "Generated from the clap definitions in `host/src/cli/` by \
         `sanddune::cli::reference_markdown()`; do not edit by hand. \
         `tests/cli_reference.rs` fails when this page is out of date; \
         regenerate it with `SANDDUNE_BLESS=1 cargo test --test cli_reference`.\n\n",
    );
    if let Some(about) = root.get_about() {
        out.push_str(&format!("`sanddune`: {}\n\n", one_line(&about.to_string())));
    }
    out.push_str(
        "Every command also takes `-h`/`--help`; `sanddune --version` prints the version. \
         Exit codes: 0 success, 1 a failure (the agent, a hook, a plugin), \
         2 bad input (nothing was changed), 130 interrupted (Ctrl-C or SIGTERM).\n\n",
    );
    for (path, cmd) in &commands {
        let about = cmd
            .get_about()
            .map(|a| format!(": {}", one_line(&a.to_string())))
            .unwrap_or_default();
        out.push_str(&format!("- [`{path}`](#{}){about}\n", anchor(path)));
    }
    for (path, cmd) in &commands {
        out.push('\n');
        render_command(path, cmd, &mut out);
    }
    out
}

/// Every command below `cmd` but `help`, depth first, with its full name.
fn collect<'a>(cmd: &'a Command, out: &mut Vec<(String, &'a Command)>) {
    let prefix = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" || sub.is_hide_set() {
            continue;
        }
        out.push((format!("{prefix} {}", sub.get_name()), sub));
        collect(sub, out);
    }
}

fn render_command(path: &str, cmd: &Command, out: &mut String) {
    out.push_str(&format!("## `{path}`\n\n"));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&paragraphs(&about.to_string()));
        out.push_str("\n\n");
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    out.push_str(&format!("    {usage}\n"));

    let subcommands: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
        .collect();
    if !subcommands.is_empty() {
        out.push_str("\n| command | what it does |\n| --- | --- |\n");
        for sub in subcommands {
            let name = format!("{path} {}", sub.get_name());
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            out.push_str(&format!(
                "| [`{name}`](#{}) | {} |\n",
                anchor(&name),
                cell(&about)
            ));
        }
    }

    let shown: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    let positionals: Vec<&Arg> = shown
        .iter()
        .copied()
        .filter(|a| a.is_positional())
        .collect();
    let options: Vec<&Arg> = shown
        .iter()
        .copied()
        .filter(|a| !a.is_positional())
        .collect();
    if !positionals.is_empty() {
        out.push_str("\n| argument | meaning |\n| --- | --- |\n");
        for arg in positionals {
            out.push_str(&format!(
                "| `{}` | {} |\n",
                value_names(arg).join(" "),
                cell(&describe(arg))
            ));
        }
    }
    if !options.is_empty() {
        out.push_str("\n| option | meaning |\n| --- | --- |\n");
        for arg in options {
            out.push_str(&format!(
                "| `{}` | {} |\n",
                flag(arg).replace('|', "\\|"),
                cell(&describe(arg))
            ));
        }
    }
}

/// `-y, --yes` or `--sandbox <SANDBOX>`.
fn flag(arg: &Arg) -> String {
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let mut flag = names.join(", ");
    if arg.get_action().takes_values() {
        for value in value_names(arg) {
            flag.push(' ');
            flag.push_str(&value);
        }
    }
    flag
}

/// `<NAME>` for each value the argument takes (`[NAME]` when optional).
fn value_names(arg: &Arg) -> Vec<String> {
    let names: Vec<String> = match arg.get_value_names() {
        Some(names) => names.iter().map(|n| n.to_string()).collect(),
        None => vec![arg.get_id().as_str().to_uppercase()],
    };
    let optional = arg.is_positional() && !arg.is_required_set();
    names
        .into_iter()
        .map(|n| {
            if optional {
                format!("[{n}]")
            } else {
                format!("<{n}>")
            }
        })
        .collect()
}

/// The help text, then what clap knows beyond it: the values allowed, the
/// default, whether it repeats, whether it is required.
fn describe(arg: &Arg) -> String {
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| one_line(&h.to_string()))
        .unwrap_or_default();
    let mut notes = Vec::new();
    if arg.is_required_set() && !arg.is_positional() {
        notes.push("required".to_string());
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !possible.is_empty() && matches!(arg.get_action(), ArgAction::Set | ArgAction::Append) {
        notes.push(format!("one of {}", possible.join(", ")));
    }
    // A flag's `false` is no news, nor a default the help already gives.
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let said = defaults.is_empty()
        || text.contains("default:")
        || defaults
            .iter()
            .any(|d| text.contains(&format!("default {d}")));
    if !said && arg.get_action().takes_values() && !arg.is_hide_default_value_set() {
        let defaults: Vec<String> = defaults.iter().map(|d| format!("`{d}`")).collect();
        notes.push(format!("default {}", defaults.join(", ")));
    }
    if matches!(arg.get_action(), ArgAction::Append) && !text.contains("repeatable") {
        notes.push("repeatable".to_string());
    }
    if !notes.is_empty() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("({})", notes.join("; ")));
    }
    text
}

/// Help text on one line: its lines joined by spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Help text as markdown paragraphs: blank-line separated, each on one line,
/// with `<` escaped so `<TAG>` is text, not HTML.
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|p| escape(&one_line(p)))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A table cell: one line, `|` and `<` escaped.
fn cell(text: &str) -> String {
    escape(&one_line(text)).replace('|', "\\|")
}

/// `<` outside code spans as `\<`, so markdown shows it instead of reading
/// an HTML tag.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
        }
        if c == '<' && !in_code {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The GitHub anchor of a `## `{path}`` heading.
fn anchor(path: &str) -> String {
    path.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_option_is_in_the_reference() {
        let page = reference_markdown();
        for heading in [
            "## `sanddune run`",
            "## `sanddune plugin add`",
            "## `sanddune workflow run`",
            "## `sanddune docker build-image`",
            "## `sanddune gc`",
        ] {
            assert!(page.contains(heading), "{heading} missing");
        }
        for option in [
            "`--sandbox <SANDBOX>`",
            "`-y, --yes`",
            "`--forget-unreachable`",
        ] {
            assert!(page.contains(option), "{option} missing");
        }
        assert!(!page.contains("## `sanddune help`"));
    }

    #[test]
    fn markup_in_help_is_escaped() {
        assert_eq!(cell("a|b <TAG> `<x>`"), "a\\|b \\<TAG> `<x>`");
        assert_eq!(anchor("sanddune plugin add"), "sanddune-plugin-add");
    }
}
