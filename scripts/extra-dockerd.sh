#!/usr/bin/env bash
# A second (third, ...) Docker engine on this machine, e.g. to try or test a sandbox.docker_hosts
# pool without a second machine. Everything it owns lives under DIR, so it never clashes with the
# main engine (scripts/start-dockerd.sh): its own socket, data root, exec root, pid file, log, no
# bridge and no iptables rules (sandboxes run with network_mode=none). Root; no stdin.
#
# Usage:  scripts/extra-dockerd.sh start DIR [--with-image]   prints DOCKER_HOST=unix://DIR/docker.sock
#         scripts/extra-dockerd.sh stop DIR                    kills that engine and what it left
# Env:    CLAWLOOP_IMAGE        image --with-image copies in from the main engine (default clawloop-base:latest)
#         CLAWLOOP_DOCKER_WAIT  seconds to wait for the engine (default 30)
#
# DIR should be short (unix socket paths are capped at 108 bytes; containerd's lives in DIR/x/).
# `stop` kills by pid only: the engine's dockerd (pid file), then the containerd and shims whose
# command lines name DIR, then the processes in its containers' cgroups, then unmounts what
# they left under DIR.
set -euo pipefail

say() { echo "extra-dockerd: $*"; }
usage() { say "usage: $0 start|stop DIR [--with-image]" >&2; exit 2; }

[[ $# -ge 2 ]] || usage
CMD="$1"
DIR="$(mkdir -p "$2" && cd "$2" && pwd)"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"
EXEC_ROOT="$DIR/x"
IMAGE="${CLAWLOOP_IMAGE:-clawloop-base:latest}"
WAIT="${CLAWLOOP_DOCKER_WAIT:-30}"

answers() { DOCKER_HOST="unix://$SOCK" timeout 5 docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

# Pids of processes whose command line names DIR (this engine's containerd and shims), not ours.
owned_pids() {
  local p
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [[ "$p" == "$$" ]] && continue
    if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$DIR/"; then echo "$p"; fi
  done
}

stop_engine() {
  if [[ -s "$PIDFILE" ]]; then
    local pid
    pid="$(cat "$PIDFILE")"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  local pids
  pids="$(owned_pids)"
  if [[ -n "$pids" ]]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
  fi
  # The processes of its containers (a killed shim leaves them running): by container id, from
  # each id's cgroup (v1 hierarchies or the unified one), then the emptied cgroups themselves.
  local id cg
  for id in $(ls "$DIR/data/containers" 2>/dev/null); do
    for cg in /sys/fs/cgroup/*/docker/"$id" /sys/fs/cgroup/docker/"$id" /sys/fs/cgroup/system.slice/docker-"$id".scope; do
      [[ -f "$cg/cgroup.procs" ]] || continue
      # shellcheck disable=SC2046
      kill -KILL $(cat "$cg/cgroup.procs") 2>/dev/null || true
    done
  done
  sleep 0.2
  for id in $(ls "$DIR/data/containers" 2>/dev/null); do
    rmdir /sys/fs/cgroup/*/docker/"$id" /sys/fs/cgroup/docker/"$id" 2>/dev/null || true
  done
  # Mounts left under DIR (netns, overlay layers of killed containers, shm), deepest first.
  awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -f "$SOCK" "$PIDFILE"
}

case "$CMD" in
  start)
    command -v dockerd >/dev/null || { say "dockerd not found: apt-get install -y docker.io" >&2; exit 1; }
    if answers; then
      say "an engine already answers at unix://$SOCK"
    else
      stop_engine
      mkdir -p "$DIR/data" "$EXEC_ROOT"
      say "starting dockerd: data root $DIR/data, socket unix://$SOCK, log $LOG"
      setsid nohup dockerd \
        --data-root "$DIR/data" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
        --host "unix://$SOCK" --storage-driver=overlay2 \
        --iptables=false --ip6tables=false --bridge=none --ip-masq=false \
        </dev/null >>"$LOG" 2>&1 &
      engine=$!
      for _ in $(seq 1 $((WAIT * 4))); do
        answers && break
        if ! kill -0 "$engine" 2>/dev/null; then
          say "dockerd exited; last log lines:" >&2; tail -n 20 "$LOG" >&2; exit 1
        fi
        sleep 0.25
      done
      answers || { say "dockerd did not answer within ${WAIT}s; see $LOG" >&2; exit 1; }
    fi
    if [[ "${3:-}" == "--with-image" ]]; then
      if DOCKER_HOST="unix://$SOCK" docker image inspect "$IMAGE" >/dev/null 2>&1; then
        say "image $IMAGE already there"
      else
        say "copying $IMAGE from the main engine (docker save | docker load)"
        docker save "$IMAGE" | DOCKER_HOST="unix://$SOCK" docker load -q >/dev/null
      fi
    fi
    echo "DOCKER_HOST=unix://$SOCK"
    ;;
  stop)
    stop_engine
    say "stopped the engine at unix://$SOCK"
    ;;
  *) usage ;;
esac
