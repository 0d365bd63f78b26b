//! Claude Code's `--output-format stream-json` lines, which other agents'
//! CLIs copy (cursor's `agent`): what their parsers share.

use serde_json::{Map, Value};

use crate::Event;

/// The text and tool-use blocks of an `assistant` line's `message.content`,
/// in order. A tool's input is compact JSON text; a missing input is an
/// empty object. `thinking` and unknown blocks are not reported.
pub fn assistant_content(obj: &Map<String, Value>, events: &mut Vec<Event>) {
    let Some(blocks) = obj
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    events.push(Event::Text(text.to_owned()));
                }
            }
            Some("tool_use") => {
                let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                let input = block
                    .get("input")
                    .map_or_else(|| "{}".to_owned(), Value::to_string);
                events.push(Event::ToolCall {
                    name: name.to_owned(),
                    input,
                });
            }
            _ => {}
        }
    }
}

/// A `result` line: the result event, and when it failed an error message
/// naming `agent` ("claude stopped with error_max_turns: ..."). The detail
/// is the result's text, else what `detail` finds in the line.
/// `is_error: true` is a failure whatever the subtype (rate limits, auth
/// errors come with "success"), and so is any subtype other than
/// "success", or a missing one.
pub fn result(
    obj: &Map<String, Value>,
    agent: &str,
    detail: impl Fn(&Map<String, Value>) -> String,
) -> (Event, Option<String>) {
    let subtype = obj.get("subtype").and_then(Value::as_str);
    let text = obj.get("result").and_then(Value::as_str).unwrap_or("");
    let error_subtype = subtype != Some("success");
    let is_error = obj
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || error_subtype;
    let result = Event::Result {
        is_error,
        text: text.to_owned(),
    };
    if !is_error {
        return (result, None);
    }
    let mut message = match subtype {
        Some(s) if error_subtype => format!("{agent} stopped with {s}"),
        None => format!("{agent} reported a result without a subtype"),
        _ => format!("{agent} reported an error"),
    };
    let detail = if text.trim().is_empty() {
        detail(obj)
    } else {
        text.to_owned()
    };
    if !detail.trim().is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    (result, Some(message))
}

/// The `errors` list of an error result (error subtypes usually carry no
/// `result` text but this), joined with "; ".
pub fn errors_list(obj: &Map<String, Value>) -> String {
    obj.get("errors")
        .and_then(Value::as_array)
        .map(|errors| {
            let texts: Vec<&str> = errors.iter().filter_map(Value::as_str).collect();
            texts.join("; ")
        })
        .unwrap_or_default()
}
