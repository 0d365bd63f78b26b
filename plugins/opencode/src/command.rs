//! Command lines for `opencode`, and validation of the agent options.

pub const PROGRAM: &str = "opencode";
pub const VARIANT: &str = "variant";
pub const OPTIONS: [&str; 1] = [VARIANT];

/// `opencode run` takes the message on argv. Linux refuses a single argv
/// string of 128 KiB (MAX_ARG_STRLEN); 120 KiB leaves room for the rest of the
/// command line and the environment.
pub const MAX_PROMPT_LEN: usize = validate::MAX_ARGV_PROMPT;

/// A session is carried between sandboxes by the print command's export
/// and import (see `session`), which the TUI does not run.
pub const NO_RESUME: &str =
    "an opencode session resumes in a run (sanddune run --resume), not in an interactive session";

use crate::session;
use sanddune_agent_sdk::validate::{self, push_flag};
pub use sanddune_agent_sdk::{Command, Config, Request};

/// opencode's whole config as JSON, merged over its config files.
pub const CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// The validated request fields that become flags.
#[derive(Debug, Default)]
struct Flags<'a> {
    model: Option<&'a str>,
    variant: Option<&'a str>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    if let Some(id) = &request.resume_session
        && !session::valid_id(id)
    {
        return Err(format!(
            "invalid opencode session id {id:?}: expected ses_..."
        ));
    }
    let model = request.model.as_deref().map(check_model).transpose()?;
    let [variant] = validate::options(PROGRAM, &request.options, OPTIONS)?;
    variant.map(check_variant).transpose()?;
    Ok(Flags { model, variant })
}

/// opencode splits `-m` at the first `/` into provider and model id (the id
/// may hold more slashes, as in `openrouter/anthropic/claude-sonnet-4.5`).
fn check_model(model: &str) -> Result<&str, String> {
    if model.trim().is_empty() {
        return Err("the model for opencode is empty".into());
    }
    let valid = match model.split_once('/') {
        Some((provider, id)) => {
            !provider.is_empty()
                && !provider.starts_with('-')
                && !id.is_empty()
                && !model.contains(|c: char| c.is_whitespace() || c == '\0')
        }
        None => false,
    };
    if valid {
        Ok(model)
    } else {
        Err(format!(
            "invalid model {model:?} for opencode: expected provider/model, e.g. anthropic/claude-sonnet-4-5"
        ))
    }
}

/// Variants are per provider and model (`low`, `high`, `max`, `xhigh`,
/// `minimal`, `none`, or ones defined in opencode's config), so the value is
/// free-form; only what cannot be a variant name is refused.
fn check_variant(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("the variant option for opencode is empty".into());
    }
    if value.starts_with('-') || value.contains(|c: char| c.is_whitespace() || c == '\0') {
        return Err(format!(
            "invalid variant {value:?} for opencode: expected a variant name such as high or max"
        ));
    }
    Ok(())
}

/// What a prompt must satisfy to travel on argv.
fn check_argv_prompt(prompt: &str) -> Result<(), String> {
    validate::argv_prompt(prompt, PROGRAM, MAX_PROMPT_LEN, " bytes")
}

/// One unattended iteration:
/// `opencode run --format json [-m provider/model] [--variant V] [--auto]
/// [--] <prompt>`. The message is the last argument; stdin stays empty (a
/// closed stdin, so `opencode run` does not wait on it).
pub fn print_command(request: &Request) -> Result<Command, String> {
    // An empty prompt is refused here rather than left to opencode's
    // "You must provide a message or a command".
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let flags = flags(request)?;
    check_argv_prompt(&request.prompt)?;
    let mut argv: Vec<String> = [PROGRAM, "run", "--format", "json"]
        .map(String::from)
        .to_vec();
    push_flag(&mut argv, "-m", flags.model);
    push_flag(&mut argv, "--variant", flags.variant);
    // Without --auto, `opencode run` rejects every permission request.
    if request.skip_permissions {
        argv.push("--auto".into());
    }
    push_flag(&mut argv, "--session", request.resume_session.as_deref());
    // opencode parses with yargs' populate-- and appends what follows `--`.
    validate::push_prompt_arg(&mut argv, &request.prompt);
    let resume = request.resume_session.clone().unwrap_or_default();
    let wrapper = ["sh", "-c", &wrapper(), "sh", &resume].map(String::from);
    Ok(Command {
        argv: wrapper.into_iter().chain(argv).collect(),
        stdin: None,
    })
}

