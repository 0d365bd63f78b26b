//! JSON with comments (`//`, `/* */`) and trailing commas, as
//! devcontainer.json is written: both are removed, strings left exactly as
//! they are, and the result parsed by serde_json (whose errors keep their
//! line and column, since removed text is replaced by spaces, newlines
//! kept).

/// `text` as plain JSON: comments become spaces (their newlines stay) and
/// a comma followed only by blanks or comments before `}` or `]` goes.
pub fn to_json(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    // Where in `out` the last comma outside a string is, while only blanks
    // have followed it.
    let mut pending_comma: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                pending_comma = None;
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    // An escape takes the next byte with it (`\"`, `\\`).
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                out.extend_from_slice(&bytes[start..i]);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                out.extend(
                    bytes[i..end]
                        .iter()
                        .map(|&c| if c == b'\n' { b'\n' } else { b' ' }),
                );
                i = end;
                continue;
            }
            b',' => pending_comma = Some(out.len()),
            b'}' | b']' => {
                if let Some(at) = pending_comma.take() {
                    out[at] = b' ';
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => pending_comma = None,
        }
        out.push(b);
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(out).expect("ASCII replacements keep UTF-8")
}

#[cfg(test)]
mod tests {
    use super::to_json;
    use serde_json::{Value, json};

    fn parse(text: &str) -> Value {
        serde_json::from_str(&to_json(text)).unwrap_or_else(|e| panic!("{e}: {}", to_json(text)))
    }

    #[test]
    fn comments_go_and_strings_stay() {
        let text = r#"{
  // a line comment
  "image": "img:1", /* a block
     comment over lines */ "url": "http://example.com//x", // "not": "this"
  "quote": "a \"//\" b /* c */",
  "slash": "ends in \\", "n": 1
}"#;
        assert_eq!(
            parse(text),
            json!({"image": "img:1", "url": "http://example.com//x",
                   "quote": "a \"//\" b /* c */", "slash": "ends in \\", "n": 1})
        );
    }

    #[test]
    fn trailing_commas_go_even_before_a_comment() {
        let text = "{\"a\": [1, 2,], \"b\": {\"c\": 3, // last\n},\n}";
        assert_eq!(parse(text), json!({"a": [1, 2], "b": {"c": 3}}));
        assert_eq!(parse("[\"x,\", ]"), json!(["x,"]));
    }

    #[test]
    fn errors_keep_their_line() {
        let err =
            serde_json::from_str::<Value>(&to_json("{\n// c\n/* d\n*/ \"a\": }")).unwrap_err();
        assert_eq!(err.line(), 4, "{err}");
    }
}
