//! Command lines for `pi` (`@mariozechner/pi-coding-agent`), and validation
//! of the agent options.

pub const PROGRAM: &str = "pi";
pub const THINKING: &str = "thinking";
pub const PROVIDER: &str = "provider";
pub const OPTIONS: [&str; 2] = [THINKING, PROVIDER];
/// pi's `--thinking` levels; pi warns about and ignores anything else.
pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// Linux refuses a single argv string of 32 pages (MAX_ARG_STRLEN, 131072
/// bytes including the terminating NUL). Only the TUI takes the prompt on argv.
const MAX_ARG_LEN: usize = 131_071;

use sanddune_agent_sdk::validate::{self, non_empty, push_flag};
pub use sanddune_agent_sdk::{Command, Config, File, Request};

/// The validated request fields that become flags.
#[derive(Debug, Default)]
struct Flags<'a> {
    provider: Option<&'a str>,
    model: Option<&'a str>,
    thinking: Option<&'a str>,
    session: Option<&'a str>,
}

fn flags(request: &Request) -> Result<Flags<'_>, String> {
    let [thinking, provider] = validate::options(PROGRAM, &request.options, OPTIONS)?;
    if let Some(thinking) = thinking {
        validate::one_of(PROGRAM, "thinking", thinking, &THINKING_LEVELS)?;
    }
    if provider.is_some_and(|v| v.trim().is_empty()) {
        return Err("the provider option for pi is empty".into());
    }
    Ok(Flags {
        model: non_empty(PROGRAM, "model", request.model.as_deref())?,
        session: request
            .resume_session
            .as_deref()
            .map(check_session_id)
            .transpose()?,
        provider,
        thinking,
    })
}

/// `pi --session X` reads X as a file path when it holds a slash or ends in
/// `.jsonl`, and as a session id (prefix) otherwise: only ids are accepted.
fn check_session_id(id: &str) -> Result<&str, String> {
    if id.trim().is_empty() {
        return Err("the resume session id for pi is empty".into());
    }
    if id.contains(['/', '\\', '\0']) || id.ends_with(".jsonl") || id.starts_with('-') {
        return Err(format!(
            "invalid session id {id:?} for pi: expected the id from the session header, not a path"
        ));
    }
    Ok(id)
}

fn push_flags(argv: &mut Vec<String>, flags: &Flags<'_>) {
    push_flag(argv, "--provider", flags.provider);
    push_flag(argv, "--model", flags.model);
    push_flag(argv, "--thinking", flags.thinking);
    push_flag(argv, "--session", flags.session);
}

/// One unattended iteration: `pi -p --mode json [--provider P] [--model M]
/// [--thinking T] [--session ID]`, with the prompt on stdin (pi reads piped
/// stdin as the first message). pi has no permission prompts, so
/// `skip-permissions` changes nothing.
pub fn print_command(request: &Request) -> Result<Command, String> {
    // pi trims stdin and, given nothing, prints its session header and exits 0:
    // an empty prompt must never reach it.
    validate::prompt_not_empty(&request.prompt, PROGRAM)?;
    let flags = flags(request)?;
    let mut argv: Vec<String> = [PROGRAM, "-p", "--mode", "json"].map(String::from).to_vec();
    push_flags(&mut argv, &flags);
    Ok(Command {
        argv,
        stdin: Some(request.prompt.as_bytes().to_vec()),
    })
}

/// The TUI: `pi [--provider P] [--model M] [--thinking T] [--session ID]
/// [prompt]`. The terminal is the user's, so the prompt goes on argv.
pub fn interactive_command(request: &Request) -> Result<Command, String> {
    let flags = flags(request)?;
    let mut argv = vec![PROGRAM.to_owned()];
    push_flags(&mut argv, &flags);

    let prompt = request.prompt.as_str();
    if !prompt.trim().is_empty() {
        validate::argv_prompt(prompt, PROGRAM, MAX_ARG_LEN, "")?;
        // pi's argument parser has no `--`: it reads "-..." as a flag (and
        // drops unknown ones) and "@..." as a file to attach. A leading space
        // keeps such a prompt a message.
        if prompt.starts_with(['-', '@']) {
            argv.push(format!(" {prompt}"));
        } else {
            argv.push(prompt.to_owned());
        }
    }
    Ok(Command { argv, stdin: None })
}

/// Where pi reads model endpoints, relative to HOME. pi ignores
/// ANTHROPIC_BASE_URL and OPENAI_BASE_URL (its model table pins the public
/// URLs); only `providers.<name>.baseUrl` here moves a provider.
pub const MODELS_JSON: &str = ".pi/agent/models.json";

