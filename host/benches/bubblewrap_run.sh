#!/usr/bin/env bash
# What a jail costs (issue 38, ADR 0036): one-iteration runs of the fake
# claude committing one line (merge-to-head), in bubblewrap, test-isolated
# (the same host programs, no jail) and docker (a cold container),
# interleaved round by round. Prints the median of each, the ratios
# (targets: bubblewrap within 1.2x of test-isolated, at least 3x faster
# than docker), and the medians of the phases from the runs' `timings`.
#
#   host/benches/bubblewrap_run.sh [rounds]                   (default 7)
#
# Needs bwrap, docker with the test image (tests/images/build.sh docker),
# python3, and the release binary (built here if missing; $SANDDUNE for
# another one).
set -euo pipefail
rounds=${1:-7}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
IMAGE=sanddune-test:latest docker_bench_setup
bench_repo
command -v bwrap >/dev/null || { echo "no bwrap: apt-get install bubblewrap" >&2; exit 1; }
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
# The fake claude on PATH for the host's own programs; it logs its calls
# beside its bin dir (here), or in /tmp where that is read-only (a jail).
fakes=$(cd "$root/tests/fakes" && pwd)
mkdir -p "$work/bin"
ln -s "$fakes/claude" "$work/bin/claude"
export PATH=$work/bin:$PATH

# The options provider $1 needs: the image for docker, the fake for a jail.
options() {
    case $1 in
        docker) opts=(--sandbox-opt "image=$image") ;;
        bubblewrap) opts=(--sandbox-opt "mount=$work/bin:$work/bin:ro"
                          --sandbox-opt "mount=$fakes:$fakes:ro") ;;
        *) opts=() ;;
    esac
}

# One run in provider $1 named $2: its --json result in $work/$1-$2.json,
# its wall time appended to $work/$1.
run_once() {
    local start
    options "$1"
    start=$(now)
    "$sanddune" run --cwd "$repo" --sandbox "$1" --agent claude-code \
        --strategy merge-to-head --json \
        --prompt "note $1 $2 FAKE:file:notes/$1-$2.md" "${opts[@]}" \
        >"$work/$1-$2.json" 2>/dev/null
    awk -v a="$(now)" -v b="$start" 'BEGIN {print a - b}' >>"$work/$1"
}

providers=(test-isolated bubblewrap docker)
# One unmeasured round: the component cache and the page cache warm up.
for provider in "${providers[@]}"; do run_once "$provider" warm-up; : >"$work/$provider"; done
for round in $(seq 1 "$rounds"); do
    for provider in "${providers[@]}"; do run_once "$provider" "$round"; done
done

echo "one-iteration run of the fake claude, median of $rounds rounds, interleaved:"
for provider in "${providers[@]}"; do
    printf '  %-14s %6.3f s\n' "$provider" "$(median <"$work/$provider")"
done
awk -v b="$(median <"$work/bubblewrap")" -v t="$(median <"$work/test-isolated")" \
    -v d="$(median <"$work/docker")" \
    'BEGIN {printf "bubblewrap / test-isolated: %.2fx (target <= 1.2x)\ndocker / bubblewrap: %.2fx (target >= 3x)\n", b / t, d / b}'
python3 - "$work" "$rounds" "${providers[@]}" <<'PY'
import json, statistics, sys
work, rounds, providers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("phases (median ms):")
for provider in providers:
    phases = {}
    for r in range(1, rounds + 1):
        with open(f"{work}/{provider}-{r}.json") as f:
            for t in json.load(f)["timings"]:
                phases.setdefault(t["phase"], []).append(t["ms"])
    shown = ", ".join(f"{p} {statistics.median(ms):.0f}" for p, ms in phases.items())
    print(f"  {provider}: {shown}")
PY
