#!/usr/bin/env sh
# Builds the python-sandbox component with componentize-py (pip install
# componentize-py==0.25.1). Usage: ./build.sh [OUTPUT.wasm], by default
# target/examples/python-sandbox.wasm, where the tests look.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/examples/python-sandbox.wasm}
mkdir -p "$(dirname "$out")"
componentize-py -d "$here/../../wit" -w sandbox-plugin componentize -p "$here" app -o "$out"
