//! The prompt pipeline. An inline prompt is passed to the agent literally.
//! A prompt template (from a file) goes through prompt argument substitution
//! on the host (`{{KEY}}`), then prompt expansion in the sandbox (each
//! !`command` replaced by its stdout). Shell expressions are found in the
//! template before substitution, so a `!` + backtick that arrives inside an
//! argument value stays inert text, while `{{KEY}}` inside a shell
//! expression is substituted.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Prompt arguments sanddune injects itself; they cannot be overridden.
pub const BUILT_INS: [&str; 2] = ["SOURCE_BRANCH", "TARGET_BRANCH"];

/// A piece of a prompt after substitution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Text(String),
    /// A shell expression's command, to run in the sandbox.
    Shell(String),
}

/// A substituted prompt template, waiting for prompt expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub segments: Vec<Segment>,
    /// Prompt arguments the template never used (worth a warning).
    pub unused: Vec<String>,
}

impl Template {
    pub fn has_shell_expressions(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Shell(_)))
    }
}

/// Split a template into text and !`command` shell expressions.
fn split_shell(template: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("!`") {
        let Some(len) = rest[start + 2..].find('`') else {
            break;
        };
        if start > 0 {
            segments.push(Segment::Text(rest[..start].to_string()));
        }
        segments.push(Segment::Shell(rest[start + 2..start + 2 + len].to_string()));
        rest = &rest[start + 2 + len + 1..];
    }
    if !rest.is_empty() {
        segments.push(Segment::Text(rest.to_string()));
    }
    segments
}

/// Replace every `{{KEY}}` in `text` from `args`; `missing` collects keys
/// without a value, `used` the keys seen.
fn substitute(
    text: &str,
    args: &BTreeMap<String, String>,
    used: &mut Vec<String>,
    missing: &mut Vec<String>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        // The key is the run of key characters right after `{{`; looking
        // only that far keeps this linear (searching for the next `}}` from
        // every unclosed `{{` was quadratic).
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let key = &after[..end];
        if key.is_empty() || !after[end..].starts_with("}}") {
            // Not a placeholder (e.g. `{{ }}` in code): keep it as text.
            out.push_str(&rest[..start + 2]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..start]);
        match args.get(key) {
            Some(value) => out.push_str(value),
            None => {
                if !missing.iter().any(|m| m == key) {
                    missing.push(key.to_string());
                }
                out.push_str(&rest[start..start + 2 + end + 2]);
            }
        }
        if !used.iter().any(|u| u == key) {
            used.push(key.to_string());
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Prompt argument substitution for a template: `args` from the caller,
/// plus the built-ins. A caller passing a built-in, or a placeholder with
/// no value, is an error naming the key.
pub fn render(
    template: &str,
    args: &[(String, String)],
    source_branch: &str,
    target_branch: &str,
) -> Result<Template> {
    if let Some((key, _)) = args.iter().find(|(k, _)| BUILT_INS.contains(&k.as_str())) {
        return Err(Error::input(format!(
            "{key} is a built-in prompt argument and cannot be overridden; use another name"
        )));
    }
    let mut all: BTreeMap<String, String> = args.iter().cloned().collect();
    all.insert("SOURCE_BRANCH".into(), source_branch.into());
    all.insert("TARGET_BRANCH".into(), target_branch.into());
    let (mut used, mut missing) = (Vec::new(), Vec::new());
    let segments = split_shell(template)
        .into_iter()
        .map(|segment| match segment {
            Segment::Text(t) => Segment::Text(substitute(&t, &all, &mut used, &mut missing)),
            Segment::Shell(c) => Segment::Shell(substitute(&c, &all, &mut used, &mut missing)),
        })
        .collect();
    if !missing.is_empty() {
        let keys = missing
            .iter()
            .map(|k| format!("{{{{{k}}}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::input(format!(
            "the prompt template uses {keys} but no value was given: pass --prompt-arg {}=...",
            missing[0]
        )));
    }
    let unused = args
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| !used.contains(k))
        .collect();
    Ok(Template { segments, unused })
}

/// The placeholders of `template` that neither `args` nor the built-ins
/// give a value, in order of first use (interactive sessions ask for them).
pub fn missing_keys(template: &str, args: &[(String, String)]) -> Vec<String> {
    let mut all: BTreeMap<String, String> = args.iter().cloned().collect();
    for key in BUILT_INS {
        all.insert(key.into(), String::new());
    }
    let (mut used, mut missing) = (Vec::new(), Vec::new());
    for segment in split_shell(template) {
        let (Segment::Text(t) | Segment::Shell(t)) = segment;
        substitute(&t, &all, &mut used, &mut missing);
    }
    missing
}

