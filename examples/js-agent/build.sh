#!/usr/bin/env sh
# Builds the js-agent component with componentize-js (npm install
# @bytecodealliance/componentize-js@0.23.0). Usage: ./build.sh [OUTPUT.wasm],
# by default target/examples/js-agent.wasm, where the tests look.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/examples/js-agent.wasm}
mkdir -p "$(dirname "$out")"
# An agent provider needs no WASI feature: disabling them all keeps the
# component's imports to what the agent-plugin world allows (`logging`).
componentize-js "$here/agent.js" --wit "$here/../../wit" --world-name agent-plugin \
    --disable stdio random clocks http fetch-event --out "$out"
