"""Diagnose: the new checkpoint attempts the held-out eval tasks; its failures are summarised
(one Prefect task each), clustered by root cause, and turned into a report and guidance.json,
which the next iteration's synthesize reads (capability weights, difficulty, failure patterns)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from clawloop.generators.diagnosis.diagnose import (
    GUIDANCE_NAME,
    PLOT_NAME,
    REPORT_NAME,
    DiagnoseConfig,
    diagnose_stage,
)
from clawloop.generators.diagnosis.guidance import read_guidance
from clawloop.generators.diagnosis.summary import SummaryConfig, summarize_failure
from clawloop.harness import owned
from clawloop.harness.rollout import RolloutConfig
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.storage import artifacts, schemas
from clawloop.storage.schemas import FailureSummary, Trajectory
from clawloop.tasks.episodes import roll_out, verified_tasks
from clawloop.tasks.policy import policy_slice, serve_policy
from clawloop.tasks.rollout import rollout_config
from clawloop.tasks.settings import stage_section
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.diagnose")
FILES = (REPORT_NAME, PLOT_NAME, GUIDANCE_NAME)


class DiagnoseSettings(stage_section(DiagnoseConfig, "diagnose")):
    eval_n: int = Field(1, ge=1, description="episodes per held-out eval task")

    def stage_config(self, **set_elsewhere: Any) -> DiagnoseConfig:
        return DiagnoseConfig(**self.model_dump(exclude={"eval_n"}), **set_elsewhere)


@task(
    name="summarize-failure",
    task_run_name="summarize-{row[task_id]}",
    cache_policy=NO_CACHE,
    persist_result=False,
)
def summarize_one(
    row: Trajectory, summarize: Callable[[Trajectory], FailureSummary]
) -> FailureSummary:
    """One failed eval episode -> its FAILURE_SUMMARIES row (LLM, or the heuristic fallback)."""
    return summarize(row)


def diagnose_config(cfg: RunConfig) -> DiagnoseConfig:
    """DiagnoseConfig from `diagnose:`; its difficulty starts where synthesis starts
    (synthesize.multihop/dirtiness), so guidance never drops below it."""
    return cfg.diagnose.stage_config(
        start_multihop=cfg.synthesize.multihop, start_dirtiness=cfg.synthesize.dirtiness
    )


def eval_rollout_config(cfg: RunConfig) -> RolloutConfig:
    """The held-out rollouts: `diagnose.eval_n` episodes per task, no band."""
    n = cfg.diagnose.eval_n
    return rollout_config(cfg, n=n, band=(0, n))


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {
        "diagnose": cfg.diagnose.model_dump(mode="json"),
        # guidance difficulty starts where synthesis starts
        "start_levels": [cfg.synthesize.multihop, cfg.synthesize.dirtiness],
        "rollout": cfg.rollout.model_dump(mode="json"),
        "sandbox": cfg.sandbox.cache_slice(),
        **policy_slice(cfg),
    }


def _history(ctx: StageContext) -> pd.DataFrame | None:
    frames = [
        artifacts.read_table(ctx.stage_url("diagnose", k), "pass_rates")
        for k in range(1, ctx.iteration)
        if ctx.manifest("diagnose", k) is not None
    ]
    return pd.concat(frames, ignore_index=True) if frames else None


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    workers = cfg.diagnose.workers
    # Every capability synthesized this iteration gets a weight, the user's own included.
    capabilities = sorted({str(r["capability"]) for r in ctx.rows("synthesize", "candidates")})
    previous = (
        read_guidance(ctx.stage_url("diagnose", ctx.iteration - 1)) if ctx.iteration > 1 else None
    )

    def fallback(row: dict[str, Any], exc: BaseException) -> dict[str, Any]:
        log.warning("summary of %s raised, heuristic used: %s", row.get("task_id"), exc)
        return summarize_failure(row, None, SummaryConfig(), iteration=ctx.iteration)

    def map_rows(fn: Callable[[dict], dict], rows: list[dict]) -> list[dict]:
        return ctx.map(summarize_one, rows, fallback, workers=workers, summarize=fn)

    with owned.temp_dir("clawloop-diagnose-") as tmp, ExitStack() as stack:
        out = Path(tmp) / "out"
        tasks = verified_tasks(ctx, "eval", Path(tmp) / "tasks")
        evals: list[dict[str, Any]] = []
        endpoint, served = None, "no policy served: no verified eval task"
        if tasks:
            policy, served = stack.enter_context(serve_policy(ctx, ctx.iteration))
            evals = roll_out(ctx, tasks, policy, eval_rollout_config(cfg), workers)
            endpoint = policy.endpoint()
        res = diagnose_stage(
            pd.DataFrame(evals, columns=schemas.TRAJECTORIES.names),
            _history(ctx),
            diagnose_config(cfg),
            endpoint,
            out,
            ctx.iteration,
            prev_guidance=previous,
            capabilities=capabilities,
            map_rows=map_rows,
        )
        files = {n: (out / n).read_bytes() for n in FILES if (out / n).is_file()}
    return StageResult(
        {"eval_trajectories": (with_host_column(schemas.TRAJECTORIES), evals), **res.tables()},
        files=files,
        summary={"policy": served, "eval_tasks": len(tasks), **res.summary},
    )


STAGE = StageSpec(
    "diagnose",
    run,
    config_slice,
    module=__name__,
    upstream=("synthesize", "forge", "verify", "train"),  # candidates name the capabilities
    previous=("diagnose",),
    workers=lambda cfg: cfg.diagnose.workers,
)
