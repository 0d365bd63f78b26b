#!/usr/bin/env bash
# Builds the real-engine tests' image `sanddune-test:latest` for one engine
# (docker or podman) without a registry: debootstrap a minimal Debian with git
# python3 and curl once (cached in $SANDDUNE_TEST_ROOTFS, default
# /var/cache/sanddune-test-rootfs), import it as `sanddune-test-base`, then
# build tests/images/Dockerfile on top with the fake agents and the host
# user's UID/GID. Needs root for debootstrap.
set -euo pipefail
engine=${1:?usage: build.sh docker|podman}
here=$(cd "$(dirname "$0")" && pwd)
rootfs=${SANDDUNE_TEST_ROOTFS:-/var/cache/sanddune-test-rootfs}

if [ ! -x "$rootfs/usr/bin/curl" ]; then
    rm -rf "$rootfs.tmp"
    debootstrap --variant=minbase --include=git,python3,procps,curl \
        bookworm "$rootfs.tmp" http://deb.debian.org/debian
    rm -rf "$rootfs.tmp/var/cache/apt/archives"/*.deb "$rootfs.tmp/var/lib/apt/lists"/*
    rm -rf "$rootfs"
    mv "$rootfs.tmp" "$rootfs"
fi
if ! "$engine" run --rm sanddune-test-base:latest test -x /usr/bin/curl >/dev/null 2>&1; then
    tar -C "$rootfs" -c . | "$engine" import - sanddune-test-base:latest
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$here/Dockerfile" "$ctx/Dockerfile"
mkdir "$ctx/fakes"
cp "$here/../fakes/"* "$ctx/fakes/"
"$engine" build -q -t sanddune-test:latest \
    --build-arg AGENT_UID="$(id -u)" --build-arg AGENT_GID="$(id -g)" "$ctx"
