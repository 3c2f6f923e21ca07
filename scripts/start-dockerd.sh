#!/usr/bin/env bash
# Start a Docker engine for clawloop's sandboxes, if none answers yet. Idempotent; root; no stdin.
#
# Usage:  sudo scripts/start-dockerd.sh            (then plain `docker` / docker.from_env() work)
# Env:    DOCKER_HOST        if set and answering, nothing is started
#         CLAWLOOP_DOCKER_ROOT  data root (default /var/lib/clawloop-docker)
#         CLAWLOOP_DOCKER_SOCK  socket to serve (default /var/run/docker.sock)
#         CLAWLOOP_DOCKER_WAIT  seconds to wait for the engine (default 30)
# Needs:  apt packages docker.io (dockerd + docker CLI) — bubblewrap/debootstrap are for the image.
#
# Why these flags: this machine has no iptables rules to manage and sandboxes run with
# network_mode=none, so the engine needs no bridge; overlay2 is 5-20x faster than vfs.
set -euo pipefail

DATA_ROOT="${CLAWLOOP_DOCKER_ROOT:-/var/lib/clawloop-docker}"
SOCK="${CLAWLOOP_DOCKER_SOCK:-/var/run/docker.sock}"
WAIT="${CLAWLOOP_DOCKER_WAIT:-30}"
EXEC_ROOT="/var/run/clawloop-docker"
PIDFILE="/var/run/clawloop-dockerd.pid"
LOG="/var/log/clawloop-dockerd.log"

say() { echo "start-dockerd: $*"; }

answers() {  # $1: DOCKER_HOST value
  DOCKER_HOST="$1" timeout 5 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
  say "dockerd/docker not found: install them with 'apt-get install -y docker.io'" >&2
  exit 1
fi

if [[ -n "${DOCKER_HOST:-}" ]] && answers "$DOCKER_HOST"; then
  say "an engine already answers at DOCKER_HOST=$DOCKER_HOST; nothing to do"
  exit 0
fi
if answers "unix://$SOCK"; then
  say "an engine already answers at unix://$SOCK; nothing to do"
  exit 0
fi

start_engine() {  # $1: storage driver
  # A dockerd killed earlier can leave its netns mount and socket behind; both block a restart.
  umount "$EXEC_ROOT/netns/default" 2>/dev/null || true
  rm -f "$SOCK" "$PIDFILE"
  mkdir -p "$DATA_ROOT" "$EXEC_ROOT" "$(dirname "$SOCK")"
  say "starting dockerd ($1): data root $DATA_ROOT, socket unix://$SOCK, log $LOG"
  # setsid + nohup: the engine must outlive this script and the CI step that ran it.
  setsid nohup dockerd \
    --data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
    --host "unix://$SOCK" --storage-driver="$1" \
    --iptables=false --ip6tables=false --bridge=none --ip-masq=false \
    </dev/null >>"$LOG" 2>&1 &
  ENGINE_PID=$!
}

wait_ready() {  # returns 1 when the engine died or did not answer within $WAIT s
  for _ in $(seq 1 $((WAIT * 4))); do
    if answers "unix://$SOCK"; then
      say "engine ready at unix://$SOCK ($(docker -H "unix://$SOCK" version --format '{{.Server.Version}}'))"
      return 0
    fi
    if [[ -n "${ENGINE_PID:-}" ]] && ! kill -0 "$ENGINE_PID" 2>/dev/null; then
      return 1
    fi
    sleep 0.25
  done
  return 1
}

if [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  say "dockerd (pid $(cat "$PIDFILE")) is running but not answering yet; waiting"
else
  start_engine overlay2
fi
wait_ready && exit 0

# overlay2 cannot stack on some file systems (e.g. /var/lib itself on overlayfs inside a container):
# fall back to vfs, which always works but is 5-20x slower.
if grep -qiE "overlay2?.*(not supported|invalid argument|failed)" "$LOG" 2>/dev/null; then
  say "overlay2 is not usable here; retrying with the vfs storage driver (slower)" >&2
  kill "$(cat "$PIDFILE" 2>/dev/null)" 2>/dev/null || true
  start_engine vfs
  wait_ready && exit 0
fi
say "dockerd did not answer within ${WAIT}s; last log lines:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
