//! Checks every agent provider makes on a command request, with the same
//! messages everywhere.

use crate::Request;

/// Sorts `options` into one slot per name in `known` (in that order). Fails
/// on an unknown name, or on a name given twice (a config mistake, not a
/// "last one wins").
pub fn options<'a, const N: usize>(
    agent: &str,
    options: &'a [(String, String)],
    known: [&str; N],
) -> Result<[Option<&'a str>; N], String> {
    let mut slots = [None; N];
    for (name, value) in options {
        let Some(i) = known.iter().position(|k| k == name) else {
            return Err(format!(
                "unknown option {name:?} for {agent}: expected one of {}",
                known.join(", ")
            ));
        };
        if slots[i].replace(value.as_str()).is_some() {
            return Err(format!("option {name:?} for {agent} is given twice"));
        }
    }
    Ok(slots)
}

/// For an agent that takes no options and keeps no session files: refuses
/// options and a resume, and returns the model (which must not be blank).
pub fn model_only<'a>(agent: &str, request: &'a Request) -> Result<Option<&'a str>, String> {
    if let Some(id) = &request.resume_session {
        return Err(format!(
            "{agent} cannot resume session {id:?}: the {agent} agent provider keeps no session files"
        ));
    }
    if let Some((name, _)) = request.options.first() {
        return Err(format!(
            "unknown option {name:?} for {agent}: {agent} takes no options (only a model)"
        ));
    }
    non_empty(agent, "model", request.model.as_deref())
}

/// `value` must be one of `allowed`.
pub fn one_of(agent: &str, what: &str, value: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} {value:?} for {agent}: expected one of {}",
            allowed.join(", ")
        ))
    }
}

/// A blank value would become a bogus flag value.
pub fn non_empty<'a>(
    agent: &str,
    what: &str,
    value: Option<&'a str>,
) -> Result<Option<&'a str>, String> {
    match value {
        Some(v) if v.trim().is_empty() => Err(format!("the {what} for {agent} is empty")),
        _ => Ok(value),
    }
}

/// An empty prompt is how a provider that dropped stdin shows up; refuse it
/// rather than let the agent "succeed" at nothing.
pub fn prompt_not_empty(prompt: &str, program: &str) -> Result<(), String> {
    if prompt.trim().is_empty() {
        return Err(format!(
            "the prompt is empty: refusing to start {program} with nothing to do"
        ));
    }
    Ok(())
}

/// Linux refuses a single argv string of 128 KiB (MAX_ARG_STRLEN); 120 KiB
/// leaves room for the rest of the command line and the environment.
pub const MAX_ARGV_PROMPT: usize = 122_880;

/// What a prompt must satisfy to travel on `program`'s argv: at most `limit`
/// bytes and no NUL. The size message reads "(at most {limit}{tail})", so
/// `tail` is e.g. `""`, `" bytes"` or `" bytes: why"`.
pub fn argv_prompt(prompt: &str, program: &str, limit: usize, tail: &str) -> Result<(), String> {
    if prompt.len() > limit {
        return Err(format!(
            "the prompt is {} bytes, too large for {program}'s command line \
             (at most {limit}{tail})",
            prompt.len()
        ));
    }
    if prompt.contains('\0') {
        return Err("the prompt contains a NUL byte, which a command line cannot carry".into());
    }
    Ok(())
}

/// Appends `flag value` when there is a value.
pub fn push_flag(argv: &mut Vec<String>, flag: &str, value: Option<&str>) {
    if let Some(value) = value {
        argv.push(flag.to_owned());
        argv.push(value.to_owned());
    }
}

/// Appends the prompt as the last positional argument, after `--` when it
/// starts with `-`, so a prompt like "-h ..." is never read as flags.
pub fn push_prompt_arg(argv: &mut Vec<String>, prompt: &str) {
    if prompt.starts_with('-') {
        argv.push("--".into());
    }
    argv.push(prompt.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_that_looks_like_a_flag_follows_a_double_dash() {
        let mut argv = vec![];
        push_prompt_arg(&mut argv, "fix it");
        push_prompt_arg(&mut argv, "-h please");
        assert_eq!(argv, ["fix it", "--", "-h please"]);
    }

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn option_slots() {
        let given = opts(&[("b", "2"), ("a", "1")]);
        assert_eq!(
            options("x", &given, ["a", "b", "c"]),
            Ok([Some("1"), Some("2"), None])
        );
        assert_eq!(
            options("x", &opts(&[("d", "1")]), ["a", "b"]),
            Err(r#"unknown option "d" for x: expected one of a, b"#.into())
        );
        assert_eq!(
            options("x", &opts(&[("a", "1"), ("a", "2")]), ["a"]),
            Err(r#"option "a" for x is given twice"#.into())
        );
    }

    #[test]
    fn allowed_and_non_empty_values() {
        assert_eq!(one_of("x", "effort", "low", &["low", "high"]), Ok(()));
        assert_eq!(
            one_of("x", "effort", "huge", &["low", "high"]),
            Err(r#"invalid effort "huge" for x: expected one of low, high"#.into())
        );
        assert_eq!(non_empty("x", "model", Some("m")), Ok(Some("m")));
        assert_eq!(non_empty("x", "model", None), Ok(None));
        assert_eq!(
            non_empty("x", "model", Some(" ")),
            Err("the model for x is empty".into())
        );
    }

    #[test]
    fn prompts() {
        assert_eq!(prompt_not_empty("go", "p"), Ok(()));
        assert_eq!(
            prompt_not_empty(" \n", "p"),
            Err("the prompt is empty: refusing to start p with nothing to do".into())
        );
        assert_eq!(argv_prompt("ok", "p", 2, ""), Ok(()));
        assert_eq!(
            argv_prompt("abc", "p", 2, " bytes"),
            Err("the prompt is 3 bytes, too large for p's command line (at most 2 bytes)".into())
        );
        assert_eq!(
            argv_prompt("abc", "p", 2, " bytes: why"),
            Err(
                "the prompt is 3 bytes, too large for p's command line (at most 2 bytes: why)"
                    .into()
            )
        );
        assert_eq!(
            argv_prompt("a\0", "p", 2, ""),
            Err("the prompt contains a NUL byte, which a command line cannot carry".into())
        );
    }

    #[test]
    fn model_only_requests() {
        let mut request = Request {
            model: Some("m".into()),
            ..Request::default()
        };
        assert_eq!(model_only("x", &request), Ok(Some("m")));
        request.options = opts(&[("effort", "high")]);
        assert_eq!(
            model_only("x", &request),
            Err(r#"unknown option "effort" for x: x takes no options (only a model)"#.into())
        );
        request.resume_session = Some("s".into());
        assert_eq!(
            model_only("x", &request),
            Err(
                r#"x cannot resume session "s": the x agent provider keeps no session files"#
                    .into()
            )
        );
        let blank = Request {
            model: Some(" ".into()),
            ..Request::default()
        };
        assert_eq!(
            model_only("x", &blank),
            Err("the model for x is empty".into())
        );
    }

    #[test]
    fn flags() {
        let mut argv = Vec::new();
        push_flag(&mut argv, "--a", None);
        push_flag(&mut argv, "--b", Some("v"));
        assert_eq!(argv, ["--b", "v"]);
    }
}
