"""Benchmark: what the stage cache saves, and what orchestration costs per forged task.

One small iteration of the real stages (synthesize -> forge -> verify ...) in a temp folder:
  1. first run (computes every stage), 2. the same run again (every stage skipped from its manifest),
  ratio = cached / first (target <= 5%), excluding Prefect's fixed start-up (plain engine here);
  3. orchestration overhead per task: the forge stage through the engine (mapper, Parquet write,
  manifest, sha256 check) versus forge_candidate called directly in an equal thread pool, over the
  same candidates, divided by the task count (target <= 20 ms); the same with a no-op item function
  isolates the fixed cost, and `--prefect` adds the cost of Prefect task runs per item.

    .venv/bin/python benchmarks/pipeline_cache.py [--n-train 8] [--n-eval 2] [--backend bwrap] [--prefect]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts, fs, schemas
from clawloop.tasks import engine
from clawloop.tasks.config import RunConfig, parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageContext, StageResult, StageSpec


def _cfg(root: str, args: argparse.Namespace) -> RunConfig:
    return parse_config(
        {
            "storage": {"root": root},
            "sandbox": {"backend": args.backend},
            "synthesize": {"n_train": args.n_train, "n_eval": args.n_eval},
            "forge": {"workers": args.workers},
            "verify": {"workers": args.workers},
        }
    )


def _timed_run(cfg: RunConfig, stages: list[StageSpec]) -> tuple[float, runs.RunSummary]:
    t0 = time.perf_counter()
    summary = runs.run_loop(cfg, "bench", stages, thread_mapper(False))
    return time.perf_counter() - t0, summary


@task(name="noop", cache_policy=NO_CACHE, persist_result=False)
def _noop(row: dict) -> dict:
    return row


def _noop_stage_overhead(root: str, n: int, mapper: engine.Mapper, label: str) -> float:
    """Seconds per item of a stage whose item function does nothing (pure orchestration)."""
    cands = [
        artifacts.empty_row(schemas.FORGED, task_id=f"t{i:05d}", status="ok") for i in range(n)
    ]

    def run(ctx: StageContext) -> StageResult:
        rows = ctx.map(_noop, cands, lambda r, e: r, workers=2)
        return StageResult({"tasks": (schemas.FORGED, rows)})

    spec = StageSpec(label, run, lambda c, k: {})
    cfg = parse_config({"storage": {"root": root}})
    t0 = time.perf_counter()
    out = engine.run_stage(spec, [spec], cfg, "noop", 1, mapper)
    if out.status != "ran":
        raise RuntimeError(f"no-op stage did not run: {out.error or out.reason}")
    return (time.perf_counter() - t0) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-train", type=int, default=8)
    p.add_argument("--n-eval", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backend", default="bwrap", choices=["auto", "bwrap", "docker"])
    p.add_argument("--noop-items", type=int, default=500)
    p.add_argument("--prefect", action="store_true", help="also measure Prefect task runs per item")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)

    stages = [s for s in STAGES if s.name in ("synthesize", "forge", "verify")]
    with tempfile.TemporaryDirectory(prefix="clawloop-bench-") as tmp:
        cfg = _cfg(tmp, args)
        first, s1 = _timed_run(cfg, stages)
        if not s1.ok:
            print("first run failed:", [(o.stage, o.status, o.error[:200]) for o in s1.outcomes])
            return 1
        cached, s2 = _timed_run(cfg, stages)
        statuses = {o.stage: o.status for o in s2.outcomes}
        print(
            f"stages: {', '.join(s.name for s in stages)}  tasks: {args.n_train + args.n_eval}  backend: {args.backend}"
        )
        for o1, o2 in zip(s1.outcomes, s2.outcomes, strict=True):
            print(
                f"  {o1.stage:<11} first {o1.duration_s:7.3f}s   cached {o2.duration_s:7.4f}s   ({o2.status})"
            )
        print(f"first run     {first:8.3f} s")
        print(
            f"cached re-run {cached:8.3f} s   all skipped: {set(statuses.values()) == {'skipped'}}"
        )
        print(f"ratio cached/first = {cached / first:.4f}  (target <= 0.05)")

        # Overhead per forged task: engine forge stage vs direct calls on the same candidates.
        from clawloop.generators.forge import forge_candidate

        cands = artifacts.read_rows(fs.stage_url(tmp, "bench", 1, "synthesize"), "candidates")
        box = cfg.sandbox.to_sandbox_config()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            list(pool.map(lambda r: forge_candidate(r, box, retries=cfg.forge.retries), cands))
        direct = time.perf_counter() - t0
        forge_spec = next(s for s in stages if s.name == "forge")
        t0 = time.perf_counter()
        engine.run_stage(forge_spec, stages, cfg, "bench", 1, thread_mapper(False), force=True)
        staged = time.perf_counter() - t0
        n = len(cands)
        print(
            f"forge {n} tasks: direct {direct:.3f}s, through the engine {staged:.3f}s -> overhead {1000 * (staged - direct) / n:+.1f} ms/task (noisy; target <= 20)"
        )
        per = _noop_stage_overhead(
            os.path.join(tmp, "noop"), args.noop_items, thread_mapper(False), "noop"
        )
        print(
            f"no-op stage, {args.noop_items} items, thread mapper: {1000 * per:.2f} ms/task (pure orchestration)"
        )
        if args.prefect:
            from prefect import flow

            from clawloop.tasks.mapping import prefect_mapper

            @flow(name="bench-noop", persist_result=False)
            def bench(tag: str) -> float:
                return _noop_stage_overhead(
                    os.path.join(tmp, tag), args.noop_items, prefect_mapper, "noop-prefect"
                )

            bench("warm-up")  # starts Prefect's temporary server (fixed start-up, excluded)
            per_p = bench("measured")
            print(
                f"no-op stage, {args.noop_items} items, Prefect tasks: {1000 * per_p:.2f} ms/task"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