/// POSIX sh around `opencode run` (`$1` the session to resume or empty,
/// the rest opencode's command line): import the resumed session's export
/// first; stream opencode's output; then export the session it names on
/// its first line where session capture finds it; exit with opencode's
/// status.
fn wrapper() -> String {
    let dir = session::DIR;
    format!(
        r#"resume=$1; shift; dir="$HOME/{dir}"
if [ -n "$resume" ] && ! opencode import "$dir/$resume.json" >/dev/null 2>&1; then
  echo "opencode could not import session $resume from $dir/$resume.json" >&2; exit 1
fi
out=$(mktemp) && rc=$(mktemp) || exit 1
{{ "$@"; echo $? >"$rc"; }} | tee "$out"
id=$(sed -n 's/.*"sessionID":"\([A-Za-z0-9_]*\)".*/\1/p' "$out" | head -n 1)
if [ -n "$id" ] && mkdir -p "$dir" && opencode export "$id" >"$dir/$id.json.part" 2>/dev/null; then
  mv "$dir/$id.json.part" "$dir/$id.json"
fi
code=$(cat "$rc"); rm -f "$out" "$rc" "$dir/$id.json.part"; exit "${{code:-1}}""#
    )
}

/// The TUI: `opencode [-m provider/model] [--prompt <prompt>]`. The TUI takes
/// no variant flag (pick one in the TUI); an invalid variant is still refused
/// so a bad config fails the same way in both modes.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    if request.resume_session.is_some() {
        return Err(NO_RESUME.into());
    }
    let flags = flags(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    push_flag(&mut argv, "-m", flags.model);
    let prompt = request.prompt.as_str();
    if !prompt.trim().is_empty() {
        check_argv_prompt(prompt)?;
        if prompt.starts_with('-') {
            // `--prompt -h` would read -h as a flag; the `=` form cannot.
            argv.push(format!("--prompt={prompt}"));
        } else {
            push_flag(&mut argv, "--prompt", Some(prompt));
        }
    }
    Ok(Command { argv, stdin: None })
}

