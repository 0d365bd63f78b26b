#!/usr/bin/env bash
# A real single-node Kubernetes 1.20 on loopback, from Debian's registry only,
# for the kubernetes provider's tests (tests/kubernetes.rs). See README.md.
#
#   cluster.sh build    compile it once per machine (cached under target/k8s-cluster)
#   cluster.sh start    start it as root; prints the env file to source
#   cluster.sh stop     stop it and leave nothing behind
#   cluster.sh status   say whether it runs, and where its env file is
#   cluster.sh env      print the env file's path (fails when not running)
set -euo pipefail
# SANDDUNE_K8S_TRACE=1: trace with timestamps.
[ -z "${SANDDUNE_K8S_TRACE:-}" ] || { PS4='+ $EPOCHREALTIME '; set -x; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${SANDDUNE_K8S_CACHE:-$root/target/k8s-cluster}
bin=$cache/bin
# Everything a running cluster owns lives here, removed by `stop`.
state=${SANDDUNE_K8S_STATE:-/run/sanddune-k8s}
# kubelet 1.20 refuses a loopback --node-ip, but takes a node name that is
# an IP as the node's InternalIP: the API server reaches kubelet (exec, logs)
# on 127.0.0.1.
node=127.0.0.1
namespace=sanddune-ci
image_src=${SANDDUNE_K8S_IMAGE_SRC:-sanddune-test:latest}
image=sanddune-test:ci
pause_image=sanddune.local/pause:3.2
# Loopback ports, away from the defaults so a kind or kubeadm cluster can
# share the machine.
api_port=16443
etcd_port=12379
etcd_peer_port=12380
kubelet_port=10250
# Pods: a bridge with no address on the host and no default route in the pod,
# so pods reach nothing; the service range is bookkeeping only (no kube-proxy).
pod_subnet=172.31.250.0/24
service_range=172.31.251.0/24
bridge=sanddune-k8s0
# The build recipe's version: bump it when build() changes what it produces.
recipe=2

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- build

src_list=/etc/apt/sources.list.d/sanddune-k8s-src.sources
build_packages=(golang-go golang-github-modern-go-reflect2-dev dpkg-dev gcc libc6-dev
    etcd-server containerd runc containernetworking-plugins openssl iproute2 curl)

apt_ready() {
    # The source package needs a deb-src line for the mirror the machine uses.
    if [ ! -f "$src_list" ]; then
        cat >"$src_list" <<'EOF'
# Written by sanddune's tests/k8s-cluster/cluster.sh: the kubernetes source package.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt-get update -q
    elif ! apt-cache showsrc kubernetes >/dev/null 2>&1; then
        apt-get update -q
    fi
}

install_packages() {
    local missing=() p
    for p in "${build_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt_ready
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
}

build() {
    [ "$(id -u)" = 0 ] || die "build installs Debian packages: run it as root"
    install_packages
    local stamp=$cache/build.stamp want
    # The stamp names the recipe, Go and the source version last built: with
    # it and the binaries present, build returns here without asking apt.
    want="recipe=$recipe go=$(go env GOVERSION) src=$(cat "$cache/src-version" 2>/dev/null || echo none)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && all_binaries_present; then
        log "built already ($want)"
        return 0
    fi
    apt_ready
    local version
    version=$(apt-cache showsrc kubernetes | sed -n 's/^Version: //p' | sort -V | tail -1)
    [ -n "$version" ] || die "no kubernetes source package in the apt lists"
    mkdir -p "$cache/src" "$bin"
    local tree=$cache/src/kubernetes-$version
    if [ ! -f "$tree/.sanddune-unpacked" ]; then
        log "fetching the kubernetes $version source package"
        rm -rf "$cache/src"/*
        (cd "$cache/src" && apt-get source -q "kubernetes=$version" >"$cache/src/apt-source.log" 2>&1) \
            || { cat "$cache/src/apt-source.log" >&2; die "apt-get source failed"; }
        local dir
        dir=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
        [ -n "$dir" ] || die "apt-get source left no kubernetes-* directory"
        [ "$dir" = "$tree" ] || mv "$dir" "$tree"
        touch "$tree/.sanddune-unpacked"
    fi
    echo "$version" >"$cache/src-version"

    # reflect2 1.0.1 reads the runtime's internals by name and crashes under
    # Go >= 1.18; Debian's 1.0.2 is API-compatible. (vendor/modules.txt still
    # says 1.0.1: the GOPATH-mode build below does not read it.)
    local reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
    [ -f "$reflect2/reflect2.go" ] || die "no $reflect2 (golang-github-modern-go-reflect2-dev)"
    rm -rf "$tree/vendor/github.com/modern-go/reflect2"
    mkdir -p "$tree/vendor/github.com/modern-go/reflect2"
    find "$reflect2" -maxdepth 1 -type f -name '*.go' ! -name '*_test.go' \
        -exec cp {} "$tree/vendor/github.com/modern-go/reflect2/" \;

    # The version the binaries report, as hack/lib/version.sh sets it (GOPATH
    # mode: the staging packages' import paths are under vendor/).
    local upstream=${version#*really}; upstream=${upstream%%-*}
    local major=${upstream%%.*} minor=${upstream#*.}; minor=${minor%%.*}
    local ld="-s -w" pkg
    for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version \
        k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
        ld+=" -X $pkg.gitVersion=v$upstream -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ld+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    log "compiling kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl with $(go env GOVERSION) (about 6 minutes on 2 cores)"
    # GOPATH mode with vendor/, as upstream's hack/lib/golang.sh and Debian's
    # rules build 1.20: in module mode Go >= 1.17 wants go.mod updated first.
    mkdir -p "$cache/gopath/src/k8s.io"
    ln -sfn "$tree" "$cache/gopath/src/k8s.io/kubernetes"
    (
        cd "$cache/gopath/src/k8s.io/kubernetes"
        export GOPATH=$cache/gopath GO111MODULE=off GOFLAGS='' GOCACHE=$cache/gocache GOPROXY=off
        gen_openapi
        go build -ldflags "$ld" -o "$bin/" \
            ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler \
            ./cmd/kubelet ./cmd/kubectl
    )
    # The pod sandbox's process, from the same tree.
    gcc -Os -static -o "$bin/pause" "$tree/build/pause/linux/pause.c" -DVERSION="$upstream-sanddune"
    strip "$bin/pause"
    all_binaries_present || die "the build left a binary out"
    echo "${want% src=*} src=$version" >"$stamp"
    log "built into $bin"
}

# The API server's OpenAPI definitions are generated at build time (upstream's
# Makefile.generated_files, gen_openapi, KUBE target); the other generated
# files are in the tarball. Runs in the tree, in GOPATH mode.
gen_openapi() {
    local out=pkg/generated/openapi/zz_generated.openapi.go dirs
    [ -f "$out" ] && return 0
    log "generating $out"
    go build -o "$cache/tools/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
    # Every package with a +k8s:openapi-gen tag, staging named as vendor/,
    # less the code-generator and sample-apiserver examples.
    dirs=$(find -H . \( -path './_*' -o -path './.*' -o -path ./vendor -o -path ./debian \) -prune \
            -o -type f -name '*.go' -print |
        sed -e 's|^\./staging/src|vendor|' -e 's|^\./||' |
        xargs grep -l '^// *+k8s:' |
        grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
        xargs grep -l '+k8s:openapi-gen=' |
        xargs -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)
    "$cache/tools/openapi-gen" --logtostderr -i "$dirs" \
        -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
        -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
        -r "$cache/openapi-violations.report" >"$cache/openapi-gen.log" 2>&1 ||
        { tail -20 "$cache/openapi-gen.log" >&2; die "openapi-gen failed"; }
}

all_binaries_present() {
    local b
    for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl pause; do
        [ -x "$bin/$b" ] || return 1
    done
}

# ---------------------------------------------------------------- start

pki=$state/pki
sock=$state/containerd/containerd.sock
# containerd's root (images, snapshots) is kept between runs beside the
# binaries: removing it takes half a minute on this disk, and the images then
# need no import at the next start. stop deletes every container in it.
ctrd_root=$cache/containerd
ctr_() { ctr --address "$sock" --namespace k8s.io "$@"; }
kc_admin() { "$bin/kubectl" --kubeconfig "$state/admin.kubeconfig" --cache-dir "$state/kubectl-cache" "$@"; }

# Starts a daemon that outlives this script: from / (a deleted working
# directory breaks some), in a session of its own, with no descriptor of ours.
daemon() {
    local name=$1; shift
    (cd / && exec setsid nohup "$@") </dev/null >"$state/log/$name.log" 2>&1 &
    echo $! >"$state/pid/$name"
}

wait_for() { # what seconds command...: fails early when a daemon died
    local what=$1 secs=$2 i f; shift 2
    for ((i = 0; i < secs * 4; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        for f in "$state"/pid/*; do
            if [ -f "$f" ] && ! alive "$(cat "$f")"; then
                tail -5 "$state/log/${f##*/}.log" >&2
                die "${f##*/} exited while waiting for $what"
            fi
        done
        sleep 0.25
    done
    die "no $what after ${secs}s (logs: $state/log)"
}

