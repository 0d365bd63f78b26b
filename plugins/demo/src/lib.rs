//! The `demo` agent provider: a deterministic stand-in for a real agent, for
//! the README demo. No API key, no model: a small `sh` script reads the prompt
//! from stdin, appends its first line to DEMO.md, commits, and reports in its
//! own JSON-lines format, which the stream parser below understands.

use std::cell::Cell;

wit_bindgen::generate!({ world: "agent-plugin", path: "../../wit" });

use exports::sanddune::plugin::agent_provider::{
    AgentCommand, AgentInfo, AgentResult, Guest, ToolCall,
};
// Public for the fuzz targets, which drive the parser natively.
pub use exports::sanddune::plugin::agent_provider::{
    AgentEvent, CommandRequest, GuestStreamParser,
};

/// The demo agent. Reads the prompt from stdin, so a sandbox that drops stdin
/// shows up as an error. Prints only fixed JSON texts: escaping prompt text
/// into JSON in `sh` would be fragile.
const SCRIPT: &str = r#"prompt=$(cat)
case $prompt in
  *[![:space:]]*) ;;
  *) printf '%s\n' '{"type":"error","message":"the prompt arrived empty"}'; exit 1 ;;
esac
first=$(printf '%s\n' "$prompt" | awk 'NF { print; exit }')
printf '%s\n' '{"type":"text","text":"Appending the prompt to DEMO.md"}'
printf '%s\n' "- $first" >> DEMO.md
printf '%s\n' '{"type":"tool","name":"Bash","input":{"command":"git commit"}}'
subject=$(printf '%s\n' "$first" | cut -c1-60)
if git add DEMO.md >&2 &&
  git commit -q -m "demo: $subject" >&2
then
  printf '%s\n' '{"type":"done","text":"Committed. <promise>COMPLETE</promise>"}'
else
  printf '%s\n' '{"type":"error","message":"git commit failed"}'
  exit 1
fi
"#;

struct Demo;

impl Guest for Demo {
    type StreamParser = Parser;

    fn describe() -> AgentInfo {
        AgentInfo {
            name: "demo".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "A deterministic demo agent: appends the prompt's first line to \
                          DEMO.md and commits it (no API key, no real agent)"
                .into(),
            program: "sh".into(),
            default_model: None,
            options: vec![],
            env: vec![],
            optional_env: Vec::new(),
            session_files: false,
            egress_hosts: Vec::new(),
        }
    }

    fn build_print_command(request: CommandRequest) -> Result<AgentCommand, String> {
        if request.prompt.trim().is_empty() {
            return Err("the prompt is empty".into());
        }
        if let Some((name, _)) = request.options.first() {
            return Err(format!("the demo agent has no option {name:?}"));
        }
        Ok(AgentCommand {
            argv: vec!["sh".into(), "-c".into(), SCRIPT.into()],
            stdin: Some(request.prompt.into_bytes()),
            env: vec![],
            files: vec![],
        })
    }

    fn build_interactive_command(_request: CommandRequest) -> Result<AgentCommand, String> {
        Ok(AgentCommand {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "echo 'the demo agent has no interactive mode' >&2; exit 1".into(),
            ],
            stdin: None,
            env: vec![],
            files: vec![],
        })
    }

    fn session_file_path(_home: String, _cwd: String, _session_id: String) -> Option<String> {
        None
    }

    fn rewrite_session_cwd(content: String, _from_cwd: String, _to_cwd: String) -> String {
        content
    }

    fn usage_from_session(_content: String) -> Option<sanddune::plugin::types::Usage> {
        None
    }
}

/// Parses the script's JSON lines.
pub struct Parser {
    /// A `done` or `error` line was seen: the run has its final result.
    finished: Cell<bool>,
}

impl GuestStreamParser for Parser {
    fn new(_request: CommandRequest) -> Self {
        Parser {
            finished: Cell::new(false),
        }
    }

    fn push_line(&self, line: String) -> Vec<AgentEvent> {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
            return vec![];
        };
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(String::from);
        match value.get("type").and_then(|t| t.as_str()) {
            Some("text") => field("text").map(AgentEvent::Text).into_iter().collect(),
            Some("tool") => match (field("name"), value.get("input")) {
                (Some(name), Some(input)) => {
                    vec![AgentEvent::ToolCall(ToolCall {
                        name,
                        input: input.to_string(),
                    })]
                }
                _ => vec![],
            },
            Some("done") => {
                self.finished.set(true);
                let text = field("text").unwrap_or_default();
                vec![AgentEvent::Result(AgentResult {
                    is_error: false,
                    text,
                })]
            }
            Some("error") => {
                self.finished.set(true);
                let message = field("message").unwrap_or_else(|| "the demo agent failed".into());
                vec![
                    AgentEvent::Error(message.clone()),
                    AgentEvent::Result(AgentResult {
                        is_error: true,
                        text: message,
                    }),
                ]
            }
            _ => vec![],
        }
    }

    fn push_lines(&self, lines: Vec<String>) -> Vec<AgentEvent> {
        lines
            .into_iter()
            .flat_map(|line| self.push_line(line))
            .collect()
    }

    fn finish(&self) -> Vec<AgentEvent> {
        if self.finished.replace(true) {
            vec![]
        } else {
            vec![AgentEvent::Error(
                "the demo agent ended without a result".into(),
            )]
        }
    }
}

