#!/usr/bin/env bash
# The kubernetes sandbox provider at scale, on the loopback mock
# (tests/k8s-mock, pods backed by docker containers of sanddune-test:latest)
# or, with KUBECONFIG set, on a real cluster.
#
# On the mock (the default): a 16-item parallel-planner workflow whose
# implement step runs in pods, at --parallel 1, 4 and 16: wall time, and the
# peak memory (max RSS) of the one sanddune process driving the fan-out,
# with what each concurrent item adds. Then the per-exec overhead
# (cargo bench --bench k8s_exec).
#
#   host/benches/k8s_cluster.sh [path/to/sanddune]   (default: target/release, else target/debug)
#
# On a real cluster: KUBECONFIG names it and SANDDUNE_TEST_K8S_IMAGE an image
# the cluster can pull that holds the test fakes (build it with
# `tests/images/build.sh docker`, tag it other than :latest, which is
# always pulled, and `kind load docker-image` it or push it to a registry). The integration suite
# (tests/kubernetes.rs) runs against it, in SANDDUNE_TEST_K8S_NAMESPACE
# (default: the context's); the tests that need the mock's fault injection
# say so and are skipped.
#
#   KUBECONFIG=~/.kube/config SANDDUNE_TEST_K8S_IMAGE=registry/sanddune-test:1 host/benches/k8s_cluster.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

if [ -n "${KUBECONFIG:-}" ]; then
  [ -n "${SANDDUNE_TEST_K8S_IMAGE:-}" ] || {
    echo "set SANDDUNE_TEST_K8S_IMAGE to an image the cluster can pull with the test fakes" >&2
    exit 2
  }
  echo "the integration suite against $(kubectl config current-context 2>/dev/null || echo "the cluster in $KUBECONFIG")"
  cd "$root"
  export SANDDUNE_TEST_KUBECONFIG="$KUBECONFIG"
  exec cargo test -p sanddune --test kubernetes
fi

source "$root/host/benches/lib/fanout.sh"
bin=$(sanddune_bin "${1:-}")

work=$(mktemp -d)
mock_pid=
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
(cd "$root" && cargo build -q -p k8s-mock --bin k8s-mock)
"$root/target/debug/k8s-mock" "$work/kubeconfig" > "$work/mock.out" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
export KUBECONFIG="$work/kubeconfig"

real_home=$HOME
fanout_home
cd "$work/repo"
fanout_scaffold
# The planner on the host; each task in a pod of the test image, whose fake
# claude adds a note and commits.
python3 - .sanddune/workflows/parallel-planner.toml <<'PY'
import sys
p = sys.argv[1]
t = open(p).read()
t = t.replace('name = "plan"\n', 'name = "plan"\nsandbox = "test-isolated"\n', 1)
t = t.replace('name = "implement"\n', 'name = "implement"\nsandbox = "kubernetes"\nsandboxOptions = { image = "sanddune-test:latest" }\n', 1)
t = "\n".join('promptArgs = { TASK_ID = "{{item.id}}" }' if l.startswith("promptArgs") else l for l in t.splitlines())
open(p, "w").write(t + "\n")
PY
# A note of its own per task, so that every branch has something to land.
printf 'implement task {{TASK_ID}}\nFAKE:file:notes/{{TASK_ID}}.md\n' > .sanddune/prompts/implement.md
base=$(fanout_commit)

echo "16-item parallel-planner, implement step in pods on the k8s mock, $(nproc) cores"
declare -A rss
for n in 1 4 16; do
  round=$(fanout_round "$base" "$n")
  fanout_print "$n" $round
  rss[$n]=$(echo "$round" | cut -d' ' -f2)
done
printf 'each concurrent item adds %.2f MiB of peak RSS (16 at once against 1 at a time)\n' \
  "$(echo "(${rss[16]} - ${rss[1]}) / 15 / 1024" | bc -l)"

cd "$root"
HOME=$real_home cargo bench -q -p sanddune --bench k8s_exec
