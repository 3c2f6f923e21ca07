#!/usr/bin/env bash
# Install and start what clawloop's sandboxes need on a fresh Debian machine (run as root):
# bubblewrap (daemonless sandbox), docker.io (engine, started here), debootstrap (base image).
# Idempotent: each step is skipped when already done. Needs no stdin.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
"${PYTHON:-python3}" -c "import ensurepip, venv" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

bash scripts/start-dockerd.sh
bash scripts/build-base-image.sh
