//! Command lines for Cursor's CLI (`agent`), and validation of the request.
//!
//! The CLI takes its prompt on argv only, so the prompt's size is checked
//! here rather than left to a cryptic `E2BIG` from the sandbox.

/// The agent provider's name, used in messages.
pub const NAME: &str = "cursor";
/// The program the sandbox runs.
pub const PROGRAM: &str = "agent";

/// Linux refuses a single argv string of 128 KiB (MAX_ARG_STRLEN); stay well
/// under it so the other arguments and a little growth still fit.
pub const MAX_PROMPT_BYTES: usize = 120 * 1024;

/// Mirrors the WIT `command-request`.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub prompt: String,
    pub model: Option<String>,
    pub options: Vec<(String, String)>,
    pub resume_session: Option<String>,
    pub skip_permissions: bool,
}

/// Mirrors the WIT `agent-command` (agent needs no stdin and no extra
/// environment: CURSOR_API_KEY comes from the sandbox's environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub argv: Vec<String>,
}

/// What every command shares: no options, no resume, a usable model.
/// Returns the model.
fn validate(request: &Request) -> Result<Option<&str>, String> {
    if let Some(id) = &request.resume_session {
        return Err(format!(
            "{NAME} cannot resume session {id:?}: the {NAME} agent provider keeps no session files"
        ));
    }
    if let Some((name, _)) = request.options.first() {
        return Err(format!(
            "unknown option {name:?} for {NAME}: {NAME} takes no options (only a model)"
        ));
    }
    match request.model.as_deref() {
        // A blank model would become a bogus `--model ""`.
        Some(m) if m.trim().is_empty() => Err(format!("the model for {NAME} is empty")),
        model => Ok(model),
    }
}

/// Appends the prompt as the last argv element, after `--` when it would
/// otherwise read as a flag. Fails when argv cannot carry it.
fn push_prompt(argv: &mut Vec<String>, prompt: &str) -> Result<(), String> {
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(format!(
            "the prompt is {} bytes, too large for {PROGRAM}'s command line \
             (at most {MAX_PROMPT_BYTES} bytes: {NAME} takes its prompt on argv)",
            prompt.len()
        ));
    }
    if prompt.contains('\0') {
        return Err("the prompt contains a NUL byte, which a command line cannot carry".into());
    }
    if prompt.starts_with('-') {
        argv.push("--".into());
    }
    argv.push(prompt.to_owned());
    Ok(())
}

fn push_model(argv: &mut Vec<String>, model: Option<&str>) {
    if let Some(model) = model {
        argv.extend(["--model".into(), model.to_owned()]);
    }
}

/// One unattended iteration:
/// `agent -p --output-format stream-json [--model M] [--force] <prompt>`.
pub fn print_command(request: &Request) -> Result<Command, String> {
    let model = validate(request)?;
    // Refuse rather than let the agent "succeed" at nothing.
    if request.prompt.trim().is_empty() {
        return Err(format!(
            "the prompt is empty: refusing to start {PROGRAM} ({NAME}) with nothing to do"
        ));
    }
    let mut argv: Vec<String> = [PROGRAM, "-p", "--output-format", "stream-json"]
        .map(String::from)
        .to_vec();
    push_model(&mut argv, model);
    if request.skip_permissions {
        // Allow every command unless a rule denies it explicitly.
        argv.push("--force".into());
    }
    push_prompt(&mut argv, &request.prompt)?;
    Ok(Command { argv })
}

/// The TUI: `agent [--model M] [prompt]`. A blank prompt starts it empty.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let model = validate(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    push_model(&mut argv, model);
    if !request.prompt.trim().is_empty() {
        push_prompt(&mut argv, &request.prompt)?;
    }
    Ok(Command { argv })
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

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "agent",
                "-p",
                "--output-format",
                "stream-json",
                "fix the bug"
            ]
        );
    }

    #[test]
    fn print_full_prompt_is_last() {
        let req = Request {
            prompt: "do it\nnow".into(),
            model: Some("gpt-5".into()),
            skip_permissions: true,
            ..Request::default()
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "agent",
                "-p",
                "--output-format",
                "stream-json",
                "--model",
                "gpt-5",
                "--force",
                "do it\nnow"
            ]
        );
        let cmd = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert!(!cmd.argv.contains(&"--force".to_string()));
        assert_eq!(cmd.argv.last().unwrap(), "do it\nnow");
    }

    #[test]
    fn flag_like_prompt_follows_double_dash() {
        let cmd = print_command(&request("-h is not a flag")).unwrap();
        assert_eq!(cmd.argv[cmd.argv.len() - 2..], ["--", "-h is not a flag"]);
        assert_eq!(
            interactive_command(&request("--help me")).unwrap().argv,
            ["agent", "--", "--help me"]
        );
    }

    #[test]
    fn empty_prompt_rejected() {
        for prompt in ["", "  \n\t "] {
            assert_eq!(
                print_command(&request(prompt)).unwrap_err(),
                "the prompt is empty: refusing to start agent (cursor) with nothing to do"
            );
        }
    }

    #[test]
    fn prompt_size_limit() {
        assert!(print_command(&request(&"x".repeat(MAX_PROMPT_BYTES))).is_ok());
        let err = print_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert_eq!(
            err,
            "the prompt is 122881 bytes, too large for agent's command line \
             (at most 122880 bytes: cursor takes its prompt on argv)"
        );
        // Bytes, not characters: 40,961 three-byte characters are too many.
        let err = print_command(&request(&"€".repeat(40_961))).unwrap_err();
        assert!(err.contains("122883 bytes"), "{err}");
        let err = interactive_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        assert!(print_command(&request("a\0b")).unwrap_err().contains("NUL"));
    }

    #[test]
    fn resume_rejected() {
        let req = Request {
            resume_session: Some("c6b62c6f".into()),
            ..request("p")
        };
        let expected = "cursor cannot resume session \"c6b62c6f\": the cursor agent provider keeps no session files";
        assert_eq!(print_command(&req).unwrap_err(), expected);
        assert_eq!(interactive_command(&req).unwrap_err(), expected);
    }

    #[test]
    fn options_and_blank_model_rejected() {
        let req = Request {
            options: vec![("effort".into(), "high".into())],
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"effort\" for cursor: cursor takes no options (only a model)"
        );
        assert!(interactive_command(&req).is_err());
        let req = Request {
            model: Some(" ".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the model for cursor is empty"
        );
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("sonnet-4".into()),
            skip_permissions: true,
            ..Request::default()
        };
        assert_eq!(
            interactive_command(&req).unwrap().argv,
            ["agent", "--model", "sonnet-4", "fix the bug"]
        );
        assert_eq!(interactive_command(&request(" ")).unwrap().argv, ["agent"]);
    }
}
