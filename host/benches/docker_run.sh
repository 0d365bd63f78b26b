#!/usr/bin/env bash
# Times one `sanddune run --sandbox docker` (merge-to-head, the fake claude
# committing one line) against the bare shell sequence of the same steps:
# git worktree add, docker run, docker exec of the agent with the prompt on
# stdin, docker rm -f, git merge, git worktree remove. Prints the medians of
# N alternating rounds, their ratio (target: at most 1.10), and the median
# of each phase of the sanddune run (its `timings`, as `--timings` prints).
#
#   host/benches/docker_run.sh [rounds]     (default 5)
#
# $SANDDUNE_RUN_ARGS go to `sanddune run` (e.g. --no-capture-sessions: the
# bare sequence captures no session).
#
# Needs docker, the test image (tests/images/build.sh docker), python3, and
# the release binary (built here if missing; $SANDDUNE for another one).
set -euo pipefail
SANDDUNE_RUN_ARGS=${SANDDUNE_RUN_ARGS:-}
rounds=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
IMAGE=sanddune-test:latest docker_bench_setup
bench_repo
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake

round=0
sanddune_once() {
    round=$((round + 1))
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "add a line" --json \
        --sandbox-opt image="$image" $SANDDUNE_RUN_ARGS >"$work/result-$round.json" 2>/dev/null
}

bare_once() {
    local name wt cid
    name=bare-$RANDOM$RANDOM
    wt=$repo/.sanddune/worktrees/$name
    git -C "$repo" worktree add -q -b "sanddune/$name" "$wt"
    cid=$(docker run -d --label sanddune.bench=1 -v "$wt:$wt:z" -v "$repo/.git:$repo/.git:z" \
        -w "$wt" --user agent -e HOME=/home/agent --entrypoint sleep "$image" infinity)
    echo "add a line" | docker exec -i -e HOME=/home/agent "$cid" \
        claude --print --output-format stream-json --verbose >/dev/null
    docker rm -f "$cid" >/dev/null
    git -C "$repo" merge -q --ff-only "sanddune/$name"
    git -C "$repo" worktree remove "$wt"
    git -C "$repo" branch -q -d "sanddune/$name"
}

# One untimed round each: the component cache and the engine's page cache.
sanddune_once
bare_once

times_s=() times_b=()
for _ in $(seq "$rounds"); do
    t0=$(now); sanddune_once; t1=$(now); bare_once; t2=$(now)
    times_s+=("$(awk "BEGIN {print $t1 - $t0}")")
    times_b+=("$(awk "BEGIN {print $t2 - $t1}")")
done

ms=$(printf '%s\n' "${times_s[@]}" | median)
mb=$(printf '%s\n' "${times_b[@]}" | median)
commits=$(git -C "$repo" rev-list --count main)
printf 'sanddune run --sandbox docker: median %.3f s over %d rounds\n' "$ms" "$rounds"
printf 'bare shell sequence:           median %.3f s over %d rounds\n' "$mb" "$rounds"
printf 'ratio: %.2fx (target <= 1.10x); %d commits landed on main\n' "$(awk "BEGIN {print $ms / $mb}")" "$commits"

# The timed rounds' phases (the first, untimed round is result-1).
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
phases = {}
for r in range(2, rounds + 2):
    with open(f"{work}/result-{r}.json") as f:
        for p in json.load(f)["timings"]:
            phases.setdefault(p["phase"], []).append(p["ms"])
print("sanddune run phases, median ms over the timed rounds:")
total = 0.0
for name, ms in phases.items():
    m = statistics.median(ms)
    total += m
    print(f"  {name:<28} {m:8.1f}")
print(f"  {'sum of phases':<28} {total:8.1f}")
PY
