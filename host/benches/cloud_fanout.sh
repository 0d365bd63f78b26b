#!/usr/bin/env bash
# Wall time of one `sanddune run --sandbox vercel|daytona` against 16 at
# once, over the provider's loopback mock (tests/vercel-mock,
# tests/daytona-mock: both run the commands for real): the fake claude
# makes one commit per run on its own branch (strategy branch), each run a
# sandbox of its own.
#
#   host/benches/cloud_fanout.sh vercel|daytona [path/to/sanddune]
#     (default binary: target/release, else target/debug)
#   needs: cargo build -p sanddune-PROVIDER-mock --bin PROVIDER-mock
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
provider=${1:-}
case "$provider" in
  vercel | daytona) ;;
  *) echo "usage: $0 vercel|daytona [path/to/sanddune]" >&2; exit 2 ;;
esac
bin=${2:-}
if [ -z "$bin" ]; then
  for b in "$root/target/release/sanddune" "$root/target/debug/sanddune"; do
    [ -x "$b" ] && bin=$b && break
  done
fi
[ -x "${bin:-}" ] || { echo "build sanddune first (cargo build --release)" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")  # the runs cd into the repo
mockbin=""
for b in "$root/target/release/$provider-mock" "$root/target/debug/$provider-mock"; do
  [ -x "$b" ] && mockbin=$b && break
done
[ -n "$mockbin" ] || { echo "build the mock first (cargo build -p sanddune-$provider-mock --bin $provider-mock)" >&2; exit 2; }

work=$(mktemp -d)
mkdir -p "$work/home/bin" "$work/repo"
ln -s "$root/tests/fakes/claude" "$work/home/bin/claude"
export HOME="$work/home" PATH="$work/home/bin:$PATH"
export SANDDUNE_CACHE_DIR="$root/target/tmp/component-cache"
export VERCEL_TOKEN=mock-token VERCEL_TEAM_ID=team_mock VERCEL_PROJECT_ID=prj_mock
export DAYTONA_API_KEY=mock-api-key
# claude-code's env requirement, as its users have it; the fake ignores it.
export ANTHROPIC_API_KEY=sk-ant-bench-fake
"$mockbin" > "$work/mock.url" &
mock=$!
trap 'kill $mock; rm -rf "$work"' EXIT
for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
url=$(head -1 "$work/mock.url")
if [ "$provider" = vercel ]; then
  origins=(--sandbox-opt "api-url=$url")
else
  origins=(--sandbox-opt "api-url=$url/api" --sandbox-opt "toolbox-url=$url/toolbox")
fi
cd "$work/repo"
git init -q -b main
echo "# bench" > README.md
git add README.md
git config user.name b && git config user.email b@b.invalid
git commit -q -m initial

one() {
  "$bin" run --sandbox "$provider" "${origins[@]}" --agent claude-code \
    --strategy branch --branch "fan-$1" --prompt "add a note $1" --json \
    > "$work/out-$1.json" 2> "$work/err-$1.txt" || { cat "$work/err-$1.txt" >&2; return 1; }
}

echo "sanddune run --sandbox $provider over the mock, $(nproc) cores"
one 0  # warm the component cache
for n in 1 16; do
  start=$(date +%s.%N)
  pids=()
  for i in $(seq 1 "$n"); do one "$n-$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  commits=$(for i in $(seq 1 "$n"); do git rev-list --count "main..fan-$n-$i"; done | paste -sd+ | bc)
  printf -- '%2s run(s) at once: %6.2f s  (%s commits on %s branches)\n' "$n" "$(echo "$end - $start" | bc)" "$commits" "$n"
done
