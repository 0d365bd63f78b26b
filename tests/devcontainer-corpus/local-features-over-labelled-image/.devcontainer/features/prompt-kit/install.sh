#!/bin/sh
set -e
mkdir -p /usr/local/share/prompt-kit
echo "$STYLE $VERSION" > /usr/local/share/prompt-kit/installed
