//! Secrets by reference: a value in `.sanddune/.env` or in the `[env]` of
//! `.sanddune/config.toml` may name where the secret is instead of holding
//! it, so the files can be committed or shared:
//!
//! - `file:PATH`: the file's content (PATH relative to the repository root,
//!   `~/` for the home directory), one trailing newline dropped;
//! - `env:NAME`: the host's environment variable NAME;
//! - `cmd:COMMAND`: what `sh -c COMMAND` prints on the host (a password
//!   manager's CLI), one trailing newline dropped.
//!
//! `literal:` keeps a value that begins with one of these as written
//! (`literal:file:test.db` is `file:test.db`). References are resolved on
//! the host, once per process (a `cmd:` prompting for a passphrase asks
//! once), when a run reads its env. The values then reach only the
//! agent's environment: every line the agent prints, its errors and its
//! captured session have them replaced by `***` ([`mask`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use crate::error::{Error, Result};

/// What a reference resolved to, by reference: shared by every run of the
/// process and by [`mask`].
static RESOLVED: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// Shorter values are not masked: they would blot out ordinary text.
const MASKED_FROM: usize = 4;

/// `value` of `key` (from `source`, for errors) with its reference, if it
/// is one, resolved.
pub fn resolve(key: &str, value: &str, root: &Path, source: &str) -> Result<String> {
    if let Some(literal) = value.strip_prefix("literal:") {
        return Ok(literal.to_string());
    }
    let is_reference = ["file:", "env:", "cmd:"]
        .iter()
        .any(|prefix| value.starts_with(prefix));
    if !is_reference {
        return Ok(value.to_string());
    }
    if let Some(found) = lock().get(value) {
        return Ok(found.clone());
    }
    let bad = |why: String| {
        Error::input(format!(
            "{key} in {source}: `{value}` {why} (write `literal:{value}` to mean the text itself)"
        ))
    };
    let secret = if let Some(path) = value.strip_prefix("file:") {
        let path = match path.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(rest))
                .ok_or_else(|| bad("names a file under ~, but HOME is not set".into()))?,
            None => root.join(path),
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| bad(format!("cannot be read from {}: {e}", path.display())))?;
        chomp(text)
    } else if let Some(name) = value.strip_prefix("env:") {
        std::env::var(name).map_err(|_| bad(format!("names `{name}`, which is not set here")))?
    } else {
        let command = &value["cmd:".len()..];
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(root)
            .stdin(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| bad(format!("cannot run: {e}")))?;
        if !out.status.success() {
            return Err(bad(format!("failed ({})", out.status)));
        }
        chomp(
            String::from_utf8(out.stdout)
                .map_err(|_| bad("printed bytes that are not UTF-8".into()))?,
        )
    };
    if secret.is_empty() {
        return Err(bad("is empty".into()));
    }
    lock().insert(value.to_string(), secret.clone());
    Ok(secret)
}

/// `text` with every secret resolved so far replaced by `***`.
pub fn mask(text: &str) -> Cow<'_, str> {
    let resolved = lock();
    let mut text = Cow::Borrowed(text);
    for secret in resolved.values().filter(|s| s.len() >= MASKED_FROM) {
        if text.contains(secret.as_str()) {
            text = Cow::Owned(text.replace(secret.as_str(), "***"));
        }
    }
    text
}

fn chomp(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<String, String>> {
    RESOLVED.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_and_their_values_are_masked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cr3t-from-file\n").unwrap();
        let r = |v: &str| resolve("K", v, dir.path(), ".sanddune/.env");
        assert_eq!(r("file:token").unwrap(), "s3cr3t-from-file");
        assert_eq!(
            r("cmd:printf 's3cr3t-from-cmd\\n'").unwrap(),
            "s3cr3t-from-cmd"
        );
        assert_eq!(r("plain").unwrap(), "plain");
        assert_eq!(r("literal:file:test.db").unwrap(), "file:test.db");
        assert_eq!(
            mask("got s3cr3t-from-file and s3cr3t-from-cmd, ok"),
            "got *** and ***, ok"
        );
    }

    #[test]
    fn a_reference_that_cannot_resolve_names_the_key_and_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let r = |v: &str| resolve("API_KEY", v, dir.path(), ".sanddune/.env");
        let e = r("file:missing").unwrap_err().to_string();
        assert!(
            e.contains("API_KEY in .sanddune/.env: `file:missing` cannot be read"),
            "{e}"
        );
        assert!(e.contains("literal:file:missing"), "{e}");
        let e = r("env:SANDDUNE_TEST_NOT_SET_ANYWHERE")
            .unwrap_err()
            .to_string();
        assert!(e.contains("which is not set here"), "{e}");
        let e = r("cmd:exit 3").unwrap_err().to_string();
        assert!(e.contains("failed (exit status: 3)"), "{e}");
    }
}
