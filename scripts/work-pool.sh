#!/usr/bin/env bash
# prefect.yaml's deployments on a Prefect process work pool with N workers, on this machine.
#
# Usage:  scripts/work-pool.sh start [--workers 2] [--config FILE] [--port 4200] [--state DIR]
#         scripts/work-pool.sh status [--state DIR]
#         scripts/work-pool.sh stop [--state DIR]
#
# start   uses the server PREFECT_API_URL points at (it must answer), else the one on
#         127.0.0.1:PORT, else starts `prefect server start` there (detached, log in the state
#         folder); creates prefect.yaml's process pool if missing; `prefect deploy --all` from this
#         checkout (nightly with its cron, rerun-stage, loop); with --config, points the deployments
#         at that run config; starts N `prefect worker start` processes (clawloop-worker-1..N) and
#         waits until the server lists each one ONLINE. A failed start stops what it started.
# stop    ends the workers, any flow run they left running, and the server if `start` started it
#         (by pid and kernel start time, recorded in the state folder; never by name).
# Env:    PREFECT_API_URL   an existing server to use instead of a local one
#         PREFECT_HOME      where a server started here keeps its database (default ~/.prefect)
#         CLAWLOOP_HOME     the checkout the workers' flow runs work in (default: this one)
#         CLAWLOOP_CACHE    the state folder is $CLAWLOOP_CACHE/work-pool (default ~/.cache/clawloop)
#         CLAWLOOP_PYTHON   the interpreter with clawloop installed (default .venv/bin/python)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${CLAWLOOP_PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"
exec "$PY" -m clawloop.flows.server "$@"
