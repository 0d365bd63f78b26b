#!/usr/bin/env bash
# The kubernetes sandbox provider at scale, on the loopback mock
# (tests/k8s-mock, pods backed by docker containers of sanddune-test:latest)
# or, with SANDDUNE_TEST_KUBECONFIG set, on that real cluster.
#
# A 16-item parallel-planner workflow whose implement step runs in pods,
# at --parallel 1, 4 and 16: wall time, and the peak memory (max RSS) of
# the one sanddune process driving the fan-out, with what each concurrent
# item adds. Then the time to a Ready pod and the per-exec overhead against
# kube-rs alone (cargo bench --bench k8s_exec).
#
#   host/benches/k8s_cluster.sh [path/to/sanddune]   (default: target/release, else target/debug)
#
# On the real cluster of tests/k8s-cluster (as root: cluster.sh build &&
# cluster.sh start), its env file names the kubeconfig, the namespace and
# the image:
#
#   source /run/sanddune-k8s/env && host/benches/k8s_cluster.sh
#
# Any other cluster: SANDDUNE_TEST_KUBECONFIG, SANDDUNE_TEST_K8S_NAMESPACE and
# SANDDUNE_TEST_K8S_IMAGE (an image it can pull with the test fakes, not
# :latest, which is always pulled). The integration suite runs there too:
# cargo test -p sanddune --test kubernetes -- real::
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

source "$root/host/benches/lib/fanout.sh"
bin=$(sanddune_bin "${1:-}")

work=$(mktemp -d)
mock_pid=
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
source "$root/host/benches/lib/k8s_target.sh"
k8s_target

real_home=$HOME
fanout_home
cd "$work/repo"
fanout_scaffold
# The planner on the host; each task in a pod of the test image, whose fake
# claude adds a note and commits.
python3 - .sanddune/workflows/parallel-planner.toml "$image" "$namespace" <<'PY'
import sys
p = sys.argv[1]
t = open(p).read()
t = t.replace('name = "plan"\n', 'name = "plan"\nsandbox = "test-isolated"\n', 1)
t = t.replace('name = "implement"\n', 'name = "implement"\nsandbox = "kubernetes"\nsandboxOptions = { image = "%s", namespace = "%s" }\n' % (sys.argv[2], sys.argv[3]), 1)
t = "\n".join('promptArgs = { TASK_ID = "{{item.id}}" }' if l.startswith("promptArgs") else l for l in t.splitlines())
open(p, "w").write(t + "\n")
PY
# A note of its own per task, so that every branch has something to land.
printf 'implement task {{TASK_ID}}\nFAKE:file:notes/{{TASK_ID}}.md\n' > .sanddune/prompts/implement.md
base=$(fanout_commit)

echo "16-item parallel-planner, implement step in pods on $target, $(nproc) cores"
declare -A rss
for n in 1 4 16; do
  round=$(fanout_round "$base" "$n")
  fanout_print "$n" $round
  rss[$n]=$(echo "$round" | cut -d' ' -f2)
done
printf 'each concurrent item adds %.2f MiB of peak RSS (16 at once against 1 at a time)\n' \
  "$(echo "(${rss[16]} - ${rss[1]}) / 15 / 1024" | bc -l)"

# One-iteration runs: the fake claude commits a note in its pod.
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for _ in 1 2 3 4 5; do
  start=$(date +%s.%N)
  "$bin" run --sandbox kubernetes --agent claude-code --prompt "add a note" \
    --sandbox-opt "image=$image" --sandbox-opt "namespace=$namespace" >/dev/null 2>&1
  echo "$(date +%s.%N) - $start" | bc -l
done | median | xargs printf 'a one-iteration run, median of 5: %.2f s\n'

# kubectl's exec of `true` in a pod of the same image, as a user times it
# (a process per exec).
pod=sanddune-bench-kubectl-$$
kubectl -n "$namespace" run "$pod" --image="$image" --image-pull-policy=IfNotPresent \
  --restart=Never --command -- sleep infinity >/dev/null
until [ "$(kubectl -n "$namespace" get pod "$pod" -o 'jsonpath={.status.phase}')" = Running ]; do sleep 0.2; done
for _ in $(seq 20); do
  start=$(date +%s.%N)
  kubectl -n "$namespace" exec "$pod" -- true
  echo "($(date +%s.%N) - $start) * 1000" | bc -l
done | median | xargs printf 'kubectl exec of `true`, median of 20: %.2f ms\n'
kubectl -n "$namespace" delete pod "$pod" --wait=false >/dev/null

cd "$root"
HOME=$real_home cargo bench -q -p sanddune --bench k8s_exec
