# The cluster a kubernetes bench runs on (sourced by k8s_cluster.sh and
# k8s_pool.sh, with $root and $work set): with SANDDUNE_TEST_KUBECONFIG set,
# that real cluster (SANDDUNE_TEST_K8S_IMAGE, an image it can pull with the
# test fakes, and SANDDUNE_TEST_K8S_NAMESPACE); else the loopback mock of
# tests/k8s-mock, whose pods are docker containers of sanddune-test:latest.
# Sets KUBECONFIG, $image, $namespace, $target (words for the report) and
# $mock_pid (the mock's process, for the caller's clean-up; empty on a real
# cluster).
k8s_target() {
  mock_pid=
  if [ -n "${SANDDUNE_TEST_KUBECONFIG:-}" ]; then
    [ -n "${SANDDUNE_TEST_K8S_IMAGE:-}" ] || {
      echo "set SANDDUNE_TEST_K8S_IMAGE to an image the cluster can pull with the test fakes" >&2
      exit 2
    }
    export KUBECONFIG=$SANDDUNE_TEST_KUBECONFIG
    image=$SANDDUNE_TEST_K8S_IMAGE namespace=${SANDDUNE_TEST_K8S_NAMESPACE:-default}
    target="the real cluster of $(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | tail -1)"
  else
    (cd "$root" && cargo build -q -p k8s-mock --bin k8s-mock)
    "$root/target/debug/k8s-mock" "$work/kubeconfig" > "$work/mock.out" 2>&1 &
    mock_pid=$!
    for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
    export KUBECONFIG="$work/kubeconfig"
    image=sanddune-test:latest namespace=default target="the k8s mock"
  fi
}
