//! How the run's env reaches a command on a TTY in the pod. A TTY exec
//! takes no env: on its stdin the terminal would echo it, and its argv is
//! the exec request's URL, which the API server's audit log keeps. So a
//! plain exec (whose env the host sends on stdin) runs `SAVE`, and the TTY
//! command runs behind `LOAD`.

/// Writes the value of each variable named in the arguments to a file of
/// that name in a new private directory, and prints the directory. The
/// names are shell names: the host refuses any other env key.
pub const SAVE: &str = r#"umask 077; d=$(mktemp -d) || exit 1
for k; do eval "printf %s \"\$$k\"" > "$d/$k" || exit 1; done
echo "$d""#;

/// Exports what `SAVE` saved in the directory `$1` (each value exact,
/// trailing newlines too), removes it and runs the rest.
pub const LOAD: &str = r#"d=$1; shift
for f in "$d"/*; do [ -f "$f" ] || continue; v=$(cat "$f"; echo x); export "${f##*/}=${v%x}"; done
rm -rf "$d"
exec "$@""#;

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn values_come_back_exactly_and_the_directory_is_private_then_gone() {
        let values = [
            ("KEY", "s3cret 'quoted' \"double\" $HOME `cmd` \\"),
            ("LINES", "one\ntwo\n\n"),
            ("EMPTY", ""),
        ];
        let saved = Command::new("sh")
            .args(["-c", SAVE, "sanddune-env"])
            .args(values.iter().map(|(k, _)| k))
            .envs(values)
            .output()
            .unwrap();
        assert!(saved.status.success(), "{saved:?}");
        let dir = String::from_utf8(saved.stdout).unwrap().trim().to_string();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{dir} is {mode:o}");

        let script = "for k in KEY LINES EMPTY; do printf '%s=' \"$k\"; eval \"printf '%s|' \\\"\\$$k\\\"\"; done";
        let loaded = Command::new("sh")
            .args(["-c", LOAD, "sanddune-env", &dir, "sh", "-c", script])
            .env_remove("KEY")
            .output()
            .unwrap();
        assert!(loaded.status.success(), "{loaded:?}");
        let expected: String = values.iter().map(|(k, v)| format!("{k}={v}|")).collect();
        assert_eq!(String::from_utf8(loaded.stdout).unwrap(), expected);
        assert!(!std::path::Path::new(&dir).exists(), "{dir} was left");
    }
}
