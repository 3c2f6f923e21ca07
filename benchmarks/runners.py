"""Per-item cost of each execution.runner (dask, ray when importable) against threads, in one run.

The same N built-in candidates (benchmarks/forge_verify.py's `candidates`) are forged and then
verified by the pipeline's own Prefect tasks (`forge_one`, `verify_batch`) through
`prefect_mapper` (a task run per item, one per verify batch), inside one Prefect flow per
runner whose task runner is the one `flows/pipeline.py` gives a stage (`task_runner`: threads,
or a local Dask / Ray cluster sized from --workers). Per runner it measures:

  start-up   a flow mapping one no-op item: the flow run, the cluster's start and its workers'
             first imports (a fixed cost per stage flow)
  no-op      N no-op items: what a Prefect task run costs per item on that runner, nothing else
  forge+v    N forge task runs, one verify task run per batch of 8: wall seconds, and
             (wall - start-up) / N per item
  CPU        CPU seconds of this process and every process under it (cluster workers and their
             sandboxes) per item: it depends less than wall time on what else the host runs

and prints a table with each runner's per-item figures as ratios to threads, plus the rows'
agreement (the same verdicts on every runner). Keep N small on a shared host: the ratio matters.

    .venv/bin/python benchmarks/runners.py [--tasks 200] [--workers 2] [--runners threads,dask,ray]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

# Prefect reads these when it is imported: a private temporary server, patient on a loaded host.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clawloop-bench-prefect-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from forge_verify import candidates  # noqa: E402
from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from clawloop.flows.pipeline import api_for_workers, local_cluster_size, task_runner  # noqa: E402
from clawloop.harness.sandbox.base import SandboxConfig  # noqa: E402
from clawloop.tasks.forge import _crashed as forge_crashed  # noqa: E402
from clawloop.tasks.forge import forge_one  # noqa: E402
from clawloop.tasks.mapping import prefect_mapper  # noqa: E402
from clawloop.tasks.settings import ExecutionSettings  # noqa: E402
from clawloop.tasks.verify import _crashed as verify_crashed  # noqa: E402
from clawloop.tasks.verify import batches, verify_batch  # noqa: E402


@task(name="noop", cache_policy=NO_CACHE, persist_result=False)
def noop(item: int, sandbox: SandboxConfig) -> int:
    return item


def tree_cpu_s() -> float:
    """CPU seconds of this process and every live process under it, each with the children it
    has waited for (sandboxes): dead workers' time is lost, so read it before the cluster stops."""
    total = 0.0
    procs = [psutil.Process()]
    procs += procs[0].children(recursive=True)
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@flow(name="bench-runner-noop", persist_result=False, validate_parameters=False)
def noop_flow(n: int, workers: int, sandbox: SandboxConfig) -> float:
    t0 = time.perf_counter()
    prefect_mapper(noop, list(range(n)), lambda i, e: -1, workers=workers, sandbox=sandbox)
    return time.perf_counter() - t0


CANDIDATES: list[dict[str, Any]] = []  # not a flow parameter: the API caps those at 512 KB


@flow(name="bench-runner-forge-verify", persist_result=False, validate_parameters=False)
def forge_verify_flow(
    workers: int, sandbox: SandboxConfig
) -> tuple[float, float, list[tuple[str, bool, str]]]:
    cands = CANDIDATES
    cpu0, t0 = tree_cpu_s(), time.perf_counter()
    forged = prefect_mapper(
        forge_one, cands, forge_crashed, workers=workers, sandbox=sandbox, retries=3
    )
    groups = batches(forged, 8, workers)
    done = prefect_mapper(
        verify_batch,
        groups,
        lambda rows, exc: [verify_crashed(r, exc) for r in rows],
        workers=workers,
        sandbox=sandbox,
    )
    checked = [c for batch in done for c in batch]
    took, cpu = time.perf_counter() - t0, tree_cpu_s() - cpu0
    verdicts = [(v["task_id"], bool(v["kept"]), v["reason"]) for _, v in checked]
    return took, cpu, verdicts


