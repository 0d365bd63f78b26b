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

/// What `path` (normalised) is below `root`: `Some("")` for `root` itself,
/// `Some("a/b")` for `root/a/b`, None when it is not inside.
pub fn below<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    if path == root {
        return Some("");
    }
    let rest = path.strip_prefix(root)?;
    if root == "/" {
        return Some(rest);
    }
    rest.strip_prefix('/')
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
    fn finds_what_lies_below() {
        assert_eq!(below("/s/home", "/s/home"), Some(""));
        assert_eq!(below("/s/home", "/s/home/a/b"), Some("a/b"));
        // A sibling sharing the prefix is outside.
        assert_eq!(below("/s/home", "/s/home2/a"), None);
        assert_eq!(below("/tmp", "/etc"), None);
    }
}
