//! The OpenAI APIs: the Responses API (`POST /v1/responses`, streamed as
//! server-sent events the way OpenAI sends them: response.created,
//! response.output_item.added / done, the tool call's or text's deltas,
//! response.completed with the usage), the WebSocket upgrade codex tries
//! first on `GET /v1/responses`, and streamed chat completions
//! (`POST /v1/chat/completions`, copilot's default wire API and Qwen
//! Code's).
//!
//! OpenAI counts cached tokens inside the input tokens and reports no cache
//! writes, so the usage the mock records has `cache_write` 0.

use serde_json::{Value, json};

use crate::{
    COMPLETION_SIGNAL, Call, FINAL_TEXT, Fault, Reply, SHELL_COMMAND, UNFINISHED_TEXT, Usage, full,
    streamed,
};

const JSON: (&str, &str) = ("content-type", "application/json");

/// Codex opens `GET /v1/responses` with `Upgrade: websocket` before any
/// HTTP request. 426 makes codex 0.169 fall back to HTTP at once (one stderr
/// line); a dropped connection costs it five retries first.
pub fn responses_websocket(_call: &Call) -> Reply {
    Reply::plain(full(
        426,
        &[JSON],
        error_body(
            "WebSockets are not served by the model mock: use HTTP",
            "invalid_request_error",
            "upgrade_required",
        ),
    ))
}

