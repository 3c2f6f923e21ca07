"""Diagnose: the new checkpoint attempts the held-out eval tasks; its failures are summarised
(one Prefect task each), clustered by root cause, and turned into a report and guidance.json,
which the next iteration's synthesize reads (capability weights, difficulty, failure patterns).

An external held-out eval set (`diagnose.eval_tasks: [DIR, ...]`, Harbor or ClawGym data set
folders: folders of task folders, e.g. a benchmark's; a ClawGym task runs as the Harbor folder
harness/taskfolder/clawgym.py makes of it, graded by its own reward.sh, passed at
`diagnose.eval_pass_threshold`) is rolled out every iteration beside our own held-out split
and graded by its own tests. It is kept apart: its episodes are `external_trajectories` (split
"external"), its pass rates `external_pass_rates` (one row per eval set and capability, "*" the
whole set, `external` true), a section of report.md and external_pass_rates.png over iterations,
and `external_*` figures in the stage summary. It never enters the own pass rates, the failure
summaries or the guidance.

`diagnose.baseline` adds the run's row 0: the base policy (no training yet) on the same held-out
and external tasks, graded by iteration 1's rollout stage while it serves the base policy
(tasks/heldout.py); iteration 1's diagnose carries its episodes into `baseline_trajectories` and
its figures into the summary's `baseline` ({policy, heldout: {capability: [passed, n]},
heldout_passed, heldout_episodes, external_*}), which `clawloop report` shows as row "base". With
`synthesize.fixed_eval` every iteration then grades the very tasks row 0 was graded on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.diagnosis.diagnose import (
    GUIDANCE_NAME,
    PLOT_NAME,
    REPORT_NAME,
    diagnose_stage,
    heldout_counts,
)
from clawloop.diagnosis.external import (
    EXTERNAL_PLOT,
    EXTERNAL_SPLIT,
    external_fingerprint,
    external_pass_rates,
    external_report,
    external_summary,
    plot_external,
)
from clawloop.diagnosis.guidance import read_guidance
from clawloop.diagnosis.summary import SummaryConfig, summarize_failure
from clawloop.harness import owned
from clawloop.harness.sandbox.pool import with_host_column
from clawloop.storage import artifacts, schemas
from clawloop.storage.schemas import FailureSummary, Trajectory
from clawloop.tasks.episodes import roll_out, verified_tasks
from clawloop.tasks.heldout import (
    BASELINE_TABLE,
    ExternalTask,
    baseline_due,
    baseline_from_rollout,
    eval_rollout_config,
    external_tasks,
    roll_out_external,
)
from clawloop.tasks.policy import policy_slice, serve_policy
from clawloop.tasks.settings import section_dump
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.diagnose")
FILES = (REPORT_NAME, PLOT_NAME, GUIDANCE_NAME)


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


def start_levels(cfg: RunConfig) -> tuple[int, int]:
    """Where guidance difficulty starts: where synthesis starts (synthesize.multihop/dirtiness),
    so guidance never drops below it."""
    return cfg.synthesize.multihop, cfg.synthesize.dirtiness


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    # baseline keys the stage only when on (and only iteration 1 runs it), so runs from before
    # it keep their keys
    off = {"baseline"} if not (cfg.diagnose.baseline and iteration == 1) else set()
    return {
        "diagnose": cfg.diagnose.model_dump(mode="json", exclude=off),
        # guidance difficulty starts where synthesis starts
        "start_levels": [cfg.synthesize.multihop, cfg.synthesize.dirtiness],
        "rollout": section_dump(cfg.rollout),
        "sandbox": cfg.sandbox.cache_slice(),
        # an edited external task re-runs the stage
        "eval_tasks": external_fingerprint(cfg.diagnose.eval_tasks),
        **policy_slice(cfg),
    }


def _external_history(ctx: StageContext, rates: list[dict[str, Any]]) -> pd.DataFrame:
    """Earlier iterations' external_pass_rates rows (where they were written) + this one's."""
    frames = []
    for k in range(1, ctx.iteration):
        m = ctx.manifest("diagnose", k)
        if m is not None and "external_pass_rates.parquet" in {f.name for f in m.files}:
            frames.append(artifacts.read_table(ctx.stage_url("diagnose", k), "external_pass_rates"))
    frames.append(pd.DataFrame(rates, columns=schemas.EXTERNAL_PASS_RATES.names))
    return pd.concat([f for f in frames if not f.empty] or frames[-1:], ignore_index=True)


def _history(ctx: StageContext) -> pd.DataFrame | None:
    frames = [
        artifacts.read_table(ctx.stage_url("diagnose", k), "pass_rates")
        for k in range(1, ctx.iteration)
        if ctx.manifest("diagnose", k) is not None
    ]
    return pd.concat(frames, ignore_index=True) if frames else None


def baseline_figures(
    cfg: RunConfig, rows: list[dict[str, Any]], external: list[ExternalTask], policy: str
) -> dict[str, Any]:
    """The summary's `baseline` (row 0) from its episodes: {policy, heldout: {capability:
    [passed, n]}, heldout_passed, heldout_episodes, external_*}."""
    evals = [r for r in rows if r["split"] != EXTERNAL_SPLIT]
    ext = [r for r in rows if r["split"] == EXTERNAL_SPLIT]
    counts = heldout_counts(evals)
    figures: dict[str, Any] = {
        "policy": policy,
        "heldout": counts,
        "heldout_passed": sum(p for p, _ in counts.values()),
        "heldout_episodes": sum(n for _, n in counts.values()),
    }
    if cfg.diagnose.eval_tasks:
        rates = external_pass_rates(ext, [row for _, row, _ in external], 0)
        figures.update(external_summary(rates, len(external), ext))
    log.info(
        "baseline (the base policy): held-out %d/%d passed%s",
        figures["heldout_passed"],
        figures["heldout_episodes"],
        f", external {figures['external_passed']}/{figures['external_episodes']}"
        if cfg.diagnose.eval_tasks
        else "",
    )
    return figures


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
        # before any policy is served: an external task that cannot run here stops the stage
        external = external_tasks(ctx, Path(tmp) / "external") if cfg.diagnose.eval_tasks else []
        evals: list[dict[str, Any]] = []
        ext_rows: list[dict[str, Any]] = []
        base: tuple[list[dict[str, Any]], dict[str, Any]] | None = None
        if baseline_due(cfg, ctx.iteration) and (tasks or external):
            # rolled out while iteration 1's rollout served the base policy
            rows, note = baseline_from_rollout(ctx)
            base = rows, baseline_figures(cfg, rows, external, note)
        endpoint, served = None, "no policy served: no verified eval task"
        if tasks or external:
            policy, served = stack.enter_context(serve_policy(ctx, ctx.iteration))
            if tasks:
                evals = roll_out(ctx, tasks, policy, eval_rollout_config(cfg), workers)
            if external:
                ext_rows = roll_out_external(
                    ctx, external, policy, eval_rollout_config(cfg), workers
                )
            endpoint = policy.endpoint()
        res = diagnose_stage(
            pd.DataFrame(evals, columns=schemas.TRAJECTORIES.names),
            _history(ctx),
            cfg.diagnose,
            endpoint,
            out,
            ctx.iteration,
            prev_guidance=previous,
            capabilities=capabilities,
            map_rows=map_rows,
            start_levels=start_levels(cfg),
        )
        files = {n: (out / n).read_bytes() for n in FILES if (out / n).is_file()}
    tables = {"eval_trajectories": (with_host_column(schemas.TRAJECTORIES), evals), **res.tables()}
    summary = {"policy": served, "eval_tasks": len(tasks), **res.summary}
    if base is not None:
        tables[BASELINE_TABLE] = (with_host_column(schemas.TRAJECTORIES), base[0])
        summary["baseline"] = base[1]
    if cfg.diagnose.eval_tasks:
        rates = external_pass_rates(ext_rows, [row for _, row, _ in external], ctx.iteration)
        history = _external_history(ctx, rates)
        tables["external_trajectories"] = (with_host_column(schemas.TRAJECTORIES), ext_rows)
        tables["external_pass_rates"] = (schemas.EXTERNAL_PASS_RATES, rates)
        report = files.get(REPORT_NAME, b"").decode()
        files[REPORT_NAME] = (report + external_report(history, ctx.iteration)).encode()
        files[EXTERNAL_PLOT] = plot_external(history)
        summary.update(external_summary(rates, len(external), ext_rows))
    return StageResult(tables, files=files, summary=summary)


STAGE = StageSpec(
    "diagnose",
    run,
    config_slice,
    module=__name__,
    # candidates name the capabilities; iteration 1's rollout graded row 0 (diagnose.baseline)
    upstream=("synthesize", "forge", "verify", "rollout", "train"),
    previous=("diagnose",),
    workers=lambda cfg: cfg.diagnose.workers,
)
