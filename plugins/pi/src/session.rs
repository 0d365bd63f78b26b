//! pi session files: `~/.pi/agent/sessions/<enc>/<ts>_<session-id>.jsonl`,
//! one JSON object per line. The first line is the header
//! `{"type":"session","version":3,"id":...,"timestamp":...,"cwd":...}`, the
//! only line with a working directory; then entries such as
//! `{"type":"message","id":...,"parentId":...,"timestamp":...,"message":{...}}`.
//!
//! `<ts>` is the session's creation time (ISO 8601 with `:` and `.` turned
//! into `-`), which cannot be derived from (home, cwd, id). pi does not need
//! it: `pi --session <id>` finds a session by reading the header `id` of every
//! `.jsonl` file in the cwd's directory, whatever the file is called.

use sanddune_agent_sdk::json;
use serde_json::Value;

use crate::parser::{Usage, usage_from_json};

/// pi's directory name for a cwd: the leading `/` (or `\`) dropped, every
/// `/`, `\` and `:` turned into `-`, wrapped in `--`
/// (`/home/u/my_repo` -> `--home-u-my_repo--`).
pub fn encode_cwd(cwd: &str) -> String {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    let inner: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{inner}--")
}

/// `{home}/.pi/agent/sessions/{enc}/{id}.jsonl`: where a session file for
/// `pi --session <id>` goes (pi resolves ids by header, not by file name).
/// A file pi writes itself carries a creation-time prefix instead
/// (`<ts>_<id>.jsonl`) in the same directory. None for an id that could step
/// outside the directory or that pi would read as a path.
pub fn session_file_path(home: &str, cwd: &str, session_id: &str) -> Option<String> {
    if session_id.is_empty()
        || session_id == "."
        || session_id == ".."
        || session_id.contains(['/', '\\', '\0'])
        || session_id.ends_with(".jsonl")
    {
        return None;
    }
    let home = home.trim_end_matches('/');
    Some(format!(
        "{home}/.pi/agent/sessions/{}/{session_id}.jsonl",
        encode_cwd(cwd)
    ))
}

/// Rewrites the `cwd` of the header line (`type: "session"`) when it equals
/// `from`. Only the cwd value's bytes change: key order, number spelling and
/// every other line stay exactly as they were.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    json::rewrite_string_values(content, from, to, |line, obj| {
        if obj.get("type").and_then(Value::as_str) != Some("session") {
            return Vec::new();
        }
        json::top_level_values(line, "cwd").unwrap_or_default()
    })
}

