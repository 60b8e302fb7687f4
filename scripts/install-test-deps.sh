#!/bin/sh
# System packages the tests need beyond pip: a real `redis-server` (the Redis-backed scheduler's
# tests start one on a free loopback port). Idempotent: does nothing when redis-server is on PATH.
# Installs Debian/Ubuntu's redis-server with apt-get (through sudo when not root); elsewhere it
# stops with a one-line message saying what to install.
set -eu

if command -v redis-server >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: redis-server is not installed and apt-get is missing: install Redis >= 6 (redis-server on PATH)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "error: installing redis-server needs root or sudo" >&2; exit 1; }
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null; then
    echo "apt-get install failed; running apt-get update and retrying" >&2
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends redis-server >/dev/null
fi
# the Debian package starts a system-wide server on port 6379; the tests never use it
command -v redis-server >/dev/null
