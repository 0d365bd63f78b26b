//! Command lines and config for Google's Gemini CLI (`gemini`), and
//! validation of the request. The facts are in docs/reference/protocols.md,
//! "Gemini CLI".

/// The agent provider's name, used in messages.
pub const NAME: &str = "gemini";
/// The program the sandbox runs.
pub const PROGRAM: &str = "gemini";
/// The agent option that caps the CLI's tries of a failed API request.
pub const MAX_ATTEMPTS: &str = "max-attempts";
pub const OPTIONS: [&str; 1] = [MAX_ATTEMPTS];
/// The CLI's settings, relative to HOME.
pub const SETTINGS: &str = ".gemini/settings.json";

/// Linux refuses a single argv string of 128 KiB (MAX_ARG_STRLEN).
pub const MAX_PROMPT_BYTES: usize = validate::MAX_ARGV_PROMPT;

use sanddune_agent_sdk::validate;
pub use sanddune_agent_sdk::{Command, Config, File, Request};

/// The model, the checked options, and a refusal of what the provider
/// cannot do.
fn model_and_attempts(request: &Request) -> Result<(Option<&str>, Option<u32>), String> {
    let [attempts] = validate::options(NAME, &request.options, OPTIONS)?;
    let attempts = attempts
        .map(|value| match value.trim().parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => Ok(n),
            _ => Err(format!(
                "invalid value {value:?} for gemini's {MAX_ATTEMPTS}: expected a whole number from 1 to 100"
            )),
        })
        .transpose()?;
    if let Some(id) = &request.resume_session {
        return Err(format!(
            "{NAME} cannot resume session {id:?}: the gemini agent provider keeps no session files \
             (the CLI names a session's file by the minute it started, which its id does not tell)"
        ));
    }
    Ok((
        validate::non_empty(NAME, "model", request.model.as_deref())?,
        attempts,
    ))
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

/// One unattended iteration: `gemini --output-format stream-json
/// --skip-trust [--yolo] [-m M] --prompt=TEXT`. `--skip-trust` because a
/// sandbox's HOME has no trusted folders (the CLI exits 55 in an untrusted
/// one); `--yolo` because without it the headless CLI offers the model no
/// shell or file-writing tool at all.
pub fn print_command(request: &Request) -> Result<Command, String> {
    let (model, _) = model_and_attempts(request)?;
    // Refuse rather than let the agent "succeed" at nothing.
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let mut argv: Vec<String> = [PROGRAM, "--output-format", "stream-json", "--skip-trust"]
        .map(String::from)
        .to_vec();
    if request.skip_permissions {
        argv.push("--yolo".into());
    }
    validate::push_flag(&mut argv, "-m", model);
    argv.push(prompt_arg("--prompt", &request.prompt)?);
    Ok(Command { argv, stdin: None })
}

/// The TUI: `gemini [-m M] [--prompt-interactive=TEXT]`. A blank prompt
/// starts it empty; it keeps its own approval prompts.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let (model, _) = model_and_attempts(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    validate::push_flag(&mut argv, "-m", model);
    if !request.prompt.trim().is_empty() {
        argv.push(prompt_arg("--prompt-interactive", &request.prompt)?);
    }
    Ok(Command { argv, stdin: None })
}

/// `~/.gemini/settings.json`: API-key auth chosen outright. Given only the
/// env, a CLI pointed at `GOOGLE_GEMINI_BASE_URL` picks a "gateway" auth
/// that headless mode refuses (exit 41). With `max-attempts`, the cap on
/// tries of a failed request.
pub fn config(request: &Request) -> Result<Config, String> {
    let (_, attempts) = model_and_attempts(request)?;
    let mut settings = serde_json::json!({
        "security": { "auth": { "selectedType": "gemini-api-key" } }
    });
    if let Some(n) = attempts {
        settings["general"] = serde_json::json!({ "maxAttempts": n });
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
                "gemini",
                "--output-format",
                "stream-json",
                "--skip-trust",
                "--prompt=fix the bug"
            ]
        );
        let req = Request {
            model: Some("gemini-2.5-pro".into()),
            skip_permissions: true,
            ..request("-h is a prompt")
        };
        assert_eq!(
            print_command(&req).unwrap().argv,
            [
                "gemini",
                "--output-format",
                "stream-json",
                "--skip-trust",
                "--yolo",
                "-m",
                "gemini-2.5-pro",
                "--prompt=-h is a prompt"
            ]
        );
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "gemini");
    }

    #[test]
    fn prompt_size_limit() {
        assert!(print_command(&request(&"x".repeat(MAX_PROMPT_BYTES))).is_ok());
        let err = print_command(&request(&"x".repeat(MAX_PROMPT_BYTES + 1))).unwrap_err();
        assert!(
            err.contains("too large") && err.contains("gemini takes its prompt on argv"),
            "{err}"
        );
        assert!(print_command(&request("a\0b")).unwrap_err().contains("NUL"));
    }

    #[test]
    fn resume_is_refused_with_the_reason() {
        let req = Request {
            resume_session: Some("c8e21316-c169-4c30-9f33-fd62bbd79bb6".into()),
            ..request("p")
        };
        for err in [
            print_command(&req).unwrap_err(),
            interactive_command(&req).unwrap_err(),
            config(&req).unwrap_err(),
        ] {
            assert!(err.starts_with("gemini cannot resume session"), "{err}");
            assert!(err.contains("keeps no session files"), "{err}");
        }
    }

    #[test]
    fn options_are_checked() {
        let req = Request {
            options: options(&[("effort", "high")]),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("effort"));
        for bad in ["0", "101", "two", ""] {
            let req = Request {
                options: options(&[(MAX_ATTEMPTS, bad)]),
                ..request("p")
            };
            let err = print_command(&req).unwrap_err();
            assert!(err.contains("max-attempts"), "{bad}: {err}");
        }
        let req = Request {
            model: Some(" ".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the model for gemini is empty"
        );
    }

    #[test]
    fn settings_choose_api_key_auth_and_the_attempts() {
        let files = config(&request("p")).unwrap().files;
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, ".gemini/settings.json");
        let settings: serde_json::Value = serde_json::from_slice(&files[0].contents).unwrap();
        assert_eq!(
            settings,
            serde_json::json!({"security": {"auth": {"selectedType": "gemini-api-key"}}})
        );
        let req = Request {
            options: options(&[(MAX_ATTEMPTS, "2")]),
            ..request("p")
        };
        let files = config(&req).unwrap().files;
        let settings: serde_json::Value = serde_json::from_slice(&files[0].contents).unwrap();
        assert_eq!(settings["general"]["maxAttempts"], 2);
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            model: Some("gemini-2.5-pro".into()),
            ..request("fix the bug")
        };
        assert_eq!(
            interactive_command(&req).unwrap().argv,
            [
                "gemini",
                "-m",
                "gemini-2.5-pro",
                "--prompt-interactive=fix the bug"
            ]
        );
        assert_eq!(interactive_command(&request(" ")).unwrap().argv, ["gemini"]);
    }
}