# A key and a certificate signed by the cluster's CA. EC keys: fast to make.
cert() { # name subject extendedKeyUsage [subjectAltName]
    local name=$1 subj=$2 eku=$3 san=${4:-}
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -keyout "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
    {
        echo "basicConstraints = critical, CA:FALSE"
        echo "keyUsage = critical, digitalSignature, keyEncipherment"
        echo "extendedKeyUsage = $eku"
        [ -z "$san" ] || echo "subjectAltName = $san"
    } >"$pki/$name.ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
        -set_serial "0x$(openssl rand -hex 8)" -days 365 -extfile "$pki/$name.ext" \
        -out "$pki/$name.crt" 2>/dev/null
    rm "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
    mkdir -p "$pki"
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
        -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 365 -subj "/CN=sanddune-k8s-ca" \
        -addext "basicConstraints = critical, CA:TRUE" \
        -addext "keyUsage = critical, keyCertSign, cRLSign, digitalSignature" 2>/dev/null
    # The kubernetes service's address: the range's first (a /24 here).
    local svc_ip=${service_range%/*}
    svc_ip=${svc_ip%.*}.1
    cert apiserver "/CN=kube-apiserver" serverAuth \
        "IP:127.0.0.1, IP:$svc_ip, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local"
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    cert kubelet "/CN=$node" serverAuth "IP:127.0.0.1, DNS:localhost"
    cert kubelet-client "/O=system:nodes/CN=system:node:$node" clientAuth
    cert controller-manager "/CN=system:kube-controller-manager" clientAuth
    cert scheduler "/CN=system:kube-scheduler" clientAuth
    # The service accounts' token signing key.
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$pki/sa.key" 2>/dev/null
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    # Static bearer tokens: an admin, and the restricted user the tests run as.
    admin_token=$(openssl rand -hex 24)
    user_token=$(openssl rand -hex 24)
    {
        echo "$admin_token,sanddune-admin,sanddune-admin,system:masters"
        echo "$user_token,sanddune-ci,sanddune-ci,"
    } >"$pki/tokens.csv"
    chmod 600 "$pki"/*.key "$pki/tokens.csv"
}

kubeconfig() { # file user-entry-yaml [namespace]
    local ns=${3:+"    namespace: $3"}
    cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sanddune-k8s
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: user
  user:
$2
contexts:
- name: sanddune-k8s
  context:
    cluster: sanddune-k8s
    user: user
$ns
current-context: sanddune-k8s
KC
}

cert_user() { # name: client cert and key inline
    printf '    client-certificate-data: %s\n    client-key-data: %s' \
        "$(base64 -w0 "$pki/$1.crt")" "$(base64 -w0 "$pki/$1.key")"
}

make_kubeconfigs() {
    kubeconfig "$state/admin.kubeconfig" "    token: $admin_token"
    kubeconfig "$state/user.kubeconfig" "    token: $user_token" "$namespace"
    kubeconfig "$state/kubelet.kubeconfig" "$(cert_user kubelet-client)"
    kubeconfig "$state/controller-manager.kubeconfig" "$(cert_user controller-manager)"
    kubeconfig "$state/scheduler.kubeconfig" "$(cert_user scheduler)"
    chmod 600 "$state"/*.kubeconfig
    # A throwaway loopback cluster: the non-root tests' user reads this one.
    chmod 644 "$state/user.kubeconfig"
}

fill() { # template -> stdout
    sed -e "s|@STATE@|$state|g" -e "s|@PAUSE_IMAGE@|$pause_image|g" \
        -e "s|@BRIDGE@|$bridge|g" -e "s|@POD_SUBNET@|$pod_subnet|g" \
        -e "s|@KUBELET_PORT@|$kubelet_port|g" -e "s|@CTRD_ROOT@|$ctrd_root|g" "$here/$1"
}

# The pause image, a single layer holding build/pause's static binary, as a
# `docker save` archive that `ctr images import` takes.
pause_archive() {
    local dir=$state/pause-image layer_sha config_sha
    mkdir -p "$dir/rootfs" "$dir/out"
    cp "$bin/pause" "$dir/rootfs/pause"
    tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$dir/rootfs" -cf "$dir/out/layer.tar" pause
    layer_sha=$(sha256sum "$dir/out/layer.tar" | cut -d' ' -f1)
    printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
        "$layer_sha" >"$dir/config.json"
    config_sha=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
    mv "$dir/config.json" "$dir/out/$config_sha.json"
    printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' \
        "$config_sha" "$pause_image" >"$dir/out/manifest.json"
    tar -C "$dir/out" -cf "$dir/pause.tar" .
    echo "$dir/pause.tar"
}

docker_up() {
    curl -sf -m 2 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1 && return 0
    # As .ci/run starts it: iptables is unavailable in these machines' network namespace.
    log "starting dockerd"
    (cd / && exec nohup dockerd --iptables=false) </dev/null >/tmp/dockerd.log 2>&1 &
    wait_for "docker" 60 curl -sf -m 2 --unix-socket /var/run/docker.sock http://d/_ping
}

# The test image, from docker into containerd under a tag that is not
# :latest (kubelet always pulls :latest, and nothing can be pulled here).
import_test_image() {
    docker_up
    docker image inspect "$image_src" >/dev/null 2>&1 || bash "$root/tests/images/build.sh" docker
    local id
    id=$(docker image inspect -f '{{.Id}}' "$image_src")
    if [ "$(cat "$ctrd_root/sanddune-test.id" 2>/dev/null)" = "$id" ] &&
        [ -n "$(ctr_ images ls -q "name==docker.io/library/$image")" ]; then
        return 0
    fi
    docker tag "$image_src" "$image"
    docker save "$image" | ctr_ images import - >/dev/null
    echo "$id" >"$ctrd_root/sanddune-test.id"
}

running() {
    [ -f "$state/pid/kube-apiserver" ] && alive "$(cat "$state/pid/kube-apiserver")"
}

start() {
    [ "$(id -u)" = 0 ] || die "start needs root"
    all_binaries_present || die "not built: run $0 build first"
    if running; then
        log "already running"
        echo "$state/env"
        return 0
    fi
    [ ! -e "$state" ] || stop
    local t0=$SECONDS
    # A start that fails keeps its logs in target/ and leaves nothing running.
    trap start_failed EXIT
    mkdir -p "$state"
    # The state dir is a mount of its own, so that stop's `umount -R` takes
    # every mount the cluster made under it (pod volumes, netns files).
    mount --bind "$state" "$state"
    mount --make-private "$state"
    chmod 755 "$state"
    mkdir -p "$state/log" "$state/pid" "$state/cni" "$state/kubelet"
    # kubelet sets these kernel tunables; stop puts them back.
    sysctl -n vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
        kernel.keys.root_maxkeys kernel.keys.root_maxbytes >"$state/sysctls"
    # kubelet 1.20 writes the pods' logs there whatever --root-dir says; stop
    # removes what was not there before.
    ls -A /var/log/pods >"$state/var-log-pods.before" 2>/dev/null || true
    ls -A /var/log/containers >"$state/var-log-containers.before" 2>/dev/null || true
    [ -d /var/log/pods ] || touch "$state/made-var-log-pods"
    [ -d /var/log/containers ] || touch "$state/made-var-log-containers"
    [ -d /var/lib/cni ] || touch "$state/made-var-lib-cni"
    # kubelet 1.20's device plugin socket is there whatever --root-dir says.
    [ -d /var/lib/kubelet ] || touch "$state/made-var-lib-kubelet"

    # Flags and settings that came or went between 1.20 and the newest
    # release, chosen by what the binaries say of themselves.
    # (kube-apiserver's --insecure-port has done nothing since 1.20.)
    local minor kcm_port=() scheduler_port=() node_flags=()
    minor=$("$bin/kube-apiserver" --version | sed -n 's/^Kubernetes v1\.\([0-9]*\).*/\1/p')
    [ -n "$minor" ] || die "cannot read kube-apiserver's version"
    # The controllers' insecure ports, until 1.24: open unless turned off.
    has_flag kube-controller-manager --port && kcm_port=(--port 0)
    has_flag kube-scheduler --port && scheduler_port=(--port 0)
    has_flag kubelet --container-runtime && node_flags+=(--container-runtime remote)
    has_flag kubelet --pod-infra-container-image && node_flags+=(--pod-infra-container-image "$pause_image")

    make_pki
    make_kubeconfigs
    printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$state/resolv.conf"
    fill containerd.toml >"$state/containerd.toml"
    fill kubelet.yaml >"$state/kubelet.yaml"
    # From 1.31 kubelet refuses this machine's cgroup v1 controllers unless told.
    [ "$minor" -lt 31 ] || echo "failCgroupV1: false" >>"$state/kubelet.yaml"
    fill cni.conflist >"$state/cni/10-sanddune.conflist"

    # etcd-server's etcd, loopback only, no TLS (nothing else can reach it).
    daemon etcd etcd --name sanddune --data-dir "$state/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster "sanddune=http://127.0.0.1:$etcd_peer_port" \
        --logger zap --log-outputs stderr
    daemon containerd containerd --config "$state/containerd.toml"

    daemon kube-apiserver "$bin/kube-apiserver" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --cert-dir "$state/apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --client-ca-file "$pki/ca.crt" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$pki/ca.crt" \
        --kubelet-preferred-address-types InternalIP \
        --token-auth-file "$pki/tokens.csv" \
        --authorization-mode Node,RBAC \
        --enable-admission-plugins NodeRestriction \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-signing-key-file "$pki/sa.key" \
        --service-account-key-file "$pki/sa.pub" \
        --service-cluster-ip-range "$service_range" \
        --endpoint-reconciler-type none \
        --allow-privileged=true --profiling=false

    # Meanwhile: the pause image into containerd.
    wait_for "containerd" 30 ctr_ version
    remove_containers
    ctr_ images import "$(pause_archive)" >/dev/null
    # And the test image, in the background (docker save takes a while).
    (import_test_image) >"$state/log/import.log" 2>&1 &
    local import_pid=$!

    wait_for "kube-apiserver" 60 curl -sf -m 2 --cacert "$pki/ca.crt" \
        -H "Authorization: Bearer $admin_token" "https://127.0.0.1:$api_port/readyz"

    daemon kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$state/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 "${kcm_port[@]}" --secure-port 0 --leader-elect=false \
        --use-service-account-credentials \
        --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
        --cert-dir "$state/controller-manager" \
        --flex-volume-plugin-dir "$state/controller-manager/volume-plugins"
    daemon kube-scheduler "$bin/kube-scheduler" \
        --kubeconfig "$state/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 "${scheduler_port[@]}" --secure-port 0 --leader-elect=false \
        --cert-dir "$state/scheduler"
    # AWS_EC2_METADATA_DISABLED: kubelet 1.20's in-tree credential lookups
    # otherwise ask the cloud metadata address at every start.
    daemon kubelet env AWS_EC2_METADATA_DISABLED=true "$bin/kubelet" \
        --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
        --root-dir "$state/kubelet" --cert-dir "$state/kubelet/pki" \
        --volume-plugin-dir "$state/kubelet/volume-plugins" \
        "${node_flags[@]}" --container-runtime-endpoint "unix://$sock" \
        --hostname-override "$node" --v 1

    # The Role the docs ask for, as a ClusterRole that a RoleBinding grants
    # per namespace (the tests bind it in namespaces of their own).
    kc_admin apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $namespace}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sanddune}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [create, get, list, delete]
  - apiGroups: [""]
    resources: [pods/exec]
    verbs: [create, get]
  - apiGroups: [extensions.agents.x-k8s.io]
    resources: [sandboxclaims]
    verbs: [create, get, list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sanddune, namespace: $namespace}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sanddune}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: sanddune-ci}
