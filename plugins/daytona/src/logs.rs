//! A session command's log as the toolbox keeps it: every output line
//! prefixed with three marker bytes naming its stream (`\x01\x01\x01`
//! stdout, `\x02\x02\x02` stderr) and ended by `\n`. `GET .../logs` answers
//! the whole log so far (as `output`, JSON, when the request names an SDK
//! version >= 0.167); a follower keeps how much it has delivered and hands
//! on only complete lines, once each.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

const STDOUT: &str = "\u{1}\u{1}\u{1}";
const STDERR: &str = "\u{2}\u{2}\u{2}";

/// Where a follower is in one command's log.
#[derive(Default, Debug)]
pub struct LogCursor {
    /// Bytes of the log already turned into lines.
    consumed: usize,
}

impl LogCursor {
    /// The complete lines of `log` after what was delivered before; with
    /// `finished` (the command has exited, so the log is whole) the last
    /// line too when it has no `\n`. A log that is shorter than what was
    /// delivered (not the same log) yields nothing.
    pub fn take(&mut self, log: &str, finished: bool) -> Vec<(Stream, String)> {
        let Some(rest) = log.get(self.consumed..) else {
            return vec![];
        };
        let complete = match rest.rfind('\n') {
            Some(i) => i + 1,
            None => 0,
        };
        let end = if finished { rest.len() } else { complete };
        let lines = split(&rest[..end]);
        self.consumed += end;
        lines
    }
}

/// `text` (whole lines) as (stream, line) pairs. A line carries the stream
/// of the last marker before it; text before any marker is stdout.
fn split(text: &str) -> Vec<(Stream, String)> {
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let (stream, body) = if let Some(b) = line.strip_prefix(STDOUT) {
            (Stream::Stdout, b)
        } else if let Some(b) = line.strip_prefix(STDERR) {
            (Stream::Stderr, b)
        } else {
            (Stream::Stdout, line)
        };
        // A line the shell wrote without its own newline can share the log
        // line with the next marker: split there too.
        let mut current = stream;
        let mut rest = body;
        loop {
            let next = [(STDOUT, Stream::Stdout), (STDERR, Stream::Stderr)]
                .into_iter()
                .filter_map(|(m, s)| rest.find(m).map(|i| (i, s)))
                .min_by_key(|(i, _)| *i);
            match next {
                Some((i, s)) => {
                    out.push((current, rest[..i].to_string()));
                    current = s;
                    rest = &rest[i + 3..];
                }
                None => {
                    out.push((current, rest.to_string()));
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_once_each_with_their_stream() {
        let mut c = LogCursor::default();
        let log1 = "\u{1}\u{1}\u{1}one\n\u{2}\u{2}\u{2}oops\n\u{1}\u{1}\u{1}tw";
        assert_eq!(
            c.take(log1, false),
            vec![
                (Stream::Stdout, "one".to_string()),
                (Stream::Stderr, "oops".to_string())
            ]
        );
        assert!(c.take(log1, false).is_empty());
        let log2 = format!("{log1}o\n\u{1}\u{1}\u{1}\n");
        assert_eq!(
            c.take(&log2, false),
            vec![(Stream::Stdout, "two".into()), (Stream::Stdout, "".into())]
        );
        let log3 = format!("{log2}\u{2}\u{2}\u{2}last");
        assert!(c.take(&log3, false).is_empty());
        assert_eq!(c.take(&log3, true), vec![(Stream::Stderr, "last".into())]);
        assert!(c.take(&log3, true).is_empty());
    }

    #[test]
    fn unmarked_text_is_stdout_and_a_shorter_log_yields_nothing() {
        let mut c = LogCursor::default();
        assert_eq!(
            c.take("plain\n", false),
            vec![(Stream::Stdout, "plain".into())]
        );
        assert!(c.take("", true).is_empty());
    }

    #[test]
    fn a_marker_inside_a_line_starts_a_new_one() {
        let mut c = LogCursor::default();
        assert_eq!(
            c.take("\u{1}\u{1}\u{1}a\u{2}\u{2}\u{2}b\n", false),
            vec![(Stream::Stdout, "a".into()), (Stream::Stderr, "b".into())]
        );
    }
}
