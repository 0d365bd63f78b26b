//! Command lines for `codex`, and validation of the agent options.

pub const PROGRAM: &str = "codex";
pub const EFFORT: &str = "effort";
pub const OPTIONS: [&str; 1] = [EFFORT];
pub const EFFORTS: [&str; 4] = ["low", "medium", "high", "xhigh"];

/// Linux refuses a single argv string of 32 pages (MAX_ARG_STRLEN, 131072
/// bytes including the terminating NUL).
const MAX_ARG_LEN: usize = 131_071;

use sanddune_agent_sdk::validate::{self, non_empty};
pub use sanddune_agent_sdk::{Command, Config, Request};

/// Where codex sends its requests unless told otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// What the parser of an iteration needs from its command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The model API codex talks to, for messages when it cannot.
    pub base_url: String,
    /// `exec resume`: `turn.completed` usage includes the earlier runs'.
    pub resuming: bool,
}

impl Default for Context {
    fn default() -> Context {
        Context::of(&Request::default())
    }
}

impl Context {
    /// The context of the command built for `request`.
    pub fn of(request: &Request) -> Context {
        Context {
            base_url: request
                .env_value(BASE_URL)
                .unwrap_or(DEFAULT_BASE_URL)
                .to_owned(),
            resuming: request.resume_session.is_some(),
        }
    }
}

/// The gateway a user sets; codex 0.169 reads only its config key
/// `openai_base_url`, so the provider passes it as `-c`.
pub const BASE_URL: &str = "OPENAI_BASE_URL";

/// The validated request fields that become arguments.
#[derive(Debug, Default)]
struct Flags<'a> {
    model: Option<&'a str>,
    effort: Option<&'a str>,
    resume: Option<&'a str>,
    base_url: Option<&'a str>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    let [effort] = validate::options(PROGRAM, &request.options, OPTIONS)?;
    if let Some(effort) = effort {
        validate::one_of(PROGRAM, "effort", effort, &EFFORTS)?;
    }
    let flags = Flags {
        model: non_empty(PROGRAM, "model", request.model.as_deref())?,
        resume: non_empty(
            PROGRAM,
            "resume session id",
            request.resume_session.as_deref(),
        )?,
        effort,
        base_url: request.env_value(BASE_URL),
    };
    // The session id is a positional argument: one starting with `-` would be
    // read as a flag.
    if let Some(id) = flags.resume
        && (id.starts_with('-') || id.contains(char::is_whitespace) || id.contains('\0'))
    {
        return Err(format!("invalid resume session id {id:?} for codex"));
    }
    Ok(flags)
}

/// The flags both forms share: `[-m M] [-c model_reasoning_effort="E"]
/// [--dangerously-bypass-approvals-and-sandbox]`.
fn push_common(argv: &mut Vec<String>, flags: &Flags<'_>, skip_permissions: bool) {
    if let Some(model) = flags.model {
        argv.extend(["-m".into(), model.to_owned()]);
    }
    if let Some(effort) = flags.effort {
        // A `-c` value is TOML; the quotes make it a TOML string.
        argv.extend(["-c".into(), format!("model_reasoning_effort=\"{effort}\"")]);
    }
    if let Some(url) = flags.base_url {
        // A JSON string is a TOML basic string.
        let url = serde_json::Value::from(url).to_string();
        argv.extend(["-c".into(), format!("openai_base_url={url}")]);
    }
    if skip_permissions {
        // Codex's own sandbox cannot nest inside most sandboxes (no user
        // namespaces, no Landlock); sanddune's sandbox is the boundary.
        argv.push("--dangerously-bypass-approvals-and-sandbox".into());
    }
}

/// The key codex sends is CODEX_API_KEY: a user who set only
/// OPENAI_API_KEY gets it there too (codex would send no key at all).
pub fn config(request: &Request) -> Result<Config, String> {
    let mut config = Config::default();
    if request.env_value("CODEX_API_KEY").is_none()
        && let Some(key) = request.env_value("OPENAI_API_KEY")
    {
        config.env.push(("CODEX_API_KEY".into(), key.into()));
    }
    Ok(config)
}

