#!/usr/bin/env bash
# Worker container entrypoint.
#   worker  (default) wait for the Prefect server, create the process pool, register prefect.yaml's
#           deployments, then run a process worker that executes scheduled and UI-triggered runs
#   server  run the Prefect server (API + UI) on 0.0.0.0:4200
#   *       anything else is executed as given (e.g. `clawloop run --config configs/cluster.yaml`)
set -euo pipefail
cd "${CLAWLOOP_HOME:-/opt/clawloop}"
POOL="${CLAWLOOP_WORK_POOL:-clawloop-process}"

case "${1:-worker}" in
  server)
    exec prefect server start --host 0.0.0.0 --port 4200
    ;;
  worker)
    : "${PREFECT_API_URL:?set PREFECT_API_URL to the Prefect server, e.g. http://prefect-server:4200/api}"
    for _ in $(seq 1 120); do
      curl -fsS "${PREFECT_API_URL}/health" >/dev/null 2>&1 && break
      sleep 1
    done
    prefect work-pool inspect "$POOL" >/dev/null 2>&1 || prefect work-pool create "$POOL" --type process
    prefect --no-prompt deploy --all
    exec prefect worker start --pool "$POOL"
    ;;
  *)
    exec "$@"
    ;;
esac
