//! Command lines for GitHub's Copilot CLI (`copilot`), and validation of the
//! request.
//!
//! The CLI takes its prompt on argv only (`-p <prompt>`, `-i <prompt>`), so
//! the prompt's size is checked here rather than left to a cryptic `E2BIG`
//! from the sandbox.

/// The agent provider's name, used in messages.
pub const NAME: &str = "copilot";
/// The program the sandbox runs.
pub const PROGRAM: &str = "copilot";

/// Linux refuses a single argv string of 128 KiB (MAX_ARG_STRLEN); stay well
/// under it so the other arguments and a little growth still fit.
pub const MAX_PROMPT_BYTES: usize = validate::MAX_ARGV_PROMPT;

use sanddune_agent_sdk::validate;
pub use sanddune_agent_sdk::{Command, Request};

/// Checks that argv can carry the prompt. The prompt is always the value of
/// a flag (`-p`, `-i`), which the CLI takes whole even when it starts with a
/// dash, so it needs no `--`.
fn check_prompt(prompt: &str) -> Result<(), String> {
    validate::argv_prompt(
        prompt,
        PROGRAM,
        MAX_PROMPT_BYTES,
        &format!(" bytes: {NAME} takes its prompt on argv"),
    )
}

/// The model, and the session to resume (`--resume=<id>`: the `=` keeps an
/// id from being read as a flag, and copilot also takes names there, so
/// only a plain id is accepted).
fn model_and_resume(request: &Request) -> Result<(Option<&str>, Option<String>), String> {
    // Options and the model are checked as for any model-only agent.
    let without_resume = Request {
        resume_session: None,
        ..request.clone()
    };
    let model = validate::model_only(NAME, &without_resume)?.and(request.model.as_deref());
    // Copilot refuses this itself, but only after starting.
    if request.env_value("COPILOT_PROVIDER_BASE_URL").is_some()
        && model.is_none()
        && ["COPILOT_MODEL", "COPILOT_PROVIDER_MODEL_ID"]
            .iter()
            .all(|k| request.env_value(k).is_none())
    {
        return Err(
            "copilot with its own model provider (COPILOT_PROVIDER_BASE_URL) needs a \
                    model: set COPILOT_MODEL or pass --model"
                .into(),
        );
    }
    let resume = match request.resume_session.as_deref() {
        None => None,
        Some(id)
            if !id.is_empty()
                && !id.starts_with('-')
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Some(format!("--resume={id}"))
        }
        Some(id) => return Err(format!("invalid resume session id {id:?} for copilot")),
    };
    Ok((model, resume))
}

/// One unattended iteration: `copilot -p <prompt> --output-format json
/// [--resume=<id>] [--model M] [--allow-all-tools]`.
pub fn print_command(request: &Request) -> Result<Command, String> {
    let (model, resume) = model_and_resume(request)?;
    // Refuse rather than let copilot "succeed" at nothing.
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    check_prompt(&request.prompt)?;
    let mut argv: Vec<String> = vec![
        PROGRAM.into(),
        "-p".into(),
        request.prompt.clone(),
        "--output-format".into(),
        "json".into(),
    ];
    argv.extend(resume);
    validate::push_flag(&mut argv, "--model", model);
    if request.skip_permissions {
        // Run every tool without asking: nobody is there to answer.
        argv.push("--allow-all-tools".into());
    }
    Ok(Command { argv, stdin: None })
}