fn error_body(message: &str, kind: &str, code: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

/// A refusal the fault asks for, as OpenAI words it; None for the faults a
/// stream shows.
fn refusal(fault: &Option<Fault>, request_id: &str) -> Option<Reply> {
    let response = match fault {
        Some(Fault::Unauthorized) => full(
            401,
            &[JSON, ("x-request-id", request_id)],
            error_body(
                "Incorrect API key provided: sk-mock. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            ),
        ),
        Some(Fault::RateLimited { retry_after }) => full(
            429,
            &[
                JSON,
                ("x-request-id", request_id),
                ("retry-after", &retry_after.to_string()),
            ],
            error_body(
                "Rate limit reached for requests. Please try again later.",
                "requests",
                "rate_limit_exceeded",
            ),
        ),
        _ => return None,
    };
    Some(Reply::plain(response))
}

/// What OpenAI reports of `u`: input counts the cached tokens.
fn recorded(u: Usage) -> Usage {
    Usage {
        cache_write: 0,
        ..u
    }
}

fn sse(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn sse_headers(request_id: &str) -> [(&str, &str); 3] {
    [
        ("content-type", "text/event-stream; charset=utf-8"),
        ("cache-control", "no-cache"),
        ("x-request-id", request_id),
    ]
}

/// The input items since the last user message: this turn's.
fn this_turn(body: &Value) -> &[Value] {
    let items = body["input"].as_array().map_or(&[][..], Vec::as_slice);
    let start = items
        .iter()
        .rposition(|i| i["type"] == "message" && i["role"] == "user")
        .unwrap_or(0);
    &items[start..]
}

/// The tool has run in this turn: its output is in the input. (A resumed
/// session's earlier outputs are before the new user message.)
fn has_tool_output(body: &Value) -> bool {
    this_turn(body).iter().any(|i| {
        matches!(
            i["type"].as_str(),
            Some("function_call_output" | "custom_tool_call_output")
        )
    })
}

/// The shell call for this request's tools: codex 0.169 offers no shell
/// function, only a freeform `exec` tool (JavaScript whose global `tools`
/// has `exec_command({cmd})`) in an `additional_tools` input item; other
/// clients offer a function tool.
fn shell_call(body: &Value, id: &str, call_id: &str) -> Option<Value> {
    let additional = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "additional_tools")
        .flat_map(|i| i["tools"].as_array().into_iter().flatten())
        .flat_map(|ns| ns["tools"].as_array().into_iter().flatten());
    if additional
        .clone()
        .any(|t| t["type"] == "custom" && t["name"] == "exec")
    {
        let script = format!(
            "const r = await tools.exec_command({{cmd: {}}});\ntext(JSON.stringify(r));",
            json!(SHELL_COMMAND)
        );
        return Some(json!({
            "type": "custom_tool_call", "id": id, "call_id": call_id,
            "name": "exec", "input": script, "status": "completed",
        }));
    }
    let tool = body["tools"].as_array().into_iter().flatten().find(|t| {
        t["type"] == "function"
            && matches!(t["name"].as_str(), Some("bash" | "shell" | "exec_command"))
    })?;
    Some(json!({
        "type": "function_call", "id": id, "call_id": call_id, "name": tool["name"],
        "arguments": function_arguments(&tool["parameters"]).to_string(), "status": "completed",
    }))
}

/// The shell tool's arguments: the command under the name its schema uses,
/// and any other required string.
fn function_arguments(parameters: &Value) -> Value {
    let key = if parameters["properties"]["cmd"].is_object() {
        "cmd"
    } else {
        "command"
    };
    let mut args = json!({ key: SHELL_COMMAND });
    for required in parameters["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|r| *r != key)
    {
        args[required] = json!("Add a line to agent.txt and commit it");
    }
    args
}

fn final_text(call: &Call) -> &'static str {
    debug_assert!(FINAL_TEXT.ends_with(COMPLETION_SIGNAL));
    if call.never_complete() {
        UNFINISHED_TEXT
    } else {
        FINAL_TEXT
    }
}

pub fn responses(call: &Call) -> Reply {
    let body = &call.body;
    let request_id = call.next_id("req_mock");
    let fault = call.fault(true);
    if let Some(reply) = refusal(&fault, &request_id) {
        return reply;
    }
    let model = body["model"].as_str().unwrap_or("gpt-5").to_string();
    let response_id = call.next_id("resp_mock");
    let usage = call.next_usage();
    let mut seq = 0;
    let mut event = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        sse(data)
    };
    let response = |status: &str, output: Value, usage: Option<Value>| {
        json!({
            "id": response_id, "object": "response", "created_at": 1_790_000_000,
            "status": status, "model": model, "output": output, "usage": usage,
        })
    };
    let mut events = vec![event(json!({
        "type": "response.created", "response": response("in_progress", json!([]), None),
    }))];
    let call_item = if has_tool_output(body) {
        None
    } else {
        shell_call(body, &call.next_id("fc_mock"), &call.next_id("call_mock"))
    };
    let tool_call = call_item.is_some();
    let (item, deltas) = match call_item {
        Some(item) => {
            let (delta, done, key) = if item["type"] == "custom_tool_call" {
                (
                    "response.custom_tool_call_input.delta",
                    "response.custom_tool_call_input.done",
                    "input",
                )
            } else {
                (
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                    "arguments",
                )
            };
            let content = item[key].as_str().unwrap().to_string();
            let mut added = item.clone();
            added[key] = json!("");
            added["status"] = json!("in_progress");
            (item.clone(), (added, delta, done, key, content))
        }
        None => {
            let text = final_text(call);
            let id = call.next_id("msg_mock");
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            let item = json!({
                "type": "message", "id": id, "status": "completed", "role": "assistant",
                "content": [part],
            });
            let added = json!({
                "type": "message", "id": id, "status": "in_progress", "role": "assistant",
                "content": [],
            });
            (
                item,
                (
                    added,
                    "response.output_text.delta",
                    "response.output_text.done",
                    "text",
                    text.to_string(),
                ),
            )
        }
    };
    let (added, delta_type, done_type, key, content) = deltas;
    let item_id = item["id"].clone();
    events.push(event(json!({
        "type": "response.output_item.added", "output_index": 0, "item": added,
    })));
    let text_part = item["type"] == "message";
    if text_part {
        events.push(event(json!({
            "type": "response.content_part.added", "item_id": item_id, "output_index": 0,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []},
        })));
    }
    // The content in two deltas, as the API splits it.
    let mid = content
        .char_indices()
        .nth(content.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    for part in [&content[..mid], &content[mid..]] {
        let mut delta = json!({
            "type": delta_type, "item_id": item_id, "output_index": 0, "delta": part,
        });
        if text_part {
            delta["content_index"] = json!(0);
        }
        events.push(event(delta));
        if fault == Some(Fault::ServerErrorMidStream) {
            // The API's own mid-stream failure: an error event, then the
            // stream ends without response.completed. No usage delivered.
            events.push(event(json!({
                "type": "error", "code": "server_error", "param": null,
                "message": "The server had an error while processing your request. Sorry about that!",
            })));
            return Reply {
                response: streamed(&sse_headers(&request_id), events),
                usage: None,
                tool_call: false,
            };
        }
    }
    let mut done = json!({"type": done_type, "item_id": item_id, "output_index": 0, key: content});
    if text_part {
        done["content_index"] = json!(0);
        events.push(event(done));
        events.push(event(json!({
            "type": "response.content_part.done", "item_id": item_id, "output_index": 0,
            "content_index": 0, "part": item["content"][0],
        })));
    } else {
        events.push(event(done));
    }
    events.push(event(json!({
        "type": "response.output_item.done", "output_index": 0, "item": item,
    })));
    let reported = recorded(usage);
    events.push(event(json!({
        "type": "response.completed",
        "response": response("completed", json!([item]), Some(json!({
            "input_tokens": reported.input + reported.cache_read,
            "input_tokens_details": {"cached_tokens": reported.cache_read},
            "output_tokens": reported.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reported.input + reported.cache_read + reported.output,
        }))),
    })));
    Reply {
        response: streamed(&sse_headers(&request_id), events),
        usage: Some(reported),
        tool_call,
    }
}

/// The conversation's last message is a tool result: the tool has run.
fn last_message_is_tool(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool")
}

fn chat_shell_tool(body: &Value) -> Option<&Value> {
    body["tools"].as_array()?.iter().find(|t| {
        matches!(
            t["function"]["name"].as_str(),
            Some("bash" | "shell" | "exec_command" | "run_shell_command")
        )
    })
}

pub fn chat_completions(call: &Call) -> Reply {
    let body = &call.body;
    let request_id = call.next_id("req_mock");
    let fault = call.fault(true);
    if let Some(reply) = refusal(&fault, &request_id) {
        return reply;
    }
    let model = body["model"].as_str().unwrap_or("gpt-5").to_string();
    let id = call.next_id("chatcmpl_mock");
    let chunk = |choices: Value, usage: Value| {
        let data = json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_790_000_000,
            "model": model, "choices": choices, "usage": usage,
        });
        format!("data: {data}\n\n")
    };
    let tool = chat_shell_tool(body).filter(|_| !last_message_is_tool(body));
    let tool_call = tool.is_some();
    let (delta, content, finish) = match tool {
        Some(t) => {
            let arguments = function_arguments(&t["function"]["parameters"]).to_string();
            let call_id = call.next_id("call_mock");
            let first = json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": call_id, "type": "function",
                "function": {"name": t["function"]["name"], "arguments": ""},
            }]});
            (first, arguments, "tool_calls")
        }
        None => (
            json!({"role": "assistant", "content": ""}),
            final_text(call).to_string(),
            "stop",
        ),
    };
    let piece = |part: &str| {
        if tool_call {
            json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        } else {
            json!({"content": part})
        }
    };
    let mut events = vec![chunk(
        json!([{"index": 0, "delta": delta, "finish_reason": null}]),
        Value::Null,
    )];
    let mid = content
        .char_indices()
        .nth(content.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    for part in [&content[..mid], &content[mid..]] {
        events.push(chunk(
            json!([{"index": 0, "delta": piece(part), "finish_reason": null}]),
            Value::Null,
        ));
        if fault == Some(Fault::ServerErrorMidStream) {
            // What OpenAI sends when it fails after the 200: an error
            // object in place of a chunk, then the stream ends.
            events.push(format!(
                "data: {}\n\n",
                error_body(
                    "The server had an error while processing your request. Sorry about that!",
                    "server_error",
                    "server_error",
                )
            ));
            return Reply {
                response: streamed(&sse_headers(&request_id), events),
                usage: None,
                tool_call: false,
            };
        }
    }
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        Value::Null,
    ));
    let usage = recorded(call.next_usage());
    // The usage chunk `stream_options.include_usage` asks for: no choices.
    events.push(chunk(
        json!([]),
        json!({
            "prompt_tokens": usage.input + usage.cache_read,
            "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.cache_read + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }),
    ));
    events.push("data: [DONE]\n\n".to_string());
    Reply {
        response: streamed(&sse_headers(&request_id), events),
        usage: Some(usage),
        tool_call,
    }
}
