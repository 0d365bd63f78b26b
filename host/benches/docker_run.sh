#!/usr/bin/env bash
# Times one `sanddune run --sandbox docker` (merge-to-head, the fake claude
# committing one line) against the bare shell sequence of the same steps:
# git worktree add, docker run, docker exec of the agent with the prompt on
# stdin, docker rm -f, git merge, git worktree remove. Prints the medians of
# N alternating rounds and their ratio (target: at most 1.25).
#
#   host/benches/docker_run.sh [rounds]     (default 5)
#
# Needs docker, the test image (tests/images/build.sh docker) and a built
# binary ($SANDDUNE, else target/debug/sanddune).
set -euo pipefail
rounds=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
sanddune=${SANDDUNE:-$root/target/debug/sanddune}
image=sanddune-test:latest
[ -x "$sanddune" ] || { echo "no binary at $sanddune: cargo build first" >&2; exit 1; }
docker image inspect "$image" >/dev/null || { echo "no $image: tests/images/build.sh docker" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
git init -q -b main "$repo"
git -C "$repo" -c user.name=b -c user.email=b@b.invalid commit -q --allow-empty -m initial
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@sanddune.invalid
export SANDDUNE_CACHE_DIR=$work/cache

now() { date +%s.%N; }

sanddune_once() {
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "add a line" \
        --sandbox-opt image="$image" >/dev/null 2>&1
}

bare_once() {
    local name wt cid
    name=bare-$RANDOM$RANDOM
    wt=$repo/.sanddune/worktrees/$name
    git -C "$repo" worktree add -q -b "sanddune/$name" "$wt"
    cid=$(docker run -d --label sanddune.bench=1 -v "$wt:$wt:z" -v "$repo/.git:$repo/.git:z" \
        -w "$wt" --user agent -e HOME=/home/agent --entrypoint sleep "$image" infinity)
    echo "add a line" | docker exec -i -e HOME=/home/agent "$cid" \
        claude --print --output-format stream-json --verbose - >/dev/null
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

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms=$(median "${times_s[@]}")
mb=$(median "${times_b[@]}")
commits=$(git -C "$repo" rev-list --count main)
printf 'sanddune run --sandbox docker: median %.3f s over %d rounds\n' "$ms" "$rounds"
printf 'bare shell sequence:           median %.3f s over %d rounds\n' "$mb" "$rounds"
printf 'ratio: %.2fx (target <= 1.25x); %d commits landed on main\n' "$(awk "BEGIN {print $ms / $mb}")" "$commits"
