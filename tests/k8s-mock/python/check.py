"""The official Kubernetes Python client against the mock: create, watch,
list with a label selector, exec with stdin over WebSocket (v4), errors,
delete. Prints `ok STEP` per step and `exec-ms N` (the mean wall time of an
exec of `true`); any exception fails the run. KUBECONFIG names the mock."""

import os
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

config.load_kube_config(os.environ["KUBECONFIG"])
api = client.CoreV1Api()
ns = "default"
name = "py-" + str(os.getpid())
labels = {"app": "k8s-mock-py", "run": name}

pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name=name, labels=labels),
    spec=client.V1PodSpec(
        restart_policy="Never",
        containers=[
            client.V1Container(
                name="main",
                image=os.environ.get("K8S_MOCK_IMAGE", "sanddune-test:latest"),
                command=["sleep", "infinity"],
                env=[client.V1EnvVar(name="GREETING", value="hello from env")],
                working_dir="/tmp",
            )
        ],
    ),
)
created = api.create_namespaced_pod(ns, pod)
assert created.metadata.name == name and created.status.phase == "Pending", created.status
print("ok create")

w = watch.Watch()
phases = []
for event in w.stream(
    api.list_namespaced_pod, ns, field_selector="metadata.name=" + name, timeout_seconds=60
):
    phases.append((event["type"], event["object"].status.phase))
    if event["object"].status.phase == "Running":
        ready = [c for c in event["object"].status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", event["object"].status.conditions
        w.stop()
assert phases[-1][1] == "Running", phases
print("ok watch running", phases)

found = api.list_namespaced_pod(ns, label_selector="app=k8s-mock-py,run=" + name)
assert [p.metadata.name for p in found.items] == [name], found.items
none = api.list_namespaced_pod(ns, label_selector="app=something-else")
assert none.items == [], none.items
print("ok list selector")

resp = stream(
    api.connect_get_namespaced_pod_exec, name, ns,
    command=["sh", "-c", 'read line; echo "out:$line:$GREETING:$(pwd)"; echo err >&2; exit 4'],
    stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False,
)
resp.write_stdin("hi\n")
out, err = "", ""
while resp.is_open():
    resp.update(timeout=1)
    out += resp.read_stdout()
    err += resp.read_stderr()
resp.close()
assert out == "out:hi:hello from env:/tmp\n", repr(out)
assert err == "err\n", repr(err)
assert resp.returncode == 4, resp.returncode
print("ok exec stdin stdout stderr exit")

text = stream(api.connect_get_namespaced_pod_exec, name, ns, command=["echo", "plain"],
              stderr=True, stdin=False, stdout=True, tty=False)
assert text == "plain\n", repr(text)
print("ok exec preloaded")

text = stream(api.connect_get_namespaced_pod_exec, name, ns,
              command=["sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty"],
              stderr=True, stdin=True, stdout=True, tty=True)
assert text.strip() == "is-a-tty", repr(text)
print("ok exec tty")

n = 20
started = time.monotonic()
for _ in range(n):
    stream(api.connect_get_namespaced_pod_exec, name, ns, command=["true"],
           stderr=True, stdin=False, stdout=True, tty=False)
print("exec-ms %.1f" % ((time.monotonic() - started) * 1000 / n))

try:
    api.read_namespaced_pod("nope", ns)
    raise AssertionError("a missing pod was found")
except ApiException as e:
    assert e.status == 404 and '"reason":"NotFound"' in e.body.replace(" ", ""), (e.status, e.body)
print("ok not found")

api.delete_namespaced_pod(name, ns, grace_period_seconds=0, propagation_policy="Background")
try:
    api.read_namespaced_pod(name, ns)
    raise AssertionError("the deleted pod is still there")
except ApiException as e:
    assert e.status == 404, e.status
print("ok delete")
