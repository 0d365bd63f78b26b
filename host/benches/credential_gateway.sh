#!/usr/bin/env bash
# The credential gateway's cost (ADR 0032), on docker, each arm beside the
# same without it (`--no-gateway`, the key in the sandbox):
#
# 1. a whole `sanddune run` (the fake claude committing one line), N
#    alternating rounds;
# 2. one model API request as the CLI makes it (curl, POST with the key
#    header), the median of 200 in one sandbox: the gateway's added
#    latency per request;
# 3. a 100 MB response through the gateway, N rounds.
#
# The API stands on one of the host's own addresses (a small Python
# server), so that without the gateway the sandbox reaches it directly.
# Prints the medians. Needs docker (root or the docker group), the test
# image (tests/images/build.sh docker; IMAGE=sanddune-test-non-root:latest
# as a non-root user) and python3.
#
#   host/benches/credential_gateway.sh [rounds]     (default 5)
set -euo pipefail
rounds=${1:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/host/benches/lib/docker_bench.sh"
docker_bench_setup
bench_repo
export ANTHROPIC_API_KEY=sk-ant-bench-real-key

addr=$(host_addr)
head -c 100000000 /dev/urandom >"$work/100mb"
port=$(free_port)
python3 - "$addr" "$port" "$work/100mb" <<'PY' &
import http.server, sys
addr, port, big = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"type":"message","content":[]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        with open(big, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
http.server.ThreadingHTTPServer((addr, port), Api).serve_forever()
PY
server=$!
sleep 1
export ANTHROPIC_BASE_URL=http://$addr:$port

run_once() { # $1: on|off, $2: prompt
    local flag=()
    [ "$1" = off ] && flag=(--no-gateway)
    "$sanddune" run --cwd "$repo" --sandbox docker --agent claude-code \
        --strategy merge-to-head --prompt "$2" --json "${flag[@]}" \
        --sandbox-opt image="$image" 2>>"$work/stderr"
}

: >"$work/run-on"; : >"$work/run-off"
for _ in $(seq "$rounds"); do
    for arm in off on; do
        timed "$work/run-$arm" run_once "$arm" "add a line"
    done
done
echo "run, --no-gateway:      median $(median <"$work/run-off") s over $rounds"
echo "run, gateway:           median $(median <"$work/run-on") s over $rounds"

call='curl -s -o /dev/null -w "%{time_total}\n" -H "x-api-key: $ANTHROPIC_API_KEY" -H "content-type: application/json" -d "{}" "$ANTHROPIC_BASE_URL/v1/messages"'
many="for i in \$(seq 200); do $call; done | sort -n | sed -n 100p"
for arm in off on; do
    echo "one API request, $arm: median $(run_once "$arm" "time it FAKE:run:$many" | said) s over 200"
done | sed 's/, off:/, --no-gateway:/; s/, on:/, gateway:     /'

fetch='curl -s -o /dev/null -w %{time_total} -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/100mb"'
: >"$work/big-on"; : >"$work/big-off"
for _ in $(seq "$rounds"); do
    for arm in off on; do
        run_once "$arm" "fetch FAKE:run:$fetch" | said >>"$work/big-$arm"
    done
done
echo "100 MB response, --no-gateway: median $(median <"$work/big-off") s over $rounds"
echo "100 MB response, gateway:      median $(median <"$work/big-on") s over $rounds"
