#!/usr/bin/env bash
# What a docker run costs beside the bare floor of the same work, in one
# run, interleaved round by round (issue 37's bench):
#
# 1. One run: `sanddune run --sandbox docker` (merge-to-head, the fake
#    claude committing one line) against the bare shell sequence of the
#    same steps (git worktree add, docker run, docker exec of the agent with
#    the prompt on stdin, docker rm -f, git merge, git worktree remove).
#    The run is timed twice: to its result on stdout (what a user waits
#    for: the sandbox's close comes after it, ADR 0034) and to its exit.
#    Prints the medians, their ratios to the floor (target: the result at
#    most 1.10x) and the median of each phase from the runs' `timings`.
#    Then the same run with a pool of warm containers (--sandbox-opt
#    pool=2, ADR 0037): each round claims one the round before left, and
#    tops the pool up after its result, before it exits.
# 2. A fan-out: 16 items at --parallel 4, each committing one line on its
#    own branch, as a `sanddune workflow run` (a plan step lists the items,
#    then the fan-out step; timed from the plan's end to the exit) against
#    the bare sequence of 16 items, four at a time (xargs -P 4), and the
#    same workflow with pool=4 (target: 1.5x faster). Then 16 `sanddune
#    run`s four at a time under merge-to-head, without and with pool=4.
#
#   host/benches/docker_run.sh [rounds] [fan-out rounds]    (default 5 and 3)
#
# $SANDDUNE_RUN_ARGS go to `sanddune run` (e.g. --no-capture-sessions: the
# bare sequence captures no session).
#
# Needs docker, the test image (tests/images/build.sh docker), python3, and
# the release binary (built here if missing; $SANDDUNE for another one).
set -euo pipefail
SANDDUNE_RUN_ARGS=${SANDDUNE_RUN_ARGS:-}
rounds=${1:-5}
fanout_rounds=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
IMAGE=sanddune-test:latest docker_bench_setup
bench_repo
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake

# Round $1's result goes to $work/result-$1.json; "$2"... go to the run.
sanddune_once() {
    local n=$1
    shift
    to_result_and_exit "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "add a line" --json \
        --sandbox-opt image="$image" $SANDDUNE_RUN_ARGS "$@" 2>"$work/result-$n.json"
}
warm_once() { sanddune_once "w$1" --sandbox-opt pool=2; }

# One item of the bare sequence on branch $1, merged when $2 is "merge".
bare_item() {
    local name=$1 wt cid
    wt=$repo/.sanddune/worktrees/$name
    git -C "$repo" worktree add -q -b "sanddune/$name" "$wt"
    cid=$(docker run -d --label sanddune.bench=1 -v "$wt:$wt:z" -v "$repo/.git:$repo/.git:z" \
        -w "$wt" --user agent -e HOME=/home/agent --entrypoint sleep "$image" infinity)
    printf 'add a line\nFAKE:file:%s.md\n' "$name" | docker exec -i -e HOME=/home/agent "$cid" \
        claude --print --output-format stream-json --verbose >/dev/null
    docker rm -f "$cid" >/dev/null
    if [ "${2:-}" = merge ]; then
        git -C "$repo" merge -q --ff-only "sanddune/$name"
    fi
    git -C "$repo" worktree remove "$wt"
    if [ "${2:-}" = merge ]; then
        git -C "$repo" branch -q -d "sanddune/$name"
    fi
}

bare_once() { bare_item "bare-$RANDOM$RANDOM" merge; }

echo "== one run, $rounds rounds (sanddune, then the floor, in each) =="
# One untimed round each: the component cache and the engine's page cache.
sanddune_once 0 >/dev/null
bare_once
# The first fills the pool.
warm_once 0 >/dev/null

: >"$work/s-result" && : >"$work/s-exit" && : >"$work/floor"
: >"$work/w-result" && : >"$work/w-exit"
for n in $(seq "$rounds"); do
    read -r r e < <(sanddune_once "$n")
    echo "$r" >>"$work/s-result"
    echo "$e" >>"$work/s-exit"
    timed "$work/floor" bare_once
    read -r r e < <(warm_once "$n")
    echo "$r" >>"$work/w-result"
    echo "$e" >>"$work/w-exit"
done

mr=$(median <"$work/s-result")
me=$(median <"$work/s-exit")
mb=$(median <"$work/floor")
printf 'floor (bare shell sequence):     median %.3f s\n' "$mb"
printf 'sanddune run, to its result:     median %.3f s  %.2fx the floor (target <= 1.10x)\n' "$mr" "$(awk "BEGIN {print $mr / $mb}")"
printf 'sanddune run, to its exit:       median %.3f s  %.2fx the floor\n' "$me" "$(awk "BEGIN {print $me / $mb}")"
wr=$(median <"$work/w-result")
we=$(median <"$work/w-exit")
printf 'warm run (pool=2), to its result: median %.3f s  %.2fx the floor (target <= 0.6x)\n' "$wr" "$(awk "BEGIN {print $wr / $mb}")"
printf 'warm run (pool=2), to its exit:   median %.3f s  %.2fx the floor (it tops the pool up)\n' "$we" "$(awk "BEGIN {print $we / $mb}")"
printf '%d commits landed on main\n' "$(git -C "$repo" rev-list --count main)"

