"""Lexical path handling: no file system access, so `..` cannot be
smuggled through a symlink the check never looked at."""

from typing import Optional


def normalize(path: str) -> str:
    """`path` made absolute with `.`, `..` and repeated slashes resolved;
    `..` at the root stays at the root, as the kernel does."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


def confine(root: str, base: str, path: str) -> Optional[str]:
    """`path` (absolute, or relative to `base`) normalised, when it stays
    inside `root`; None when it escapes."""
    full = normalize(path if path.startswith("/") else f"{base}/{path}")
    if full == root or full.startswith(root + "/"):
        return full
    return None


def shell_quote(s: str) -> str:
    """`s` as one single-quoted sh word."""
    return "'" + s.replace("'", "'\\''") + "'"