// The export glue only links as a wasm component; natively the logic is still
// compiled and tested.
#[cfg(target_arch = "wasm32")]
export!(Demo);

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::{Command, Stdio};

    fn request(prompt: &str) -> CommandRequest {
        CommandRequest {
            prompt: prompt.into(),
            model: None,
            options: vec![],
            resume_session: None,
            skip_permissions: true,
            env: vec![],
        }
    }

    fn parse(lines: &[&str]) -> Vec<AgentEvent> {
        let parser = Parser::new(request("parse"));
        let mut events: Vec<_> = lines
            .iter()
            .flat_map(|l| parser.push_line(l.to_string()))
            .collect();
        events.extend(parser.finish());
        events
    }

    #[test]
    fn rejects_an_empty_prompt() {
        assert!(Demo::build_print_command(request("")).is_err());
        assert!(Demo::build_print_command(request(" \n\t")).is_err());
    }

    #[test]
    fn prompt_goes_to_stdin() {
        let command = Demo::build_print_command(request("Add a greeting")).unwrap();
        assert_eq!(command.argv, ["sh", "-c", SCRIPT]);
        assert_eq!(command.stdin.as_deref(), Some(&b"Add a greeting"[..]));
    }

    #[test]
    fn parses_a_successful_run() {
        let events = parse(&[
            r#"{"type":"text","text":"Appending the prompt to DEMO.md"}"#,
            "not json",
            r#"{"type":"mystery"}"#,
            r#"{"type":"tool","name":"Bash","input":{"command":"git commit"}}"#,
            r#"{"type":"done","text":"Committed. <promise>COMPLETE</promise>"}"#,
        ]);
        assert!(matches!(&events[..], [
            AgentEvent::Text(t),
            AgentEvent::ToolCall(ToolCall { name, input }),
            AgentEvent::Result(AgentResult { is_error: false, text }),
        ] if t == "Appending the prompt to DEMO.md"
            && name == "Bash"
            && input == r#"{"command":"git commit"}"#
            && text.contains("<promise>COMPLETE</promise>")));
    }

    #[test]
    fn parses_an_error() {
        let events = parse(&[r#"{"type":"error","message":"the prompt arrived empty"}"#]);
        assert!(matches!(&events[..], [
            AgentEvent::Error(m),
            AgentEvent::Result(AgentResult { is_error: true, text }),
        ] if m == "the prompt arrived empty" && text == m));
    }

    #[test]
    fn missing_result_is_an_error() {
        let events = parse(&[r#"{"type":"text","text":"hi"}"#]);
        assert!(matches!(events.last(), Some(AgentEvent::Error(_))));
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs the script with `stdin`, returning (exit success, stdout lines).
    fn run_script(dir: &Path, stdin: &[u8]) -> (bool, Vec<String>) {
        use std::io::Write;
        let mut child = Command::new("sh")
            .args(["-c", SCRIPT])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let lines = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        (out.status.success(), lines)
    }

    #[test]
    fn the_script_commits() {
        let dir = std::env::temp_dir().join(format!("sanddune-demo-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q"]);
        // The user's identity, as sanddune gives it to a sandbox.
        git(&dir, &["config", "user.name", "t"]);
        git(&dir, &["config", "user.email", "t@example.invalid"]);
        git(&dir, &["commit", "-q", "--allow-empty", "-m", "init"]);

        let prompt = format!("\n{}\nsecond line\n", "x".repeat(80));
        let (ok, lines) = run_script(&dir, prompt.as_bytes());
        assert!(ok, "{lines:?}");
        let events = parse(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(matches!(
            events.last(),
            Some(AgentEvent::Result(AgentResult {
                is_error: false,
                ..
            }))
        ));
        let subject = git(&dir, &["log", "-1", "--format=%s"]);
        assert_eq!(subject.trim(), format!("demo: {}", "x".repeat(60)));
        let demo = std::fs::read_to_string(dir.join("DEMO.md")).unwrap();
        assert_eq!(demo, format!("- {}\n", "x".repeat(80)));

        // A dropped prompt is reported, not committed.
        let (ok, lines) = run_script(&dir, b"");
        assert!(!ok);
        assert_eq!(
            lines,
            [r#"{"type":"error","message":"the prompt arrived empty"}"#]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
