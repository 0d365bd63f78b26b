//! Command lines for `opencode`, and validation of the agent options.

pub const PROGRAM: &str = "opencode";
pub const VARIANT: &str = "variant";
pub const OPTIONS: [&str; 1] = [VARIANT];

/// `opencode run` takes the message on argv. Linux refuses a single argv
/// string of 128 KiB (MAX_ARG_STRLEN); 120 KiB leaves room for the rest of the
/// command line and the environment.
pub const MAX_PROMPT_LEN: usize = validate::MAX_ARGV_PROMPT;

/// opencode keeps its sessions in its own database under ~/.local/share, not
/// in per-session files, so a session cannot be carried between sandboxes.
pub const NO_RESUME: &str =
    "opencode sessions are not files sanddune can move; resume is not supported";

use sanddune_agent_sdk::validate::{self, push_flag};
pub use sanddune_agent_sdk::{Command, Request};

/// The validated request fields that become flags.
#[derive(Debug, Default)]
struct Flags<'a> {
    model: Option<&'a str>,
    variant: Option<&'a str>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    if request.resume_session.is_some() {
        return Err(NO_RESUME.into());
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
    // opencode parses with yargs' populate-- and appends what follows `--`.
    validate::push_prompt_arg(&mut argv, &request.prompt);
    Ok(Command { argv, stdin: None })
}

/// The TUI: `opencode [-m provider/model] [--prompt <prompt>]`. The TUI takes
/// no variant flag (pick one in the TUI); an invalid variant is still refused
/// so a bad config fails the same way in both modes.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt: &str) -> Request {
        Request {
            prompt: prompt.into(),
            ..Request::default()
        }
    }

    fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(
            cmd.argv,
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
            cmd.argv,
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
        assert!(!cmd.argv.contains(&"--auto".to_string()));
        assert_eq!(cmd.argv.last().map(String::as_str), Some("do it"));
    }

    #[test]
    fn prompt_is_always_last_and_dash_prompts_are_fenced() {
        let req = Request {
            skip_permissions: true,
            ..request("-h is not a flag")
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv[cmd.argv.len() - 3..],
            ["--auto", "--", "-h is not a flag"]
        );
        let multi = "line one\n\"quoted\" line two\n";
        let cmd = print_command(&request(multi)).unwrap();
        assert_eq!(cmd.argv.last().map(String::as_str), Some(multi));
    }

    #[test]
    fn empty_prompt_rejected() {
        for prompt in ["", "  \n\t "] {
            assert_eq!(
                print_command(&request(prompt)).unwrap_err(),
                "the prompt is empty: refusing to start opencode with nothing to do"
            );
        }
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
            assert_eq!(cmd.argv[4..6], ["-m", good]);
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
    fn resume_rejected() {
        for id in ["ses_4f3c2a1b7ffe", ""] {
            let req = Request {
                resume_session: Some(id.into()),
                ..request("p")
            };
            assert_eq!(print_command(&req).unwrap_err(), NO_RESUME);
            assert_eq!(interactive_command(&req).unwrap_err(), NO_RESUME);
        }
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
}
