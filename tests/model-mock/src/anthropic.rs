//! The Anthropic Messages API: `POST /v1/messages`, streamed as server-sent
//! events exactly as the real API sends them (message_start,
//! content_block_start / delta / stop, message_delta with the usage and
//! stop_reason, message_stop) or as one JSON message, and
//! `POST /v1/messages/count_tokens`.

use serde_json::{Value, json};

use crate::{
    COMPLETION_SIGNAL, Call, FINAL_TEXT, Fault, Reply, SHELL_COMMAND, UNFINISHED_TEXT, Usage, full,
    streamed,
};

const JSON: (&str, &str) = ("content-type", "application/json");

/// The shell tool among the request's `tools` (`Bash` for Claude Code,
/// `bash` for opencode and pi).
fn shell_tool(body: &Value) -> Option<&Value> {
    body["tools"].as_array()?.iter().find(|t| {
        t["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case("bash"))
    })
}

/// Whether the conversation's last message carries a tool result: the
/// tool has run, so the model answers in text. (On a resumed session the
/// earlier turns' results are further back: the model calls the tool again.)
fn last_message_has_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
}

/// The tool's input: the command, and any other string the tool's schema
/// requires (opencode's bash wants a `description`).
fn tool_input(tool: &Value) -> Value {
    let mut input = json!({ "command": SHELL_COMMAND });
    for key in tool["input_schema"]["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if key != "command" {
            input[key] = json!("Add a line to agent.txt and commit it");
        }
    }
    input
}

fn usage_json(u: Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
        "output_tokens": u.output,
    })
}

fn error_body(kind: &str, message: &str, request_id: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id})
        .to_string()
}

fn sse(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub fn messages(call: &Call) -> Reply {
    let body = &call.body;
    let stream = body["stream"].as_bool().unwrap_or(false);
    let request_id = call.next_id("req_mock");
    // A cut stream hits a turn of the agent's loop, not a side request
    // (opencode's title) whose failure the CLI ignores.
    let fault = call.fault(stream && shell_tool(body).is_some());
    match fault {
        Some(Fault::Unauthorized) => {
            return Reply::plain(full(
                401,
                &[
                    JSON,
                    ("request-id", &request_id),
                    ("x-should-retry", "false"),
                ],
                error_body("authentication_error", "invalid x-api-key", &request_id),
            ));
        }
        Some(Fault::RateLimited { retry_after }) => {
            return Reply::plain(full(
                429,
                &[
                    JSON,
                    ("request-id", &request_id),
                    ("retry-after", &retry_after.to_string()),
                    ("x-should-retry", "true"),
                ],
                error_body(
                    "rate_limit_error",
                    "This request would exceed the rate limit for your organization of 50 requests per minute.",
                    &request_id,
                ),
            ));
        }
        _ => {}
    }
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_string();
    let tool = shell_tool(body).filter(|_| !last_message_has_tool_result(body));
    let usage = call.next_usage();
    let message_id = call.next_id("msg_mock");
    let (block, stop_reason) = match tool {
        Some(t) => (
            json!({
                "type": "tool_use",
                "id": call.next_id("toolu_mock"),
                "name": t["name"],
                "input": tool_input(t),
            }),
            "tool_use",
        ),
        None => {
            let text = if call.never_complete() {
                UNFINISHED_TEXT
            } else {
                FINAL_TEXT
            };
            debug_assert!(FINAL_TEXT.ends_with(COMPLETION_SIGNAL));
            (json!({"type": "text", "text": text}), "end_turn")
        }
    };
    let tool_call = tool.is_some();
    if !stream {
        let message = json!({
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": usage_json(usage),
        });
        return Reply {
            response: full(
                200,
                &[JSON, ("request-id", &request_id)],
                message.to_string(),
            ),
            usage: Some(usage),
            tool_call,
        };
    }
    let mut events = vec![
        sse(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(Usage { output: 1, ..usage }),
            }}),
        ),
        sse(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": match block["type"].as_str() {
                Some("tool_use") => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                _ => json!({"type": "text", "text": ""}),
            }}),
        ),
        sse("ping", json!({"type": "ping"})),
    ];
    // The content in two deltas, as the API splits it.
    let (delta_type, key, content) = match block["type"].as_str() {
        Some("tool_use") => (
            "input_json_delta",
            "partial_json",
            block["input"].to_string(),
        ),
        _ => (
            "text_delta",
            "text",
            block["text"].as_str().unwrap().to_string(),
        ),
    };
    let mid = content
        .char_indices()
        .nth(content.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    for part in [&content[..mid], &content[mid..]] {
        events.push(sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": delta_type, key: part}}),
        ));
        if fault == Some(Fault::ServerErrorMidStream) {
            // The API's own mid-stream failure: an error event, then the
            // stream ends. Only message_start's usage was delivered.
            events.push(sse(
                "error",
                json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}, "request_id": request_id}),
            ));
            return Reply {
                response: streamed(&sse_headers(&request_id), events),
                usage: Some(Usage { output: 1, ..usage }),
                tool_call: false,
            };
        }
    }
    events.push(sse(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage_json(usage)}),
    ));
    events.push(sse("message_stop", json!({"type": "message_stop"})));
    Reply {
        response: streamed(&sse_headers(&request_id), events),
        usage: Some(usage),
        tool_call,
    }
}

fn sse_headers(request_id: &str) -> [(&str, &str); 3] {
    [
        ("content-type", "text/event-stream; charset=utf-8"),
        ("cache-control", "no-cache"),
        ("request-id", request_id),
    ]
}

pub fn count_tokens(call: &Call) -> Reply {
    let n = call.body.to_string().len() as u64 / 4;
    Reply::plain(full(200, &[JSON], json!({"input_tokens": n}).to_string()))
}
