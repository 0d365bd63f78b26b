#!/usr/bin/env bash
# A non-root user for the tests of sanddune's non-root paths (tests/non_root.rs):
# rootless Podman with the user's own API socket in its XDG_RUNTIME_DIR, and
# Docker through the `docker` group, each with the test image built for the
# user's UID/GID. Needs root, an existing rootfs from build.sh, and the
# engines' packages. Idempotent; prints the user's name last.
set -euo pipefail
user=${1:-sanddune-ci}
here=$(cd "$(dirname "$0")" && pwd)
rootfs=${SANDDUNE_TEST_ROOTFS:-/var/cache/sanddune-test-rootfs}

id -u "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
# Subordinate IDs for the rootless user namespace.
for f in /etc/subuid /etc/subgid; do
    grep -q "^$user:" "$f" 2>/dev/null || echo "$user:300000:65536" >>"$f"
done
usermod -aG docker "$user"
# Rootless networking (slirp4netns) opens /dev/net/tun, which distributions
# leave world-usable (0666) and these machines do not.
[ -c /dev/net/tun ] && chmod 0666 /dev/net/tun
run=/run/user/$uid
mkdir -p "$run/podman"
chown -R "$user:" "$run"
chmod 700 "$run"
# No systemd user session here: cgroupfs and file events; runc, as for root.
mkdir -p "$home/.config/containers"
cat >"$home/.config/containers/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
CONF
chown -R "$user:" "$home/.config"

as_user() {
    runuser -u "$user" -- env -u CONTAINER_HOST -u DOCKER_HOST HOME="$home" XDG_RUNTIME_DIR="$run" "$@"
}
socket=$run/podman/podman.sock
if ! as_user curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1; then
    # The redirections are the background subshell's own, so no descriptor
    # of this script's stdout stays open in it: a caller reading that
    # stdout (`$(non-root-user.sh)`) would otherwise wait for the service.
    (cd / && as_user nohup podman system service --time=0 "unix://$socket") \
        </dev/null >"/tmp/podman-$user.log" 2>&1 &
fi
for _ in $(seq 120); do
    as_user curl -sf --unix-socket "$socket" http://d/_ping >/dev/null 2>&1 && break
    sleep 0.5
done
as_user curl -sf --unix-socket "$socket" http://d/_ping >/dev/null

# The test image in the user's own storage (root reads the rootfs), and in
# Docker under its own tag, both with the user's UID/GID.
if ! as_user podman image inspect sanddune-test-base:latest >/dev/null 2>&1; then
    tar -C "$rootfs" -c . | as_user podman import - sanddune-test-base:latest >/dev/null
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/Dockerfile" "$ctx/Dockerfile"
mkdir "$ctx/fakes"
cp "$here/../fakes/"* "$ctx/fakes/"
chmod -R a+rX "$ctx"
(cd "$ctx" && as_user podman build -q -t sanddune-test:latest \
    --build-arg AGENT_UID="$uid" --build-arg AGENT_GID="$gid" "$ctx" >/dev/null)
docker build -q -t sanddune-test-non-root:latest \
    --build-arg AGENT_UID="$uid" --build-arg AGENT_GID="$gid" "$ctx" >/dev/null
echo "$user"
