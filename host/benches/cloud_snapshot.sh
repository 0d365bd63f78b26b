#!/usr/bin/env bash
# What a prepared snapshot saves on a provider that keeps its own (ADR
# 0038): a vercel or daytona run on that provider's loopback mock (which
# runs commands for real, on this machine) whose set-up hook takes 20 s and
# writes 2,000 files into the synced repository. It runs cold once (the
# set-up runs and the provider keeps the sandbox), then from the snapshot
# (the set-up is skipped), interleaved round by round with the same run
# with no set-up at all (the floor).
#
# "Agent start" is from `sanddune run` starting to the agent's first
# command (`date` in the sandbox, the same clock). Target: from a matching
# snapshot, under 1 s. The mock answers at once; a real provider adds its
# own create-from-snapshot time, which this does not measure.
#
#   host/benches/cloud_snapshot.sh [vercel|daytona] [rounds] [set-up seconds] [files]
#                                             (default vercel, 5, 20 and 2000)
#
# Needs python3, the release binary and the mock's (built here if missing;
# $SANDDUNE for another sanddune).
set -euo pipefail
provider=${1:-vercel}
rounds=${2:-5}
setup_secs=${3:-20}
files=${4:-2000}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
case $provider in
vercel | daytona) ;;
*) echo "usage: cloud_snapshot.sh [vercel|daytona] [rounds] [set-up seconds] [files]" >&2; exit 2 ;;
esac
sanddune=${SANDDUNE:-$root/target/release/sanddune}
if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
fi
mock_bin=$root/target/release/$provider-mock
[ -x "$mock_bin" ] || (cd "$root" && cargo build --release -q -p "sanddune-$provider-mock")
bench_repo
snapshot_repos "$setup_secs" "$files"

# The mock, with the fake agents first on its commands' PATH.
PATH="$root/tests/fakes:$PATH" "$mock_bin" >"$work/mock-url" &
server=$!
for _ in $(seq 100); do [ -s "$work/mock-url" ] && break; sleep 0.05; done
url=$(head -1 "$work/mock-url")
case $provider in
vercel)
    export VERCEL_TOKEN=mock-token VERCEL_TEAM_ID=team_mock VERCEL_PROJECT_ID=prj_mock
    opts=(--sandbox-opt "api-url=$url")
    ;;
daytona)
    export DAYTONA_API_KEY=mock-api-key
    opts=(--sandbox-opt "api-url=$url/api" --sandbox-opt "toolbox-url=$url/toolbox")
    ;;
esac
export ANTHROPIC_API_KEY=sk-ant-bench-fake

# One run in repository $1, round $2, arm $3 (agent_start_and_total).
run_once() {
    agent_start_and_total "$3" "$2" "$sanddune" run --cwd "$1" --sandbox "$provider" "${opts[@]}" \
        --agent claude-code --trust --strategy merge-to-head --json
}

snapshot_bench "$rounds" "$provider on its mock, cold (the ${setup_secs} s set-up runs, writes $files files, and the sandbox is kept):"
"$sanddune" snapshot ls --cwd "$repo"
"$sanddune" snapshot rm --all --cwd "$repo" >/dev/null
