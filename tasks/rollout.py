"""Rollout: the current policy attempts every verified train task `rollout.n` times; the band
filter keeps the tasks whose pass count is in [low, high] for training.

With `diagnose.baseline`, iteration 1's rollout also grades the run's row 0 while the base policy
is served: the held-out (and external) eval tasks, `diagnose.eval_n` episodes each
(`baseline_trajectories`; tasks/heldout.py), which diagnose carries over and counts. The held-out
episodes run in the same map as the train episodes (`roll_out_sets`), so the server batches both."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.harness import owned
from clawloop.harness.rollout import band_filter, pass_rates
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.storage import schemas
from clawloop.tasks.episodes import roll_out_sets, verified_tasks
from clawloop.tasks.heldout import (
    BASELINE_TABLE,
    ExternalTask,
    baseline_due,
    baseline_slice,
    eval_rollout_config,
    external_tasks,
    roll_out_baseline,
)
from clawloop.tasks.policy import policy_slice, serve_policy
from clawloop.tasks.settings import section_dump
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    out = {
        "rollout": section_dump(cfg.rollout),
        "sandbox": cfg.sandbox.cache_slice(),
        **policy_slice(cfg),
    }
    if baseline_due(cfg, iteration):  # only then, so other iterations keep their keys
        out["baseline"] = baseline_slice(cfg)
    return out


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    rcfg = cfg.rollout  # checked when the config was loaded
    base: list[dict[str, Any]] | None = None
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(owned.temp_dir("clawloop-rollout-")))
        tasks = verified_tasks(ctx, "train", tmp)
        evals: list[tuple[Path, dict[str, Any]]] = []
        external: list[ExternalTask] = []
        if baseline_due(cfg, ctx.iteration):
            held = Path(stack.enter_context(owned.temp_dir("clawloop-baseline-")))
            evals = verified_tasks(ctx, "eval", held / "tasks")
            # before any policy is served: an external task that cannot run here stops the stage
            if cfg.diagnose.eval_tasks:
                external = external_tasks(ctx, held / "external")
        traj: list[dict[str, Any]] = []
        held: list[dict[str, Any]] = []
        served = "no policy served: no verified train task to roll out"
        if tasks or evals or external:
            with serve_policy(ctx, ctx.iteration - 1) as (policy, served):
                # Row 0's own held-out episodes join the train episodes in one map (at most
                # rollout.workers in flight): vLLM batches both, and neither set waits for the
                # other's last episode.
                sets = [(tasks, rcfg.n)] + ([(evals, eval_rollout_config(cfg).n)] if evals else [])
                if tasks or evals:
                    traj, *rest = roll_out_sets(ctx, sets, policy, rcfg, cfg.rollout.workers)
                    held = rest[0] if rest else []
                if evals or external:  # row 0, on the policy already served
                    base = roll_out_baseline(ctx, held, external, policy, cfg.diagnose.workers)
    band = band_filter(traj, rcfg.n, rcfg.band_lo, rcfg.band_hi)
    tables = {
        "trajectories": (with_host_column(schemas.TRAJECTORIES), traj),
        "band": (schemas.BAND, band),
        "pass_rates": (schemas.ROLLOUT_PASS_RATES, pass_rates(traj, band)),
    }
    summary = {
        "policy": served,
        "tasks": len(tasks),
        "episodes": len(traj),
        "passed": sum(bool(r["passed"]) for r in traj),
        "kept_tasks": sum(bool(b["kept"]) for b in band),
    }
    if base is not None:
        tables[BASELINE_TABLE] = (with_host_column(schemas.TRAJECTORIES), base)
        summary["baseline_episodes"] = len(base)
        summary["baseline_passed"] = sum(bool(r["passed"]) for r in base)
    return StageResult(tables, summary=summary)


STAGE = StageSpec(
    "rollout",
    run,
    config_slice,
    module=__name__,
    upstream=("forge", "verify"),
    previous=("train",),
    workers=lambda cfg: cfg.rollout.workers,
)