YAML

    # Ready: the node schedulable with no taint left, and the namespace's
    # default service account holding its token (pods are refused before).
    wait_for "Ready node" 60 node_ready
    wait_for "default service account" 60 sa_ready "$namespace" "$minor"
    wait "$import_pid" || { cat "$state/log/import.log" >&2; die "importing $image failed"; }

    cat >"$state/env" <<ENV
export SANDDUNE_TEST_KUBECONFIG=$state/user.kubeconfig
export SANDDUNE_TEST_K8S_ADMIN_KUBECONFIG=$state/admin.kubeconfig
export SANDDUNE_TEST_K8S_IMAGE=$image
export SANDDUNE_TEST_K8S_NAMESPACE=$namespace
export SANDDUNE_TEST_K8S_KUBECTL=$bin/kubectl
ENV
    chmod 644 "$state/env"
    trap - EXIT
    log "running in $((SECONDS - t0))s; source $state/env"
    echo "$state/env"
}

start_failed() {
    rm -rf "$cache/failed-start-logs"
    cp -r "$state/log" "$cache/failed-start-logs" 2>/dev/null || true
    log "start failed; logs in $cache/failed-start-logs; stopping"
    stop
}

node_ready() {
    local out
    out=$(kc_admin get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}') || return 1
    [ "$out" = "True " ]
}

