#!/usr/bin/env bash
# What a prepared snapshot saves (issue 37 part 3, ADR 0035): a docker run
# whose set-up hook takes 20 s and writes 2,000 files into the worktree
# (`npm ci` in miniature; both figures are arguments), cold (the set-up runs, and the sandbox is kept
# as a snapshot) and then from the snapshot (the set-up is skipped, its
# worktree files copied back), interleaved round by round with the same
# run with no set-up at all (the floor).
#
# "Agent start" is from `sanddune run` starting to the agent's first
# command (`date` inside the sandbox, the same clock). Target: from a
# matching snapshot, under 1 s.
#
#   host/benches/snapshot.sh [rounds] [set-up seconds] [worktree files]
#                                                (default 5, 20 and 2000)
#
# Needs docker, the test image (tests/images/build.sh docker), python3, and
# the release binary (built here if missing; $SANDDUNE for another one).
set -euo pipefail
rounds=${1:-5}
setup_secs=${2:-20}
files=${3:-2000}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
IMAGE=sanddune-test:latest docker_bench_setup
bench_repo
export ANTHROPIC_API_KEY=sk-ant-bench-fake
floor=$work/floor
git clone -q "$repo" "$floor"
git -C "$floor" config user.name bench
git -C "$floor" config user.email bench@sanddune.invalid

mkdir -p "$repo/.sanddune"
cat >"$repo/.sanddune/config.toml" <<TOML
[sandboxOptions]
snapshot = "auto"
"snapshot.inputs" = "deps.lock"

[[hooks.sandbox.onSandboxReady]]
command = "sleep $setup_secs && mkdir -p node_modules && for i in \$(seq $files); do echo \$i > node_modules/f\$i; done"
timeoutMs = 600000
TOML
printf 'node_modules/\n' >"$repo/.gitignore"
printf 'left-pad 1.0\n' >"$repo/deps.lock"
git -C "$repo" add -A
git -C "$repo" commit -qm "a set-up and its lockfile"
trap '"$sanddune" snapshot rm --all --cwd "$repo" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# One run in repository $1, round $2: prints "AGENT_START TOTAL" in seconds
# and leaves its --json result in $work/$3-$2.json.
run_once() {
    local dir=$1 round=$2 arm=$3 start end said
    start=$(now)
    "$sanddune" run --cwd "$dir" --sandbox docker --agent claude-code --trust \
        --strategy merge-to-head --json --sandbox-opt image="$image" \
        --prompt "note $round FAKE:run:date +%s.%N" >"$work/$arm-$round.json" 2>/dev/null
    end=$(now)
    said=$(said <"$work/$arm-$round.json")
    awk -v s="$start" -v a="$said" -v e="$end" 'BEGIN {printf "%.3f %.3f\n", a - s, e - s}'
}

echo "cold (the ${setup_secs} s set-up runs, writes $files worktree files, and the sandbox is kept):"
read -r agent total < <(run_once "$repo" 0 cold)
echo "  agent start ${agent} s, whole run ${total} s"
: >"$work/snap-agent"; : >"$work/snap-total"; : >"$work/floor-agent"; : >"$work/floor-total"
for round in $(seq 1 "$rounds"); do
    read -r agent total < <(run_once "$repo" "$round" snap)
    echo "$agent" >>"$work/snap-agent"; echo "$total" >>"$work/snap-total"
    read -r agent total < <(run_once "$floor" "$round" floor)
    echo "$agent" >>"$work/floor-agent"; echo "$total" >>"$work/floor-total"
done
echo "median over $rounds rounds, interleaved:"
printf '  %-34s agent start %6.3f s, whole run %6.3f s\n' \
    "from the snapshot (set-up skipped)" "$(median <"$work/snap-agent")" "$(median <"$work/snap-total")" \
    "no set-up at all (the floor)" "$(median <"$work/floor-agent")" "$(median <"$work/floor-total")"
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def phases(arm, rounds):
    out = {}
    for r in rounds:
        with open(f"{work}/{arm}-{r}.json") as f:
            for p in json.load(f)["timings"]:
                out.setdefault(p["phase"], []).append(p["ms"])
    return {k: sorted(v)[len(v) // 2] for k, v in out.items()}
cold = phases("cold", [0])
snap = phases("snap", range(1, rounds + 1))
floor = phases("floor", range(1, rounds + 1))
print("phases, ms (cold: its one run; the others: medians):")
print(f"  {'phase':<22} {'cold':>8} {'snapshot':>9} {'floor':>8}")
for name in dict.fromkeys([*cold, *snap, *floor]):
    cell = lambda d: f"{d[name]:.0f}" if name in d else "-"
    print(f"  {name:<22} {cell(cold):>8} {cell(snap):>9} {cell(floor):>8}")
PY
"$sanddune" snapshot ls --cwd "$repo"
