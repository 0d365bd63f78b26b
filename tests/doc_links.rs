//! Every relative link in the project's documentation leads somewhere:
//! README.md, CONTEXT.md and every `.md` under docs/ are read, and each
//! markdown link `[text](path)`, `[text](path#anchor)`, `[text](#anchor)`
//! and reference definition `[label]: path` is checked. A target file must
//! exist; an anchor must be the GitHub slug of a heading in the target (or
//! an explicit `id`/`name` in it). External links (`http:`, `https:`,
//! `mailto:`, any `scheme://`) are not checked. Links in fenced and
//! indented code blocks and in code spans are not links, and are skipped.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// README.md, CONTEXT.md, and every `.md` under docs/, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![root.join("README.md"), root.join("CONTEXT.md")];
    let mut under = Vec::new();
    walk(&root.join("docs"), &mut under);
    under.sort();
    docs.extend(under);
    docs
}

/// The lines of a markdown file that are prose: (line number, text), with
/// fenced and indented code blocks left out.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut previous_blank = true;
    let mut in_indented_code = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some((ch, len)) = fence {
            let run = trimmed.chars().take_while(|&c| c == ch).count();
            if run >= len && trimmed[run..].trim().is_empty() && indent < 4 {
                fence = None;
            }
            previous_blank = false;
            continue;
        }
        if indent < 4 {
            for ch in ['`', '~'] {
                let run = trimmed.chars().take_while(|&c| c == ch).count();
                if run >= 3 {
                    fence = Some((ch, run));
                }
            }
            if fence.is_some() {
                in_indented_code = false;
                previous_blank = false;
                continue;
            }
        }
        let blank = trimmed.is_empty();
        let indented = line.starts_with("    ") || line.starts_with('\t');
        // A blank line neither starts nor ends an indented block.
        if !blank {
            in_indented_code = indented && (previous_blank || in_indented_code);
        }
        if !in_indented_code && !blank {
            out.push((i + 1, line));
        }
        previous_blank = blank;
    }
    out
}

/// `line` with its code spans blanked out (same length, so nothing inside
/// them looks like a link).
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '`' {
            let run = chars[i..].iter().take_while(|&&c| c == '`').count();
            // The closing run of exactly the same length.
            let mut j = i + run;
            let mut close = None;
            while j < chars.len() {
                if chars[j] == '`' {
                    let r = chars[j..].iter().take_while(|&&c| c == '`').count();
                    if r == run {
                        close = Some(j);
                        break;
                    }
                    j += r;
                } else {
                    j += 1;
                }
            }
            match close {
                Some(j) => {
                    out.extend(std::iter::repeat_n(' ', j + run - i));
                    i = j + run;
                }
                None => {
                    out.extend(std::iter::repeat_n('`', run));
                    i += run;
                }
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The link targets on one prose line: inline links and images
/// `[text](target "title")`, and reference definitions `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(end) = trimmed.find("]:")
        && !trimmed[1..end].contains(']')
    {
        if let Some(target) = trimmed[end + 2..].split_whitespace().next() {
            targets.push(target.trim_matches(['<', '>']).to_string());
        }
        return targets;
    }
    let mut from = 0;
    while let Some(at) = line[from..].find("](") {
        let start = from + at + 2;
        // The destination runs to the matching `)`; a `<...>` destination
        // may hold spaces and parentheses.
        let rest = &line[start..];
        let target = if let Some(inner) = rest.strip_prefix('<') {
            inner.find('>').map(|end| inner[..end].to_string())
        } else {
            let mut depth = 0usize;
            let mut end = None;
            for (k, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(k);
                        break;
                    }
                    ')' => depth -= 1,
                    c if c.is_whitespace() => {
                        end = Some(k);
                        break;
                    }
                    _ => {}
                }
            }
            end.map(|end| rest[..end].to_string())
        };
        if let Some(target) = target
            && !target.is_empty()
            // `](` right after a `[`-less `]` (e.g. `a](b)` in prose) still
            // reads as a link on GitHub only when a `[` opened it.
            && line[..from + at].contains('[')
        {
            targets.push(target);
        }
        from = start;
    }
    targets
}

fn is_external(target: &str) -> bool {
    let scheme_end = target.find(':');
    let slash = target.find('/');
    match scheme_end {
        Some(colon) => {
            let scheme = &target[..colon];
            let looks_like_scheme = !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            looks_like_scheme && slash.is_none_or(|s| colon < s)
        }
        None => false,
    }
}

