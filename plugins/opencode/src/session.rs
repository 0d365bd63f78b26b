//! opencode keeps sessions in its own store (a database under
//! `~/.local/share/opencode`), not in one file per session that sanddune could
//! copy between a sandbox and the host. So: no session file, content passed
//! through untouched, and no usage to read from one. `describe()` says
//! `session-files: false`, and resuming is refused when building commands.

use crate::parser::Usage;

/// Always None: there is no session file to point at.
pub fn session_file_path(_home: &str, _cwd: &str, _session_id: &str) -> Option<String> {
    None
}

/// Unchanged: opencode has no session files whose cwd could be rewritten.
pub fn rewrite_session_cwd(content: &str, _from: &str, _to: &str) -> String {
    content.to_owned()
}

/// Always None: usage comes from the stream's `step_finish` lines instead.
pub fn usage_from_session(_content: &str) -> Option<Usage> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_session_files() {
        assert_eq!(session_file_path("/home/u", "/w", "ses_abc"), None);
        let content = "{\"cwd\":\"/w\"}\nnot json\n";
        assert_eq!(rewrite_session_cwd(content, "/w", "/x"), content);
        assert_eq!(usage_from_session(content), None);
    }
}
