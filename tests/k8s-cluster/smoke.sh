#!/usr/bin/env bash
# Checks a started cluster (cluster.sh start) as the tests' restricted user:
# a pod of the test image becomes Ready without a pull, exec works with and
# without stdin, the pod has no route out, the user is refused what the Role
# does not grant, and the pod deletes. Any user may run it.
#
#   tests/k8s-cluster/smoke.sh [KUBECTL]   (default: the cluster's 1.20 kubectl)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1090
source "$(bash "$here/cluster.sh" env)"
kubectl=${1:-$SANDDUNE_TEST_K8S_KUBECTL}
# kubectl's discovery cache in a temporary dir, not the user's ~/.kube.
cache=$(mktemp -d)
k() { "$kubectl" --kubeconfig "$SANDDUNE_TEST_KUBECONFIG" --cache-dir "$cache" "$@"; }
pod=smoke-$$
cleanup() {
    k delete pod "$pod" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    rm -rf "$cache"
}
trap cleanup EXIT
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }

k run "$pod" --image="$SANDDUNE_TEST_K8S_IMAGE" --image-pull-policy=IfNotPresent \
    --restart=Never --command -- sleep 600 >/dev/null
# The Role grants no watch: poll.
for _ in $(seq 240); do
    [ "$(k get pod "$pod" -o jsonpath='{.status.containerStatuses[0].ready}')" = true ] && break
    sleep 0.25
done
[ "$(k get pod "$pod" -o jsonpath='{.status.containerStatuses[0].ready}')" = true ] ||
    fail "pod not Ready: $(k get pod "$pod" -o jsonpath='{.status}')"

[ "$(k exec "$pod" -- sh -c 'echo hi')" = hi ] || fail "exec"
[ "$(echo data | k exec -i "$pod" -- cat)" = data ] || fail "exec with stdin"
# No default route, and a connection out fails at once.
# shellcheck disable=SC2016
[ -z "$(k exec "$pod" -- awk 'NR > 1 && $2 == "00000000"' /proc/net/route)" ] || fail "pod has a default route"
if k exec "$pod" -- curl -s -m 5 -o /dev/null http://8.8.8.8/ 2>/dev/null; then fail "pod reached 8.8.8.8"; fi
if out=$(k get secrets 2>&1); then fail "listing secrets was allowed"; fi
case $out in *Forbidden*) ;; *) fail "listing secrets: $out" ;; esac
k delete pod "$pod" --grace-period=0 --force --wait=false >/dev/null 2>&1
echo "smoke: ok ($("$kubectl" version --client --short 2>/dev/null || "$kubectl" version --client 2>/dev/null | head -1))"
