//! Value references: how a workflow feeds one step's structured output to a
//! later step. `{{args.KEY}}` is a workflow argument, `{{item}}` and
//! `{{item.PATH}}` the fan-out item, `{{index}}` its position (from 1),
//! `{{STEP.PATH}}` an earlier step's structured output. A PATH is keys and
//! list positions joined by dots (`plan.issues.0.id`). Strings render as
//! they are, other values as compact JSON. Pure: no I/O.

use std::collections::BTreeMap;

use serde_json::Value;

/// What references resolve against while one step (or one item) runs.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub args: BTreeMap<String, String>,
    /// Earlier steps' outputs by step name (a fan-out step's is the list of
    /// its items' outputs).
    pub outputs: BTreeMap<String, Value>,
    /// The fan-out item and its position from 1.
    pub item: Option<(Value, usize)>,
    /// How many of the fan-out's items run at once (0 or 1: alone).
    pub side_by_side: u32,
}

/// The roots a reference may start with besides a step name.
pub const RESERVED: [&str; 3] = ["args", "item", "index"];

/// Replace every `{{reference}}` in `text`. An unknown reference is an
/// error naming it.
pub fn render(text: &str, scope: &Scope) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("`{{{{` without `}}}}` in `{text}`"))?;
        let value = lookup(after[..end].trim(), scope)?;
        out.push_str(&display(&value));
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value a bare reference (`plan.issues`) names.
pub fn lookup(reference: &str, scope: &Scope) -> Result<Value, String> {
    let mut parts = reference.split('.');
    let root = parts.next().unwrap_or_default();
    let (mut value, mut at) = match root {
        "args" => {
            let key = parts
                .next()
                .ok_or("`args` needs a key: `args.KEY`".to_string())?;
            let v = scope.args.get(key).ok_or_else(|| {
                format!(
                    "`{reference}`: no workflow argument `{key}` (declared: {})",
                    list(scope.args.keys())
                )
            })?;
            (Value::String(v.clone()), format!("args.{key}"))
        }
        "item" | "index" => {
            let (item, index) = scope.item.as_ref().ok_or_else(|| {
                format!("`{reference}`: `{root}` exists only in a step with forEach")
            })?;
            let v = if root == "index" {
                Value::from(*index)
            } else {
                item.clone()
            };
            (v, root.to_string())
        }
        step => {
            let v = scope.outputs.get(step).ok_or_else(|| {
                format!(
                    "`{reference}`: no earlier step `{step}` with a structured output (have: {})",
                    list(scope.outputs.keys())
                )
            })?;
            (v.clone(), step.to_string())
        }
    };
    for key in parts {
        let next = match &value {
            Value::Object(map) => map.get(key).cloned(),
            Value::Array(list) => key.parse::<usize>().ok().and_then(|i| list.get(i).cloned()),
            _ => None,
        };
        value = next.ok_or_else(|| format!("`{reference}`: `{at}` has no `{key}`"))?;
        at = format!("{at}.{key}");
    }
    Ok(value)
}

/// How a value reads inside a prompt argument or a branch name.
pub fn display(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The references in `text`, for checks before anything runs.
pub fn references(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        found.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    found
}

fn list<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let keys: Vec<_> = keys.map(|k| format!("`{k}`")).collect();
    if keys.is_empty() {
        "none".into()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope() -> Scope {
        Scope {
            args: BTreeMap::from([("LABEL".into(), "ready".into())]),
            outputs: BTreeMap::from([(
                "plan".into(),
                json!({"issues": [{"id": "7", "title": "Fix auth", "n": 3}]}),
            )]),
            item: Some((json!({"id": "7", "branch": "sanddune/issue-7"}), 2)),
            side_by_side: 1,
        }
    }

    #[test]
    fn references_render() {
        let cases = [
            ("{{args.LABEL}}", "ready"),
            (
                "issue {{ item.id }} on {{item.branch}}",
                "issue 7 on sanddune/issue-7",
            ),
            ("#{{index}}", "#2"),
            ("{{plan.issues.0.title}}", "Fix auth"),
            ("{{plan.issues.0.n}}", "3"),
            (
                "{{plan.issues.0}}",
                r#"{"id":"7","n":3,"title":"Fix auth"}"#,
            ),
            ("no references", "no references"),
        ];
        for (text, want) in cases {
            assert_eq!(render(text, &scope()).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn bad_references_are_named() {
        let mut no_item = scope();
        no_item.item = None;
        let cases = [
            (
                "{{args.NOPE}}",
                &scope(),
                "no workflow argument `NOPE` (declared: `LABEL`)",
            ),
            ("{{plann.issues}}", &scope(), "no earlier step `plann`"),
            ("{{plan.issues.5}}", &scope(), "`plan.issues` has no `5`"),
            ("{{item.id}}", &no_item, "only in a step with forEach"),
            ("{{item.id", &scope(), "without `}}`"),
        ];
        for (text, scope, want) in cases {
            let e = render(text, scope).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn references_are_listed() {
        assert_eq!(references("a {{x.y}} b {{ z }}"), vec!["x.y", "z"]);
    }
}
