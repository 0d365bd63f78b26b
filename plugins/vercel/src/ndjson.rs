//! The command stream of `POST .../cmd` (`wait: true`) and `GET .../logs`:
//! `application/x-ndjson`, one JSON object per line. First `{"command":{...,
//! "exitCode":null}}`, then `{"stream":"stdout"|"stderr","data":"..."}`
//! chunks (arbitrary pieces of text, not lines), then `{"command":{...,
//! "exitCode":N}}`; `{"stream":"error","data":{code,message}}` when the
//! sandbox stops mid-stream. Unknown lines and fields are ignored.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A `command` object; `exit_code` is None while it runs.
    Command {
        id: String,
        exit_code: Option<i32>,
    },
    Log {
        stream: Stream,
        data: String,
    },
    /// The sandbox stopped (or failed) while the command ran.
    Error {
        code: String,
        message: String,
    },
    /// A line this parser does not know: ignored.
    Other,
}

/// Parse one ndjson line. A line that is not JSON is an error (the stream is
/// corrupt); a JSON object of an unknown shape is `Other`.
pub fn parse(line: &str) -> Result<Event, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| {
        format!(
            "the command stream has a line that is not JSON ({e}): {}",
            clip(line)
        )
    })?;
    if let Some(cmd) = value.get("command").filter(|c| c.is_object()) {
        let id = cmd
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let exit_code = cmd
            .get("exitCode")
            .and_then(Value::as_i64)
            .map(|c| c as i32);
        return Ok(Event::Command { id, exit_code });
    }
    match value.get("stream").and_then(Value::as_str) {
        Some("stdout" | "stderr") => {
            let stream = if value["stream"] == "stdout" {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            let data = value
                .get("data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Ok(Event::Log { stream, data })
        }
        Some("error") => {
            let data = &value["data"];
            Ok(Event::Error {
                code: data
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .into(),
                message: data
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
            })
        }
        _ => Ok(Event::Other),
    }
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Splits a byte stream into lines; bytes are kept until their line ends.
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Complete lines in `chunk` (with what was pending), without `\n`.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut lines = Vec::new();
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            let text = text.trim_end_matches('\r');
            if !text.trim().is_empty() {
                lines.push(text.to_string());
            }
        }
        lines
    }

    /// The last line when the stream ended without a newline.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let text = String::from_utf8_lossy(&rest).trim().to_string();
        (!text.is_empty()).then_some(text)
    }
}

/// Turns `data` chunks into output lines per stream: a line is delivered
/// once, when its newline arrives (or at the end, when it has none).
#[derive(Default)]
pub struct OutputLines {
    stdout: String,
    stderr: String,
}

impl OutputLines {
    pub fn push(&mut self, stream: &Stream, data: &str, emit: &mut dyn FnMut(&Stream, String)) {
        let buf = match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        buf.push_str(data);
        while let Some(i) = buf.find('\n') {
            let line: String = buf.drain(..=i).collect();
            emit(stream, line[..line.len() - 1].to_string());
        }
    }

    pub fn finish(&mut self, emit: &mut dyn FnMut(&Stream, String)) {
        for (stream, buf) in [
            (Stream::Stdout, &mut self.stdout),
            (Stream::Stderr, &mut self.stderr),
        ] {
            if !buf.is_empty() {
                emit(&stream, std::mem::take(buf));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_the_documented_shapes() {
        let cases = [
            (
                r#"{"command":{"id":"cmd_1","name":"sh","args":["-c","x"],"cwd":"/vercel/sandbox","sessionId":"s","exitCode":null,"startedAt":1}}"#,
                Event::Command {
                    id: "cmd_1".into(),
                    exit_code: None,
                },
            ),
            (
                r#"{"command":{"id":"cmd_1","exitCode":3,"startedAt":1,"extra":{"a":1}}}"#,
                Event::Command {
                    id: "cmd_1".into(),
                    exit_code: Some(3),
                },
            ),
            (
                r#"{"stream":"stdout","data":"hi\n"}"#,
                Event::Log {
                    stream: Stream::Stdout,
                    data: "hi\n".into(),
                },
            ),
            (
                r#"{"stream":"stderr","data":"oops"}"#,
                Event::Log {
                    stream: Stream::Stderr,
                    data: "oops".into(),
                },
            ),
            (
                r#"{"stream":"error","data":{"code":"sandbox_stopped","message":"The sandbox was stopped"}}"#,
                Event::Error {
                    code: "sandbox_stopped".into(),
                    message: "The sandbox was stopped".into(),
                },
            ),
            (r#"{"type":"heartbeat"}"#, Event::Other),
            (r#"{"stream":"stdin","data":"x"}"#, Event::Other),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line).unwrap(), want, "{line}");
        }
        assert!(parse("not json").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut s = LineSplitter::default();
        assert!(s.push(b"{\"a\":").is_empty());
        assert_eq!(
            s.push(b"1}\n{\"b\":2}\r\n\n{\"c\""),
            vec!["{\"a\":1}", "{\"b\":2}"]
        );
        assert_eq!(s.push(b":3}"), Vec::<String>::new());
        assert_eq!(s.finish().as_deref(), Some("{\"c\":3}"));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn output_chunks_become_lines_once_per_stream() {
        let mut out = OutputLines::default();
        let mut got = Vec::new();
        let mut emit = |s: &Stream, l: String| got.push((s.clone(), l));
        out.push(&Stream::Stdout, "a\nb", &mut emit);
        out.push(&Stream::Stderr, "e1", &mut emit);
        out.push(&Stream::Stdout, "c\n\nd", &mut emit);
        out.push(&Stream::Stderr, "\n", &mut emit);
        out.finish(&mut emit);
        assert_eq!(
            got,
            vec![
                (Stream::Stdout, "a".into()),
                (Stream::Stdout, "bc".into()),
                (Stream::Stdout, "".into()),
                (Stream::Stderr, "e1".into()),
                (Stream::Stdout, "d".into()),
            ]
        );
    }
}
