#!/usr/bin/env bash
# Build the sandbox base: a Debian bookworm rootfs (debootstrap, cached) that the bubblewrap
# backend binds read-only, and the Docker image clawloop-base:latest made from the same rootfs.
# Idempotent; root; no stdin. Without a Docker engine it still prepares the rootfs for bubblewrap.
#
# Usage:  sudo scripts/build-base-image.sh     (after scripts/start-dockerd.sh for the image)
# Env:    CLAWLOOP_CACHE   cache dir (default /var/cache/clawloop): rootfs-bookworm.tar + rootfs-bookworm/
#         CLAWLOOP_IMAGE   image tag (default clawloop-base:latest)
#         CLAWLOOP_MIRROR  Debian mirror (default: first URI in /etc/apt/sources.list.d/debian.sources)
#         DOCKER_HOST      engine to build on (default unix:///var/run/docker.sock)
# Needs:  apt packages debootstrap (rootfs), docker.io (image).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CLAWLOOP_CACHE:-/var/cache/clawloop}"
IMAGE="${CLAWLOOP_IMAGE:-clawloop-base:latest}"
ROOTFS_IMAGE="clawloop-rootfs:bookworm"
TARBALL="$CACHE/rootfs-bookworm.tar"
ROOTFS_DIR="$CACHE/rootfs-bookworm"
SUITE=bookworm
# python3-yaml and python3-pytest: what ClawGym's checkers import beyond the standard library.
INCLUDE=python3,bash,coreutils,python3-yaml,python3-pytest
# What the rootfs holds (packages + layout); a cached tarball, rootfs or image made from another
# stamp is rebuilt. Bump LAYOUT when the layout below changes. Rebuild cost: about a minute of
# debootstrap (mirror-bound) + ~10 s extracting + ~20 s docker import/build, once.
LAYOUT=2
STAMP="include=$INCLUDE layout=$LAYOUT"

say() { echo "build-base-image: $*"; }

mirror() {
  if [[ -n "${CLAWLOOP_MIRROR:-}" ]]; then echo "$CLAWLOOP_MIRROR"; return; fi
  local src=/etc/apt/sources.list.d/debian.sources
  if [[ -f "$src" ]]; then
    awk '/^URIs:/ {print $2; exit}' "$src"
  else
    echo "http://deb.debian.org/debian"
  fi
}

mkdir -p "$CACHE"

# 1. The rootfs tarball (≈40 s the first time, then cached).
if [[ -s "$TARBALL" && "$(cat "$TARBALL.stamp" 2>/dev/null)" == "$STAMP" ]]; then
  say "rootfs tarball cached at $TARBALL"
else
  [[ -s "$TARBALL" ]] && say "cached rootfs tarball is not '$STAMP': rebuilding it"
  rm -f "$TARBALL.stamp"
  command -v debootstrap >/dev/null || { say "debootstrap not found: apt-get install -y debootstrap" >&2; exit 1; }
  work="$(mktemp -d "$CACHE/debootstrap.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  say "debootstrap --variant=minbase --include=$INCLUDE $SUITE from $(mirror) (about a minute)"
  debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$work/rootfs" "$(mirror)" \
    >"$CACHE/debootstrap.log" 2>&1 || { say "debootstrap failed; see $CACHE/debootstrap.log" >&2; tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  # The sandbox layout exists in the rootfs too, so bubblewrap can bind onto it read-only.
  mkdir -p "$work/rootfs/workspace" "$work/rootfs/tests" "$work/rootfs/solution" "$work/rootfs/logs/verifier"
  # ClawGym tasks name their workspace /root/.openclaw/workspace (reward.sh, some checkers):
  # there it is the sandbox's /workspace.
  mkdir -p "$work/rootfs/root/.openclaw" && ln -sfn /workspace "$work/rootfs/root/.openclaw/workspace"
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb
  tar -C "$work/rootfs" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
  echo "$STAMP" >"$TARBALL.stamp"
  say "rootfs tarball written: $TARBALL ($(du -h "$TARBALL" | cut -f1))"
fi

# 2. The extracted rootfs the bubblewrap backend binds (read-only) — same bytes as the image.
if [[ -x "$ROOTFS_DIR/usr/bin/python3" && "$(cat "$ROOTFS_DIR.stamp" 2>/dev/null)" == "$STAMP" ]]; then
  say "bubblewrap rootfs ready at $ROOTFS_DIR"
else
  rm -rf "$ROOTFS_DIR.tmp" && mkdir -p "$ROOTFS_DIR.tmp"
  tar -C "$ROOTFS_DIR.tmp" -xf "$TARBALL"
  rm -rf "$ROOTFS_DIR" && mv "$ROOTFS_DIR.tmp" "$ROOTFS_DIR"
  echo "$STAMP" >"$ROOTFS_DIR.stamp"
  say "bubblewrap rootfs extracted to $ROOTFS_DIR"
fi

# 3. The Docker image.
export DOCKER_HOST="${DOCKER_HOST:-unix:///var/run/docker.sock}"
if ! command -v docker >/dev/null || ! timeout 5 docker info >/dev/null 2>&1; then
  say "no Docker engine answers at $DOCKER_HOST: skipped the image (run scripts/start-dockerd.sh first); bubblewrap can use the rootfs"
  exit 0
fi
label() { docker image inspect "$1" --format '{{ index .Config.Labels "org.clawloop.stamp" }}' 2>/dev/null; }
if [[ "$(label "$IMAGE")" == "$STAMP" ]]; then
  say "image $IMAGE exists; nothing to do"
  exit 0
fi
if [[ "$(label "$ROOTFS_IMAGE")" != "$STAMP" ]]; then
  say "docker import $TARBALL as $ROOTFS_IMAGE"
  docker import --change "LABEL org.clawloop.stamp=\"$STAMP\"" - "$ROOTFS_IMAGE" <"$TARBALL" >/dev/null
fi
say "docker build $HERE/../docker/sandbox as $IMAGE"
docker build -q --build-arg ROOTFS_IMAGE="$ROOTFS_IMAGE" --label "org.clawloop.stamp=$STAMP" \
  -t "$IMAGE" "$HERE/../docker/sandbox" >/dev/null
say "image $IMAGE built ($(docker image inspect "$IMAGE" --format '{{.Size}}') bytes)"
