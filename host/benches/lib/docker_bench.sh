# What the docker benches of one run's cost share (sourced by
# docker_run.sh, pool_big_repo.sh, egress_proxy.sh, credential_gateway.sh,
# snapshot.sh and cloud_snapshot.sh, with $root set): the release binary, the test image, a scratch repository
# and the helpers that time and read the runs.

# $sanddune: $SANDDUNE, else target/release/sanddune (built if missing).
# $image: $IMAGE, else the root test image, which must exist.
docker_bench_setup() {
  sanddune=${SANDDUNE:-$root/target/release/sanddune}
  if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
  fi
  image=${IMAGE:-sanddune-test:latest}
  docker image inspect "$image" >/dev/null || { echo "no $image: tests/images/build.sh docker" >&2; exit 1; }
}

# $work (a scratch dir, removed on exit with the server $server if one is
# started) and $repo in it: one empty commit and a git identity.
bench_repo() {
  work=$(mktemp -d)
  server=
  trap '[ -n "$server" ] && kill "$server"; rm -rf "$work"' EXIT
  repo=$work/repo
  git init -q -b main "$repo"
  git -C "$repo" -c user.name=b -c user.email=b@b.invalid commit -q --allow-empty -m initial
  git -C "$repo" config user.name bench
  git -C "$repo" config user.email bench@sanddune.invalid
  export SANDDUNE_CACHE_DIR=$work/cache
}

# One of the host's own addresses (not loopback), and a free port.
host_addr() { hostname -I | tr ' ' '\n' | grep -v '^127\.' | grep '\.' | head -1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }

# Run "$@" (its stdout dropped) and append its wall time, in seconds, to
# the file $1.
timed() {
  local out=$1 start
  shift
  start=$(now)
  "$@" >/dev/null
  awk -v a="$(now)" -v b="$start" 'BEGIN {print a - b}' >>"$out"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

# The number the fake agent's last FAKE:run command printed, from a run's
# --json result on stdin.
said() { python3 -c 'import json,sys,re; print(re.search(r"([0-9.]+) \(exit 0\)", json.load(sys.stdin)["stdout"]).group(1))'; }

# Runs "$@" and prints "SECONDS_TO_RESULT SECONDS_TO_EXIT": the result is
# the --json object on stdout, whole once its closing brace is.
to_result_and_exit() {
    python3 - "$@" <<'PY'
import subprocess, sys, time
start = time.monotonic()
with subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:
    out, result = [], None
    for line in p.stdout:
        out.append(line)
        if line.rstrip() == b"}" and result is None:
            result = time.monotonic() - start
    code = p.wait()
end = time.monotonic() - start
if code != 0:
    sys.exit(f"exit {code}")
sys.stderr.buffer.write(b"".join(out))
print(f"{result:.4f} {end:.4f}")
PY
}

# The snapshot benches' repositories, after bench_repo: $floor, a clone of
# $repo with no set-up, and $repo with snapshot=auto and a set-up hook that
# takes $1 seconds and writes $2 files under node_modules (the input: a
# lockfile).
snapshot_repos() {
    local setup_secs=$1 files=$2
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
}

# Run "$@" (a `sanddune run ... --json`) with the fake agent's prompt for
# round $2, its result left in $work/$1-$2.json (arm $1): prints
# "AGENT_START TOTAL" in seconds, the agent start being its first command
# (`date` in the sandbox, the same clock).
agent_start_and_total() {
    local arm=$1 round=$2 start end said
    shift 2
    start=$(now)
    "$@" --prompt "note $round FAKE:run:date +%s.%N" >"$work/$arm-$round.json" 2>/dev/null
    end=$(now)
    said=$(said <"$work/$arm-$round.json")
    awk -v s="$start" -v a="$said" -v e="$end" 'BEGIN {printf "%.3f %.3f\n", a - s, e - s}'
}

# The snapshot benches' rounds (snapshot.sh, cloud_snapshot.sh): the cold
# run of $repo (said as $2), then $1 rounds of a run from the snapshot
# interleaved with one of $floor, each through the script's
# `run_once DIR ROUND ARM`; then the report.
snapshot_bench() {
    local rounds=$1 agent total round
    echo "$2"
    read -r agent total < <(run_once "$repo" 0 cold)
    echo "  agent start ${agent} s, whole run ${total} s"
    : >"$work/snap-agent"; : >"$work/snap-total"; : >"$work/floor-agent"; : >"$work/floor-total"
    for round in $(seq 1 "$rounds"); do
        read -r agent total < <(run_once "$repo" "$round" snap)
        echo "$agent" >>"$work/snap-agent"; echo "$total" >>"$work/snap-total"
        read -r agent total < <(run_once "$floor" "$round" floor)
        echo "$agent" >>"$work/floor-agent"; echo "$total" >>"$work/floor-total"
    done
    snapshot_report "$rounds"
}

# The medians of arms snap and floor over $1 rounds, and the phases of
# each arm, from the results run_once left in $work.
snapshot_report() {
    local rounds=$1
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
}
