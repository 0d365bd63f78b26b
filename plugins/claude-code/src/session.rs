//! Claude Code session files: `~/.claude/projects/<enc>/<session-id>.jsonl`,
//! one JSON object per line.

use sanddune_agent_sdk::session::{self, encode_cwd};
use serde_json::Value;

use crate::parser::{Usage, usage_from_json};

/// `{home}/.claude/projects/{enc}/{id}.jsonl`. None for an id that could
/// step outside the project directory (ids are UUIDs in practice).
pub fn session_file_path(home: &str, cwd: &str, session_id: &str) -> Option<String> {
    if !session::is_file_name(session_id) {
        return None;
    }
    let home = home.trim_end_matches('/');
    Some(format!(
        "{home}/.claude/projects/{}/{session_id}.jsonl",
        encode_cwd(cwd)
    ))
}

/// Rewrites the top-level `"cwd"` of every line where it equals `from`. Only
/// the cwd value's bytes change: key order, number spelling and every other
/// line stay exactly as they were.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    session::rewrite_top_level_cwd(content, from, to)
}

/// Usage of the last `assistant` line that carries `message.usage`.
pub fn usage_from_session(content: &str) -> Option<Usage> {
    content.lines().rev().find_map(|line| {
        let value: Value = serde_json::from_str(line).ok()?;
        if value.get("type")?.as_str()? != "assistant" {
            return None;
        }
        usage_from_json(value.get("message")?.get("usage")?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_encoding() {
        assert_eq!(
            session_file_path("/home/u", "/x/.sanddune/worktrees/a", "5805de68").as_deref(),
            Some("/home/u/.claude/projects/-x--sanddune-worktrees-a/5805de68.jsonl")
        );
        assert_eq!(
            session_file_path("/home/u/", "/w", "id").as_deref(),
            Some("/home/u/.claude/projects/-w/id.jsonl")
        );
        for bad in ["", ".", "..", "../../etc/passwd", "a/b", "a\\b"] {
            assert_eq!(session_file_path("/home/u", "/w", bad), None, "{bad}");
        }
    }

    const SESSION: &str = concat!(
        r#"{"type":"summary","summary":"Fix tests","leafUuid":"u0"}"#,
        "\n",
        r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.330","gitBranch":"main","type":"user","message":{"role":"user","content":"fix the tests in /w"},"uuid":"u1","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"parentUuid":"u1","isSidechain":false,"userType":"external","cwd":"/w","sessionId":"s1","version":"2.1.330","type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cd /w && npm test","cwd":"/w"}}],"usage":{"input_tokens":2,"cache_creation_input_tokens":100,"cache_read_input_tokens":9600,"output_tokens":58}},"costUSD":1.0e-2,"big":123456789012345678901234567890,"uuid":"u2","timestamp":"2026-01-01T00:00:01.000Z"}"#,
        "\n",
        r#"{"cwd" : "/w/sub","type":"user","uuid":"u3"}"#,
        "\n",
        "not json at all {\"cwd\":\"/w\"}\n",
        "\n",
        r#"{"parentUuid":"u3","cwd":"/w","type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Done"}],"usage":{"input_tokens":3,"output_tokens":9}},"uuid":"u4"}"#,
        "\n",
        r#"{"parentUuid":"u4","cwd":"/w","type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"no usage"}]},"uuid":"u5"}"#,
        "\n",
    );

    #[test]
    fn cwd_rewrite_round_trip() {
        let moved = rewrite_session_cwd(SESSION, "/w", "/home/u/my \"repo\"");
        assert_ne!(moved, SESSION);
        assert!(moved.ends_with('\n'));
        assert_eq!(moved.lines().count(), SESSION.lines().count());
        for (before, after) in SESSION.lines().zip(moved.lines()) {
            let b: Result<Value, _> = serde_json::from_str(before);
            match b
                .ok()
                .filter(|b| b.get("cwd").and_then(Value::as_str) == Some("/w"))
            {
                Some(mut b) => {
                    let a: Value = serde_json::from_str(after).unwrap();
                    assert_eq!(a["cwd"], "/home/u/my \"repo\"");
                    // Nothing but the top-level cwd changed, not even nested "cwd"s.
                    b["cwd"] = a["cwd"].clone();
                    assert_eq!(a, b);
                    assert_eq!(
                        after.len() - before.len(),
                        r#"/home/u/my \"repo\""#.len() - 2
                    );
                }
                // Unparsable lines, other cwds and lines without cwd: untouched.
                None => assert_eq!(before, after),
            }
        }
        // Key order and number spelling survive.
        assert!(moved.contains(r#""costUSD":1.0e-2,"big":123456789012345678901234567890,"#));
        assert!(moved.contains(r#"{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/home/u/my \"repo\"","#));
        assert_eq!(
            rewrite_session_cwd(&moved, "/home/u/my \"repo\"", "/w"),
            SESSION
        );
    }

    #[test]
    fn cwd_rewrite_edge_cases() {
        assert_eq!(rewrite_session_cwd("", "/a", "/b"), "");
        assert_eq!(rewrite_session_cwd("\n\n", "/a", "/b"), "\n\n");
        assert_eq!(
            rewrite_session_cwd("{\"cwd\":\"/a\"}\r\n{\"cwd\":\"/a\"}", "/a", "/b"),
            "{\"cwd\":\"/b\"}\r\n{\"cwd\":\"/b\"}"
        );
        // Escaped spellings of the key and the value are recognised.
        assert_eq!(
            rewrite_session_cwd(
                r#"{ "x": [1, {"cwd": "/a"}], "\u0063wd" : "\/a" }"#,
                "/a",
                "/b"
            ),
            r#"{ "x": [1, {"cwd": "/a"}], "\u0063wd" : "/b" }"#
        );
        // Non-string cwd, arrays, truncated lines: untouched.
        for line in [r#"{"cwd":1}"#, r#"["cwd","/a"]"#, r#"{"cwd":"/a""#] {
            assert_eq!(rewrite_session_cwd(line, "/a", "/b"), line);
        }
    }

    #[test]
    fn usage_from_last_assistant_line() {
        assert_eq!(
            usage_from_session(SESSION),
            Some(Usage {
                input_tokens: 3,
                output_tokens: 9,
                ..Usage::default()
            })
        );
        let first_only: String = SESSION.lines().take(3).collect::<Vec<_>>().join("\n");
        assert_eq!(
            usage_from_session(&first_only),
            Some(Usage {
                input_tokens: 2,
                cache_creation_input_tokens: 100,
                cache_read_input_tokens: 9600,
                output_tokens: 58,
            })
        );
        assert_eq!(usage_from_session(""), None);
        assert_eq!(
            usage_from_session(
                "{\"type\":\"user\",\"message\":{\"usage\":{\"input_tokens\":1}}}\ngarbage"
            ),
            None
        );
    }
}
