//! Checks for agent providers: the prompt reaches the agent, bad requests
//! are refused, and the stream parser survives whatever an agent CLI may
//! print (unknown events, cut-off JSON, replaced bytes, huge lines).

use super::Report;
use crate::plugin::PluginKind;
use crate::plugin::agent::{AgentEvent, AgentProvider, CommandRequest, Usage};

type Checked = Result<String, String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Run every agent check against `agent`; `transcript` is a real agent's
/// stdout for the usage check.
pub async fn run(agent: &mut AgentProvider, transcript: Option<&[u8]>) -> Report {
    let mut report = Report {
        plugin: agent.name().to_string(),
        kind: PluginKind::Agent,
        checks: vec![],
    };
    report.push("describe", describe(agent));
    report.push("prompt-delivered", prompt_delivered(agent).await);
    report.push("empty-prompt-refused", empty_prompt(agent).await);
    report.push("unknown-option-refused", unknown_option(agent).await);
    report.push("parser-robust", parser_robust(agent).await);
    report.push("push-lines-matches-push-line", push_lines(agent).await);
    report.push(
        "finish-without-result-is-error",
        finish_without_result(agent).await,
    );
    report.push("session-helpers-robust", session_helpers(agent).await);
    match transcript {
        Some(lines) => report.push("usage-shape", usage_shape(agent, lines).await),
        None => report.skip(
            "usage-shape",
            "no transcript given; pass --transcript FILE (a real run's stdout) to check the usage events",
        ),
    }
    report
}

fn request(prompt: &str) -> CommandRequest {
    CommandRequest {
        prompt: prompt.into(),
        model: None,
        options: vec![],
        resume_session: None,
        skip_permissions: true,
        env: Vec::new(),
    }
}

fn describe(agent: &AgentProvider) -> Checked {
    let info = agent.info();
    ensure!(
        !info.name.trim().is_empty(),
        "describe returned an empty name"
    );
    ensure!(
        !info.program.trim().is_empty(),
        "describe returned an empty program"
    );
    let mut names: Vec<&str> = info.options.iter().map(|o| o.name.as_str()).collect();
    names.sort();
    ensure!(
        names.windows(2).all(|w| w[0] != w[1]),
        "option names repeat: {names:?}"
    );
    ensure!(
        info.env.iter().all(|r| !r.any_of.is_empty()),
        "an env requirement lists no keys: a group with no key can never be satisfied"
    );
    Ok(format!("program {}", info.program))
}

async fn prompt_delivered(agent: &mut AgentProvider) -> Checked {
    // Several lines, quotes, shell syntax and non-ASCII: all must arrive as is.
    let prompt = "Fix the typo in README.md.\nDo not run `rm -rf /` or $(whoami); say \"done\" — ✓";
    let cmd = agent
        .build_print_command(&request(prompt))
        .await
        .map_err(|e| format!("build-print-command refused a plain prompt: {e}"))?;
    ensure!(!cmd.argv.is_empty(), "the print command has an empty argv");
    if let Some(stdin) = &cmd.stdin
        && stdin.windows(prompt.len()).any(|w| w == prompt.as_bytes())
    {
        return Ok("on stdin".into());
    }
    ensure!(
        cmd.argv.iter().any(|a| a.contains(prompt)),
        "the prompt is neither in the stdin bytes nor in one argv element, byte for byte"
    );
    Ok("in argv".into())
}

async fn empty_prompt(agent: &mut AgentProvider) -> Checked {
    for prompt in ["", " \n\t"] {
        ensure!(
            agent.build_print_command(&request(prompt)).await.is_err(),
            "build-print-command accepted the prompt {prompt:?}: an agent given an empty prompt does nothing useful, refuse it"
        );
    }
    Ok(String::new())
}

async fn unknown_option(agent: &mut AgentProvider) -> Checked {
    let mut req = request("hello");
    req.options = vec![("sanddune-conformance-no-such-option".into(), "1".into())];
    ensure!(
        agent.build_print_command(&req).await.is_err(),
        "build-print-command accepted an option it does not declare: validate options against describe"
    );
    Ok(String::new())
}