/// Readable placeholders for shell expressions that have not run yet.
pub fn stand_ins(template: &Template) -> Vec<String> {
    let shell = |s: &Segment| match s {
        Segment::Shell(cmd) => Some(format!("(output of `{cmd}`)")),
        Segment::Text(_) => None,
    };
    template.segments.iter().filter_map(shell).collect()
}

/// Join a template whose shell expressions were replaced by `outputs`
/// (in order). A trailing newline of each output is dropped, as `$(...)` does.
pub fn assemble(template: &Template, outputs: &[String]) -> String {
    let mut outputs = outputs.iter();
    let mut prompt = String::new();
    for segment in &template.segments {
        match segment {
            Segment::Text(t) => prompt.push_str(t),
            Segment::Shell(_) => {
                let out = outputs.next().map(String::as_str).unwrap_or("");
                prompt.push_str(out.strip_suffix('\n').unwrap_or(out));
            }
        }
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn text(t: &Template) -> String {
        assemble(t, &[])
    }

    #[test]
    fn substitutes_arguments_and_built_ins() {
        let t = render(
            "Fix #{{ISSUE}} on {{SOURCE_BRANCH}}, diff against {{TARGET_BRANCH}}.",
            &args(&[("ISSUE", "42")]),
            "sanddune/run-1",
            "main",
        )
        .unwrap();
        assert_eq!(text(&t), "Fix #42 on sanddune/run-1, diff against main.");
        assert!(t.unused.is_empty());
        assert!(!t.has_shell_expressions());
    }

    #[test]
    fn a_missing_key_is_an_error_naming_it() {
        let err = render(
            "{{ISSUE_NUBMER}} and {{X}}",
            &args(&[("ISSUE_NUMBER", "1")]),
            "s",
            "t",
        )
        .unwrap_err();
        assert!(err.to_string().contains("{{ISSUE_NUBMER}}, {{X}}"), "{err}");
        assert!(
            err.to_string().contains("--prompt-arg ISSUE_NUBMER="),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn unused_arguments_are_reported_not_refused() {
        let t = render("hello", &args(&[("SHARED", "x")]), "s", "t").unwrap();
        assert_eq!(t.unused, vec!["SHARED".to_string()]);
    }

    #[test]
    fn built_ins_cannot_be_overridden() {
        for key in BUILT_INS {
            let err = render("x", &args(&[(key, "mine")]), "s", "t").unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn arguments_reach_inside_shell_expressions() {
        let t = render(
            "Issue: !`gh issue view {{N}}` end",
            &args(&[("N", "7")]),
            "s",
            "t",
        )
        .unwrap();
        assert_eq!(
            t.segments,
            vec![
                Segment::Text("Issue: ".into()),
                Segment::Shell("gh issue view 7".into()),
                Segment::Text(" end".into())
            ]
        );
        assert_eq!(assemble(&t, &["title\n".into()]), "Issue: title end");
    }

    #[test]
    fn shell_syntax_inside_an_argument_value_stays_inert() {
        let t = render(
            "Title: {{TITLE}}",
            &args(&[("TITLE", "!`rm -rf /`")]),
            "s",
            "t",
        )
        .unwrap();
        assert!(!t.has_shell_expressions());
        assert_eq!(text(&t), "Title: !`rm -rf /`");
    }

    #[test]
    fn braces_that_are_not_placeholders_are_kept() {
        let t = render("let x = {{ }}; {{a-b}} {{", &[], "s", "t").unwrap();
        assert_eq!(text(&t), "let x = {{ }}; {{a-b}} {{");
    }

    #[test]
    fn many_unclosed_braces_stay_linear() {
        // Found by fuzzing: every unclosed `{{` searched to the end for `}}`.
        let template = format!("{}{{{{KEY}}}}", "{{a-\n".repeat(50_000));
        let start = std::time::Instant::now();
        let t = render(&template, &args(&[("KEY", "v")]), "s", "t").unwrap();
        assert!(text(&t).ends_with("{{a-\nv"));
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn an_unclosed_shell_expression_is_text() {
        let t = render("keep !`this", &[], "s", "t").unwrap();
        assert_eq!(t.segments, vec![Segment::Text("keep !`this".into())]);
    }
}
