//! Lexical path handling. Pure string work, so it is tested natively.

/// `path` made absolute with `.`, `..` and repeated slashes resolved lexically.
/// `..` at the root stays at the root, as the kernel does.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `path` (absolute, or relative to `base`) normalised, when it stays inside
/// `root` (itself normalised). None when it escapes.
pub fn confine(root: &str, base: &str, path: &str) -> Option<String> {
    let full = if path.starts_with('/') {
        normalize(path)
    } else {
        normalize(&format!("{base}/{path}"))
    };
    let inside = full == root || full.starts_with(&format!("{root}/"));
    inside.then_some(full)
}

/// `s` as one single-quoted `sh` word.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize("/a//b/./c/"), "/a/b/c");
        assert_eq!(normalize("/a/b/../c"), "/a/c");
        assert_eq!(normalize("/../.."), "/");
    }

    #[test]
    fn confines() {
        let root = "/s/sbx-1";
        let base = "/s/sbx-1/repo";
        assert_eq!(confine(root, base, "").as_deref(), Some(base));
        assert_eq!(
            confine(root, base, "x/../y").as_deref(),
            Some("/s/sbx-1/repo/y")
        );
        assert_eq!(confine(root, base, "..").as_deref(), Some(root));
        assert_eq!(
            confine(root, base, "/s/sbx-1/repo/.git").as_deref(),
            Some("/s/sbx-1/repo/.git")
        );
        assert_eq!(confine(root, base, "../../escape.txt"), None);
        assert_eq!(confine(root, base, "/tmp"), None);
        // A sibling sharing the prefix is outside.
        assert_eq!(confine(root, base, "/s/sbx-10"), None);
        assert_eq!(
            confine(root, base, "/s/sbx-1/repo/../../sbx-1/x").as_deref(),
            Some("/s/sbx-1/x")
        );
    }

    #[test]
    fn quotes() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
