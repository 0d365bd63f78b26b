//! The Gemini API's streamed generation (`POST
//! /v1beta/models/{model}:streamGenerateContent?alt=sse`), as the Gemini CLI
//! calls it: server-sent events, each `data: {GenerateContentResponse}`,
//! the last one with `finishReason` and the request's `usageMetadata`. The
//! shell tool is a `functionCall` of `run_shell_command`; its output comes
//! back as a `functionResponse` part in the next request.
//!
//! Gemini counts cached tokens inside `promptTokenCount` and reports no
//! cache writes, so the usage the mock records has `cache_write` 0. Errors
//! are `{"error": {code, message, status}}` with the same HTTP status.

use serde_json::{Value, json};

use crate::{Call, FINAL_TEXT, Fault, Reply, UNFINISHED_TEXT, Usage, full, streamed};

/// [`crate::SHELL_COMMAND`] without its `$(date ...)`: the Gemini CLI's
/// shell tool refuses any command substitution ("Command injection
/// detected"). Each run still appends a line, so each commits.
pub const SHELL_COMMAND: &str =
    r#"echo line >> agent.txt && git add agent.txt && git commit -q -m "agent: add line""#;

const JSON: (&str, &str) = ("content-type", "application/json");

fn error(status: u16, message: &str, kind: &str) -> Reply {
    Reply::plain(full(
        status,
        &[JSON],
        json!({"error": {"code": status, "message": message, "status": kind}}).to_string(),
    ))
}

/// The function response is in the last user turn: the tool has run.
fn has_tool_output(body: &Value) -> bool {
    body["contents"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|turn| turn["parts"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()))
}

fn chunk(parts: Value, last: Option<(&str, Usage)>, model: &str) -> String {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut response = json!({"candidates": [], "modelVersion": model});
    if let Some((reason, u)) = last {
        candidate["finishReason"] = json!(reason);
        response["usageMetadata"] = json!({
            "promptTokenCount": u.input + u.cache_read,
            "cachedContentTokenCount": u.cache_read,
            "candidatesTokenCount": u.output,
            "totalTokenCount": u.input + u.cache_read + u.output,
        });
    }
    response["candidates"] = json!([candidate]);
    format!("data: {response}\r\n\r\n")
}

/// `POST /v1beta/models/{model}:streamGenerateContent`.
pub fn stream_generate_content(call: &Call) -> Reply {
    match call.fault(false) {
        Some(Fault::Unauthorized) => {
            return error(
                401,
                "API key not valid. Please pass a valid API key.",
                "UNAUTHENTICATED",
            );
        }
        Some(Fault::RateLimited { .. }) => {
            return error(
                429,
                "Resource has been exhausted (e.g. check quota).",
                "RESOURCE_EXHAUSTED",
            );
        }
        _ => {}
    }
    let model = call
        .path
        .trim_start_matches("/v1beta/models/")
        .trim_end_matches(":streamGenerateContent")
        .to_string();
    let u = Usage {
        cache_write: 0,
        ..call.next_usage()
    };
    let headers = [("content-type", "text/event-stream")];
    if !has_tool_output(&call.body) {
        let args = json!({"command": SHELL_COMMAND, "description": "Add a line and commit it"});
        let id = call.next_id("call_mock");
        let parts =
            json!([{"functionCall": {"id": id, "name": "run_shell_command", "args": args}}]);
        return Reply {
            response: streamed(&headers, vec![chunk(parts, Some(("STOP", u)), &model)]),
            usage: Some(u),
            tool_call: true,
        };
    }
    let text = if call.never_complete() {
        UNFINISHED_TEXT
    } else {
        FINAL_TEXT
    };
    let (first, rest) = text.split_at(text.len() / 2);
    let chunks = vec![
        chunk(json!([{"text": first}]), None, &model),
        chunk(json!([{"text": rest}]), Some(("STOP", u)), &model),
    ];
    Reply {
        response: streamed(&headers, chunks),
        usage: Some(u),
        tool_call: false,
    }
}
