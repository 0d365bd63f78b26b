#!/usr/bin/env bash
# Wall time of a 16-item parallel-planner workflow at --parallel 1, 4 and 16:
# `sanddune init` scaffolds it, the test-isolated sandbox provider runs it,
# the scripted agent of tests/fakes/workflow-claude works AGENT_SECONDS per
# task (default 1) and commits, and the merge queue lands all 16 branches.
# With the peak memory of the one sanddune process driving it.
#
#   host/benches/workflow_fanout.sh [path/to/sanddune]    (default: target/release, else target/debug)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/host/benches/lib/fanout.sh"
bin=$(sanddune_bin "${1:-}")
agent_seconds=${AGENT_SECONDS:-1}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fanout_home
echo "$agent_seconds" > "$work/home/fake-sleep-implement"
cd "$work/repo"
fanout_scaffold
base=$(fanout_commit)

echo "16-item parallel-planner, test-isolated, ${agent_seconds}s of agent work per task, $(nproc) cores"
for n in 1 4 16; do
  round=$(fanout_round "$base" "$n" --sandbox test-isolated)
  fanout_print "$n" $round
done