/// Usage of the last assistant message entry that carries `message.usage`
/// (one entry per model call).
pub fn usage_from_session(content: &str) -> Option<Usage> {
    content.lines().rev().find_map(|line| {
        let value: Value = serde_json::from_str(line).ok()?;
        if value.get("type")?.as_str()? != "message" {
            return None;
        }
        let message = value.get("message")?;
        if message.get("role")?.as_str()? != "assistant" {
            return None;
        }
        usage_from_json(message.get("usage")?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_encoding() {
        assert_eq!(encode_cwd("/home/u/my_repo"), "--home-u-my_repo--");
        assert_eq!(
            encode_cwd("/x/.sanddune/worktrees/a"),
            "--x-.sanddune-worktrees-a--"
        );
        assert_eq!(encode_cwd("/w"), "--w--");
        assert_eq!(encode_cwd("/"), "----");
        assert_eq!(encode_cwd("C:\\Users\\u\\repo"), "--C--Users-u-repo--");
        assert_eq!(encode_cwd("/tmp/café 1"), "--tmp-café 1--");
        assert_eq!(
            session_file_path("/home/u", "/x/.sanddune/worktrees/a", "0199a1b2").as_deref(),
            Some("/home/u/.pi/agent/sessions/--x-.sanddune-worktrees-a--/0199a1b2.jsonl")
        );
        assert_eq!(
            session_file_path("/home/u/", "/w", "id").as_deref(),
            Some("/home/u/.pi/agent/sessions/--w--/id.jsonl")
        );
        for bad in ["", ".", "..", "../../etc/passwd", "a/b", "a\\b", "x.jsonl"] {
            assert_eq!(session_file_path("/home/u", "/w", bad), None, "{bad}");
        }
    }

    const SESSION: &str = concat!(
        r#"{"type":"session","version":3,"id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"model_change","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.001Z","provider":"anthropic","modelId":"claude-sonnet-4-5"}"#,
        "\n",
        r#"{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-01-01T00:00:00.002Z","message":{"role":"user","content":[{"type":"text","text":"fix the tests in /w"}],"timestamp":1767225600002}}"#,
        "\n",
        r#"{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"toolu_1","name":"bash","arguments":{"command":"cd /w && npm test","cwd":"/w"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":2,"output":58,"cacheRead":9600,"cacheWrite":100,"totalTokens":9760,"cost":{"input":6.0e-6,"output":0.00087,"cacheRead":0.00288,"cacheWrite":0.000375,"total":0.004131}},"stopReason":"toolUse","timestamp":1767225601000}}"#,
        "\n",
        r#"{"type":"message","id":"d4e5f6a7","parentId":"c3d4e5f6","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"toolResult","toolCallId":"toolu_1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":1767225602000}}"#,
        "\n",
        "not json at all {\"type\":\"session\",\"cwd\":\"/w\"}\n",
        "\n",
        r#"{"type":"message","id":"e5f6a7b8","parentId":"d4e5f6a7","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Done"}],"usage":{"input":3,"output":9,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225603000}}"#,
        "\n",
        r#"{"type":"message","id":"f6a7b8c9","parentId":"e5f6a7b8","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"no usage","timestamp":1767225604000}}"#,
        "\n",
    );

    #[test]
    fn cwd_rewrite_header_only() {
        let to = "/home/u/my \"repo\"";
        let moved = rewrite_session_cwd(SESSION, "/w", to);
        assert!(moved.ends_with('\n'));
        assert_eq!(moved.lines().count(), SESSION.lines().count());
        let mut changed = 0;
        for (before, after) in SESSION.lines().zip(moved.lines()) {
            if before == after {
                continue;
            }
            changed += 1;
            let mut b: Value = serde_json::from_str(before).unwrap();
            let a: Value = serde_json::from_str(after).unwrap();
            assert_eq!(a["type"], "session");
            assert_eq!(a["cwd"], to);
            b["cwd"] = a["cwd"].clone();
            assert_eq!(a, b);
        }
        assert_eq!(changed, 1);
        // Everything else verbatim, including paths inside messages.
        assert!(moved.contains(r#""arguments":{"command":"cd /w && npm test","cwd":"/w"}"#));
        assert!(moved.starts_with(
            r#"{"type":"session","version":3,"id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/u/my \"repo\""}"#
        ));
        assert!(moved.contains(r#""cost":{"input":6.0e-6,"#));
        assert_eq!(rewrite_session_cwd(&moved, to, "/w"), SESSION);
    }

    #[test]
    fn cwd_rewrite_edge_cases() {
        assert_eq!(rewrite_session_cwd("", "/a", "/b"), "");
        assert_eq!(rewrite_session_cwd("\n\n", "/a", "/b"), "\n\n");
        assert_eq!(
            rewrite_session_cwd("{\"type\":\"session\",\"cwd\":\"/a\"}\r\n", "/a", "/b"),
            "{\"type\":\"session\",\"cwd\":\"/b\"}\r\n"
        );
        // Other cwds, other line types, non-string cwds, truncated lines: untouched.
        for line in [
            r#"{"type":"session","cwd":"/a/sub"}"#,
            r#"{"type":"message","cwd":"/a"}"#,
            r#"{"cwd":"/a"}"#,
            r#"{"type":"session","cwd":1}"#,
            r#"{"type":"session","cwd":"/a""#,
        ] {
            assert_eq!(rewrite_session_cwd(line, "/a", "/b"), line);
        }
        // Escaped spellings of the key and the value are recognised.
        assert_eq!(
            rewrite_session_cwd(r#"{ "type" : "session", "\u0063wd" : "\/a" }"#, "/a", "/b"),
            r#"{ "type" : "session", "\u0063wd" : "/b" }"#
        );
    }

    #[test]
    fn usage_from_last_assistant_message() {
        assert_eq!(
            usage_from_session(SESSION),
            Some(Usage {
                input_tokens: 3,
                output_tokens: 9,
                ..Usage::default()
            })
        );
        let first_only: String = SESSION.lines().take(5).collect::<Vec<_>>().join("\n");
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
                "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"usage\":{\"input\":1}}}\ngarbage"
            ),
            None
        );
    }

    /// A session file `tests/fakes/pi` wrote under
    /// ~/.pi/agent/sessions/--<enc>--/<ts>_<id>.jsonl, captured by hand.
    const FAKE_SESSION: &str = include_str!("testdata/fake-session.jsonl");

    #[test]
    fn captured_fake_session_file() {
        let header: Value = serde_json::from_str(FAKE_SESSION.lines().next().unwrap()).unwrap();
        let cwd = header["cwd"].as_str().unwrap();
        let moved = rewrite_session_cwd(FAKE_SESSION, cwd, "/home/u/repo");
        let (before, after) = (
            FAKE_SESSION.split_once('\n').unwrap(),
            moved.split_once('\n').unwrap(),
        );
        assert_eq!(before.1, after.1, "only the header changes");
        let moved_header: Value = serde_json::from_str(after.0).unwrap();
        assert_eq!(moved_header["cwd"], "/home/u/repo");
        assert_eq!(moved_header["id"], header["id"]);
        assert_eq!(
            rewrite_session_cwd(&moved, "/home/u/repo", cwd),
            FAKE_SESSION
        );
        assert_eq!(
            usage_from_session(FAKE_SESSION),
            Some(Usage {
                input_tokens: 40,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 10800,
                output_tokens: 20,
            })
        );
    }
}
