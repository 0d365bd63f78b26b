#!/usr/bin/env bash
# The egress proxy's cost (ADR 0022, 0031), on docker:
#
# 1. a whole `sanddune run` (the fake claude committing one line) with
#    `egress=allow-all` against `egress=deny-all` (network mode none, the
#    proxy on a unix socket and the forwarder started in the container),
#    N alternating rounds;
# 2. a 100 MB download by curl in the sandbox from a server on the host's
#    address: direct (allow-all) against through the proxy (a domain list
#    naming the server), N rounds each.
#
# Prints the medians of each. Needs docker (as root or in the docker
# group), the test image (tests/images/build.sh docker, which has curl;
# as a non-root user, IMAGE=sanddune-test-non-root:latest) and python3.
#
#   host/benches/egress_proxy.sh [rounds]     (default 5)
set -euo pipefail
rounds=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
sanddune=${SANDDUNE:-$root/target/release/sanddune}
if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
fi
image=${IMAGE:-sanddune-test:latest}
docker image inspect "$image" >/dev/null || { echo "no $image: tests/images/build.sh docker" >&2; exit 1; }

work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server"; rm -rf "$work"' EXIT
repo=$work/repo
git init -q -b main "$repo"
git -C "$repo" -c user.name=b -c user.email=b@b.invalid commit -q --allow-empty -m initial
git -C "$repo" config user.name bench
git -C "$repo" config user.email bench@sanddune.invalid
export SANDDUNE_CACHE_DIR=$work/cache
export ANTHROPIC_API_KEY=sk-ant-bench-fake

# A server on one of the host's own addresses, with a 100 MB file.
addr=$(hostname -I | tr ' ' '\n' | grep -v '^127\.' | grep '\.' | head -1)
mkdir "$work/www"
head -c 100000000 /dev/urandom >"$work/www/100mb"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
(cd "$work/www" && exec python3 -m http.server --bind "$addr" "$port" >/dev/null 2>&1) &
server=$!
sleep 1

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

run_once() { # $1: egress policy, $2: prompt
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "$2" --json \
        --sandbox-opt image="$image" --sandbox-opt egress="$1" 2>>"$work/stderr"
}

: >"$work/allow" ; : >"$work/deny"
for _ in $(seq "$rounds"); do
    for policy in allow deny; do
        start=$(now)
        run_once "$policy-all" "add a line" >/dev/null
        awk -v a="$(now)" -v b="$start" 'BEGIN {print a - b}' >>"$work/$policy"
    done
done
echo "run, egress=allow-all: median $(median <"$work/allow") s over $rounds"
echo "run, egress=deny-all:  median $(median <"$work/deny") s over $rounds"

: >"$work/direct" ; : >"$work/proxied"
fetch="curl -s -o /dev/null -w %{time_total} http://$addr:$port/100mb"
for _ in $(seq "$rounds"); do
    run_once allow-all "fetch FAKE:run:$fetch" |
        python3 -c 'import json,sys,re; print(re.search(r"([0-9.]+) \(exit 0\)", json.load(sys.stdin)["stdout"]).group(1))' >>"$work/direct"
    run_once "$addr:$port" "fetch FAKE:run:$fetch" |
        python3 -c 'import json,sys,re; print(re.search(r"([0-9.]+) \(exit 0\)", json.load(sys.stdin)["stdout"]).group(1))' >>"$work/proxied"
done
echo "100 MB download, direct:        median $(median <"$work/direct") s over $rounds"
echo "100 MB download, through proxy: median $(median <"$work/proxied") s over $rounds"
