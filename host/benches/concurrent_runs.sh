#!/usr/bin/env bash
# Runs per minute with 1, 8, 32 and 64 `sanddune run` processes at once on one
# repository: test-isolated sandbox, the fake claude of tests/fakes committing
# a file of its own, merge-to-head. Each level starts all its runs together
# and waits for the last; every run must exit 0 and land, and `git fsck` must
# be clean afterwards. Prints, per level: wall time, runs/minute, and per run
# the median and max wall time and peak memory (ru_maxrss).
#
#   host/benches/concurrent_runs.sh [path/to/sanddune]   (default: target/release/sanddune)
#   LEVELS="1 8" host/benches/concurrent_runs.sh          (other levels)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath -m "${1:-$root/target/release/sanddune}")
[ -x "$bin" ] || { echo "build sanddune first: cargo build --release (or pass target/debug/sanddune)" >&2; exit 2; }
levels=${LEVELS:-1 8 32 64}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home/bin" "$work/repo"
ln -s "$root/tests/fakes/claude" "$work/home/bin/claude"
export HOME="$work/home" PATH="$work/home/bin:$PATH" GIT_CONFIG_NOSYSTEM=1
export SANDDUNE_CACHE_DIR="$work/cache"
unset XDG_CONFIG_HOME GIT_CONFIG_GLOBAL
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
cd "$work/repo"
git init -q -b main
git config user.name bench
git config user.email bench@sanddune.invalid
echo "# bench" > README.md
git add README.md
git commit -q -m initial

echo "sanddune: $bin"
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$bin" $levels <<'PY'
import json, os, statistics, subprocess, sys, time

bin, levels = sys.argv[1], [int(n) for n in sys.argv[2:]]

def spawn(tag):
    prompt = f"note {tag}\nFAKE:file:notes/{tag}.md"
    out = open(f"../{tag}.out", "w")
    err = open(f"../{tag}.err", "w")
    return subprocess.Popen(
        [bin, "run", "--sandbox", "test-isolated", "--agent", "claude-code",
         "--strategy", "merge-to-head", "--name", tag, "--prompt", prompt, "--json"],
        stdin=subprocess.DEVNULL, stdout=out, stderr=err)

def level(n, label):
    start = time.monotonic()
    procs = {}
    for i in range(n):
        p = spawn(f"{label}-{i}")
        procs[p.pid] = (f"{label}-{i}", time.monotonic())
    walls, peaks, failed = [], [], []
    while procs:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in procs:
            continue
        tag, began = procs.pop(pid)
        walls.append(time.monotonic() - began)
        peaks.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(tag)
    total = time.monotonic() - start
    for tag in failed:
        sys.stderr.write(f"run {tag} failed:\n" + open(f"../{tag}.err").read())
    if failed:
        sys.exit(1)
    return total, walls, peaks

level(1, "warmup")  # compiles the components into the cache
print(f"{'at once':>7}  {'wall':>7}  {'runs/min':>8}  {'run median':>10}  {'run max':>8}  {'peak MiB median':>15}  {'max':>5}")
for n in levels:
    total, walls, peaks = level(n, f"n{n}")
    print(f"{n:>7}  {total:>6.1f}s  {n * 60 / total:>8.1f}  {statistics.median(walls):>9.2f}s  {max(walls):>7.2f}s  {statistics.median(peaks):>15.1f}  {max(peaks):>5.1f}", flush=True)

landed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "main", "notes/"], capture_output=True, text=True).stdout.split()
expected = 1 + sum(levels)
fsck = subprocess.run(["git", "fsck", "--full", "--strict"], capture_output=True, text=True)
print(f"landed {len(landed)}/{expected} files; git fsck: {'clean' if fsck.returncode == 0 and 'error' not in fsck.stderr else fsck.stderr}")
if len(landed) != expected or fsck.returncode != 0:
    sys.exit(1)
PY
