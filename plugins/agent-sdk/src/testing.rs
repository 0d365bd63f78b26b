//! For agent providers' unit tests: the requests they build, and the
//! checks every stream parser must pass whatever its agent (lines that are
//! not events, lines cut short, hostile input), so each provider states
//! them once, here, and adds only its own lines.

use crate::{Command, Event, Parser, Request};

/// A request for `prompt`, everything else unset.
pub fn request(prompt: &str) -> Request {
    Request {
        prompt: prompt.into(),
        ..Request::default()
    }
}

/// Option pairs as a request carries them.
pub fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `command` refuses an empty or blank prompt, with the message naming
/// `program` that `validate` gives.
pub fn assert_refuses_empty_prompt(
    command: impl Fn(&Request) -> Result<Command, String>,
    program: &str,
) {
    for prompt in ["", "  \n\t "] {
        assert_eq!(
            command(&request(prompt)).unwrap_err(),
            format!("the prompt is empty: refusing to start {program} with nothing to do")
        );
    }
}

/// Lines no agent's output makes an event of: an unknown type, no type,
/// blank lines, JSON that is not an object, `null`.
pub const NOT_EVENTS: [&str; 7] = [
    r#"{"type":"brand_new_thing","payload":{"x":[1,2,3]}}"#,
    r#"{"no_type":true}"#,
    "",
    "   ",
    "[1,2,3]",
    "\"just a string\"",
    "null",
];

/// `parser` makes no event of `lines`, nor of any of [`NOT_EVENTS`].
pub fn assert_no_events(parser: &mut impl Parser, lines: &[&str]) {
    for line in lines.iter().chain(&NOT_EVENTS) {
        assert_eq!(parser.push_line(line), vec![], "line: {line}");
    }
}

/// `parser` makes no event of any of `lines` cut short (after 1 and 10
/// bytes, half-way, before the last byte).
pub fn assert_cuts_yield_nothing(parser: &mut impl Parser, lines: &[&str]) {
    for line in lines {
        for cut in [1, 10, line.len() / 2, line.len() - 1] {
            assert_eq!(parser.push_line(&line[..cut]), vec![], "{}", &line[..cut]);
        }
    }
}

/// A fresh parser survives hostile lines without an event or a panic:
/// JSON nested deeper than any parser should follow, and bytes that are
/// not UTF-8 (the host replaces them with U+FFFD).
pub fn assert_survives_hostile_lines<P: Parser + Default>() {
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let garbage = String::from_utf8_lossy(&[0xFF, 0xFE, b'{', 0x80]).into_owned();
    for line in [nested, garbage] {
        assert_eq!(P::default().push_line(&line), Vec::<Event>::new());
    }
}