/// Lines an agent CLI might print that no parser expects.
fn hostile_lines() -> Vec<String> {
    let huge = "a".repeat(1 << 20);
    vec![
        String::new(),
        "not json at all".into(),
        "{".into(),
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"cut"#.into(),
        r#"{"type":"sanddune-conformance-unknown-event","data":{"x":[1,2,3]}}"#.into(),
        r#"{"type":null}"#.into(),
        r#"{"type":42,"text":{}}"#.into(),
        "{}".into(),
        "[]".into(),
        "null".into(),
        "42".into(),
        r#""a string""#.into(),
        // Invalid UTF-8 as the host delivers it: replaced by U+FFFD.
        "\u{FFFD}\u{FFFD}{\"type\":\"text\",\"text\":\"\u{FFFD}\"}".into(),
        "\u{0}\u{1b}[31mred\u{1b}[0m".into(),
        format!(r#"{{"type":"text","text":"{huge}"}}"#),
        huge,
    ]
}

async fn parser_robust(agent: &mut AgentProvider) -> Checked {
    let parser = agent
        .new_parser(&request("parse"))
        .await
        .map_err(|e| format!("stream-parser constructor: {e}"))?;
    for line in hostile_lines() {
        let shown: String = line.chars().take(60).collect();
        agent
            .push_line(&parser, &line)
            .await
            .map_err(|e| format!("push-line {shown:?} ({} bytes): {e}", line.len()))?;
    }
    agent
        .finish(parser)
        .await
        .map_err(|e| format!("finish after hostile lines: {e}"))?;
    Ok(String::new())
}

/// The WIT promises push-lines gives the same events as push-line on each.
async fn push_lines(agent: &mut AgentProvider) -> Checked {
    let lines = hostile_lines();
    let one = agent
        .new_parser(&request("parse"))
        .await
        .map_err(|e| e.to_string())?;
    let mut single = vec![];
    for line in &lines {
        single.extend(
            agent
                .push_line(&one, line)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    agent.finish(one).await.map_err(|e| e.to_string())?;
    let many = agent
        .new_parser(&request("parse"))
        .await
        .map_err(|e| e.to_string())?;
    let batched = agent
        .push_lines(&many, &lines)
        .await
        .map_err(|e| format!("push-lines: {e}"))?;
    agent.finish(many).await.map_err(|e| e.to_string())?;
    ensure!(
        format!("{single:?}") == format!("{batched:?}"),
        "push-lines gave {} events, push-line on each gave {}: they must agree",
        batched.len(),
        single.len()
    );
    Ok(String::new())
}

async fn finish_without_result(agent: &mut AgentProvider) -> Checked {
    for lines in [
        vec![],
        vec!["{\"type\":\"sanddune-conformance-unknown-event\"}".to_string()],
    ] {
        let parser = agent
            .new_parser(&request("parse"))
            .await
            .map_err(|e| e.to_string())?;
        agent
            .push_lines(&parser, &lines)
            .await
            .map_err(|e| e.to_string())?;
        let events = agent.finish(parser).await.map_err(|e| e.to_string())?;
        ensure!(
            events.iter().any(|e| matches!(e, AgentEvent::Error(_))),
            "finish on a stream with no result ({} lines) gave no error event: a run would count a crashed agent as done",
            lines.len()
        );
    }
    Ok(String::new())
}

async fn session_helpers(agent: &mut AgentProvider) -> Checked {
    let garbage = "not json\n{\"cwd\":\n\u{FFFD}";
    let rewritten = agent
        .rewrite_session_cwd(garbage, "/from", "/to")
        .await
        .map_err(|e| format!("rewrite-session-cwd: {e}"))?;
    ensure!(
        rewritten == garbage,
        "rewrite-session-cwd changed lines it cannot parse (and that hold no /from): keep them verbatim"
    );
    agent
        .usage_from_session(garbage)
        .await
        .map_err(|e| format!("usage-from-session: {e}"))?;
    let path = agent
        .session_file_path("/home/u", "/work/repo", "sanddune-conformance-session")
        .await
        .map_err(|e| format!("session-file-path: {e}"))?;
    if !agent.info().session_files {
        ensure!(
            path.is_none(),
            "describe says session-files false, but session-file-path gave {path:?}"
        );
    }
    Ok(String::new())
}

/// Usage events are the iteration's running total: no field ever goes down
/// (a parser that sees usage per turn sums), and a transcript that reports
/// usage yields at least one event.
async fn usage_shape(agent: &mut AgentProvider, transcript: &[u8]) -> Checked {
    let lines: Vec<String> = String::from_utf8_lossy(transcript)
        .lines()
        .map(String::from)
        .collect();
    let parser = agent
        .new_parser(&request("parse"))
        .await
        .map_err(|e| e.to_string())?;
    let mut events = agent
        .push_lines(&parser, &lines)
        .await
        .map_err(|e| format!("push-lines of the transcript: {e}"))?;
    events.extend(agent.finish(parser).await.map_err(|e| e.to_string())?);
    let usages: Vec<&Usage> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage(u) => Some(u),
            _ => None,
        })
        .collect();
    ensure!(
        !usages.is_empty(),
        "the transcript ({} lines) gave no usage event",
        lines.len()
    );
    let fields = |u: &Usage| {
        [
            u.input_tokens,
            u.cache_creation_input_tokens,
            u.cache_read_input_tokens,
            u.output_tokens,
        ]
    };
    for pair in usages.windows(2) {
        let (a, b) = (fields(pair[0]), fields(pair[1]));
        ensure!(
            a.iter().zip(&b).all(|(x, y)| y >= x),
            "usage went down from {a:?} to {b:?} (input, cache-creation, cache-read, output): each usage event is the iteration's total so far"
        );
    }
    let last = usages[usages.len() - 1];
    ensure!(
        fields(last).iter().any(|n| *n > 0),
        "the last usage event is all zeros"
    );
    Ok(format!(
        "{} usage events, total {:?}",
        usages.len(),
        fields(last)
    ))
}