# The timed rounds' phases (the untimed rounds are result-0 and -w0), and
# how long after the process started the agent's exec began.
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
BEFORE = ("process start", "worktree", "sandbox create", "hooks", "status before")
for label, prefix in (("cold", ""), ("warm", "w")):
    phases, to_agent = {}, []
    for r in range(1, rounds + 1):
        with open(f"{work}/result-{prefix}{r}.json") as f:
            timings = json.load(f)["timings"]
        for p in timings:
            phases.setdefault(p["phase"], []).append(p["ms"])
        # `process start` includes the plugin load.
        to_agent.append(sum(p["ms"] for p in timings if p["phase"] in BEFORE))
    print(f"{label} run phases, median ms over the timed rounds (process start includes plugin load):")
    for name, ms in phases.items():
        print(f"  {name:<28} {statistics.median(ms):8.1f}")
    print(f"  {'to the agent exec':<28} {statistics.median(to_agent):8.1f}   (process start to the agent's exec)")
PY

echo
echo "== fan-out: 16 items at --parallel 4, $fanout_rounds rounds =="
mkdir -p "$repo/.sanddune/workflows"
items=$(seq -s, 1 16)
cat >"$repo/.sanddune/workflows/fanout.toml" <<EOF
[defaults]
sandbox = "docker"
agent = "claude-code"
sandboxOptions = { image = "$image" }

[[steps]]
name = "plan"
strategy = "head"
prompt = "list the items\nFAKE:file:plan.md\nFAKE:say:<plan>[$items]</plan>"
output = { tag = "plan", schemaFile = "plan.schema.json" }

[[steps]]
name = "implement"
forEach = "plan"
branch = "bench/{{args.ROUND}}-{{index}}"
promptFile = "item.md"
promptArgs = { N = "{{index}}" }

[args]
ROUND = "0"
EOF
echo '{"type": "array", "items": {"type": "integer"}}' >"$repo/.sanddune/plan.schema.json"
printf 'add a line\nFAKE:file:item-{{N}}.md\n' >"$repo/.sanddune/item.md"
git -C "$repo" add .sanddune
git -C "$repo" commit -q -m "bench workflow"
# Prints the fan-out step's seconds: the workflow's wall time less its
# plan step's.
fanout_once() {
    python3 - "$sanddune" "$repo" "$@" <<'PY'
import json, subprocess, sys, time
bin, repo, n, *extra = sys.argv[1:]
start = time.monotonic()
out = subprocess.run([bin, "workflow", "run", "fanout", "--cwd", repo, "--parallel", "4",
                      "--arg", f"ROUND={n}", "--json", "--trust", *extra], capture_output=True)
wall = time.monotonic() - start
if out.returncode != 0:
    sys.exit(out.stderr.decode())
steps = json.loads(out.stdout)["steps"]
plan = steps[0]["items"][0]["durationMs"] / 1000
ok = sum(i["status"] == "succeeded" for i in steps[1]["items"])
if ok != 16:
    sys.exit(f"{ok} of 16 items succeeded")
with open(f"{repo}/../fanout-{n}.json", "wb") as f:
    f.write(out.stdout)
print(f"{wall - plan:.4f}")
PY
}

bare_fanout() {
    seq 1 16 | xargs -P 4 -I{} bash -c "$(declare -f bare_item); repo=$repo image=$image bare_item fan-$1-{}"
}

# 16 `sanddune run`s, four at a time, under merge-to-head: without a pool,
# then with pool=4. (The workflow's items are measured with pool=4 too.)
run_item() {
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "$(printf 'add a line\nFAKE:file:run-%s.md' "$1")" \
        --sandbox-opt image="$image" "${@:2}" >/dev/null 2>&1
}
runs_fanout() {
    seq 1 16 | xargs -P 4 -I{} bash -c "$(declare -f run_item); sanddune=$sanddune repo=$repo image=$image run_item {} $*"
}

fanout_once 0 >/dev/null
# The first with a pool fills it (the items' own: four share the limits).
fanout_once p0 --sandbox-opt pool=4 >/dev/null
runs_fanout
runs_fanout --sandbox-opt pool=4
: >"$work/fan-s" && : >"$work/fan-w" && : >"$work/fan-b" && : >"$work/fan-m" && : >"$work/fan-p"
for n in $(seq "$fanout_rounds"); do
    fanout_once "$n" >>"$work/fan-s"
    fanout_once "p$n" --sandbox-opt pool=4 >>"$work/fan-w"
    timed "$work/fan-b" bare_fanout "$n"
    timed "$work/fan-m" runs_fanout
    timed "$work/fan-p" runs_fanout --sandbox-opt pool=4
done
fs=$(median <"$work/fan-s")
fb=$(median <"$work/fan-b")
printf 'floor (bare, xargs -P 4):        median %.3f s\n' "$fb"
printf 'sanddune workflow, fan-out step: median %.3f s  %.2fx the floor\n' "$fs" "$(awk "BEGIN {print $fs / $fb}")"
fw=$(median <"$work/fan-w")
printf '  the same, pool=4:              median %.3f s  %.2fx faster (target >= 1.5x)\n' "$fw" "$(awk "BEGIN {print $fs / $fw}")"
fm=$(median <"$work/fan-m")
fp=$(median <"$work/fan-p")
printf '16 runs, -P 4, no pool:          median %.3f s\n' "$fm"
printf '16 runs, -P 4, pool=4:           median %.3f s  %.2fx faster (target >= 1.5x)\n' "$fp" "$(awk "BEGIN {print $fm / $fp}")"
python3 - "$work" "$fanout_rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
phases = {}
for r in range(1, rounds + 1):
    for item in json.load(open(f"{work}/fanout-{r}.json"))["steps"][1]["items"]:
        for p in item["runs"][0]["timings"]:
            phases.setdefault(p["phase"], []).append(p["ms"])
print("fan-out item phases, median ms over the items of the timed rounds:")
for name, ms in phases.items():
    print(f"  {name:<28} {statistics.median(ms):8.1f}")
PY

# The warm containers left waiting go with the scratch repository.
"$sanddune" gc --cwd "$repo" --drain-pool >/dev/null