/// One unattended iteration:
/// `codex exec [resume ID] --json [-m M] [-c model_reasoning_effort="E"]
///  [--dangerously-bypass-approvals-and-sandbox] --skip-git-repo-check -`,
/// with the prompt on stdin (argv has a size limit). Codex waits for stdin to
/// close, so the prompt must come with the command, as here.
///
/// `resume` takes no `-s`; without skip-permissions no sandbox mode is passed
/// at all, so codex's own configuration (`sandbox_mode` in config.toml)
/// decides.
pub fn print_command(request: &Request) -> Result<Command, String> {
    // An empty prompt is how a provider that dropped stdin shows up; refuse it
    // here too rather than let codex fail on it (or "succeed" at nothing).
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let flags = flags(request)?;
    let mut argv = vec![PROGRAM.to_owned(), "exec".to_owned()];
    if let Some(id) = flags.resume {
        argv.extend(["resume".into(), id.to_owned()]);
    }
    argv.push("--json".into());
    push_common(&mut argv, &flags, request.skip_permissions);
    // `codex exec` refuses a directory that is not a git repository it trusts;
    // the sandbox's copy of the worktree need not look like one.
    argv.extend(["--skip-git-repo-check".into(), "-".into()]);
    Ok(Command {
        argv,
        stdin: Some(request.prompt.as_bytes().to_vec()),
    })
}