# Before 1.24 a pod is refused until its service account's token secret
# exists; from 1.24 there is no such secret, the account is enough.
sa_ready() { # namespace minor
    local secret
    secret=$(kc_admin -n "$1" get serviceaccount default -o jsonpath='{.secrets[0].name}' 2>/dev/null) || return 1
    [ "$2" -ge 24 ] || [ -n "$secret" ]
}

# Whether `$bin/$1 --help` lists flag $2.
# The help is read whole first: with pipefail, `--help | grep -q` fails
# whenever grep exits at its match before the binary has written the rest
# (SIGPIPE), which a loaded machine makes likely, and the kubelet then
# started on docker instead of this cluster's containerd.
has_flag() {
    local help
    help=$("$bin/$1" --help 2>&1) || true
    grep -qE -- "^ +$2( |=|\$)" <<<"$help"
}


# ---------------------------------------------------------------- stop

# Alive and not a zombie (this machine's init reaps orphans late).
alive() {
    local st
    st=$(sed -n 's/^State:\t\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

stop_daemons() { # names...: TERM all, then KILL what is left after 10 s
    local name pids=() pid i left
    for name in "$@"; do
        [ -f "$state/pid/$name" ] && pids+=("$(cat "$state/pid/$name")")
        rm -f "$state/pid/$name"
    done
    [ ${#pids[@]} -gt 0 ] || return 0
    kill "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
        left=0
        for pid in "${pids[@]}"; do alive "$pid" && left=1; done
        [ "$left" = 1 ] || return 0
        sleep 0.25
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
}

# Every container (and sandbox) with its task and snapshot: at stop, and at
# start for what a run that was not stopped left in containerd's root.
remove_containers() {
    local ids id i
    # containerd's CRI plugin deletes a task itself once it has exited.
    for ((i = 0; i < 40; i++)); do
        ids=$(ctr_ tasks ls -q 2>/dev/null) || break
        [ -n "$ids" ] || break
        for id in $ids; do
            ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || ctr_ tasks delete "$id" >/dev/null 2>&1 || true
        done
        sleep 0.25
    done
    for id in $(ctr_ containers ls -q 2>/dev/null); do
        ctr_ containers delete "$id" >/dev/null 2>&1 || true
    done
}

# The processes of this cluster that no pid file names: containerd's shims
# (found by this containerd's socket in their arguments) and anything left
# in kubelet's pod cgroups.
stray_pids() {
    local p
    for p in /proc/[0-9]*; do
        tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $sock " && echo "${p#/proc/}"
    done
    cat /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/*/cgroup.procs \
        /sys/fs/cgroup/*/kubepods/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/*/cgroup.procs 2>/dev/null
    true
}

stop() {
    [ "$(id -u)" = 0 ] || die "stop needs root"
    [ -e "$state" ] || { log "not running"; return 0; }
    local id pid i f
    stop_daemons kubelet kube-scheduler kube-controller-manager
    # The pods' containers and sandboxes, while containerd still answers.
    if [ -S "$sock" ] && ctr_ version >/dev/null 2>&1; then
        remove_containers
    fi
    # The API server before etcd: without etcd it lingers past the TERM.
    stop_daemons kube-apiserver
    stop_daemons containerd etcd
    for pid in $(stray_pids | sort -u); do kill -9 "$pid" 2>/dev/null || true; done
    sleep 0.2
    # kubelet's cgroups, deepest first.
    for id in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
        if [ -d "$id" ]; then find "$id" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
    done
    # Pod volumes and network namespaces (their veths go with them), then the bridge.
    if mountpoint -q "$state"; then
        umount -R "$state" 2>/dev/null || umount -R -l "$state"
    fi
    ip link del "$bridge" 2>/dev/null || true
    # What kubelet and the CNI plugins write outside the state dir.
    for id in pods containers; do
        if [ -f "$state/made-var-log-$id" ]; then
            rm -rf "/var/log/$id"
        else
            for f in "/var/log/$id"/*; do
                [ -e "$f" ] || [ -L "$f" ] || continue
                grep -qxF -- "${f##*/}" "$state/var-log-$id.before" || rm -rf "$f"
            done
        fi
    done
    rm -f /var/lib/cni/results/sanddune-k8s-* /var/lib/cni/results/cni-loopback-*
    if [ -f "$state/made-var-lib-cni" ]; then rm -rf /var/lib/cni; fi
    if [ -f "$state/made-var-lib-kubelet" ]; then rm -rf /var/lib/kubelet; fi
    if [ -f "$state/sysctls" ]; then
        local names=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
            kernel.keys.root_maxkeys kernel.keys.root_maxbytes) values
        mapfile -t values <"$state/sysctls"
        for i in "${!names[@]}"; do sysctl -q -w "${names[$i]}=${values[$i]}" || true; done
    fi
    rm -rf "$state"
    log "stopped"
}

status() {
    if running; then
        echo "running; env: $state/env"
        kc_admin get nodes 2>/dev/null || true
    else
        echo "not running"
        return 3
    fi
}

case "${1:-}" in
    build) build ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) running || die "not running"; echo "$state/env" ;;
    *) die "usage: cluster.sh build|start|stop|status|env" ;;
esac
