#!/usr/bin/env python3
"""Writes a `git fast-import` stream of a large synthetic repository to
stdout: FILES text files in nested directories at the tip, COMMITS commits
of history, each changing a few files the way a real project's commits do
(a line edited, a few lines added). Deterministic for a given seed, so two
runs of the benchmark measure the same repository.

    synth_repo.py FILES COMMITS [SEED] | git fast-import --quiet
"""
import random
import sys

files, commits = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
out = sys.stdout.buffer

# Source-like text: identifiers from a small vocabulary compress the way
# code does (about 4x with gzip), not like random bytes.
words = [
    "let", "fn", "match", "self", "impl", "pub", "struct", "return", "if",
    "else", "for", "in", "Some", "None", "Ok", "Err", "String", "Vec",
    "usize", "u32", "value", "node", "parent", "child", "token", "syntax",
    "range", "offset", "text", "name", "path", "config", "result", "error",
    "iter", "map", "collect", "into", "clone", "unwrap", "expect", "len",
] + ["ident_%d" % i for i in range(400)]


def line():
    n = rng.randint(2, 12)
    return ("    " * rng.randint(0, 3) + " ".join(rng.choice(words) for _ in range(n)) + ";\n")


def content(lines):
    return "".join(lines).encode()


paths = []
for i in range(files):
    depth = rng.randint(1, 4)
    parts = ["dir%02d" % rng.randint(0, 40) for _ in range(depth)]
    paths.append("/".join(parts) + "/file%05d.rs" % i)
bodies = {p: [line() for _ in range(rng.randint(20, 200))] for p in paths}

mark = 0


def blob(data):
    global mark
    mark += 1
    out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)))
    out.write(data)
    out.write(b"\n")
    return mark


def commit(i, changed, first):
    global mark
    marks = {p: blob(content(bodies[p])) for p in changed}
    mark += 1
    msg = b"change %d\n" % i
    when = 1_600_000_000 + i * 60
    out.write(b"commit refs/heads/main\nmark :%d\n" % mark)
    out.write(b"author Synth <synth@sanddune.invalid> %d +0000\n" % when)
    out.write(b"committer Synth <synth@sanddune.invalid> %d +0000\n" % when)
    out.write(b"data %d\n%s" % (len(msg), msg))
    if first:
        out.write(b"deleteall\n")
    for p, m in marks.items():
        out.write(b"M 100644 :%d %s\n" % (m, p.encode()))
    out.write(b"\n")


# The first commit holds every file; the rest edit a few each.
commit(0, paths, True)
for i in range(1, commits):
    changed = rng.sample(paths, rng.randint(1, 3))
    for p in changed:
        body = bodies[p]
        body[rng.randrange(len(body))] = line()
        for _ in range(rng.randint(0, 3)):
            body.insert(rng.randrange(len(body) + 1), line())
    commit(i, changed, False)
out.write(b"done\n")
