//! Text the agent produced (its output, commit subjects, file names, run
//! and item names) on its way to a terminal. A terminal obeys escape
//! sequences in what it prints: an OSC 52 sequence writes the user's
//! clipboard, others retitle the window, move the cursor to rewrite lines
//! above, or make text invisible. So every control character is shown as
//! an escape instead: ESC as `\e`, BEL as `\a`, CR as `\r`, other C0
//! controls, DEL and the C1 controls (U+0080-U+009F, which some terminals
//! obey like ESC sequences) as `\xNN` or `\u{NN}`, and the Unicode
//! bidirectional overrides (which reorder what is shown) as `\u{NNNN}`.
//! A backslash stays as it is: the result is for reading, not parsing.
//! Newlines and tabs only move the cursor forward: [`visible`] keeps them,
//! [`visible_line`] (one cell, one line) escapes them too.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character but newline and tab made visible.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// `text` as one line: every control character, newline and tab included,
/// made visible.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let hidden = |c: char| needs_escape(c) && !keep(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !hidden(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\x1b' => out.write_str("\\e"),
            '\x07' => out.write_str("\\a"),
            '\r' => out.write_str("\\r"),
            '\n' => out.write_str("\\n"),
            '\t' => out.write_str("\\t"),
            c if (c as u32) < 0x80 => write!(out, "\\x{:02x}", c as u32),
            c => write!(out, "\\u{{{:x}}}", c as u32),
        };
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_and_text_stays() {
        let cases: &[(&str, &str, &str)] = &[
            // (input, visible, visible_line)
            ("fix the parser", "fix the parser", "fix the parser"),
            ("naïve → ok ✓", "naïve → ok ✓", "naïve → ok ✓"),
            ("a\\eb", "a\\eb", "a\\eb"),
            (
                "x\x1b]52;c;aGk=\x07y",
                "x\\e]52;c;aGk=\\ay",
                "x\\e]52;c;aGk=\\ay",
            ),
            ("\x1b[2J\x1b[H", "\\e[2J\\e[H", "\\e[2J\\e[H"),
            ("one\ntwo\tthree", "one\ntwo\tthree", "one\\ntwo\\tthree"),
            ("ok\rEVIL", "ok\\rEVIL", "ok\\rEVIL"),
            (
                "nul\0bs\x08del\x7f",
                "nul\\x00bs\\x08del\\x7f",
                "nul\\x00bs\\x08del\\x7f",
            ),
            ("csi\u{9b}31m", "csi\\u{9b}31m", "csi\\u{9b}31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed", "abc\\u{202e}fed"),
        ];
        for (input, text, line) in cases {
            assert_eq!(visible(input), *text, "visible({input:?})");
            assert_eq!(visible_line(input), *line, "visible_line({input:?})");
        }
    }

    #[test]
    fn plain_text_is_not_copied() {
        assert!(matches!(visible("plain"), Cow::Borrowed("plain")));
        assert!(matches!(visible_line("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn nothing_visible_holds_a_control_character() {
        let all: String = (0..=0x2100u32).filter_map(char::from_u32).collect();
        assert!(!visible_line(&all).chars().any(char::is_control));
        assert!(
            !visible(&all)
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
    }
}
