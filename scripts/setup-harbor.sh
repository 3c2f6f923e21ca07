#!/usr/bin/env bash
# Prepare Harbor 0.25 (the Terminal-Bench 2.0 framework) as a checker of exported task folders:
# harbor==0.25.0 in its own Python >= 3.12 venv, the docker compose v2 CLI plugin Harbor drives,
# and a Docker engine holding the tasks' base image. Idempotent; root; no stdin.
#
# Usage:  sudo scripts/setup-harbor.sh      (then `make test-harbor` or `pytest -m harbor`)
# Env:    CLAWLOOP_HARBOR_HOME    where it all goes (default $CLAWLOOP_CACHE/harbor, i.e.
#                                 /var/cache/clawloop/harbor): venv/ (bin/harbor) and
#                                 docker-config/ (use as DOCKER_CONFIG: cli-plugins/docker-compose)
#         CLAWLOOP_HARBOR_PYTHON  interpreter for the venv (default: pyenv's newest 3.12, else
#                                 python3.12/python3.13 on PATH)
#         CLAWLOOP_MIRROR         Debian mirror (default: first URI in debian.sources)
#         DOCKER_HOST             the engine Harbor will use (default unix:///var/run/docker.sock)
# Needs:  PyPI and a Debian mirror; apt, dpkg; docker.io (scripts/setup-system.sh installs it).
#
# Why so: Harbor needs Python >= 3.12 (these machines run 3.11) and `docker compose` v2, which
# bookworm's apt does not ship (only docker-compose 1.29); trixie's docker-compose .deb holds the
# v2 plugin binary, fetched with a private apt list so the system's sources stay untouched.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CLAWLOOP_CACHE:-/var/cache/clawloop}"
HOME_DIR="${CLAWLOOP_HARBOR_HOME:-$CACHE/harbor}"
VENV="$HOME_DIR/venv"
DCONF="$HOME_DIR/docker-config"
HARBOR_VERSION=0.25.0
export DOCKER_HOST="${DOCKER_HOST:-unix:///var/run/docker.sock}"

say() { echo "setup-harbor: $*"; }
mkdir -p "$HOME_DIR"

# 1. harbor==0.25.0 in a Python >= 3.12 venv (≈1 min the first time).
find_python() {
  if [[ -n "${CLAWLOOP_HARBOR_PYTHON:-}" ]]; then echo "$CLAWLOOP_HARBOR_PYTHON"; return; fi
  local root cand minor
  if command -v pyenv >/dev/null; then
    root="$(pyenv root)"
    for minor in 3.12 3.13; do  # 3.12 first: the version Harbor 0.25 was measured with here
      for cand in $(ls -d "$root/versions/$minor"* 2>/dev/null | sort -V -r); do
        [[ -x "$cand/bin/python3" ]] && { echo "$cand/bin/python3"; return; }
      done
    done
  fi
  for cand in python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null \
      && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$cand"; return
    fi
  done
  return 1
}

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("harbor"))' 2>/dev/null
}

if [[ -x "$VENV/bin/harbor" && "$(installed_version)" == "$HARBOR_VERSION" ]]; then
  say "harbor $HARBOR_VERSION ready in $VENV"
else
  PY="$(find_python)" || { say "no Python >= 3.12 found (pyenv versions 3.12*, python3.12); set CLAWLOOP_HARBOR_PYTHON" >&2; exit 1; }
  say "pip install harbor==$HARBOR_VERSION into $VENV ($("$PY" --version 2>&1))"
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "harbor==$HARBOR_VERSION" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  [[ "$(installed_version)" == "$HARBOR_VERSION" ]] || { say "harbor $HARBOR_VERSION did not install" >&2; exit 1; }
  say "harbor $HARBOR_VERSION installed"
fi

# 2. The docker compose v2 plugin, in a private DOCKER_CONFIG (≈5 s the first time).
command -v docker >/dev/null || { say "docker CLI not found: apt-get install -y docker.io (scripts/setup-system.sh)" >&2; exit 1; }
if DOCKER_CONFIG="$DCONF" docker compose version >/dev/null 2>&1; then
  say "docker compose ready ($(DOCKER_CONFIG="$DCONF" docker compose version --short))"
else
  mirror="${CLAWLOOP_MIRROR:-}"
  if [[ -z "$mirror" ]]; then
    mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
    mirror="${mirror:-http://deb.debian.org/debian}"
  fi
  apt_dir="$(mktemp -d "$HOME_DIR/apt.XXXXXX")"
  trap 'rm -rf "$apt_dir"' EXIT
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  signed=""; [[ -f "$keyring" ]] && signed="[signed-by=$keyring] "
  echo "deb ${signed}$mirror trixie main" >"$apt_dir/trixie.list"
  apt_opts=(-q -o "Dir::Etc::SourceList=$apt_dir/trixie.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "APT::Sandbox::User=root")
  say "downloading trixie's docker-compose .deb from $mirror (private apt list)"
  apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 \
    || { say "apt-get update (trixie) failed:" >&2; tail -n 5 "$apt_dir/update.log" >&2; exit 1; }
  (cd "$apt_dir" && apt-get "${apt_opts[@]}" download docker-compose >"$apt_dir/download.log" 2>&1) \
    || { say "apt-get download docker-compose failed:" >&2; tail -n 5 "$apt_dir/download.log" >&2; exit 1; }
  dpkg -x "$apt_dir"/docker-compose_*.deb "$apt_dir/x"
  mkdir -p "$DCONF/cli-plugins"
  install -m 0755 "$apt_dir/x/usr/libexec/docker/cli-plugins/docker-compose" "$DCONF/cli-plugins/docker-compose"
  DOCKER_CONFIG="$DCONF" docker compose version >/dev/null \
    || { say "the docker compose plugin does not run" >&2; exit 1; }
  say "docker compose $(DOCKER_CONFIG="$DCONF" docker compose version --short) in $DCONF/cli-plugins"
fi

# 3. An engine, and the tasks' base image in it (task Dockerfiles say FROM clawloop-base:latest;
#    there is no registry to pull it from).
bash "$HERE/start-dockerd.sh"
bash "$HERE/build-base-image.sh"
docker image inspect clawloop-base:latest >/dev/null 2>&1 \
  || { say "no clawloop-base:latest in the engine at $DOCKER_HOST" >&2; exit 1; }
say "ready: harbor=$VENV/bin/harbor DOCKER_CONFIG=$DCONF DOCKER_HOST=$DOCKER_HOST"
