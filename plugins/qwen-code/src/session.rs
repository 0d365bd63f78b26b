//! Qwen Code session files:
//! `~/.qwen/projects/<enc>/chats/<session-id>.jsonl`, one JSON record per
//! line, the project directory named after the cwd as Claude Code names it.

use sanddune_agent_sdk::session;
use serde_json::Value;

use crate::parser::{Usage, usage_from_json};

/// `{home}/.qwen/projects/{enc}/chats/{id}.jsonl`. None for an id that
/// could step outside the directory.
pub fn session_file_path(home: &str, cwd: &str, session_id: &str) -> Option<String> {
    if !session::is_file_name(session_id) {
        return None;
    }
    let home = home.trim_end_matches('/');
    Some(format!(
        "{home}/.qwen/projects/{}/chats/{session_id}.jsonl",
        session::encode_cwd(cwd)
    ))
}

/// Rewrites the top-level `"cwd"` of every record where it equals `from`;
/// nothing else in the file changes.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    session::rewrite_top_level_cwd(content, from, to)
}

/// Usage of the last `assistant` record that carries `usageMetadata`.
pub fn usage_from_session(content: &str) -> Option<Usage> {
    content.lines().rev().find_map(|line| {
        let value: Value = serde_json::from_str(line).ok()?;
        if value.get("type")?.as_str()? != "assistant" {
            return None;
        }
        usage_from_json(value.get("usageMetadata")?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDS: &str = concat!(
        r#"{"uuid":"u1","parentUuid":null,"sessionId":"s1","timestamp":"2026-11-27T20:00:38.996Z","type":"user","cwd":"/w","version":"0.24.4","message":{"role":"user","parts":[{"text":"add a line"}]}}"#,
        "\n",
        r#"{"uuid":"u2","parentUuid":"u1","sessionId":"s1","type":"assistant","cwd":"/w","model":"m","message":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"cd /w"}}}]},"usageMetadata":{"promptTokenCount":200,"candidatesTokenCount":30,"totalTokenCount":230,"cachedContentTokenCount":0}}"#,
        "\n",
        r#"{"uuid":"u3","parentUuid":"u2","sessionId":"s1","type":"assistant","cwd":"/w","model":"m","message":{"role":"model","parts":[{"text":"done"}]},"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":7,"thoughtsTokenCount":0,"totalTokenCount":107,"cachedContentTokenCount":40}}"#,
        "\n",
        r#"{"uuid":"u4","parentUuid":"u3","sessionId":"s1","type":"system","subtype":"ui_telemetry","cwd":"/w"}"#,
        "\n",
    );

    #[test]
    fn the_path_is_derived_from_home_cwd_and_id() {
        assert_eq!(
            session_file_path("/home/u/", "/tmp/qrepo-toolB", "3d13499a").as_deref(),
            Some("/home/u/.qwen/projects/-tmp-qrepo-toolB/chats/3d13499a.jsonl")
        );
        for bad in ["", "..", "../x", "a/b"] {
            assert_eq!(session_file_path("/home/u", "/w", bad), None, "{bad}");
        }
    }

    #[test]
    fn cwd_is_rewritten_and_usage_read_from_the_last_answer() {
        let moved = rewrite_session_cwd(RECORDS, "/w", "/repo/x");
        assert_eq!(moved.matches(r#""cwd":"/repo/x""#).count(), 4);
        // Nested text that says /w is not the cwd field.
        assert!(moved.contains(r#""command":"cd /w""#));
        assert_eq!(
            usage_from_session(RECORDS),
            Some(Usage {
                input_tokens: 60,
                cache_read_input_tokens: 40,
                output_tokens: 7,
                ..Usage::default()
            })
        );
        assert_eq!(usage_from_session(""), None);
    }
}
