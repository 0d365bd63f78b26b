//! Command lines and config for Qwen Code (`qwen`), and validation of the
//! request. The facts are in docs/reference/protocols.md, "Qwen Code".

/// The agent provider's name, used in messages.
pub const NAME: &str = "qwen-code";
/// The program the sandbox runs.
pub const PROGRAM: &str = "qwen";
/// The agent option that caps the CLI's retries of a failed API request.
pub const MAX_RETRIES: &str = "max-retries";
pub const OPTIONS: [&str; 1] = [MAX_RETRIES];
/// The CLI's user settings, relative to HOME.
pub const SETTINGS: &str = ".qwen/settings.json";

/// Linux refuses a single argv string of 128 KiB (MAX_ARG_STRLEN).
pub const MAX_PROMPT_BYTES: usize = validate::MAX_ARGV_PROMPT;

pub use sanddune_agent_sdk::{Command, Config, File, Request};
use sanddune_agent_sdk::{session, validate};

/// What a request asks of the CLI, checked.
struct Flags<'a> {
    model: Option<&'a str>,
    resume: Option<&'a str>,
    retries: Option<u32>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    let [retries] = validate::options(NAME, &request.options, OPTIONS)?;
    let retries = retries
        .map(|value| match value.trim().parse::<u32>() {
            Ok(n) if n <= 100 => Ok(n),
            _ => Err(format!(
                "invalid value {value:?} for qwen-code's {MAX_RETRIES}: expected a whole number from 0 to 100"
            )),
        })
        .transpose()?;
    let resume = validate::non_empty(NAME, "resume session id", request.resume_session.as_deref())?;
    if let Some(id) = resume
        && (!session::is_file_name(id) || id.starts_with('-'))
    {
        return Err(format!(
            "{NAME} cannot resume session {id:?}: a session id names a file, with no `/` and no leading `-`"
        ));
    }
    Ok(Flags {
        model: validate::non_empty(NAME, "model", request.model.as_deref())?,
        resume,
        retries,
    })
}

/// The prompt as one `FLAG=TEXT` argument: the `=` form keeps a prompt
/// that begins with `-` from reading as a flag. Fails when argv cannot
/// carry it.
fn prompt_arg(flag: &str, prompt: &str) -> Result<String, String> {
    validate::argv_prompt(
        prompt,
        PROGRAM,
        MAX_PROMPT_BYTES,
        &format!(" bytes: {NAME} takes its prompt on argv"),
    )?;
    Ok(format!("{flag}={prompt}"))
}

/// What both commands share: `--auth-type openai` because without it the
/// CLI picks its auth from the env and refuses to start when OPENAI_MODEL
/// is unset (with it, a run without a model uses the CLI's default), then
/// the model and the session to resume.
fn common(flags: &Flags) -> Vec<String> {
    let mut argv: Vec<String> = [PROGRAM, "--auth-type", "openai"]
        .map(String::from)
        .to_vec();
    validate::push_flag(&mut argv, "-m", flags.model);
    if let Some(id) = flags.resume {
        argv.push(format!("--resume={id}"));
    }
    argv
}

/// One unattended iteration: `qwen --auth-type openai [-m M] [--resume=ID]
/// --output-format stream-json [--yolo] --prompt=TEXT`. Without `--yolo`
/// the headless CLI declines every shell command the model asks for.
pub fn print_command(request: &Request) -> Result<Command, String> {
    let flags = flags(request)?;
    // Refuse rather than let the agent "succeed" at nothing.
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let mut argv = common(&flags);
    argv.extend(["--output-format", "stream-json"].map(String::from));
    if request.skip_permissions {
        argv.push("--yolo".into());
    }
    argv.push(prompt_arg("--prompt", &request.prompt)?);
    Ok(Command { argv, stdin: None })
}

/// The TUI: `qwen --auth-type openai [-m M] [--resume=ID]
/// [--prompt-interactive=TEXT]`. A blank prompt starts it empty; it keeps
/// its own approval prompts.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let flags = flags(request)?;
    let mut argv = common(&flags);
    if !request.prompt.trim().is_empty() {
        argv.push(prompt_arg("--prompt-interactive", &request.prompt)?);
    }
    Ok(Command { argv, stdin: None })
}

