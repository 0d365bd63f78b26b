//! Copilot sessions: `~/.copilot/session-state/<session-id>/events.jsonl`,
//! one `{"type","data","id","timestamp","parentId"}` event per line. The
//! first, `session.start`, holds the working directory
//! (`data.context.cwd`, `data.context.gitRoot`); each model call leaves a
//! `session.usage_record`, and each prompt (`-p`, also on `--resume`) a
//! `user.message`. Copilot 1.0.102 prints no token counts on stdout, so the
//! iteration's usage comes from here. `copilot --resume=<id>` needs only
//! this file.

use sanddune_agent_sdk::json;
use serde_json::Value;

use crate::parser::Usage;

/// `{home}/.copilot/session-state/{id}/events.jsonl`; None for an id that
/// could leave that directory.
pub fn session_file_path(home: &str, _cwd: &str, session_id: &str) -> Option<String> {
    let safe = !session_id.is_empty()
        && session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    safe.then(|| {
        format!(
            "{}/.copilot/session-state/{session_id}/events.jsonl",
            home.trim_end_matches('/')
        )
    })
}

/// Rewrites `data.context.cwd` and `data.context.gitRoot` equal to `from`.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    json::rewrite_string_values(content, from, to, |line, _| {
        let mut spans = Vec::new();
        for data in json::top_level_values(line, "data").unwrap_or_default() {
            for context in
                json::top_level_values(&line[data.clone()], "context").unwrap_or_default()
            {
                let start = data.start + context.start;
                let text = &line[start..data.start + context.end];
                for key in ["cwd", "gitRoot"] {
                    spans.extend(
                        json::top_level_values(text, key)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|s| s.start + start..s.end + start),
                    );
                }
            }
        }
        spans
    })
}

/// The last prompt's usage: the `session.usage_record`s since the last
/// `user.message`. Copilot's `inputTokens` counts the cache reads and
/// writes too (measured against Anthropic and OpenAI APIs), so fresh input
/// is the difference. None when that prompt recorded none.
pub fn usage_from_session(content: &str) -> Option<Usage> {
    let mut turn: Option<Usage> = None;
    for line in content.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match value.get("type").and_then(Value::as_str) {
            Some("user.message") => turn = None,
            Some("session.usage_record") => {
                let Some((usage, true)) = Usage::from_keys(
                    &value["data"]["usage"],
                    [
                        &["inputTokens"],
                        &["cacheWriteTokens"],
                        &["cacheReadTokens"],
                        &["outputTokens"],
                    ],
                ) else {
                    continue;
                };
                turn.get_or_insert_default().add(Usage {
                    input_tokens: usage
                        .input_tokens
                        .saturating_sub(usage.cache_read_input_tokens)
                        .saturating_sub(usage.cache_creation_input_tokens),
                    ..usage
                });
            }
            _ => {}
        }
    }
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    // Copilot 1.0.102's events.jsonl against tests/model-mock (BYOK, chat
    // completions): one prompt (two model calls), then `--resume` with a
    // second prompt (two more), trimmed to the lines read here.
    const REAL: &str = include_str!("../testdata/copilot-1.0.102-events.jsonl");

    #[test]
    fn path() {
        assert_eq!(
            session_file_path("/home/u/", "/w", "73de4807-4711-4dfe-a073-e82ae4b4f471").as_deref(),
            Some(
                "/home/u/.copilot/session-state/73de4807-4711-4dfe-a073-e82ae4b4f471/events.jsonl"
            )
        );
        for bad in ["", "..", "a/b", "../x", "a b", "a\0b"] {
            assert_eq!(session_file_path("/h", "/w", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn usage_of_the_last_prompt() {
        // The resumed prompt's two calls: 111 + 211 fresh, 1005 + 2005 read.
        assert_eq!(
            usage_from_session(REAL),
            Some(Usage {
                input_tokens: 322,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 3010,
                output_tokens: 44,
            })
        );
        let anthropic = r#"{"type":"session.usage_record","data":{"usage":{"model":"claude-sonnet-4.5","inputTokens":1139,"outputTokens":17,"cacheReadTokens":1005,"cacheWriteTokens":23,"cost":0.0}}}"#;
        assert_eq!(
            usage_from_session(anthropic),
            Some(Usage {
                input_tokens: 111,
                cache_creation_input_tokens: 23,
                cache_read_input_tokens: 1005,
                output_tokens: 17,
            })
        );
        let (first, _) = REAL.split_at(REAL.rfind("\"type\":\"user.message\"").unwrap());
        let started = format!("{first}{}", REAL[first.len()..].lines().next().unwrap());
        assert_eq!(usage_from_session(&started), None);
        assert_eq!(usage_from_session(""), None);
    }

    #[test]
    fn cwd_rewrite() {
        let moved = rewrite_session_cwd(REAL, "/work/scratch/openai/rrepo", "/home/u/my \"repo\"");
        let start = moved.lines().next().unwrap();
        let v: Value = serde_json::from_str(start).unwrap();
        assert_eq!(v["data"]["context"]["cwd"], "/home/u/my \"repo\"");
        assert_eq!(v["data"]["context"]["gitRoot"], "/home/u/my \"repo\"");
        assert_eq!(moved.lines().count(), REAL.lines().count());
        for (a, b) in REAL.lines().zip(moved.lines()).skip(1) {
            assert_eq!(a, b);
        }
        assert_eq!(
            rewrite_session_cwd(&moved, "/home/u/my \"repo\"", "/work/scratch/openai/rrepo"),
            REAL
        );
    }
}
