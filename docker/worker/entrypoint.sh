#!/usr/bin/env bash
# Worker container entrypoint.
#   worker  (default) wait for the Prefect server, create the process pool, register prefect.yaml's
#           deployments, then run a process worker that executes scheduled and UI-triggered runs
#   server  run the Prefect server (API + UI) on 0.0.0.0:4200
#   dask-scheduler  a Dask scheduler on :8786 (execution.runner: dask, execution.address:
#           tcp://<this-host>:8786); it unpickles task graphs, so it runs this same image
#   dask-worker [SCHEDULER]  Dask worker processes for execution.runner: dask, joining
#           SCHEDULER (default $DASK_SCHEDULER_ADDRESS): DASK_NWORKERS processes (default: one
#           per core) x DASK_NTHREADS threads (default 2: items are sandbox-bound)
#   ray-head / ray-worker [HEAD]  a Ray node for execution.runner: ray (image built with
#           --build-arg EXTRAS=ray); clients join with execution.address: ray://<head>:10001
#   *       anything else is executed as given (e.g. `clawloop run --config tasks/profiles/cluster.yaml`)
set -euo pipefail
cd "${CLAWLOOP_HOME:-/opt/clawloop}"
POOL=clawloop-process  # the pool prefect.yaml's deployments name (deploy --all ignores --pool)

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
  dask-scheduler)
    exec dask scheduler --host 0.0.0.0 --port 8786 --dashboard-address :8787
    ;;
  dask-worker)
    SCHED="${2:-${DASK_SCHEDULER_ADDRESS:?pass the scheduler, e.g. tcp://scheduler-host:8786}}"
    exec dask worker "$SCHED" --nworkers "${DASK_NWORKERS:-auto}" \
      --nthreads "${DASK_NTHREADS:-2}" --name "${DASK_WORKER_NAME:-$(hostname)}"
    ;;
  ray-head)
    exec ray start --head --block --port 6379 --ray-client-server-port 10001 \
      --dashboard-host 0.0.0.0 --num-cpus "${RAY_NUM_CPUS:-$(nproc)}"
    ;;
  ray-worker)
    exec ray start --block --address "${2:-${RAY_HEAD_ADDRESS:?pass the head, e.g. head-host:6379}}" \
      --num-cpus "${RAY_NUM_CPUS:-$(nproc)}"
    ;;
  *)
    exec "$@"
    ;;
esac