def timed(fn, *args: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def measure(name: str, cands: list[dict], workers: int, box: SandboxConfig) -> dict[str, Any]:
    execution = ExecutionSettings(runner=name)
    n = len(cands)

    def runner_flow(f):
        return f.with_options(task_runner=task_runner("forge", execution, workers))

    with api_for_workers(execution, "forge"):
        startup, _ = timed(runner_flow(noop_flow), 1, workers, box)
        noop_wall, _ = timed(runner_flow(noop_flow), n, workers, box)
        wall, (inner, cpu, verdicts) = timed(runner_flow(forge_verify_flow), workers, box)
    return {
        "runner": name,
        "startup_s": startup,
        "noop_ms": max(0.0, noop_wall - startup) / n * 1000,
        "wall_s": wall,
        "item_ms": max(0.0, wall - startup) / n * 1000,
        "inner_ms": inner / n * 1000,
        "cpu_ms": cpu / n * 1000,
        "verdicts": verdicts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200, help="forge+verify items per runner")
    ap.add_argument("--workers", type=int, default=2, help="items in flight (the stage's workers)")
    ap.add_argument("--runners", default="threads,dask,ray")
    ap.add_argument("--backend", default="bwrap", help="sandbox backend (bwrap, docker)")
    args = ap.parse_args()

    wanted = [r.strip() for r in args.runners.split(",") if r.strip()]
    if "threads" not in wanted:
        wanted.insert(0, "threads")  # the baseline every ratio is against
    runners = []
    for name in wanted:
        module = {"dask": "prefect_dask", "ray": "prefect_ray"}.get(name)
        if module and importlib.util.find_spec(module) is None:
            print(f"[{name}] skipped: {module} is not importable (pip install 'clawloop[{name}]')")
            continue
        runners.append(name)

    procs, threads = local_cluster_size(args.workers)
    print(
        f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
        f"{args.tasks} items, {args.workers} workers (local clusters: {procs} processes x "
        f"{threads} threads; ray: {args.workers} CPUs), sandbox {args.backend}"
    )
    cands = CANDIDATES[:] = candidates(args.tasks)
    box = SandboxConfig(backend=args.backend)
    noop_flow(1, 1, box)  # starts Prefect's temporary server: a fixed cost of any first flow
    results = []
    for name in runners:
        res = measure(name, cands, args.workers, box)
        results.append(res)
        print(
            f"  [{name}] start-up {res['startup_s']:.1f}s, forge+verify {res['wall_s']:.1f}s",
            flush=True,
        )
    base = results[0]
    print()
    print(
        f"{'runner':<8} {'start-up s':>10} {'no-op ms/item':>14} {'forge+verify s':>15} "
        f"{'ms/item':>8} {'CPU ms/item':>12} {'ms/item vs threads':>19} {'CPU vs threads':>15} "
        f"{'kept':>6}"
    )
    for r in results:
        kept = sum(k for _, k, _ in r["verdicts"])
        print(
            f"{r['runner']:<8} {r['startup_s']:>10.1f} {r['noop_ms']:>14.1f} {r['wall_s']:>15.1f} "
            f"{r['item_ms']:>8.0f} {r['cpu_ms']:>12.0f} {r['item_ms'] / base['item_ms']:>18.2f}x "
            f"{r['cpu_ms'] / base['cpu_ms']:>14.2f}x {kept:>3}/{len(cands)}"
        )
    for r in results[1:]:
        same = r["verdicts"] == base["verdicts"]
        extra = r["item_ms"] - base["item_ms"]
        print(
            f"{r['runner']}: {extra:+.0f} ms per forge+verify item vs threads "
            f"({r['noop_ms'] - base['noop_ms']:+.1f} ms per no-op task run), "
            f"+{r['startup_s'] - base['startup_s']:.1f}s start-up per stage flow; "
            f"verdicts {'identical to' if same else 'DIFFER from'} threads'"
        )
    for r in results:
        reasons = sorted({why.splitlines()[0][:160] for _, kept, why in r["verdicts"] if not kept})
        for why in reasons[:4]:
            print(f"    [{r['runner']}] dropped: {why}")
    print(f"host load average {os.getloadavg()[0]:.1f} at end")
    return 0 if all(r["verdicts"] == base["verdicts"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
