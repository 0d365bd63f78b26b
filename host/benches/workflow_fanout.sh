#!/usr/bin/env bash
# Wall time of a 16-item parallel-planner workflow at --parallel 1, 4 and 16:
# `sanddune init` scaffolds it, the test-isolated sandbox provider runs it,
# the scripted agent of tests/fakes/workflow-claude works AGENT_SECONDS per
# task (default 1) and commits, and the merge queue lands all 16 branches.
#
#   host/benches/workflow_fanout.sh [path/to/sanddune]    (default: target/release, else target/debug)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-}
if [ -z "$bin" ]; then
  for b in "$root/target/release/sanddune" "$root/target/debug/sanddune"; do
    [ -x "$b" ] && bin=$b && break
  done
fi
[ -x "${bin:-}" ] || { echo "build sanddune first (cargo build --release)" >&2; exit 2; }
agent_seconds=${AGENT_SECONDS:-1}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home/bin" "$work/repo"
ln -s "$root/tests/fakes/workflow-claude" "$work/home/bin/claude"
ln -s "$root/tests/fakes/gh" "$work/home/bin/gh"
echo 0.05 > "$work/home/fake-sleep"
echo "$agent_seconds" > "$work/home/fake-sleep-implement"
python3 -c 'import json; print(json.dumps([{"id": str(i), "title": f"task {i}"} for i in range(1, 17)]))' \
  > "$work/home/issues.json"
export HOME="$work/home" PATH="$work/home/bin:$PATH"
export SANDDUNE_CACHE_DIR="$root/target/tmp/component-cache"
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
cd "$work/repo"
git init -q -b main
echo "# bench" > README.md
git add README.md
git -c user.name=b -c user.email=b@b.invalid commit -q -m initial
"$bin" init --agent claude-code --sandbox docker --backlog github-issues \
  --template parallel-planner --no-build > /dev/null
printf 'GIT_AUTHOR_NAME=a\nGIT_AUTHOR_EMAIL=a@a.invalid\nGIT_COMMITTER_NAME=a\nGIT_COMMITTER_EMAIL=a@a.invalid\n' > .sanddune/.env
git add .sanddune
git -c user.name=b -c user.email=b@b.invalid commit -q -m "sanddune init"
base=$(git rev-parse HEAD)

echo "16-item parallel-planner, test-isolated, ${agent_seconds}s of agent work per task, $(nproc) cores"
for n in 1 4 16; do
  git reset -q --hard "$base"
  git for-each-ref --format='%(refname:short)' 'refs/heads/sanddune/' | xargs -r git branch -q -D
  start=$(date +%s.%N)
  "$bin" workflow run parallel-planner --sandbox test-isolated --parallel "$n" --json > "$work/result.json" 2> "$work/stderr.txt" \
    || { cat "$work/stderr.txt" >&2; exit 1; }
  end=$(date +%s.%N)
  landed=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(q["status"]=="landed" for q in r["steps"][2]["merge"]))' "$work/result.json")
  printf -- '--parallel %-2s  %6.2f s  (%s branches landed)\n' "$n" "$(echo "$end - $start" | bc)" "$landed"
done
