//! Codex session files ("rollouts"):
//! `${CODEX_HOME:-$HOME/.codex}/sessions/YYYY/MM/DD/rollout-<ts>-<thread-id>.jsonl`,
//! one `{"timestamp","type","payload"}` object per line. The first line is
//! `session_meta` (`payload.id`, `payload.cwd`); `turn_context` lines carry
//! `payload.cwd` too; `event_msg` lines with `payload.type == "token_count"`
//! carry the running token totals and each response's own
//! (`last_token_usage`); `task_started` begins each `codex exec` turn.

use sanddune_agent_sdk::json;
use serde_json::Value;

use crate::parser::{Usage, usage_from_codex};

/// Where codex keeps the session `session_id`, as codex itself names it:
/// `{home}/.codex/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-{id}.jsonl`.
///
/// Codex stamps the directory and file name with the LOCAL time at which it
/// created the file, which `(home, cwd, id)` cannot tell exactly. Codex
/// thread ids are UUIDv7, whose first 48 bits are the creation time in Unix
/// milliseconds, and codex creates the file right after the id; so the time
/// here is the id's, in UTC. That is:
///
/// - where codex will FIND the file when resuming: it looks a session up by
///   the id in the file name anywhere under `sessions/`, and this name also
///   parses like its own in `codex resume`'s listing. A host that puts a
///   session into a sandbox can write it here.
/// - where codex WROTE the file only when the sandbox's clock runs in UTC (the
///   usual case in containers) and the file was created within the id's
///   second. A host that takes a session out of a sandbox should try this path
///   and otherwise look for `sessions/**/rollout-*-{id}.jsonl`.
///
/// `cwd` plays no part: codex does not file sessions by directory. None for an
/// id that is not a UUIDv7 (older codex versions used v4 ids, which carry no
/// time).
pub fn session_file_path(home: &str, _cwd: &str, session_id: &str) -> Option<String> {
    let millis = uuid_v7_millis(session_id)?;
    let (year, month, day, hour, minute, second) = utc_from_unix_millis(millis);
    let home = home.trim_end_matches('/');
    Some(format!(
        "{home}/.codex/sessions/{year:04}/{month:02}/{day:02}/\
         rollout-{year:04}-{month:02}-{day:02}T{hour:02}-{minute:02}-{second:02}-{session_id}.jsonl"
    ))
}

/// The timestamp of a UUIDv7 in its canonical 8-4-4-4-12 hex form.
fn uuid_v7_millis(id: &str) -> Option<u64> {
    let bytes = id.as_bytes();
    let canonical = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    // Version 7, RFC 9562 variant (10xx).
    if !canonical
        || bytes[14] != b'7'
        || !matches!(bytes[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B')
    {
        return None;
    }
    let hex: String = id[..8].chars().chain(id[9..13].chars()).collect();
    u64::from_str_radix(&hex, 16).ok()
}

/// (year, month, day, hour, minute, second) in UTC.
fn utc_from_unix_millis(millis: u64) -> (u64, u64, u64, u64, u64, u64) {
    let secs = millis / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days >= 0 since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Rewrites every working directory equal to `from` to `to`: the
/// `payload.cwd` of `session_meta` and `turn_context` lines (of any line, in
/// fact) and a top-level `cwd`. Only those values' bytes change: key order,
/// number spelling and every other line stay exactly as they were. Paths
/// inside message text (codex's `<environment_context>`) are left alone.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    json::rewrite_string_values(content, from, to, |line, _| {
        let mut spans = json::top_level_values(line, "cwd").unwrap_or_default();
        for payload in json::top_level_values(line, "payload").unwrap_or_default() {
            let inner = json::top_level_values(&line[payload.clone()], "cwd").unwrap_or_default();
            spans.extend(
                inner
                    .into_iter()
                    .map(|s| s.start + payload.start..s.end + payload.start),
            );
        }
        spans
    })
}

