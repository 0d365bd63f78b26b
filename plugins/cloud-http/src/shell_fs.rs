//! The seed-002 file calls that cloud APIs lack (`stat`, `read-dir`,
//! `exists`, `remove`), as POSIX `sh` scripts a provider runs in its
//! sandbox (`sh -c SCRIPT sh ARGS...`), and the parsers of what they print.

/// `$1`: a path. Prints `TYPE LINK SIZE MTIME` (type `d`, `f` or `o`; link
/// 1 or 0; size and mtime in seconds, `-` when unknown); exit 2 when the
/// path does not exist.
pub const STAT: &str = r#"p=$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo "no such file or directory" >&2; exit 2; fi
if [ -L "$p" ]; then l=1; else l=0; fi
if [ -d "$p" ]; then t=d; elif [ -f "$p" ]; then t=f; else t=o; fi
printf '%s %s %s %s\n' "$t" "$l" "$(stat -L -c %s -- "$p" 2>/dev/null || echo -)" "$(stat -L -c %Y -- "$p" 2>/dev/null || echo -)""#;

/// `$1`: a directory. One name a line, dotfiles included.
pub const READ_DIR: &str = r#"[ -d "$1" ] || { echo "not a directory" >&2; exit 2; }; cd -- "$1" && for f in * .[!.]* ..?*; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\n' "$f"; done; true"#;

/// `$1`: a path. Exit 0 when it exists (a dangling symlink does), 1 when not.
pub const EXISTS: &str = r#"if [ -e "$1" ] || [ -L "$1" ]; then exit 0; else exit 1; fi"#;

/// `$1` path, `$2` recursive (1/0), `$3` force (1/0): `rm` semantics; a
/// missing path is an error unless forced.
pub const REMOVE: &str = r#"p=$1 r=$2 f=$3
if [ ! -e "$p" ] && [ ! -L "$p" ]; then [ "$f" = 1 ] && exit 0; echo "no such file or directory" >&2; exit 2; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$r" = 1 ]; then rm -rf -- "$p"; else rmdir -- "$p"; fi
else rm -f -- "$p"; fi"#;

/// `$1`: a directory to create, one level (its parent must exist).
pub const MKDIR: &str = r#"mkdir -- "$1""#;

/// `$1`: a directory to create with its parents.
pub const MKDIR_P: &str = r#"mkdir -p -- "$1""#;

/// The file operations a cloud provider answers with the scripts above, run
/// in its sandbox. It supplies how to run one and where its worktree is;
/// relative paths are relative to the worktree.
pub trait ShellFs {
    /// `sh -c SCRIPT sh ARGS...` in the sandbox: (exit code, stdout, stderr).
    fn run_script(&self, script: &str, args: &[&str]) -> Result<(i32, String, String), String>;

    /// The worktree's absolute path in the sandbox.
    fn worktree(&self) -> &str;

    /// `path` made absolute: relative paths are relative to the worktree.
    fn resolve(&self, path: &str) -> String {
        let cwd = self.worktree();
        if path.starts_with('/') {
            path.to_string()
        } else if path.is_empty() || path == "." {
            cwd.to_string()
        } else {
            format!(
                "{}/{}",
                cwd.trim_end_matches('/'),
                path.trim_start_matches("./")
            )
        }
    }

    /// [`ShellFs::run_script`], its stdout; a non-zero exit is an error
    /// saying `what` failed and why.
    fn run_script_ok(&self, what: &str, script: &str, args: &[&str]) -> Result<String, String> {
        let (code, out, errout) = self.run_script(script, args)?;
        if code != 0 {
            let why = errout.trim();
            return Err(if why.is_empty() {
                format!("{what}: exit {code}")
            } else {
                format!("{what}: {why}")
            });
        }
        Ok(out)
    }

    fn stat(&self, path: &str) -> Result<Stat, String> {
        let out = self.run_script_ok(&format!("stat {path}"), STAT, &[&self.resolve(path)])?;
        parse_stat(&out).map_err(|e| format!("stat {path}: {e}"))
    }

    fn read_dir(&self, path: &str) -> Result<Vec<String>, String> {
        let out = self.run_script_ok(
            &format!("reading directory {path}"),
            READ_DIR,
            &[&self.resolve(path)],
        )?;
        Ok(parse_read_dir(&out))
    }

    fn exists(&self, path: &str) -> Result<bool, String> {
        let (code, _, errout) = self.run_script(EXISTS, &[&self.resolve(path)])?;
        match code {
            0 => Ok(true),
            1 => Ok(false),
            c => Err(format!("checking {path}: exit {c}: {}", errout.trim())),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub is_file: bool,
    pub is_directory: bool,
    pub is_symlink: bool,
    pub size: Option<u64>,
    pub mtime_ms: Option<u64>,
}

/// What `STAT` printed.
pub fn parse_stat(out: &str) -> Result<Stat, String> {
    let words: Vec<&str> = out.split_whitespace().collect();
    let [t, l, size, mtime] = words[..] else {
        return Err(format!("unexpected output {out:?}"));
    };
    Ok(Stat {
        is_file: t == "f",
        is_directory: t == "d",
        is_symlink: l == "1",
        size: size.parse().ok(),
        mtime_ms: mtime.parse::<u64>().ok().map(|s| s * 1000),
    })
}

/// What `READ_DIR` printed, sorted.
pub fn parse_read_dir(out: &str) -> Vec<String> {
    let mut names: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sh(script: &str, args: &[&str]) -> (i32, String) {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[test]
    fn the_scripts_do_what_they_say_on_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.txt"), "hello").unwrap();
        std::fs::write(d.join(".hidden"), "").unwrap();
        std::os::unix::fs::symlink("missing", d.join("dangling")).unwrap();
        let p = |n: &str| d.join(n).display().to_string();

        let (code, out) = sh(STAT, &[&p("a.txt")]);
        assert_eq!(code, 0);
        let s = parse_stat(&out).unwrap();
        assert!(s.is_file && !s.is_directory && !s.is_symlink);
        assert_eq!(s.size, Some(5));
        assert!(s.mtime_ms.is_some());
        assert_eq!(sh(STAT, &[&p("nope")]).0, 2);

        let (_, out) = sh(READ_DIR, &[&d.display().to_string()]);
        assert_eq!(parse_read_dir(&out), vec![".hidden", "a.txt", "dangling"]);

        assert_eq!(sh(EXISTS, &[&p("dangling")]).0, 0);
        assert_eq!(sh(EXISTS, &[&p("nope")]).0, 1);

        assert_eq!(sh(MKDIR, &[&p("x/y")]).0, 1);
        assert_eq!(sh(MKDIR_P, &[&p("x/y")]).0, 0);
        assert_ne!(sh(REMOVE, &[&p("x"), "0", "0"]).0, 0);
        assert_eq!(sh(REMOVE, &[&p("x"), "1", "0"]).0, 0);
        assert_eq!(sh(REMOVE, &[&p("x"), "1", "1"]).0, 0);
        assert_eq!(sh(REMOVE, &[&p("x"), "1", "0"]).0, 2);
    }

    #[test]
    fn stat_output_that_is_not_four_words_is_an_error() {
        assert!(parse_stat("f 0 12").is_err());
    }
}
