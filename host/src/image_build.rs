//! Building an image through the engine's API (bollard, no CLI): the build
//! context packed as a tar with Docker's `.dockerignore` rules, and the
//! build's progress streamed as it comes. `sanddune docker build-image` and
//! a run's dev container share it.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;

use crate::error::{Error, Result};

/// The name the build file gets inside the context tar.
const BUILD_FILE: &str = ".sanddune-build-file";

/// Pack the build file and its context (None: the file alone) (blocking work, off the async threads).
pub async fn pack(dockerfile: &str, context: Option<&Path>) -> Result<Vec<u8>> {
    let (dockerfile, context) = (dockerfile.to_string(), context.map(Path::to_path_buf));
    tokio::task::spawn_blocking(move || context_tar(&dockerfile, context.as_deref()))
        .await
        .map_err(|e| Error::Other(e.into()))?
        .map_err(|e| Error::input(format!("cannot pack the build context: {e}")))
}

/// Build `tar` (from [`pack`]) as `name`; each progress line goes to
/// `progress`. A failed build is an error with the engine's message.
pub async fn build(
    docker: &Docker,
    name: &str,
    tar: Vec<u8>,
    args: &HashMap<String, String>,
    target: Option<&str>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<()> {
    let mut options = BuildImageOptionsBuilder::default()
        .dockerfile(BUILD_FILE)
        .t(name)
        .rm(true)
        .buildargs(args);
    if let Some(target) = target {
        options = options.target(target);
    }
    let mut stream =
        docker.build_image(options.build(), None, Some(bollard::body_full(tar.into())));
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| Error::Agent(format!("building {name} failed: {e}")))?;
        if let Some(error) = info.error_detail.and_then(|d| d.message) {
            return Err(Error::Agent(format!("building {name} failed: {error}")));
        }
        if let Some(text) = info.stream {
            progress(&text);
        }
    }
    Ok(())
}

/// The build context as a tar, without what its `.dockerignore` excludes,
/// with the build file added under a name of its own so a file from anywhere
/// works with any context.
pub fn context_tar(dockerfile: &str, context: Option<&Path>) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.follow_symlinks(false);
    if let Some(dir) = context {
        let ignore = Ignore::read(dir);
        add_dir(&mut tar, dir, &mut Vec::new(), &ignore)?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, BUILD_FILE, dockerfile.as_bytes())?;
    tar.into_inner()
}

/// Add `dir`'s entries (at `rel` inside the context) that are not ignored.
fn add_dir(
    tar: &mut tar::Builder<Vec<u8>>,
    dir: &Path,
    rel: &mut Vec<String>,
    ignore: &Ignore,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        rel.push(entry.file_name().to_string_lossy().into_owned());
        let excluded = ignore.excluded(rel);
        let file_type = entry.file_type()?;
        let name = rel.join("/");
        if file_type.is_dir() {
            // An excluded directory is still walked when an exception
            // (`!pattern`) could bring something inside it back.
            if !excluded {
                tar.append_dir(&name, entry.path())?;
            }
            if !excluded || ignore.has_exceptions {
                add_dir(tar, &entry.path(), rel, ignore)?;
            }
        } else if !excluded {
            tar.append_path_with_name(entry.path(), &name)?;
        }
        rel.pop();
    }
    Ok(())
}

/// The context's `.dockerignore`, with Docker's rules: `*`, `?` and `**`
/// globs, `!` exceptions, the last matching line decides, and a pattern
/// matching a directory covers everything in it.
struct Ignore {
    /// (pattern components, is an exception)
    rules: Vec<(Vec<String>, bool)>,
    has_exceptions: bool,
}

impl Ignore {
    fn read(dir: &Path) -> Self {
        let text = std::fs::read_to_string(dir.join(".dockerignore")).unwrap_or_default();
        Self::parse(&text)
    }

    fn parse(text: &str) -> Self {
        let rules: Vec<(Vec<String>, bool)> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|line| {
                let (pattern, exception) = match line.strip_prefix('!') {
                    Some(p) => (p.trim(), true),
                    None => (line, false),
                };
                let parts = pattern
                    .split('/')
                    .filter(|c| !c.is_empty() && *c != ".")
                    .map(String::from)
                    .collect();
                (parts, exception)
            })
            .filter(|(parts, _): &(Vec<String>, bool)| !parts.is_empty())
            .collect();
        let has_exceptions = rules.iter().any(|(_, e)| *e);
        Ignore {
            rules,
            has_exceptions,
        }
    }

    fn excluded(&self, path: &[String]) -> bool {
        let mut excluded = false;
        for (pattern, exception) in &self.rules {
            if (1..=path.len()).any(|n| glob_path(pattern, &path[..n])) {
                excluded = !exception;
            }
        }
        excluded
    }
}

/// Path components against pattern components; `**` spans any number.
fn glob_path(pattern: &[String], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| glob_path(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((name, tail)) => glob(first.as_bytes(), name.as_bytes()) && glob_path(rest, tail),
            None => false,
        },
    }
}

/// One component: `*` any run of characters, `?` one character.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => (0..=name.len()).any(|skip| glob(rest, &name[skip..])),
        (Some((b'?', rest)), Some((_, tail))) => glob(rest, tail),
        (Some((p, rest)), Some((n, tail))) => p == n && glob(rest, tail),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::Ignore;

    fn excluded(rules: &str, path: &str) -> bool {
        let parts: Vec<String> = path.split('/').map(String::from).collect();
        Ignore::parse(rules).excluded(&parts)
    }

    #[test]
    fn dockerignore_rules_follow_docker() {
        let rules = "# build output\ntarget\n*.log\n**/node_modules\n!keep.log\n/.git\n";
        assert!(excluded(rules, "target"));
        assert!(excluded(rules, "target/debug/sanddune"));
        assert!(excluded(rules, "app.log"));
        assert!(!excluded(rules, "keep.log"));
        assert!(!excluded(rules, "sub/app.log"), "* does not cross /");
        assert!(excluded(rules, "node_modules/x"));
        assert!(excluded(rules, "web/ui/node_modules/y"));
        assert!(excluded(rules, ".git/HEAD"));
        assert!(!excluded(rules, "src/main.rs"));
        assert!(!excluded(rules, "targets"));
        assert!(excluded("src/?.rs", "src/a.rs"));
        assert!(!excluded("src/?.rs", "src/ab.rs"));
    }
}
