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

bin=${1:-}
if [ -z "$bin" ]; then
  for b in "$root/target/release/sanddune" "$root/target/debug/sanddune"; do
    [ -x "$b" ] && bin=$b && break
  done
fi
[ -x "${bin:-}" ] || { echo "build sanddune first (cargo build --release)" >&2; exit 2; }

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

mkdir -p "$work/home/bin" "$work/repo"
ln -s "$root/tests/fakes/workflow-claude" "$work/home/bin/claude"
ln -s "$root/tests/fakes/gh" "$work/home/bin/gh"
echo 0.05 > "$work/home/fake-sleep"
python3 -c 'import json; print(json.dumps([{"id": str(i), "title": f"task {i}"} for i in range(1, 17)]))' \
  > "$work/home/issues.json"
real_home=$HOME
export HOME="$work/home" PATH="$work/home/bin:$PATH"
export SANDDUNE_CACHE_DIR="$root/target/tmp/component-cache"
export ANTHROPIC_API_KEY=sk-ant-bench-fake
cd "$work/repo"
git init -q -b main
echo "# bench" > README.md
git add README.md
git -c user.name=b -c user.email=b@b.invalid commit -q -m initial
"$bin" init --agent claude-code --sandbox docker --backlog github-issues \
  --template parallel-planner --no-build > /dev/null
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
printf 'GIT_AUTHOR_NAME=a\nGIT_AUTHOR_EMAIL=a@a.invalid\nGIT_COMMITTER_NAME=a\nGIT_COMMITTER_EMAIL=a@a.invalid\n' > .sanddune/.env
git add .sanddune
git -c user.name=b -c user.email=b@b.invalid commit -q -m "sanddune init"
base=$(git rev-parse HEAD)

echo "16-item parallel-planner, implement step in pods on the k8s mock, $(nproc) cores"
declare -A rss
for n in 1 4 16; do
  git reset -q --hard "$base"
  git for-each-ref --format='%(refname:short)' 'refs/heads/sanddune/' | xargs -r git branch -q -D
  # Wall time and the child's peak RSS (KiB), measured by python's rusage.
  read -r wall kib < <(python3 - "$bin" "$n" "$work" <<'PY'
import resource, subprocess, sys, time
bin, n, work = sys.argv[1:]
start = time.monotonic()
with open(f"{work}/result.json", "w") as out, open(f"{work}/stderr.txt", "w") as err:
    code = subprocess.call([bin, "workflow", "run", "parallel-planner", "--parallel", n, "--json"], stdout=out, stderr=err)
wall = time.monotonic() - start
if code != 0:
    sys.stderr.write(open(f"{work}/stderr.txt").read())
    sys.exit(code)
print(f"{wall:.2f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
PY
)
  rss[$n]=$kib
  landed=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(q["status"]=="landed" for q in r["steps"][2]["merge"]))' "$work/result.json")
  printf -- '--parallel %-2s  %6.2f s  peak RSS %5.1f MiB  (%s branches landed)\n' "$n" "$wall" "$(echo "$kib / 1024" | bc -l)" "$landed"
done
printf 'each concurrent item adds %.2f MiB of peak RSS (16 at once against 1 at a time)\n' \
  "$(echo "(${rss[16]} - ${rss[1]}) / 15 / 1024" | bc -l)"

cd "$root"
HOME=$real_home cargo bench -q -p sanddune --bench k8s_exec
