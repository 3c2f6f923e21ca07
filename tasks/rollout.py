"""Rollout: the current policy attempts every verified train task `rollout.n` times; the band
filter keeps the tasks whose pass count is in [low, high] for training."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.harness import owned
from clawloop.harness.rollout import band_filter, pass_rates
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.storage import schemas
from clawloop.tasks.episodes import roll_out, verified_tasks
from clawloop.tasks.policy import policy_slice, serve_policy
from clawloop.tasks.settings import section_dump
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {
        "rollout": section_dump(cfg.rollout),
        "sandbox": cfg.sandbox.cache_slice(),
        **policy_slice(cfg),
    }


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    rcfg = cfg.rollout  # checked when the config was loaded
    with owned.temp_dir("clawloop-rollout-") as tmp:
        tasks = verified_tasks(ctx, "train", Path(tmp))
        traj: list[dict[str, Any]] = []
        served = "no policy served: no verified train task to roll out"
        if tasks:
            with serve_policy(ctx, ctx.iteration - 1) as (policy, served):
                traj = roll_out(ctx, tasks, policy, rcfg, cfg.rollout.workers)
    band = band_filter(traj, rcfg.n, rcfg.band_lo, rcfg.band_hi)
    return StageResult(
        {
            "trajectories": (with_host_column(schemas.TRAJECTORIES), traj),
            "band": (schemas.BAND, band),
            "pass_rates": (schemas.ROLLOUT_PASS_RATES, pass_rates(traj, band)),
        },
        summary={
            "policy": served,
            "tasks": len(tasks),
            "episodes": len(traj),
            "passed": sum(bool(r["passed"]) for r in traj),
            "kept_tasks": sum(bool(b["kept"]) for b in band),
        },
    )


STAGE = StageSpec(
    "rollout",
    run,
    config_slice,
    module=__name__,
    upstream=("forge", "verify"),
    previous=("train",),
    workers=lambda cfg: cfg.rollout.workers,
)
