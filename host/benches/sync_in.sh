#!/usr/bin/env bash
# `sync in`'s fixed costs (issue 37): the time a run of test-isolated (an
# isolated sandbox on this machine) spends putting the branch into its
# sandbox, for a small tree and a big one, beside what git itself needs
# for the same work (the floor: pack the tree, check it out in a new
# repository). Each tree is one commit of FILES files of 2.5 KB in nested
# directories.
#
# Prints, per tree, the medians over ROUNDS runs of: the run's `sync in`
# phase (its --json timings), the floor, and the floor's two steps.
#
#   host/benches/sync_in.sh [rounds] [small-files] [big-files]   (default 7 2000 20000)
#
# Needs git, python3 and the release binary (built if missing; $SANDDUNE
# for another).
set -euo pipefail
rounds=${1:-7}
small=${2:-2000}
big=${3:-20000}
root=$(cd "$(dirname "$0")/../.." && pwd)
sanddune=${SANDDUNE:-$root/target/release/sanddune}
if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home/bin"
ln -s "$root/tests/fakes/claude" "$work/home/bin/claude"
export HOME=$work/home PATH=$work/home/bin:$PATH
export ANTHROPIC_API_KEY=sk-ant-bench-fake
export SANDDUNE_CACHE_DIR=$root/target/tmp/component-cache

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# $1 files into repository $2, one commit.
tree() {
    git init -q -b main "$2"
    python3 - "$1" "$2" <<'PY'
import os, random, sys
n, root = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
words = ["fn", "let", "match", "value", "node", "path", "config", "result", "iter", "map"]
for i in range(n):
    d = os.path.join(root, "src", f"m{i % 40}", f"s{i % 7}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}.rs"), "w") as f:
        while f.tell() < 2500:
            f.write(" ".join(rng.choice(words) for _ in range(8)) + f" {rng.random()};\n")
PY
    git -C "$2" add -A
    git -C "$2" -c user.name=b -c user.email=b@b.invalid commit -q -m tree
    # Packed, as a clone is: pack-objects reuses what is compressed.
    git -C "$2" repack -adq
    git -C "$2" config user.name bench
    git -C "$2" config user.email bench@sanddune.invalid
}

# The floor: the tree's objects packed with an index, checked out in a new
# repository. Prints "pack checkout" in ms.
floor_once() {
    local repo=$1 dest=$work/floor
    rm -rf "$dest"
    git init -q "$dest"
    local t0 t1 t2
    t0=$(now)
    git -C "$repo" rev-list --objects --no-walk HEAD |
        git -C "$repo" pack-objects -q --window=0 "$dest/.git/objects/pack/pack" >/dev/null
    t1=$(now)
    git -C "$dest" checkout -q -B main "$(git -C "$repo" rev-parse HEAD)"
    t2=$(now)
    echo "$(( (t1 - t0) / 1000000 )) $(( (t2 - t1) / 1000000 ))"
}

for files in "$small" "$big"; do
    repo=$work/repo-$files
    tree "$files" "$repo"
    size=$(git -C "$repo" archive --format=tar HEAD | wc -c)
    : >"$work/sync"; : >"$work/pack"; : >"$work/checkout"; : >"$work/floor-ms"
    # One untimed run: the component cache, the page cache.
    (cd "$repo" && "$sanddune" run --sandbox test-isolated --agent claude-code \
        --prompt "add a note" --json >/dev/null 2>"$work/err") || { cat "$work/err" >&2; exit 1; }
    for _ in $(seq "$rounds"); do
        (cd "$repo" && "$sanddune" run --sandbox test-isolated --agent claude-code \
            --prompt "add a note" --json 2>"$work/err") |
            python3 -c 'import json,sys; print(sum(p["ms"] for p in json.load(sys.stdin)["timings"] if p["phase"]=="sync in"))' >>"$work/sync"
        read -r p c < <(floor_once "$repo")
        echo "$p" >>"$work/pack"; echo "$c" >>"$work/checkout"; echo $((p + c)) >>"$work/floor-ms"
    done
    printf '%6d files (%5.1f MB): sync in median %6.1f ms; floor %5.0f ms (pack %4.0f, checkout %4.0f), over %d rounds\n' \
        "$files" "$(awk "BEGIN {print $size / 1000000}")" "$(median <"$work/sync")" \
        "$(median <"$work/floor-ms")" "$(median <"$work/pack")" "$(median <"$work/checkout")" "$rounds"
done