/// The TUI: `codex [resume ID] [-m M] [-c model_reasoning_effort="E"]
/// [--dangerously-bypass-approvals-and-sandbox] [prompt]`. The terminal is
/// the user's, so the prompt goes on argv.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let flags = flags(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    if let Some(id) = flags.resume {
        argv.extend(["resume".into(), id.to_owned()]);
    }
    push_common(&mut argv, &flags, request.skip_permissions);

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
            ["codex", "exec", "--json", "--skip-git-repo-check", "-"]
        );
        assert_eq!(cmd.stdin.as_deref(), Some(&b"fix the bug"[..]));
    }

    #[test]
    fn print_full_and_prompt_never_on_argv() {
        let req = Request {
            prompt: "do it".into(),
            model: Some("gpt-5.1-codex".into()),
            options: options(&[("effort", "xhigh")]),
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "codex",
                "exec",
                "--json",
                "-m",
                "gpt-5.1-codex",
                "-c",
                "model_reasoning_effort=\"xhigh\"",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "-"
            ]
        );
        assert!(!cmd.argv.iter().any(|a| a.contains("do it")));
        assert_eq!(cmd.stdin.as_deref(), Some(&b"do it"[..]));

        // Without skip-permissions: never the dangerous flag, and no sandbox
        // flag either (codex's config decides).
        let cmd = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert!(
            !cmd.argv
                .iter()
                .any(|a| a.contains("dangerously") || a == "-s" || a.contains("sandbox"))
        );
    }

    #[test]
    fn print_resume() {
        let req = Request {
            prompt: "go on".into(),
            model: Some("gpt-5".into()),
            options: options(&[("effort", "low")]),
            resume_session: Some("019fd9f6-3e33-72e0-89e8-49e33838d1cf".into()),
            skip_permissions: true,
            env: vec![],
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "codex",
                "exec",
                "resume",
                "019fd9f6-3e33-72e0-89e8-49e33838d1cf",
                "--json",
                "-m",
                "gpt-5",
                "-c",
                "model_reasoning_effort=\"low\"",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "-"
            ]
        );
        // `resume` rejects `-s`.
        assert!(!cmd.argv.contains(&"-s".to_string()));
        assert_eq!(cmd.stdin.as_deref(), Some(&b"go on"[..]));
    }

    fn with_env(pairs: &[(&str, &str)]) -> Request {
        Request {
            env: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..request("p")
        }
    }

    /// Codex 0.169 reads neither OPENAI_BASE_URL nor OPENAI_API_KEY.
    #[test]
    fn gateway_and_key_passed_the_way_codex_reads_them() {
        let req = with_env(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
            ("OPENAI_API_KEY", "sk-user"),
        ]);
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "codex",
                "exec",
                "--json",
                "-c",
                "openai_base_url=\"http://127.0.0.1:8080/v1\"",
                "--skip-git-repo-check",
                "-"
            ]
        );
        assert_eq!(
            Context::of(&req),
            Context {
                base_url: "http://127.0.0.1:8080/v1".into(),
                resuming: false
            }
        );
        assert_eq!(
            config(&req).unwrap().env,
            [("CODEX_API_KEY".to_string(), "sk-user".to_string())]
        );
        // The user's own CODEX_API_KEY wins; without a gateway, no -c.
        let req = with_env(&[("OPENAI_API_KEY", "sk-a"), ("CODEX_API_KEY", "sk-b")]);
        assert!(config(&req).unwrap().env.is_empty());
        assert!(!print_command(&req).unwrap().argv.contains(&"-c".into()));
        assert_eq!(Context::of(&req).base_url, DEFAULT_BASE_URL);
        // A URL with a quote stays one TOML string.
        let cmd = print_command(&with_env(&[("OPENAI_BASE_URL", r#"http://h/"x"#)])).unwrap();
        assert!(
            cmd.argv
                .contains(&r#"openai_base_url="http://h/\"x""#.to_string())
        );
    }

    #[test]
    fn a_resume_is_known_to_the_parser() {
        let req = Request {
            resume_session: Some("019fd9f6-3e33-72e0-89e8-49e33838d1cf".into()),
            ..request("p")
        };
        assert!(Context::of(&req).resuming);
        assert!(!Context::of(&request("p")).resuming);
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "codex");
    }

    #[test]
    fn effort_validation() {
        for effort in EFFORTS {
            let req = Request {
                options: options(&[("effort", effort)]),
                ..request("p")
            };
            assert!(print_command(&req).is_ok(), "{effort}");
            assert!(interactive_command(&req).is_ok(), "{effort}");
        }
        for bad in ["huge", "", "HIGH", " high", "max", "minimal"] {
            let req = Request {
                options: options(&[("effort", bad)]),
                ..request("p")
            };
            let expected = format!(
                "invalid effort {bad:?} for codex: expected one of low, medium, high, xhigh"
            );
            assert_eq!(print_command(&req).unwrap_err(), expected);
            assert_eq!(interactive_command(&req).unwrap_err(), expected);
        }
        let req = Request {
            options: options(&[("effort", "huge")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            r#"invalid effort "huge" for codex: expected one of low, medium, high, xhigh"#
        );
    }

    #[test]
    fn unknown_and_duplicate_options_rejected() {
        let req = Request {
            options: options(&[("permission-mode", "plan")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"permission-mode\" for codex: expected one of effort"
        );
        assert!(interactive_command(&req).is_err());
        let req = Request {
            options: options(&[("effort", "low"), ("effort", "high")]),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("given twice"));
    }

    #[test]
    fn blank_or_odd_model_and_resume_rejected() {
        let req = Request {
            model: Some(" ".into()),
            ..request("p")
        };
        assert!(print_command(&req).unwrap_err().contains("model"));
        for bad in ["", "  ", "--last", "a b", "a\0b"] {
            let req = Request {
                resume_session: Some(bad.into()),
                ..request("p")
            };
            assert!(
                print_command(&req).unwrap_err().contains("resume"),
                "{bad:?}"
            );
            assert!(
                interactive_command(&req).unwrap_err().contains("resume"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("gpt-5".into()),
            options: options(&[("effort", "medium")]),
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        };
        let cmd = interactive_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "codex",
                "-m",
                "gpt-5",
                "-c",
                "model_reasoning_effort=\"medium\"",
                "--dangerously-bypass-approvals-and-sandbox",
                "fix the bug"
            ]
        );
        assert_eq!(cmd.stdin, None);

        let cmd = interactive_command(&Request {
            skip_permissions: false,
            prompt: String::new(),
            resume_session: Some("abc".into()),
            ..req
        })
        .unwrap();
        assert_eq!(
            cmd.argv,
            [
                "codex",
                "resume",
                "abc",
                "-m",
                "gpt-5",
                "-c",
                "model_reasoning_effort=\"medium\""
            ]
        );
        assert_eq!(interactive_command(&request(" ")).unwrap().argv, ["codex"]);
    }

    #[test]
    fn interactive_prompt_edge_cases() {
        assert_eq!(
            interactive_command(&request("-h is not a flag"))
                .unwrap()
                .argv,
            ["codex", "--", "-h is not a flag"]
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