/// `~/.qwen/settings.json`. Managed auto-memory is off: by default the CLI
/// follows every answer with a second model call that extracts "memories"
/// into HOME, which a sandbox throws away, at the run's token cost. With
/// `max-retries`, the cap on retries of a failed request (its own default
/// retries a rate limit 10 times, waiting from 60 s up to 5 minutes).
pub fn config(request: &Request) -> Result<Config, String> {
    let flags = flags(request)?;
    let mut settings = serde_json::json!({
        "memory": { "enableManagedAutoMemory": false }
    });
    if let Some(n) = flags.retries {
        settings["model"] = serde_json::json!({ "generationConfig": { "maxRetries": n } });
    }
    Ok(Config {
        env: Vec::new(),
        files: vec![File {
            path: SETTINGS.into(),
            contents: format!("{settings}\n").into_bytes(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{assert_refuses_empty_prompt, options, request};

    #[test]
    fn print_minimal_and_full() {
        assert_eq!(
            print_command(&request("fix the bug")).unwrap().argv,
            [
                "qwen",
                "--auth-type",
                "openai",
                "--output-format",
                "stream-json",
                "--prompt=fix the bug"
            ]
        );
        let req = Request {
            model: Some("qwen3-coder-plus".into()),
            resume_session: Some("3d13499a-4325-457b-af03-286ee5301fbf".into()),
            skip_permissions: true,
            ..request("-h is a prompt")
        };
        assert_eq!(
            print_command(&req).unwrap().argv,
            [
                "qwen",
                "--auth-type",
                "openai",
                "-m",
                "qwen3-coder-plus",
                "--resume=3d13499a-4325-457b-af03-286ee5301fbf",
                "--output-format",
                "stream-json",
                "--yolo",
                "--prompt=-h is a prompt"
            ]
        );
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "qwen");
    }

    #[test]
    fn prompt_size_limit() {
        assert!(print_command(&request(&"x".repeat(MAX_PROMPT_BYTES))).is_ok());
        let err = print_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert!(
            err.contains("too large") && err.contains("qwen-code takes its prompt on argv"),
            "{err}"
        );
        assert!(print_command(&request("a\0b")).unwrap_err().contains("NUL"));
    }

    #[test]
    fn a_resume_id_that_is_no_file_name_is_refused() {
        for bad in ["--yolo", "../x", "a/b", ".."] {
            let req = Request {
                resume_session: Some(bad.into()),
                ..request("p")
            };
            let err = print_command(&req).unwrap_err();
            assert!(err.starts_with("qwen-code cannot resume session"), "{err}");
        }
        let req = Request {
            resume_session: Some(" ".into()),
            ..request("p")
        };
        assert!(
            print_command(&req)
                .unwrap_err()
                .contains("resume session id")
        );
    }

    #[test]
    fn options_are_checked() {
        let req = Request {
            options: options(&[("effort", "high")]),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("effort"));
        for bad in ["101", "two", "", "-1"] {
            let req = Request {
                options: options(&[(MAX_RETRIES, bad)]),
                ..request("p")
            };
            let err = print_command(&req).unwrap_err();
            assert!(err.contains("max-retries"), "{bad}: {err}");
        }
        let req = Request {
            model: Some(" ".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the model for qwen-code is empty"
        );
    }

    #[test]
    fn settings_turn_memory_off_and_cap_the_retries() {
        let settings = |req: &Request| -> serde_json::Value {
            let files = config(req).unwrap().files;
            assert_eq!(files.len(), 1);
            assert_eq!(files[0].path, ".qwen/settings.json");
            serde_json::from_slice(&files[0].contents).unwrap()
        };
        assert_eq!(
            settings(&request("p")),
            serde_json::json!({"memory": {"enableManagedAutoMemory": false}})
        );
        let req = Request {
            options: options(&[(MAX_RETRIES, "0")]),
            ..request("p")
        };
        assert_eq!(settings(&req)["model"]["generationConfig"]["maxRetries"], 0);
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            model: Some("qwen3-coder-plus".into()),
            ..request("fix the bug")
        };
        assert_eq!(
            interactive_command(&req).unwrap().argv,
            [
                "qwen",
                "--auth-type",
                "openai",
                "-m",
                "qwen3-coder-plus",
                "--prompt-interactive=fix the bug"
            ]
        );
        assert_eq!(
            interactive_command(&request(" ")).unwrap().argv,
            ["qwen", "--auth-type", "openai"]
        );
    }
}
