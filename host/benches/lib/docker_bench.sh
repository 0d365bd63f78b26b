# What the docker benches of one run's cost share (sourced by
# docker_run.sh, pool_big_repo.sh, egress_proxy.sh and credential_gateway.sh,
# with $root set): the release binary, the test image, a scratch repository
# and the helpers that time and read the runs.

# $sanddune: $SANDDUNE, else target/release/sanddune (built if missing).
# $image: $IMAGE, else the root test image, which must exist.
docker_bench_setup() {
  sanddune=${SANDDUNE:-$root/target/release/sanddune}
  if [ -z "${SANDDUNE:-}" ] && [ ! -x "$sanddune" ]; then
    (cd "$root" && cargo build --release -q -p sanddune)
  fi
  image=${IMAGE:-sanddune-test:latest}
  docker image inspect "$image" >/dev/null || { echo "no $image: tests/images/build.sh docker" >&2; exit 1; }
}

# $work (a scratch dir, removed on exit with the server $server if one is
# started) and $repo in it: one empty commit and a git identity.
bench_repo() {
  work=$(mktemp -d)
  server=
  trap '[ -n "$server" ] && kill "$server"; rm -rf "$work"' EXIT
  repo=$work/repo
  git init -q -b main "$repo"
  git -C "$repo" -c user.name=b -c user.email=b@b.invalid commit -q --allow-empty -m initial
  git -C "$repo" config user.name bench
  git -C "$repo" config user.email bench@sanddune.invalid
  export SANDDUNE_CACHE_DIR=$work/cache
}

# One of the host's own addresses (not loopback), and a free port.
host_addr() { hostname -I | tr ' ' '\n' | grep -v '^127\.' | grep '\.' | head -1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'; }

# Run "$@" (its stdout dropped) and append its wall time, in seconds, to
# the file $1.
timed() {
  local out=$1 start
  shift
  start=$(now)
  "$@" >/dev/null
  awk -v a="$(now)" -v b="$start" 'BEGIN {print a - b}' >>"$out"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

# The number the fake agent's last FAKE:run command printed, from a run's
# --json result on stdin.
said() { python3 -c 'import json,sys,re; print(re.search(r"([0-9.]+) \(exit 0\)", json.load(sys.stdin)["stdout"]).group(1))'; }

# Runs "$@" and prints "SECONDS_TO_RESULT SECONDS_TO_EXIT": the result is
# the --json object on stdout, whole once its closing brace is.
to_result_and_exit() {
    python3 - "$@" <<'PY'
import subprocess, sys, time
start = time.monotonic()
with subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as p:
    out, result = [], None
    for line in p.stdout:
        out.append(line)
        if line.rstrip() == b"}" and result is None:
            result = time.monotonic() - start
    code = p.wait()
end = time.monotonic() - start
if code != 0:
    sys.exit(f"exit {code}")
sys.stderr.buffer.write(b"".join(out))
print(f"{result:.4f} {end:.4f}")
PY
}