/// The TUI: `copilot [--resume=<id>] [--model M] [-i <prompt>]`. A blank
/// prompt starts it empty.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let (model, resume) = model_and_resume(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    argv.extend(resume);
    validate::push_flag(&mut argv, "--model", model);
    if !request.prompt.trim().is_empty() {
        check_prompt(&request.prompt)?;
        argv.extend(["-i".into(), request.prompt.clone()]);
    }
    Ok(Command { argv, stdin: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{assert_refuses_empty_prompt, request};

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(
            cmd.argv,
            ["copilot", "-p", "fix the bug", "--output-format", "json"]
        );
    }

    #[test]
    fn print_full() {
        let req = Request {
            prompt: "-h is a prompt\nwith lines".into(),
            model: Some("claude-sonnet-4.5".into()),
            skip_permissions: true,
            ..Request::default()
        };
        assert_eq!(
            print_command(&req).unwrap().argv,
            [
                "copilot",
                "-p",
                "-h is a prompt\nwith lines",
                "--output-format",
                "json",
                "--model",
                "claude-sonnet-4.5",
                "--allow-all-tools"
            ]
        );
        let cmd = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert!(!cmd.argv.contains(&"--allow-all-tools".to_string()));
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "copilot");
    }

    #[test]
    fn prompt_size_limit() {
        assert!(print_command(&request(&"x".repeat(MAX_PROMPT_BYTES))).is_ok());
        let err = print_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert_eq!(
            err,
            "the prompt is 122881 bytes, too large for copilot's command line \
             (at most 122880 bytes: copilot takes its prompt on argv)"
        );
        // Bytes, not characters.
        let err = print_command(&request(&"€".repeat(40_961))).unwrap_err();
        assert!(err.contains("122883 bytes"), "{err}");
        let err = interactive_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        assert!(print_command(&request("a\0b")).unwrap_err().contains("NUL"));
        assert!(
            interactive_command(&request("a\0b"))
                .unwrap_err()
                .contains("NUL")
        );
    }

    #[test]
    fn resume() {
        let req = Request {
            resume_session: Some("73de4807-4711-4dfe-a073-e82ae4b4f471".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap().argv,
            [
                "copilot",
                "-p",
                "p",
                "--output-format",
                "json",
                "--resume=73de4807-4711-4dfe-a073-e82ae4b4f471"
            ]
        );
        assert_eq!(
            interactive_command(&req).unwrap().argv,
            [
                "copilot",
                "--resume=73de4807-4711-4dfe-a073-e82ae4b4f471",
                "-i",
                "p"
            ]
        );
        for bad in ["", "a b", "../x", "--continue", "a\0b"] {
            let req = Request {
                resume_session: Some(bad.into()),
                ..request("p")
            };
            assert_eq!(
                print_command(&req).unwrap_err(),
                format!("invalid resume session id {bad:?} for copilot")
            );
        }
    }

    /// BYOK: 1.0.102 says "BYOK providers require an explicit model." and
    /// exits 1 after starting; refused here first.
    #[test]
    fn own_model_provider_needs_a_model() {
        let env = |pairs: &[(&str, &str)]| Request {
            env: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..request("p")
        };
        let url = ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:1/v1");
        let err = print_command(&env(&[url])).unwrap_err();
        assert!(
            err.contains("COPILOT_MODEL") && err.contains("--model"),
            "{err}"
        );
        assert!(interactive_command(&env(&[url])).is_err());
        assert!(print_command(&env(&[url, ("COPILOT_MODEL", "gpt-5")])).is_ok());
        assert!(print_command(&env(&[url, ("COPILOT_PROVIDER_MODEL_ID", "gpt-5")])).is_ok());
        let req = Request {
            model: Some("gpt-5".into()),
            ..env(&[url])
        };
        assert!(print_command(&req).is_ok());
        // With a GitHub token copilot picks its own default.
        assert!(print_command(&env(&[("GH_TOKEN", "t")])).is_ok());
    }

    #[test]
    fn options_and_blank_model_rejected() {
        let req = Request {
            options: vec![("effort".into(), "high".into())],
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"effort\" for copilot: copilot takes no options (only a model)"
        );
        assert!(interactive_command(&req).is_err());
        let req = Request {
            model: Some(String::new()),
            ..request("p")
        };
        assert_eq!(
            interactive_command(&req).unwrap_err(),
            "the model for copilot is empty"
        );
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("gpt-5".into()),
            skip_permissions: true,
            ..Request::default()
        };
        assert_eq!(
            interactive_command(&req).unwrap().argv,
            ["copilot", "--model", "gpt-5", "-i", "fix the bug"]
        );
        assert_eq!(interactive_command(&request("")).unwrap().argv, ["copilot"]);
    }
}