/// GitHub's anchor for a heading: lower case, every character that is not
/// a letter, a digit, `-`, `_` or a space dropped, spaces made `-`. Inline
/// markdown is rendered first: a link counts as its text, emphasis and code
/// markers are dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](url)` counts as `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if !after[..close].contains('[') => {
                text.push_str(&after[..close]);
                let url = &after[close + 2..];
                rest = match url.find(')') {
                    Some(end) => &url[end + 1..],
                    None => "",
                };
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a markdown file has: its headings' slugs (a repeated one
/// gets `-1`, `-2`, ... as on GitHub) and explicit `id="..."`/`name="..."`.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = HashSet::new();
    let mut add = |base: String, out: &mut HashSet<String>| {
        let n = seen.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        out.insert(anchor);
    };
    let lines = prose_lines(text);
    for (k, (number, line)) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() < 4 && trimmed.starts_with('#') {
            let level = trimmed.chars().take_while(|&c| c == '#').count();
            let after = &trimmed[level..];
            if level <= 6 && (after.is_empty() || after.starts_with([' ', '\t'])) {
                let heading = after.trim().trim_end_matches('#').trim_end();
                add(slug(heading), &mut out);
            }
        }
        // A setext heading: a paragraph line underlined by `===` or `---`.
        if let Some((next_number, next)) = lines.get(k + 1) {
            let under = next.trim();
            if *next_number == number + 1
                && !under.is_empty()
                && (under.chars().all(|c| c == '=') || under.chars().all(|c| c == '-'))
                && !trimmed.starts_with(['#', '-', '*', '>', '|'])
            {
                add(slug(trimmed), &mut out);
            }
        }
        for attr in ["id=\"", "name=\""] {
            let mut from = 0;
            while let Some(at) = line[from..].find(attr) {
                let start = from + at + attr.len();
                if let Some(end) = line[start..].find('"') {
                    out.insert(line[start..start + end].to_string());
                }
                from = start;
            }
        }
    }
    out
}

/// Decode `%XX` escapes (a link to `a%20b.md` names `a b.md`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(hex) = std::str::from_utf8(&bytes[i + 1..i + 3])
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What is wrong with each broken link of `doc`: `file:line: message`.
fn check(root: &Path, doc: &Path, cache: &mut BTreeMap<PathBuf, HashSet<String>>) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
    let shown = doc.strip_prefix(root).unwrap_or(doc).display().to_string();
    let mut problems = Vec::new();
    for (number, line) in prose_lines(&text) {
        for target in link_targets(line) {
            if is_external(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let path = percent_decode(path);
            let file = if path.is_empty() {
                doc.to_path_buf()
            } else if let Some(from_root) = path.strip_prefix('/') {
                root.join(from_root)
            } else {
                doc.parent().unwrap().join(&path)
            };
            if !file.exists() {
                problems.push(format!(
                    "{shown}:{number}: `{target}`: no such file or directory {}",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
                continue;
            }
            let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
                continue;
            };
            if file.is_dir() || file.extension().is_none_or(|e| e != "md") {
                // GitHub's line anchors (#L10) and the like: not headings.
                continue;
            }
            let key = file.canonicalize().unwrap_or(file.clone());
            let known = cache
                .entry(key.clone())
                .or_insert_with(|| anchors(&std::fs::read_to_string(&key).unwrap_or_default()));
            let anchor = percent_decode(anchor);
            if !known.contains(&anchor) {
                problems.push(format!(
                    "{shown}:{number}: `{target}`: no heading with the anchor #{anchor} in {}",
                    key.strip_prefix(root).unwrap_or(&key).display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let root = root();
    let mut cache = BTreeMap::new();
    let docs = documents(&root);
    assert!(
        docs.len() >= 2,
        "no documents found under {}",
        root.display()
    );
    let problems: Vec<String> = docs
        .iter()
        .flat_map(|doc| check(&root, doc, &mut cache))
        .collect();
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the documentation:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("Versions and capabilities"),
        "versions-and-capabilities"
    );
    assert_eq!(slug("`sanddune run`"), "sanddune-run");
    assert_eq!(
        slug("Hooks, config, logs, sessions"),
        "hooks-config-logs-sessions"
    );
    assert_eq!(slug("0.2: what changed?"), "02-what-changed");
    assert_eq!(slug("The [link](x.md) text"), "the-link-text");
    assert_eq!(slug("snake_case and-dash"), "snake_case-and-dash");
    assert_eq!(slug("Docker and Podman"), "docker-and-podman");
}

#[test]
fn repeated_headings_get_numbered_anchors() {
    let a = anchors("# Options\n\ntext\n\n## Options\n\nSetext\n---\n");
    for anchor in ["options", "options-1", "setext"] {
        assert!(a.contains(anchor), "{anchor} in {a:?}");
    }
}

#[test]
fn links_in_code_are_not_links() {
    let text = "a [b](c.md) `[d](e.md)`\n\n    [f](g.md)\n\n```\n[h](i.md)\n```\n[j]: k.md\n";
    let found: Vec<String> = prose_lines(text)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .collect();
    assert_eq!(found, ["c.md", "k.md"]);
}

#[test]
fn external_links_are_recognised() {
    for t in ["https://x.y/z", "http://a", "mailto:a@b", "ftp://h"] {
        assert!(is_external(t), "{t}");
    }
    for t in ["docs/a.md", "#x", "a.md#b:c", "../wit/"] {
        assert!(!is_external(t), "{t}");
    }
}
