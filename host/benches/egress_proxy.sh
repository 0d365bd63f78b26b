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
. "$root/host/benches/lib/docker_bench.sh"
docker_bench_setup
bench_repo
export ANTHROPIC_API_KEY=sk-ant-bench-fake

# A server on one of the host's own addresses, with a 100 MB file.
addr=$(host_addr)
mkdir "$work/www"
head -c 100000000 /dev/urandom >"$work/www/100mb"
port=$(free_port)
(cd "$work/www" && exec python3 -m http.server --bind "$addr" "$port" >/dev/null 2>&1) &
server=$!
sleep 1

run_once() { # $1: egress policy, $2: prompt
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "$2" --json \
        --sandbox-opt image="$image" --sandbox-opt egress="$1" 2>>"$work/stderr"
}

: >"$work/allow" ; : >"$work/deny"
for _ in $(seq "$rounds"); do
    for policy in allow deny; do
        timed "$work/$policy" run_once "$policy-all" "add a line"
    done
done
echo "run, egress=allow-all: median $(median <"$work/allow") s over $rounds"
echo "run, egress=deny-all:  median $(median <"$work/deny") s over $rounds"

: >"$work/direct" ; : >"$work/proxied"
fetch="curl -s -o /dev/null -w %{time_total} http://$addr:$port/100mb"
for _ in $(seq "$rounds"); do
    run_once allow-all "fetch FAKE:run:$fetch" | said >>"$work/direct"
    run_once "$addr:$port" "fetch FAKE:run:$fetch" | said >>"$work/proxied"
done
echo "100 MB download, direct:        median $(median <"$work/direct") s over $rounds"
echo "100 MB download, through proxy: median $(median <"$work/proxied") s over $rounds"
