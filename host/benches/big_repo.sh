#!/usr/bin/env bash
# Sync on a big repository. Synthesises one with git fast-import
# (synth_repo.py: FILES files at the tip, COMMITS commits of history; made
# once and kept under target/bench-repos/), then prints:
#
#   - the size of the tree at the base: `git archive` as tar and gzipped,
#     and the whole-history bundle the sync used to send;
#   - the floor: the least any design does for one agent commit (git
#     worktree add, copy the tree, commit there, merge back, remove), timed;
#   - `sanddune run --sandbox test-isolated` (merge-to-head, the fake
#     claude committing one line): time, and the bytes sync moved in and
#     out (the run's `timings`), with each phase's median;
#   - one run against the Vercel mock: the bytes uploaded to it (fs/write
#     bodies, as the mock counts them).
#
#   host/benches/big_repo.sh [rounds] [files] [commits]   (default 5 3000 20000)
#
# Needs git, python3, the release binary and the Vercel mock (both built
# here if missing; $SANDDUNE for another binary).
set -euo pipefail
rounds=${1:-5}
files=${2:-3000}
commits=${3:-20000}
root=$(cd "$(dirname "$0")/../.." && pwd)
sanddune=${SANDDUNE:-$root/target/release/sanddune}
mockbin=$root/target/release/vercel-mock
if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
fi
[ -x "$mockbin" ] || (cd "$root" && cargo build --release -q -p sanddune-vercel-mock --bin vercel-mock)

. "$root/host/benches/lib/big_repo.sh"
origin=$(big_repo_origin "$files" "$commits")

work=$(mktemp -d)
mock=""
trap '[ -n "$mock" ] && kill $mock; rm -rf "$work"' EXIT
repo=$work/repo
git clone -q --no-local "$origin" "$repo"
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@sanddune.invalid
mkdir -p "$work/home/bin"
ln -s "$root/tests/fakes/claude" "$work/home/bin/claude"
export HOME=$work/home PATH=$work/home/bin:$PATH
# claude-code requires a key up front; the fake claude reads none.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
export SANDDUNE_CACHE_DIR=$root/target/tmp/component-cache

now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mb() { awk "BEGIN {printf \"%.2f MB\", $1 / 1000000}"; }

tar_bytes=$(git -C "$repo" archive --format=tar HEAD | wc -c)
tgz_bytes=$(git -C "$repo" archive --format=tar HEAD | gzip -c | wc -c)
bundle_bytes=$(git -C "$repo" bundle create - main 2>/dev/null | wc -c)
echo "repository: $(git -C "$repo" ls-files | wc -l) files, $(git -C "$repo" rev-list --count HEAD) commits, .git $(du -sh "$repo/.git" | cut -f1)"
echo "tree at the base: tar $(mb "$tar_bytes"), tar.gz $(mb "$tgz_bytes"); whole-history bundle $(mb "$bundle_bytes")"

floor_once() {
    local name=floor-$RANDOM$RANDOM
    local wt=$repo/.sanddune/worktrees/$name sb=$work/sandbox-$name
    git -C "$repo" worktree add -q -b "$name" "$wt"
    cp -r "$wt" "$sb"
    echo "a note" >>"$sb/NOTES.md"
    git -C "$sb" add NOTES.md
    git -C "$sb" commit -q -m "Add a note"
    git -C "$repo" merge -q --ff-only "$name"
    git -C "$repo" worktree remove --force "$wt"
    git -C "$repo" branch -q -D "$name"
    rm -rf "$sb"
}

round=0
sanddune_once() {
    round=$((round + 1))
    (cd "$repo" && "$sanddune" run --sandbox test-isolated --agent claude-code \
        --prompt "add a note" --json >"$work/result-$round.json" 2>"$work/err-$round.txt") \
        || { cat "$work/err-$round.txt" >&2; exit 1; }
}

# One untimed round each: the component cache, the page cache.
floor_once
sanddune_once
times_f=() times_s=()
for _ in $(seq "$rounds"); do
    t0=$(now); sanddune_once; t1=$(now); floor_once; t2=$(now)
    times_s+=("$(awk "BEGIN {print $t1 - $t0}")")
    times_f+=("$(awk "BEGIN {print $t2 - $t1}")")
done
ms=$(median "${times_s[@]}")
mf=$(median "${times_f[@]}")
last=$work/result-$round.json
sync_in=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(p.get("bytes",0) for p in r["timings"] if p["phase"]=="sync in"))' "$last")
sync_out=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(p.get("bytes",0) for p in r["timings"] if p["phase"].endswith("sync out")))' "$last")
printf 'floor (worktree add, copy, commit, merge): median %.3f s over %d rounds\n' "$mf" "$rounds"
printf 'sanddune run --sandbox test-isolated:      median %.3f s over %d rounds\n' "$ms" "$rounds"
printf 'ratio to the floor: %.2fx (target <= 1.25x)\n' "$(awk "BEGIN {print $ms / $mf}")"
printf 'sync in %s (%.2fx the tar.gz of the tree; target <= 1.5x), sync out %s B\n' \
    "$(mb "$sync_in")" "$(awk "BEGIN {print $sync_in / $tgz_bytes}")" "$sync_out"
echo "median of each phase (ms):"
python3 - "$work" "$round" <<'EOF'
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
phases = {}
for i in range(2, n + 1):
    for p in json.load(open(f"{work}/result-{i}.json"))["timings"]:
        phases.setdefault(p["phase"], []).append(p["ms"])
for name, ms in phases.items():
    print(f"  {name:<28} {statistics.median(ms):9.1f}")
EOF

# One run on the Vercel mock: what was uploaded to it.
export VERCEL_TOKEN=mock-token VERCEL_TEAM_ID=team_mock VERCEL_PROJECT_ID=prj_mock
"$mockbin" >"$work/mock.url" 2>"$work/mock.err" &
mock=$!
for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
t0=$(now)
(cd "$repo" && "$sanddune" run --sandbox vercel --sandbox-opt "api-url=$(head -1 "$work/mock.url")" \
    --agent claude-code --prompt "add a note" --json >"$work/vercel.json" 2>"$work/vercel.err") \
    || { cat "$work/vercel.err" >&2; exit 1; }
t1=$(now)
uploaded=$(awk '/fs\/write/ {s += $3} END {print s + 0}' "$work/mock.err")
printf 'vercel mock: one run %.2f s, uploaded %s (the whole-history bundle would be %s)\n' \
    "$(awk "BEGIN {print $t1 - $t0}")" "$(mb "$uploaded")" "$(mb "$bundle_bytes")"
