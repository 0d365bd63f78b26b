//! opencode keeps its sessions in a sqlite database under
//! `~/.local/share/opencode`, not in files; but `opencode export ID` prints
//! one session as JSON and `opencode import FILE` loads it into another
//! HOME, where `opencode run --session ID` continues it (checked with
//! 1.18.33). So the print command exports the session after every run to
//! [`session_file_path`], the file session capture moves, and imports it
//! before a resumed run.

use serde_json::Value;

/// Where the print command keeps exports, relative to HOME.
pub const DIR: &str = ".local/share/opencode/sanddune";

/// opencode's session ids (`ses_` and base62); anything else is refused,
/// so an id never becomes a path of its own.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub fn session_file_path(home: &str, _cwd: &str, session_id: &str) -> Option<String> {
    valid_id(session_id).then(|| format!("{}/{DIR}/{session_id}.json", home.trim_end_matches('/')))
}

/// Every string in the export that is `from` or a path under it (the
/// session's `directory`, the paths of its tool calls) moves to `to`. An
/// export that is not JSON is kept as it is.
pub fn rewrite_session_cwd(content: &str, from: &str, to: &str) -> String {
    let Ok(mut export) = serde_json::from_str::<Value>(content) else {
        return content.to_owned();
    };
    rewrite(&mut export, from, to);
    format!("{export:#}\n")
}

fn rewrite(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) => {
            if s == from {
                *s = to.to_owned();
            } else if let Some(rest) = s.strip_prefix(from).filter(|r| r.starts_with('/')) {
                *s = format!("{to}{rest}");
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| rewrite(v, from, to)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_lives_under_home_by_id() {
        assert_eq!(
            session_file_path("/home/u/", "/w", "ses_ded34e520ffewhL2xQWo6NDxu4").as_deref(),
            Some("/home/u/.local/share/opencode/sanddune/ses_ded34e520ffewhL2xQWo6NDxu4.json")
        );
        for bad in ["", "../x", "a/b", "ses 1"] {
            assert_eq!(session_file_path("/h", "/w", bad), None, "{bad}");
        }
    }

    #[test]
    fn directories_move_and_other_text_stays() {
        let export = r#"{"info":{"id":"ses_1","directory":"/sbx/w","path":""},"messages":[{"parts":[{"state":{"input":{"workdir":"/sbx/w/src","command":"cd /sbx/w"}}}]}],"other":"/sbx/wx"}"#;
        let out: Value =
            serde_json::from_str(&rewrite_session_cwd(export, "/sbx/w", "/repo")).unwrap();
        assert_eq!(out["info"]["directory"], "/repo");
        assert_eq!(
            out["messages"][0]["parts"][0]["state"]["input"]["workdir"],
            "/repo/src"
        );
        assert_eq!(
            out["messages"][0]["parts"][0]["state"]["input"]["command"],
            "cd /sbx/w"
        );
        assert_eq!(out["other"], "/sbx/wx");
        assert_eq!(rewrite_session_cwd("not json", "/a", "/b"), "not json");
    }
}
