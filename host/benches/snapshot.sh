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
snapshot_repos "$setup_secs" "$files"
trap '"$sanddune" snapshot rm --all --cwd "$repo" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# One run in repository $1, round $2, arm $3 (agent_start_and_total).
run_once() {
    agent_start_and_total "$3" "$2" "$sanddune" run --cwd "$1" --sandbox docker --agent claude-code \
        --trust --strategy merge-to-head --json --sandbox-opt image="$image"
}

snapshot_bench "$rounds" "cold (the ${setup_secs} s set-up runs, writes $files worktree files, and the sandbox is kept):"
"$sanddune" snapshot ls --cwd "$repo"