/// The last turn's own token usage: the sum of `payload.info.last_token_usage`
/// (one model response each) of the `token_count` events since the last
/// `task_started` (each `codex exec`, resumed or not, starts one), converted
/// as in the stream (fresh input = input - cached). After a resume this is
/// the resumed iteration's usage, where the stream reports the session's
/// running total. None when the turn records none.
pub fn usage_from_session(content: &str) -> Option<Usage> {
    let mut turn: Option<Usage> = None;
    for line in content.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if value.get("type").and_then(Value::as_str) != Some("event_msg") {
            continue;
        }
        let payload = &value["payload"];
        match payload.get("type").and_then(Value::as_str) {
            Some("task_started") => turn = None,
            Some("token_count") => {
                if let Some(usage) = usage_from_codex(&payload["info"]["last_token_usage"]) {
                    turn.get_or_insert_default().add(usage);
                }
            }
            _ => {}
        }
    }
    turn
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "019fd9f6-3e33-72e0-89e8-49e33838d1cf";

    #[test]
    fn path_from_the_uuid_v7_time() {
        // 0x019fd9f63e33 ms = 2026-08-07T02:03:41.491Z
        assert_eq!(
            session_file_path("/home/u", "/w", ID).as_deref(),
            Some(
                "/home/u/.codex/sessions/2026/08/07/\
                 rollout-2026-08-07T02-03-41-019fd9f6-3e33-72e0-89e8-49e33838d1cf.jsonl"
            )
        );
        assert_eq!(
            session_file_path("/home/u/", "/elsewhere", ID),
            session_file_path("/home/u", "/w", ID)
        );
        // 2025-10-01T23:20:11.456Z; uppercase hex is a UUID too.
        assert_eq!(
            session_file_path("/h", "/w", "0199A213-81C0-7800-8AA1-BBAB2A035A53").as_deref(),
            Some(
                "/h/.codex/sessions/2025/10/01/\
                 rollout-2025-10-01T23-20-11-0199A213-81C0-7800-8AA1-BBAB2A035A53.jsonl"
            )
        );
        for bad in [
            "",
            ".",
            "..",
            "../../etc/passwd",
            "a/b",
            // v4: no time in it.
            "5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11",
            // Wrong variant, wrong shape, not hex, path tricks.
            "019fd9f6-3e33-72e0-c9e8-49e33838d1cf",
            "019fd9f63e3372e089e849e33838d1cf",
            "019fd9f6-3e33-72e0-89e8-49e33838d1cg",
            "019fd9f6-3e33-72e0-89e8-49e3/../d1cf",
        ] {
            assert_eq!(session_file_path("/home/u", "/w", bad), None, "{bad}");
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(utc_from_unix_millis(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(
            utc_from_unix_millis(951_782_400_000),
            (2000, 2, 29, 0, 0, 0)
        );
        assert_eq!(
            utc_from_unix_millis(1_767_225_599_999),
            (2025, 12, 31, 23, 59, 59)
        );
        assert_eq!(
            utc_from_unix_millis(1_767_225_600_000),
            (2026, 1, 1, 0, 0, 0)
        );
        assert_eq!(
            utc_from_unix_millis(4_107_542_400_000),
            (2100, 3, 1, 0, 0, 0)
        );
    }

    // A rollout as codex writes it (trimmed).
    const SESSION: &str = concat!(
        r#"{"timestamp":"2026-08-07T02:03:41.512Z","type":"session_meta","payload":{"id":"019fd9f6-3e33-72e0-89e8-49e33838d1cf","timestamp":"2026-08-07T02:03:41.491Z","cwd":"/w","originator":"codex_exec","cli_version":"0.130.0","source":"exec","model_provider":"openai","git":{"commit_hash":"abc","branch":"main"}}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:41.600Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:41.601Z","type":"turn_context","payload":{"cwd":"/w","approval_policy":"never","sandbox_policy":{"type":"danger-full-access"},"model":"gpt-5.1-codex","effort":"medium","summary":"auto"}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:42.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":7.0}}}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:45.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"],\"workdir\":\"/w\"}","call_id":"call_1","cwd":"/w/sub"}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:46.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":20,"reasoning_output_tokens":8,"total_tokens":1020},"last_token_usage":{"input_tokens":1000,"cached_input_tokens":400,"output_tokens":20,"reasoning_output_tokens":8,"total_tokens":1020},"model_context_window":272000},"rate_limits":null}}"#,
        "\n",
        "not json at all {\"cwd\":\"/w\"}\n",
        "\n",
        r#"{"cwd" : "/w","type":"legacy","n":1.0e-2,"big":123456789012345678901234567890}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:50.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":79281,"cached_input_tokens":60416,"output_tokens":301,"reasoning_output_tokens":64,"total_tokens":79582},"last_token_usage":{"input_tokens":78281,"cached_input_tokens":60016,"output_tokens":281},"model_context_window":272000}}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:51.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":8.0}}}}"#,
        "\n",
        r#"{"timestamp":"2026-08-07T02:03:51.100Z","type":"event_msg","payload":{"type":"agent_message","message":"Done."}}"#,
        "\n",
    );

    #[test]
    fn cwd_rewrite_round_trip() {
        let to = "/home/u/my \"repo\"";
        let moved = rewrite_session_cwd(SESSION, "/w", to);
        assert_ne!(moved, SESSION);
        assert!(moved.ends_with('\n'));
        assert_eq!(moved.lines().count(), SESSION.lines().count());
        let mut rewritten = 0;
        for (before, after) in SESSION.lines().zip(moved.lines()) {
            let Ok(mut b) = serde_json::from_str::<Value>(before) else {
                assert_eq!(before, after);
                continue;
            };
            let a: Value = serde_json::from_str(after).unwrap();
            if b["payload"]["cwd"] == "/w" {
                assert_eq!(a["payload"]["cwd"], to);
                b["payload"]["cwd"] = a["payload"]["cwd"].clone();
                rewritten += 1;
            } else if b["cwd"] == "/w" {
                assert_eq!(a["cwd"], to);
                b["cwd"] = a["cwd"].clone();
                rewritten += 1;
            } else {
                // Other cwds, message text, lines without cwd: untouched.
                assert_eq!(before, after);
            }
            // Nothing else changed.
            assert_eq!(a, b);
        }
        assert_eq!(rewritten, 3);
        // Key order, spacing and number spelling survive; text is left alone.
        assert!(moved.contains(r#"{"cwd" : "/home/u/my \"repo\"","type":"legacy","n":1.0e-2,"big":123456789012345678901234567890}"#));
        assert!(moved.contains(r#""payload":{"id":"019fd9f6-3e33-72e0-89e8-49e33838d1cf","timestamp":"2026-08-07T02:03:41.491Z","cwd":"/home/u/my \"repo\"","originator""#));
        assert!(moved.contains(r"<cwd>/w</cwd>"));
        assert!(moved.contains(r#""cwd":"/w/sub""#));
        assert_eq!(rewrite_session_cwd(&moved, to, "/w"), SESSION);
    }

    #[test]
    fn cwd_rewrite_edge_cases() {
        assert_eq!(rewrite_session_cwd("", "/a", "/b"), "");
        assert_eq!(rewrite_session_cwd("\n\n", "/a", "/b"), "\n\n");
        assert_eq!(
            rewrite_session_cwd(
                "{\"payload\":{\"cwd\":\"/a\"}}\r\n{\"cwd\":\"/a\",\"payload\":{\"cwd\":\"/a\"}}",
                "/a",
                "/b"
            ),
            "{\"payload\":{\"cwd\":\"/b\"}}\r\n{\"cwd\":\"/b\",\"payload\":{\"cwd\":\"/b\"}}"
        );
        // Escaped spellings of the keys and the value are recognised; deeper
        // `cwd`s are not working directories of the session.
        assert_eq!(
            rewrite_session_cwd(
                r#"{ "x": [1, {"cwd": "/a"}], "p\u0061yload" : { "\u0063wd" : "\/a", "y": {"cwd":"/a"} } }"#,
                "/a",
                "/b"
            ),
            r#"{ "x": [1, {"cwd": "/a"}], "p\u0061yload" : { "\u0063wd" : "/b", "y": {"cwd":"/a"} } }"#
        );
        // Non-string cwd, non-object payload, arrays, truncated lines: untouched.
        for line in [
            r#"{"cwd":1}"#,
            r#"{"payload":{"cwd":["/a"]}}"#,
            r#"{"payload":"/a"}"#,
            r#"["cwd","/a"]"#,
            r#"{"payload":{"cwd":"/a"}"#,
        ] {
            assert_eq!(rewrite_session_cwd(line, "/a", "/b"), line);
        }
    }

    // codex 0.169.0's task_started / token_count / task_complete lines of one
    // session: a turn of two responses, then two `exec resume` turns (one
    // response, then two).
    const REAL_TURNS: &str = include_str!("../testdata/codex-0.169.0-session-turns.jsonl");

    #[test]
    fn usage_of_the_last_turn_only() {
        assert_eq!(
            usage_from_session(REAL_TURNS),
            Some(Usage {
                input_tokens: 2005 - 205,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 205,
                output_tokens: 25,
            })
        );
        // Up to the end of the first resumed turn: its one response, not the
        // session's running total (3007).
        let first_resume: String = REAL_TURNS.lines().take(7).collect::<Vec<_>>().join("\n");
        assert_eq!(
            usage_from_session(&first_resume),
            Some(Usage {
                input_tokens: 900,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 102,
                output_tokens: 12,
            })
        );
        // A turn that has started and reported nothing yet.
        let started: String = REAL_TURNS.lines().take(8).collect::<Vec<_>>().join("\n");
        assert_eq!(usage_from_session(&started), None);
    }

    #[test]
    fn usage_from_last_token_count() {
        assert_eq!(
            usage_from_session(SESSION),
            Some(Usage {
                input_tokens: 79281 - 60416,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 60416,
                output_tokens: 301,
            })
        );
        let first_only: String = SESSION.lines().take(6).collect::<Vec<_>>().join("\n");
        assert_eq!(
            usage_from_session(&first_only),
            Some(Usage {
                input_tokens: 600,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 400,
                output_tokens: 20,
            })
        );
        let before_any: String = SESSION.lines().take(4).collect::<Vec<_>>().join("\n");
        assert_eq!(usage_from_session(&before_any), None);
        assert_eq!(usage_from_session(""), None);
        assert_eq!(
            usage_from_session(
                "{\"type\":\"response_item\",\"payload\":{\"type\":\"token_count\",\"info\":{\"total_token_usage\":{\"input_tokens\":1}}}}\ngarbage"
            ),
            None
        );
    }
}
