//! Structured output: the agent ends its work with a tagged block,
//! `<tag>{ ... }</tag>` (the last one wins, a ```json fence inside is fine),
//! and the run returns it parsed and validated against a JSON Schema.

use serde_json::Value;

use crate::error::{Error, Result};

/// What a run asks the agent for.
#[derive(Clone, Debug)]
pub struct StructuredOutput {
    /// The tag name, e.g. `result` for `<result>...</result>`.
    pub tag: String,
    /// The JSON Schema the block must satisfy.
    pub schema: Value,
}

pub use crate::outcome::OutputError;

impl StructuredOutput {
    /// Refuse a bad tag or schema before anything starts.
    pub fn check(&self) -> Result<()> {
        let valid = !self.tag.is_empty()
            && self
                .tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(Error::input(format!(
                "`{}` is not a usable output tag: use letters, digits, `-` and `_`",
                self.tag
            )));
        }
        jsonschema::validator_for(&self.schema)
            .map(|_| ())
            .map_err(|e| Error::input(format!("the output schema is not a valid JSON Schema: {e}")))
    }

    /// The last tagged block in `text`, parsed and validated.
    pub fn extract(&self, text: &str) -> Result<Value, String> {
        let (open, close) = (format!("<{}>", self.tag), format!("</{}>", self.tag));
        let end = text
            .rfind(&close)
            .ok_or_else(|| format!("the agent's output has no {open}...{close} block"))?;
        let start = text[..end]
            .rfind(&open)
            .ok_or_else(|| format!("the agent's output has {close} without {open}"))?;
        let body = strip_fence(text[start + open.len()..end].trim());
        let value: Value = serde_json::from_str(body)
            .map_err(|e| format!("the {open} block is not valid JSON: {e}"))?;
        let validator = jsonschema::validator_for(&self.schema)
            .map_err(|e| format!("the output schema is not a valid JSON Schema: {e}"))?;
        let problems: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(format!(
                "the {open} block does not match the output schema: {}",
                problems.join("; ")
            ));
        }
        Ok(value)
    }
}

/// The body of a Markdown code fence (```json ... ```), or `body` itself.
fn strip_fence(body: &str) -> &str {
    let Some(rest) = body.strip_prefix("```") else {
        return body;
    };
    let Some(rest) = rest.strip_suffix("```") else {
        return body;
    };
    // An info string (`json`) may come first, up to a newline or a space.
    let rest = rest.trim();
    match rest.find(|c: char| c.is_whitespace() || c == '{' || c == '[') {
        Some(at) if rest[..at].chars().all(|c| c.is_ascii_alphanumeric()) => rest[at..].trim(),
        _ => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> StructuredOutput {
        StructuredOutput {
            tag: "result".into(),
            schema: json!({
                "type": "object",
                "required": ["verdict"],
                "properties": {"verdict": {"enum": ["approve", "reject"]}}
            }),
        }
    }

    #[test]
    fn extraction_table() {
        let cases: &[(&str, Result<Value, &str>)] = &[
            (
                r#"<result>{"verdict":"approve"}</result>"#,
                Ok(json!({"verdict":"approve"})),
            ),
            (
                "first <result>{\"verdict\":\"reject\"}</result> then\n<result>\n```json\n{\"verdict\":\"approve\"}\n```\n</result>",
                Ok(json!({"verdict":"approve"})),
            ),
            (
                "<result>```\n{\"verdict\":\"reject\"}\n```</result>",
                Ok(json!({"verdict":"reject"})),
            ),
            (
                "<result>```json {\"verdict\":\"reject\"} ```</result>",
                Ok(json!({"verdict":"reject"})),
            ),
            ("no block here", Err("has no <result>...</result> block")),
            ("oops </result>", Err("without <result>")),
            ("<result>{verdict: approve}</result>", Err("not valid JSON")),
            (r#"<result>{"verdict":"maybe"}</result>"#, Err("/verdict")),
            (
                r#"<result>{}</result>"#,
                Err("\"verdict\" is a required property"),
            ),
        ];
        for (text, expected) in cases {
            match (spec().extract(text), expected) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_bad_tag_or_schema_is_refused_up_front() {
        let mut s = spec();
        s.tag = "a b".into();
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .contains("not a usable output tag")
        );
        let mut s = spec();
        s.schema = json!({"type": 12});
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .contains("not a valid JSON Schema")
        );
        assert!(spec().check().is_ok());
    }
}
