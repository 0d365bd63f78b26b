//! Command lines for `claude`, and validation of the agent options.

pub const PROGRAM: &str = "claude";
pub const EFFORT: &str = "effort";
pub const PERMISSION_MODE: &str = "permission-mode";
pub const OPTIONS: [&str; 2] = [EFFORT, PERMISSION_MODE];
pub const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// Linux refuses a single argv string of 32 pages (MAX_ARG_STRLEN, 131072
/// bytes including the terminating NUL).
const MAX_ARG_LEN: usize = 131_071;

use sanddune_agent_sdk::validate::{self, non_empty, push_flag};
pub use sanddune_agent_sdk::{Command, Request};

/// The agent provider's name, used in messages.
const NAME: &str = "claude-code";

/// The validated request fields that become flags.
#[derive(Debug, Default)]
struct Flags<'a> {
    model: Option<&'a str>,
    effort: Option<&'a str>,
    permission_mode: Option<&'a str>,
    resume: Option<&'a str>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    let [effort, permission_mode] = validate::options(NAME, &request.options, OPTIONS)?;
    if let Some(effort) = effort {
        validate::one_of(NAME, "effort", effort, &EFFORTS)?;
    }
    if permission_mode.is_some_and(|v| v.trim().is_empty()) {
        return Err("the permission-mode option for claude-code is empty".into());
    }
    Ok(Flags {
        model: non_empty(NAME, "model", request.model.as_deref())?,
        resume: non_empty(NAME, "resume session id", request.resume_session.as_deref())?,
        effort,
        permission_mode,
    })
}

/// One unattended iteration:
/// `claude --print --verbose --output-format stream-json [--model M]
///  [--dangerously-skip-permissions | --permission-mode X] [--effort E]
///  [--resume ID] -p -`, with the prompt on stdin (argv has a size limit).
pub fn print_command(request: &Request) -> Result<Command, String> {
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let flags = flags(request)?;
    let mut argv: Vec<String> = [
        PROGRAM,
        "--print",
        "--verbose",
        "--output-format",
        "stream-json",
    ]
    .map(String::from)
    .to_vec();
    push_flag(&mut argv, "--model", flags.model);
    if request.skip_permissions {
        argv.push("--dangerously-skip-permissions".into());
    } else {
        push_flag(&mut argv, "--permission-mode", flags.permission_mode);
    }
    push_flag(&mut argv, "--effort", flags.effort);
    push_flag(&mut argv, "--resume", flags.resume);
    // No positional prompt: `claude --print` reads it from stdin, and a
    // positional `-` would reach the model as text before it.
    Ok(Command {
        argv,
        stdin: Some(request.prompt.as_bytes().to_vec()),
    })
}