/// The run's base URLs as pi's models.json: the anthropic base without
/// `/v1` (pi appends /v1/messages, as Claude Code does to
/// ANTHROPIC_BASE_URL), the openai one as OPENAI_BASE_URL holds it.
pub fn config(request: &Request) -> Result<Config, String> {
    let mut providers = serde_json::Map::new();
    for (key, provider) in [
        ("ANTHROPIC_BASE_URL", "anthropic"),
        ("OPENAI_BASE_URL", "openai"),
    ] {
        if let Some(url) = request.env_value(key) {
            providers.insert(
                provider.into(),
                serde_json::json!({ "baseUrl": url.trim_end_matches('/') }),
            );
        }
    }
    if providers.is_empty() {
        return Ok(Config::default());
    }
    let models = serde_json::json!({ "providers": providers });
    Ok(Config {
        env: Vec::new(),
        files: vec![File {
            path: MODELS_JSON.into(),
            contents: format!("{models:#}\n").into_bytes(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sanddune_agent_sdk::testing::{assert_refuses_empty_prompt, options, request};

    #[test]
    fn print_minimal() {
        let cmd = print_command(&request("fix the bug")).unwrap();
        assert_eq!(cmd.argv, ["pi", "-p", "--mode", "json"]);
        assert_eq!(cmd.stdin.as_deref(), Some(&b"fix the bug"[..]));
    }

    #[test]
    fn print_full_and_prompt_never_on_argv() {
        let req = Request {
            prompt: "do it".into(),
            model: Some("claude-sonnet-4-5".into()),
            options: options(&[("thinking", "xhigh"), ("provider", "anthropic")]),
            resume_session: Some("0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into()),
            skip_permissions: true,
            env: vec![],
        };
        let cmd = print_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "pi",
                "-p",
                "--mode",
                "json",
                "--provider",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
                "--thinking",
                "xhigh",
                "--session",
                "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
            ]
        );
        assert!(!cmd.argv.iter().any(|a| a.contains("do it")));
        // pi has no permission prompts: skip-permissions changes nothing.
        let without = print_command(&Request {
            skip_permissions: false,
            ..req
        })
        .unwrap();
        assert_eq!(without, cmd);
    }

    #[test]
    fn large_prompt_goes_to_stdin() {
        let prompt = "x".repeat(MAX_ARG_LEN * 4);
        let cmd = print_command(&request(&prompt)).unwrap();
        assert_eq!(cmd.stdin.map(|s| s.len()), Some(prompt.len()));
    }

    #[test]
    fn empty_prompt_rejected() {
        assert_refuses_empty_prompt(print_command, "pi");
    }

    #[test]
    fn thinking_validation() {
        for level in THINKING_LEVELS {
            let req = Request {
                options: options(&[("thinking", level)]),
                ..request("p")
            };
            assert!(print_command(&req).is_ok(), "{level}");
        }
        for bad in ["max", "", "HIGH", " high"] {
            let req = Request {
                options: options(&[("thinking", bad)]),
                ..request("p")
            };
            let expected = format!(
                "invalid thinking {bad:?} for pi: expected one of off, minimal, low, medium, high, xhigh"
            );
            assert_eq!(print_command(&req).unwrap_err(), expected);
            assert_eq!(interactive_command(&req).unwrap_err(), expected);
        }
    }

    #[test]
    fn unknown_duplicate_and_blank_options_rejected() {
        let req = Request {
            options: options(&[("variant", "high")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "unknown option \"variant\" for pi: expected one of thinking, provider"
        );
        let req = Request {
            options: options(&[("provider", "openai"), ("provider", "google")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "option \"provider\" for pi is given twice"
        );
        let req = Request {
            options: options(&[("provider", " ")]),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the provider option for pi is empty"
        );
        let req = Request {
            model: Some(String::new()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the model for pi is empty"
        );
    }

    #[test]
    fn session_ids_only() {
        for bad in ["a/b", "..\\x", "old.jsonl", "-x", "a\0b"] {
            let req = Request {
                resume_session: Some(bad.into()),
                ..request("p")
            };
            let err = print_command(&req).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "invalid session id {bad:?} for pi: expected the id from the session header, not a path"
                )
            );
            assert_eq!(interactive_command(&req).unwrap_err(), err);
        }
        let req = Request {
            resume_session: Some(" ".into()),
            ..request("p")
        };
        assert_eq!(
            print_command(&req).unwrap_err(),
            "the resume session id for pi is empty"
        );
    }

    #[test]
    fn interactive_forms() {
        let req = Request {
            prompt: "fix the bug".into(),
            model: Some("gpt-5".into()),
            options: options(&[("provider", "openai"), ("thinking", "low")]),
            resume_session: Some("abc".into()),
            skip_permissions: true,
            env: vec![],
        };
        let cmd = interactive_command(&req).unwrap();
        assert_eq!(
            cmd.argv,
            [
                "pi",
                "--provider",
                "openai",
                "--model",
                "gpt-5",
                "--thinking",
                "low",
                "--session",
                "abc",
                "fix the bug"
            ]
        );
        assert_eq!(cmd.stdin, None);
        assert_eq!(interactive_command(&request(" ")).unwrap().argv, ["pi"]);
    }

    #[test]
    fn interactive_prompt_edge_cases() {
        assert_eq!(
            interactive_command(&request("-h is not a flag"))
                .unwrap()
                .argv,
            ["pi", " -h is not a flag"]
        );
        assert_eq!(
            interactive_command(&request("@README.md is not a file"))
                .unwrap()
                .argv,
            ["pi", " @README.md is not a file"]
        );
        assert!(interactive_command(&request(&"x".repeat(MAX_ARG_LEN))).is_ok());
        let err = interactive_command(&request(&"x".repeat(MAX_ARG_LEN + 1))).unwrap_err();
        assert_eq!(
            err,
            "the prompt is 131072 bytes, too large for pi's command line (at most 131071)"
        );
        assert!(
            interactive_command(&request("a\0b"))
                .unwrap_err()
                .contains("NUL")
        );
    }

    #[test]
    fn the_base_urls_go_to_models_json() {
        let mut req = Request::default();
        assert_eq!(config(&req).unwrap(), Config::default());
        req.env = vec![
            ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9/".into()),
            ("ANTHROPIC_API_KEY".into(), "sk".into()),
        ];
        let config = config(&req).unwrap();
        assert_eq!(config.env, vec![]);
        assert_eq!(config.files.len(), 1);
        assert_eq!(config.files[0].path, ".pi/agent/models.json");
        let models: serde_json::Value = serde_json::from_slice(&config.files[0].contents).unwrap();
        assert_eq!(
            models,
            serde_json::json!({"providers": {"anthropic": {"baseUrl": "http://127.0.0.1:9"}}})
        );
    }
}
