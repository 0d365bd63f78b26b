#!/bin/sh
set -e
echo "$CHANNEL" > /usr/local/share/pinned-tools-channel