/// The TUI: `claude [--dangerously-skip-permissions] [--model M]
/// [--permission-mode X] [--effort E] [--resume ID] [prompt]`. The terminal is
/// the user's, so the prompt goes on argv.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let flags = flags(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    if request.skip_permissions {
        argv.push("--dangerously-skip-permissions".into());
    }
    push_flag(&mut argv, "--model", flags.model);
    if !request.skip_permissions {
        push_flag(&mut argv, "--permission-mode", flags.permission_mode);
    }
    push_flag(&mut argv, "--effort", flags.effort);
    push_flag(&mut argv, "--resume", flags.resume);

    let prompt = request.prompt.as_str();
    if !prompt.trim().is_empty() {
        validate::argv_prompt(prompt, PROGRAM, MAX_ARG_LEN, "")?;
        validate::push_prompt_arg(&mut argv, prompt);
    }
    Ok(Command { argv, stdin: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{assert_refuses_empty_prompt, options, request};

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "claude",
                "--print",
                "--verbose",
                "--output-format",
                "stream-json"
            ]
        );
        assert_eq!(cmd.stdin.as_deref(), Some(&b"fix the bug"[..]));
    }

    #[test]
    fn print_full_and_prompt_never_on_argv() {
        let req = Request {
            prompt: "do it".into(),
            model: Some("opus".into()),
            options: options(&[("effort", "xhigh"), ("permission-mode", "acceptEdits")]),
            resume_session: Some("5805de68".into()),
            skip_permissions: true,
            env: vec![],
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "claude",
                "--print",
                "--verbose",
                "--output-format",
                "stream-json",
                "--model",
                "opus",
                "--dangerously-skip-permissions",
                "--effort",
                "xhigh",
                "--resume",
                "5805de68"
            ]
        );
        assert!(!cmd.argv.iter().any(|a| a.contains("do it")));

        // Without skip-permissions: the permission mode, never the dangerous flag.
        let cmd = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert_eq!(
            cmd.argv[5..9],
            ["--model", "opus", "--permission-mode", "acceptEdits"]
        );
        assert!(
            !cmd.argv
                .contains(&"--dangerously-skip-permissions".to_string())
        );
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "claude");
    }

    #[test]
    fn effort_validation() {
        for effort in EFFORTS {
            let req = Request {
                options: options(&[("effort", effort)]),
                ..request("p")
            };
            assert!(print_command(&req).is_ok(), "{effort}");
        }
        for bad in ["huge", "", "HIGH", " high"] {
            let req = Request {
                options: options(&[("effort", bad)]),
                ..request("p")
            };
            let expected = format!(
                "invalid effort {bad:?} for claude-code: expected one of low, medium, high, xhigh, max"
            );
            assert_eq!(print_command(&req).unwrap_err(), expected);
            assert_eq!(interactive_command(&req).unwrap_err(), expected);
        }
    }

    #[test]
    fn unknown_and_duplicate_options_rejected() {
        let req = Request {
            options: options(&[("max-turns", "3")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"max-turns\" for claude-code: expected one of effort, permission-mode"
        );
        let req = Request {
            options: options(&[("effort", "low"), ("effort", "max")]),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("given twice"));
        let req = Request {
            options: options(&[("permission-mode", " ")]),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("empty"));
    }

    #[test]
    fn blank_model_or_resume_rejected() {
        let req = Request {
            model: Some(" ".into()),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("model"));
        let req = Request {
            resume_session: Some(String::new()),
            ..request("p")
        };
        assert!(interactive_command(&req).unwrap_err().contains("resume"));
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("sonnet".into()),
            options: options(&[("effort", "low"), ("permission-mode", "plan")]),
            resume_session: Some("abc".into()),
            skip_permissions: true,
            env: vec![],
        };
        let cmd = interactive_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "claude",
                "--dangerously-skip-permissions",
                "--model",
                "sonnet",
                "--effort",
                "low",
                "--resume",
                "abc",
                "fix the bug"
            ]
        );
        assert_eq!(cmd.stdin, None);

        let cmd = interactive_command(&Request {
            skip_permissions: false,
            prompt: String::new(),
            ..req
        })
        .unwrap();
        assert_eq!(
            cmd.argv,
            [
                "claude",
                "--model",
                "sonnet",
                "--permission-mode",
                "plan",
                "--effort",
                "low",
                "--resume",
                "abc"
            ]
        );
        assert_eq!(interactive_command(&request(" ")).unwrap().argv, ["claude"]);
    }

    #[test]
    fn interactive_prompt_edge_cases() {
        assert_eq!(
            interactive_command(&request("-h is not a flag"))
                .unwrap()
                .argv,
            ["claude", "--", "-h is not a flag"]
        );
        assert!(interactive_command(&request(&"x".repeat(MAX_ARG_LEN))).is_ok());
        let err = interactive_command(&request(&"x".repeat(MAX_ARG_LEN + 1))).unwrap_err();
        assert!(err.contains("too large"), "{err}");
        assert!(
            interactive_command(&request("a\0b"))
                .unwrap_err()
                .contains("NUL")
        );
    }
}
