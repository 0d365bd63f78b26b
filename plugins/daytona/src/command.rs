//! The line a session command runs. The toolbox sources each command into
//! the session's long-lived shell, so a command must neither change that
//! shell (its cwd, its variables) nor `exit` it: the line only starts a
//! child `sh`, which enters the cwd, takes its stdin from a file (or
//! `/dev/null`: an async session command's own stdin stays open) and
//! `exec`s the argv with the environment given.

/// `s` quoted for `sh`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `$0` the stdin file (removed once open, unless it is /dev/null), `$1`
/// the cwd, the rest the argv. 126: no such cwd; 125: no stdin file.
const WRAPPER: &str = r#"cd -- "$1" || exit 126; exec <"$0" || exit 125; [ "$0" = /dev/null ] || rm -f -- "$0"; shift; exec "$@""#;

pub fn line(argv: &[String], cwd: &str, stdin: &str, env: &[(String, String)]) -> String {
    let mut words = vec!["env".to_string()];
    for (k, v) in env {
        words.push(quote(&format!("{k}={v}")));
    }
    words.extend(["sh", "-c"].map(String::from));
    words.push(quote(WRAPPER));
    words.push(quote(stdin));
    words.push(quote(cwd));
    words.extend(argv.iter().map(|a| quote(a)));
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn the_line_runs_the_argv_in_the_cwd_with_env_and_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, "from stdin\n").unwrap();
        let argv: Vec<String> = [
            "sh",
            "-c",
            r#"pwd; echo "$A|$B"; cat; echo "it's" >&2; exit 3"#,
        ]
        .map(String::from)
        .to_vec();
        let l = line(
            &argv,
            &dir.path().display().to_string(),
            &input.display().to_string(),
            &[("A".into(), "x y".into()), ("B".into(), "'q'".into())],
        );
        // As the session shell would: sourced, then the shell goes on.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{l}\necho \"ec=$?\"; pwd"))
            .current_dir("/")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let real = dir.path().canonicalize().unwrap();
        assert_eq!(
            stdout,
            format!("{}\nx y|'q'\nfrom stdin\nec=3\n/\n", real.display())
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "it's\n");
        assert!(!input.exists(), "the stdin file is removed");
    }

    #[test]
    fn without_stdin_the_command_reads_end_of_file() {
        let argv: Vec<String> = ["sh", "-c", "cat; echo done"].map(String::from).to_vec();
        let l = line(&argv, "/", "/dev/null", &[]);
        let out = Command::new("sh")
            .arg("-c")
            .arg(&l)
            .stdin(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    }
}
