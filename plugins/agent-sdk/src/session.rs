//! Session-file paths the agent CLIs share: Claude Code and Qwen Code name a
//! session's project directory after its cwd the same way.

/// A project directory name for `cwd` as Claude Code and Qwen Code spell it:
/// every character outside `[A-Za-z0-9]` becomes `-`. They do this with a
/// JavaScript regex over UTF-16 code units, so a character outside the BMP
/// becomes two dashes.
pub fn encode_cwd(cwd: &str) -> String {
    let mut out = String::with_capacity(cwd.len());
    for c in cwd.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('-', c.len_utf16()));
        }
    }
    out
}

/// Rewrites the top-level `"cwd"` of every line where it equals `from`
/// (Claude Code's and Qwen Code's session records). Only the cwd value's
/// bytes change: key order, number spelling and every other line stay
/// exactly as they were.
pub fn rewrite_top_level_cwd(content: &str, from: &str, to: &str) -> String {
    crate::json::rewrite_string_values(content, from, to, |line, _| {
        crate::json::top_level_values(line, "cwd").unwrap_or_default()
    })
}

/// Whether `id` can name a file inside a session directory: not empty, not
/// `.` or `..`, no path separator or NUL (ids are UUIDs in practice, but
/// the id comes from the agent's output).
pub fn is_file_name(id: &str) -> bool {
    !(id.is_empty() || id == "." || id == ".." || id.contains(['/', '\\', '\0']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_encoding() {
        assert_eq!(encode_cwd("/home/u/my_repo"), "-home-u-my-repo");
        assert_eq!(
            encode_cwd("/x/.sanddune/worktrees/a"),
            "-x--sanddune-worktrees-a"
        );
        assert_eq!(encode_cwd("/w"), "-w");
        assert_eq!(encode_cwd("/tmp/café 1"), "-tmp-caf--1");
        assert_eq!(encode_cwd("/a😀b"), "-a--b");
    }

    #[test]
    fn file_names() {
        assert!(is_file_name("5805de68-1f5e-4b2a-9d0c-2a4f6f0e7c11"));
        for bad in ["", ".", "..", "../../etc/passwd", "a/b", "a\\b", "a\0b"] {
            assert!(!is_file_name(bad), "{bad:?}");
        }
    }
}
