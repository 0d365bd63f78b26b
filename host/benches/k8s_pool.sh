#!/usr/bin/env bash
# Warm pods (--sandbox-opt pool=N, ADR 0037) on the kubernetes provider: a
# one-iteration run (merge-to-head, the image's fake claude committing one
# line) that creates its pod, against the same run with pool=1, which
# claims the pod the round before left waiting. Interleaved round by round;
# prints the medians of the time to the result (the --json object on
# stdout), to the exit (a pooled run tops the pool up after its result,
# before it exits), of the `sandbox create` phase, and of the time from the
# process's start to the agent's exec.
#
#   host/benches/k8s_pool.sh [rounds]        (default 5)
#
# On the loopback mock (tests/k8s-mock, pods backed by docker containers),
# or on a real cluster: `source /run/sanddune-k8s/env` first (see
# k8s_cluster.sh). The binary: $SANDDUNE, else target/release, else
# target/debug.
set -euo pipefail
rounds=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/host/benches/lib/fanout.sh"
source "$root/host/benches/lib/docker_bench.sh"
source "$root/host/benches/lib/k8s_target.sh"
bin=$(sanddune_bin "${SANDDUNE:-}")

work=$(mktemp -d)
cleanup() {
  [ -n "${mock_pid:-}" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
  # The pool's last pod, with its slot.
  [ -d "$work/repo" ] && "$bin" gc --cwd "$work/repo" --drain-pool >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
k8s_target
repo=$work/repo
git init -q -b main "$repo"
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@sanddune.invalid
git -C "$repo" commit -q --allow-empty -m initial
export SANDDUNE_CACHE_DIR="$root/target/tmp/component-cache"
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake

# Round $1's result goes to $work/result-$1.json; "$2"... go to the run.
run_once() {
  local n=$1
  shift
  to_result_and_exit "$bin" run --cwd "$repo" --sandbox kubernetes --agent claude-code \
    --strategy merge-to-head --prompt "$(printf 'add a line\nFAKE:file:%s.md' "$n")" --json \
    --sandbox-opt "image=$image" --sandbox-opt "namespace=$namespace" "$@" \
    2>"$work/result-$n.json"
}

echo "one-iteration runs on $target, $(nproc) cores, $rounds rounds (cold, then warm, in each)"
# Untimed: the component cache, the image on the node, and the pool's fill.
run_once c0 >/dev/null
run_once w0 --sandbox-opt pool=1 >/dev/null
: >"$work/c-result" && : >"$work/c-exit" && : >"$work/w-result" && : >"$work/w-exit"
for n in $(seq "$rounds"); do
  read -r r e < <(run_once "c$n")
  echo "$r" >>"$work/c-result" && echo "$e" >>"$work/c-exit"
  read -r r e < <(run_once "w$n" --sandbox-opt pool=1)
  echo "$r" >>"$work/w-result" && echo "$e" >>"$work/w-exit"
done
for kind in c w; do
  label=$([ $kind = c ] && echo "cold (creates its pod)" || echo "warm (pool=1)         ")
  printf '%s  to its result: median %.3f s   to its exit: median %.3f s\n' "$label" \
    "$(median <"$work/$kind-result")" "$(median <"$work/$kind-exit")"
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
BEFORE = ("process start", "worktree", "sandbox create", "sync in", "hooks", "status before")
for label, kind in (("cold", "c"), ("warm", "w")):
    create, to_agent = [], []
    for r in range(1, rounds + 1):
        result = json.load(open(f"{work}/result-{kind}{r}.json"))
        timings = result["timings"]
        create.append(sum(p["ms"] for p in timings if p["phase"] == "sandbox create"))
        to_agent.append(sum(p["ms"] for p in timings if p["phase"] in BEFORE))
    print(f"{label}: sandbox create median {statistics.median(create):.1f} ms, "
          f"process start to the agent's exec median {statistics.median(to_agent):.1f} ms")
PY
printf '%d commits landed on main; %d of the %d timed warm runs took a warm pod (and the untimed first filled the pool)\n' \
  "$(git -C "$repo" rev-list --count main)" \
  "$(grep -l 'pool: took a warm pod' "$repo"/.sanddune/logs/*.log | wc -l)" "$rounds"
