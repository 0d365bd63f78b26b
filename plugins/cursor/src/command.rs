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
pub const MAX_PROMPT_BYTES: usize = validate::MAX_ARGV_PROMPT;

use sanddune_agent_sdk::validate;
pub use sanddune_agent_sdk::{Command, Request};

/// Appends the prompt as the last argv element, after `--` when it would
/// otherwise read as a flag. Fails when argv cannot carry it.
fn push_prompt(argv: &mut Vec<String>, prompt: &str) -> Result<(), String> {
    validate::argv_prompt(
        prompt,
        PROGRAM,
        MAX_PROMPT_BYTES,
        &format!(" bytes: {NAME} takes its prompt on argv"),
    )?;
    validate::push_prompt_arg(argv, prompt);
    Ok(())
}

/// One unattended iteration:
/// `agent -p --output-format stream-json [--model M] [--force] <prompt>`.
pub fn print_command(request: &Request) -> Result<Command, String> {
    let model = validate::model_only(NAME, request)?;
    // Refuse rather than let the agent "succeed" at nothing.
    validate::prompt_not_empty(&request.prompt, &format!("{PROGRAM} ({NAME})"))?;
    let mut argv: Vec<String> = [PROGRAM, "-p", "--output-format", "stream-json"]
        .map(String::from)
        .to_vec();
    validate::push_flag(&mut argv, "--model", model);
    if request.skip_permissions {
        // Allow every command unless a rule denies it explicitly.
        argv.push("--force".into());
    }
    push_prompt(&mut argv, &request.prompt)?;
    Ok(Command { argv, stdin: None })
}

/// The TUI: `agent [--model M] [prompt]`. A blank prompt starts it empty.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let model = validate::model_only(NAME, request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    validate::push_flag(&mut argv, "--model", model);
    if !request.prompt.trim().is_empty() {
        push_prompt(&mut argv, &request.prompt)?;
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
        assert_refuses_empty_prompt(print_command, "agent (cursor)");
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
