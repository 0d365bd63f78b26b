//! Byte-preserving edits of JSON lines (session files), for the session cwd
//! rewrites: only the edited values' bytes change, so key order, number
//! spelling and every other line stay exactly as they were.

use std::ops::Range;

use serde_json::{Map, Value};

/// Rewrites the string values equal to `from` to `to` in every
/// `'\n'`-separated line of `content` that parses as a JSON object.
/// `spans(line, object)` names the byte ranges of the candidate values in
/// that line (see [`top_level_values`]); lines it cannot parse are kept
/// verbatim, as are empty lines, `'\r'` and a trailing newline.
pub fn rewrite_string_values(
    content: &str,
    from: &str,
    to: &str,
    spans: impl Fn(&str, &Map<String, Value>) -> Vec<Range<usize>>,
) -> String {
    let to_json = Value::from(to).to_string();
    content
        .split('\n')
        .map(|line| {
            let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
                return line.to_owned();
            };
            let mut spans = spans(line, &obj);
            spans.sort_by_key(|s| s.start);
            let mut out = line.to_owned();
            // Back to front, so earlier spans keep their offsets.
            for span in spans.into_iter().rev() {
                if serde_json::from_str::<String>(&line[span.clone()]).is_ok_and(|v| v == from) {
                    out.replace_range(span, &to_json);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Byte ranges of the values of the top-level `key` in `text`, a JSON object
/// that serde_json has already accepted (so this scanner can stay simple).
/// None if the text is not shaped as expected.
pub fn top_level_values(text: &str, key: &str) -> Option<Vec<Range<usize>>> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    pos += 1;
    let mut spans = Vec::new();
    loop {
        pos = skip_ws(bytes, pos);
        match bytes.get(pos)? {
            b'}' => return Some(spans),
            b',' => {
                pos = skip_ws(bytes, pos + 1);
            }
            _ => {}
        }
        let key_end = skip_value(bytes, pos)?;
        let name: String = serde_json::from_str(&text[pos..key_end]).ok()?;
        pos = skip_ws(bytes, key_end);
        if bytes.get(pos) != Some(&b':') {
            return None;
        }
        let start = skip_ws(bytes, pos + 1);
        let end = skip_value(bytes, start)?;
        if name == key {
            spans.push(start..end);
        }
        pos = end;
    }
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos).is_some_and(u8::is_ascii_whitespace) {
        pos += 1;
    }
    pos
}

/// The end of the JSON value starting at `pos`.
fn skip_value(bytes: &[u8], pos: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = pos;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            // A scalar (number, true, false, null) ends at a delimiter.
            b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(i - 1),
            _ => {}
        }
    }
    (depth == 0 && !in_string && i > pos).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cwd_spans(line: &str, _: &Map<String, Value>) -> Vec<Range<usize>> {
        top_level_values(line, "cwd").unwrap_or_default()
    }

    #[test]
    fn rewrites_only_matching_values_byte_for_byte() {
        let content = concat!(
            r#"{"cwd" : "/w", "n": 1.0e-2, "big": 123456789012345678901234567890}"#,
            "\n",
            r#"{"cwd":"/w/sub","inner":{"cwd":"/w"}}"#,
            "\r\n",
            "not json {\"cwd\":\"/w\"}\n",
            "\n",
            r#"{"a":[1,{"b":"}"}],"cwd":"/w"}"#,
            "\n",
        );
        let out = rewrite_string_values(content, "/w", "/new \"dir\"", cwd_spans);
        let expected = concat!(
            r#"{"cwd" : "/new \"dir\"", "n": 1.0e-2, "big": 123456789012345678901234567890}"#,
            "\n",
            r#"{"cwd":"/w/sub","inner":{"cwd":"/w"}}"#,
            "\r\n",
            "not json {\"cwd\":\"/w\"}\n",
            "\n",
            r#"{"a":[1,{"b":"}"}],"cwd":"/new \"dir\""}"#,
            "\n",
        );
        assert_eq!(out, expected);
        assert_eq!(
            rewrite_string_values(content, "/x", "/y", cwd_spans),
            content
        );
    }

    #[test]
    fn finds_top_level_values() {
        let text = r#"{ "k": "v", "o": {"k": 1}, "k" : [1, 2] , "n": true }"#;
        let spans = top_level_values(text, "k").unwrap();
        let values: Vec<&str> = spans.into_iter().map(|s| &text[s]).collect();
        assert_eq!(values, [r#""v""#, "[1, 2]"]);
        assert_eq!(top_level_values("[1]", "k"), None);
        assert_eq!(top_level_values("{}", "k"), Some(Vec::new()));
    }

    #[test]
    fn scanner_spans() {
        let text = r#"{"a":1,"cwd":"x\"y","b":{"cwd":2},"cwd":true , "c":[1,"]"]}"#;
        let spans = top_level_values(text, "cwd").unwrap();
        let values: Vec<&str> = spans.into_iter().map(|s| &text[s]).collect();
        assert_eq!(values, [r#""x\"y""#, "true"]);
        assert_eq!(top_level_values("{}", "cwd"), Some(vec![]));
        assert_eq!(top_level_values("[]", "cwd"), None);
    }
}