/// opencode appends `/messages` to ANTHROPIC_BASE_URL (its default base is
/// `https://api.anthropic.com/v1`) where Claude Code appends `/v1/messages`,
/// so one gateway URL would not serve both. Its own provider config, given
/// in OPENCODE_CONFIG_CONTENT, wins over the variable: the provider sets
/// the base Claude Code would use, unless the user gave config content.
pub fn config(request: &Request) -> Result<Config, String> {
    if request.env_value(CONFIG_CONTENT).is_some() {
        return Ok(Config::default());
    }
    let mut providers = serde_json::Map::new();
    if let Some(url) = request.env_value("ANTHROPIC_BASE_URL") {
        let base = format!("{}/v1", url.trim_end_matches('/'));
        providers.insert(
            "anthropic".into(),
            serde_json::json!({ "options": { "baseURL": base } }),
        );
    }
    if let Some(url) = request.env_value("OPENAI_BASE_URL") {
        providers.insert(
            "openai".into(),
            serde_json::json!({ "options": { "baseURL": url.trim_end_matches('/') } }),
        );
    }
    if providers.is_empty() {
        return Ok(Config::default());
    }
    let content = serde_json::json!({ "provider": providers }).to_string();
    Ok(Config {
        env: vec![(CONFIG_CONTENT.into(), content)],
        files: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{assert_refuses_empty_prompt, options, request};

    /// The opencode command line inside the print command's sh wrapper.
    fn run_argv(cmd: &Command) -> Vec<String> {
        assert_eq!(cmd.argv[..3], ["sh".to_string(), "-c".into(), wrapper()]);
        cmd.argv[5..].to_vec()
    }

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(
            run_argv(&cmd),
            ["opencode", "run", "--format", "json", "fix the bug"]
        );
        assert_eq!(cmd.stdin, None);
    }

    #[test]
    fn print_full() {
        let req = Request {
            prompt: "do it".into(),
            model: Some("anthropic/claude-sonnet-4-5".into()),
            options: options(&[("variant", "high")]),
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            run_argv(&cmd),
            [
                "opencode",
                "run",
                "--format",
                "json",
                "-m",
                "anthropic/claude-sonnet-4-5",
                "--variant",
                "high",
                "--auto",
                "do it"
            ]
        );
        // Without skip-permissions, no --auto: opencode rejects permission requests.
        let cmd = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert!(!run_argv(&cmd).contains(&"--auto".to_string()));
        assert_eq!(run_argv(&cmd).last().map(String::as_str), Some("do it"));
    }

    #[test]
    fn prompt_is_always_last_and_dash_prompts_are_fenced() {
        let req = Request {
            skip_permissions: true,
            ..request("-h is not a flag")
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            run_argv(&cmd)[run_argv(&cmd).len() - 3..],
            ["--auto", "--", "-h is not a flag"]
        );
        let multi = "line one\n\"quoted\" line two\n";
        let cmd = print_command(&request(multi)).unwrap();
        assert_eq!(run_argv(&cmd).last().map(String::as_str), Some(multi));
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "opencode");
    }

    #[test]
    fn prompt_size_limit() {
        assert!(print_command(&request(&"x".repeat(MAX_PROMPT_LEN))).is_ok());
        let err = print_command(&request(&"x".repeat(MAX_PROMPT_LEN + 1))).unwrap_err();
        assert_eq!(
            err,
            "the prompt is 122881 bytes, too large for opencode's command line (at most 122880 bytes)"
        );
        // Bytes, not chars: 40,961 three-byte chars are 122,883 bytes.
        let err = print_command(&request(&"€".repeat(40_961))).unwrap_err();
        assert!(err.contains("122883 bytes"), "{err}");
        let err = interactive_command(&request(&"x".repeat(MAX_PROMPT_LEN + 1))).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        assert!(print_command(&request("a\0b")).unwrap_err().contains("NUL"));
    }

    #[test]
    fn model_must_be_provider_slash_model() {
        for good in [
            "anthropic/claude-sonnet-4-5",
            "openrouter/anthropic/claude-sonnet-4.5",
            "opencode/big-pickle",
        ] {
            let req = Request {
                model: Some(good.into()),
                ..request("p")
            };
            let cmd = print_command(&req).unwrap();
            assert_eq!(run_argv(&cmd)[4..6], ["-m", good]);
        }
        for bad in [
            "sonnet",
            "/claude",
            "anthropic/",
            "-x/y",
            "anthropic/claude sonnet",
        ] {
            let req = Request {
                model: Some(bad.into()),
                ..request("p")
            };
            let expected = format!(
                "invalid model {bad:?} for opencode: expected provider/model, e.g. anthropic/claude-sonnet-4-5"
            );
            assert_eq!(print_command(&req).unwrap_err(), expected);
            assert_eq!(interactive_command(&req).unwrap_err(), expected);
        }
        let req = Request {
            model: Some("  ".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the model for opencode is empty"
        );
    }

    #[test]
    fn variant_validation() {
        for good in [
            "minimal",
            "low",
            "medium",
            "high",
            "max",
            "xhigh",
            "none",
            "my-custom",
        ] {
            let req = Request {
                options: options(&[("variant", good)]),
                ..request("p")
            };
            assert!(print_command(&req).is_ok(), "{good}");
        }
        for bad in ["-high", "very high", "a\0b"] {
            let req = Request {
                options: options(&[("variant", bad)]),
                ..request("p")
            };
            let expected = format!(
                "invalid variant {bad:?} for opencode: expected a variant name such as high or max"
            );
            assert_eq!(print_command(&req).unwrap_err(), expected);
            assert_eq!(interactive_command(&req).unwrap_err(), expected);
        }
        for blank in ["", " "] {
            let req = Request {
                options: options(&[("variant", blank)]),
                ..request("p")
            };
            assert_eq!(
                print_command(&req).unwrap_err(),
                "the variant option for opencode is empty"
            );
        }
    }

    #[test]
    fn unknown_and_duplicate_options_rejected() {
        let req = Request {
            options: options(&[("effort", "high")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"effort\" for opencode: expected one of variant"
        );
        let req = Request {
            options: options(&[("variant", "low"), ("variant", "max")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "option \"variant\" for opencode is given twice"
        );
    }

    #[test]
    fn resume_imports_the_export_and_passes_the_session() {
        let id = "ses_4f3c2a1b7ffe";
        let req = Request {
            resume_session: Some(id.into()),
            ..request("p")
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(cmd.argv[..2], ["sh", "-c"]);
        assert_eq!(cmd.argv[3..5], ["sh", id]);
        assert_eq!(
            run_argv(&cmd),
            ["opencode", "run", "--format", "json", "--session", id, "p"]
        );
        assert_eq!(interactive_command(&req).unwrap_err(), NO_RESUME);
        for bad in ["", "../x"] {
            let req = Request {
                resume_session: Some(bad.into()),
                ..request("p")
            };
            assert!(
                print_command(&req)
                    .unwrap_err()
                    .contains("invalid opencode session id")
            );
        }
        // A fresh run passes an empty session to the wrapper.
        assert_eq!(print_command(&request("p")).unwrap().argv[4], "");
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("openai/gpt-5".into()),
            options: options(&[("variant", "high")]),
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        };
        let cmd = interactive_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            ["opencode", "-m", "openai/gpt-5", "--prompt", "fix the bug"]
        );
        assert_eq!(cmd.stdin, None);
        assert_eq!(
            interactive_command(&request(" ")).unwrap().argv,
            ["opencode"]
        );
        assert_eq!(
            interactive_command(&request("-h is not a flag"))
                .unwrap()
                .argv,
            ["opencode", "--prompt=-h is not a flag"]
        );
    }

    #[test]
    fn anthropic_base_url_becomes_the_base_claude_code_would_use() {
        let mut req = Request::default();
        assert_eq!(config(&req).unwrap(), Config::default());
        req.env = vec![("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9/".into())];
        let config_of = |req: &Request| config(req).unwrap();
        let got = config_of(&req);
        assert_eq!(got.files, vec![]);
        let [(key, content)] = &got.env[..] else {
            panic!("{got:?}");
        };
        assert_eq!(key, CONFIG_CONTENT);
        let content: serde_json::Value = serde_json::from_str(content).unwrap();
        assert_eq!(
            content,
            serde_json::json!({"provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:9/v1"}}}})
        );
        // The user's own config content is left alone.
        req.env.push((CONFIG_CONTENT.into(), "{}".into()));
        assert_eq!(config_of(&req), Config::default());
    }
}
