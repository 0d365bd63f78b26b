#!/usr/bin/env bash
# Warm sandboxes on a big repository (issue 37): a docker run under
# merge-to-head (the fake claude committing one line, release build) on the
# synthetic repository of big_repo.sh, interleaved round by round:
#
#   - cold: no pool; the run checks its worktree out and creates its
#     container;
#   - warm: pool=1, claiming the container the round before left; HEAD
#     moved by the runs in between (their merges: a few files), which the
#     claim checks out in the slot's worktree;
#   - warm after a bigger move: MOVED files of HEAD changed by a commit on
#     the host first, so the claim checks out MOVED files.
#
# Each is timed to its result on stdout; the phases' medians follow
# (`process start` holds the plan, and with it the claim).
#
#   host/benches/pool_big_repo.sh [rounds] [files] [commits] [moved]
#                                 (default 5 3000 20000 300)
#
# Needs docker, the test image (tests/images/build.sh docker), git,
# python3 and the release binary (built if missing; $SANDDUNE for another).
set -euo pipefail
rounds=${1:-5}
files=${2:-3000}
commits=${3:-20000}
moved=${4:-300}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
. "$root/host/benches/lib/big_repo.sh"
docker_bench_setup
origin=$(big_repo_origin "$files" "$commits")
bench_repo
# The warm containers left waiting go with the scratch repository, however
# the bench ends.
trap '"$sanddune" gc --cwd "$repo" --drain-pool >/dev/null 2>&1; rm -rf "$work"' EXIT
rm -rf "$repo"
git clone -q --no-local "$origin" "$repo"
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@sanddune.invalid
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
echo "repository: $(git -C "$repo" ls-files | wc -l) files, $(git -C "$repo" rev-list --count HEAD) commits"

# Round $1's result goes to $work/result-$1.json; its seconds to its
# result are printed. "$2"... go to the run.
once() {
    local n=$1
    shift
    to_result_and_exit "$sanddune" run --cwd "$repo" --sandbox docker \
        --agent claude-code --strategy merge-to-head --prompt "add a line" --json \
        --sandbox-opt image="$image" "$@" 2>"$work/result-$n.json" | cut -d' ' -f1
}

# Change $moved files of HEAD in one commit on the host.
move_head() {
    (cd "$repo" && git ls-files -z | python3 -c 'import sys
for f in sys.stdin.buffer.read().split(b"\0")[: int(sys.argv[1])]:
    open(f, "ab").write(b"moved\n")' "$moved")
    git -C "$repo" commit -q -a -m "move $moved files"
}

# Untimed: the caches, and the first slot.
once c0 >/dev/null
once w0 --sandbox-opt pool=1 >/dev/null
: >"$work/cold" && : >"$work/warm" && : >"$work/moved"
for r in $(seq "$rounds"); do
    once "c$r" >>"$work/cold"
    once "w$r" --sandbox-opt pool=1 >>"$work/warm"
    move_head
    once "m$r" --sandbox-opt pool=1 >>"$work/moved"
done
c=$(median <"$work/cold")
w=$(median <"$work/warm")
m=$(median <"$work/moved")
printf 'cold run, to its result:                    median %.3f s\n' "$c"
printf 'warm run (pool=1), to its result:           median %.3f s  %.2fx the cold run\n' "$w" "$(awk "BEGIN {print $w / $c}")"
printf 'warm run after %d files moved, to result: median %.3f s  %.2fx the cold run\n' "$moved" "$m" "$(awk "BEGIN {print $m / $c}")"
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for label, prefix in (("cold", "c"), ("warm", "w"), ("moved", "m")):
    phases = {}
    for r in range(1, rounds + 1):
        result = json.load(open(f"{work}/result-{prefix}{r}.json"))
        for p in result["timings"]:
            phases.setdefault(p["phase"], []).append(p["ms"])
    print(f"{label} phases, median ms:")
    for name in ("process start", "plugin load", "worktree", "sandbox create", "iteration 1 exec"):
        if name in phases:
            print(f"  {name:<20} {statistics.median(phases[name]):8.1f}")
PY
