"""Train: SFT on the passed episodes of band-kept tasks, then GRPO on their groups; writes a
servable checkpoint inside the stage folder (every file of it in the manifest) and metrics rows.

A crash in training raises (training.stage.TrainError): the engine records the stage as failed
and does not commit it, so the policy never silently stays the base model and a resumed run
re-runs training.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from clawloop.storage import artifacts, schemas
from clawloop.tasks.policy import (
    MODEL_DIR,
    local_stage_dir,
    policy_adapter,
    policy_dir,
    policy_slice,
)
from clawloop.tasks.settings import section_dump
from clawloop.tasks.stage import StageContext, StageResult, StageSpec
from clawloop.training.config import TrainConfig
from clawloop.training.stage import token_summary, train_stage

if TYPE_CHECKING:
    from clawloop.harness.rollout import RolloutConfig
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.train")


def agent_tool_call_parser():
    """The tool-call parser the agent reads replies with (harness/toolcalls.py), in training's
    shape (calls, errors, prose left): the template fallback keeps a turn only if its rendering
    parses back into the same calls with it."""
    from clawloop.harness.toolcalls import parse_tool_calls

    def parse(text: str) -> tuple[list[Any], list[str], str]:
        found = parse_tool_calls(text)
        return list(found.calls), list(found.errors), found.content

    return parse


def train_config(cfg: RunConfig) -> TrainConfig:
    """The `train:` section: training.config.TrainConfig itself."""
    return cfg.train


def untrainable(rollout: RolloutConfig, train: TrainConfig) -> list[str]:
    """What in this rollout + train pair can never train, each with the fix; [] when it can.

    Pure and self-contained: `tasks.config.RunConfig` calls it once when the file loads, so a run
    that would report `nothing_to_train` every iteration is refused before any stage runs."""
    n, lo, hi = rollout.n, rollout.band_lo, rollout.band_hi
    band = f"rollout.band [{lo}, {hi}]"
    problems: list[str] = []
    if lo > n:
        problems.append(
            f"{band} keeps tasks with at least {lo} passes out of rollout.n={n}: no task can be "
            f"kept, so nothing is ever trained; set the band within [0, {n}], e.g. [1, {max(1, n - 1)}]"
        )
        return problems
    if train.run_grpo:
        if n < 2:
            problems.append(
                f"GRPO (train.phases: {train.phases}) compares the rollouts of one task, but "
                f"rollout.n={n} makes groups of one, which have no reward spread: set rollout.n to "
                "2 or more (8 in the GRPO papers), or train.phases: sft"
            )
        else:
            # Under the outcome reward a group has spread only with some but not all passed; a
            # shaped reward can still differ among all-failed groups, never among all-passed.
            spread_lo = 1 if train.reward == "outcome" else 0
            if hi < spread_lo or lo > n - 1:
                problems.append(
                    f"GRPO (train.phases: {train.phases}, train.reward: {train.reward}) needs "
                    f"kept groups whose rewards differ, but {band} with rollout.n={n} keeps only "
                    f"groups that all {'passed' if lo > n - 1 else 'failed'}: set the band "
                    f"within [{spread_lo}, {n - 1}], e.g. [1, {n - 1}]"
                )
    if train.run_sft and hi < 1:
        problems.append(
            f"SFT (train.phases: {train.phases}) trains on passed episodes of kept tasks, but "
            f"{band} keeps only tasks that never passed: set rollout.band's high end to 1 or "
            "more, or train.phases: grpo"
        )
    return problems


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {"train": section_dump(cfg.train), **policy_slice(cfg)}


def run(ctx: StageContext) -> StageResult:
    tcfg = train_config(ctx.config)  # checked when the config was loaded
    traj = artifacts.read_table(ctx.stage_url("rollout"), "trajectories")
    band = artifacts.read_table(ctx.stage_url("rollout"), "band")
    adapter = policy_adapter(ctx, ctx.iteration - 1) if tcfg.lora else None
    result = train_stage(
        traj,
        band,
        tcfg,
        policy_dir(ctx, ctx.iteration - 1),
        local_stage_dir(ctx) / MODEL_DIR,
        init_adapter=adapter,
        tool_call_parser=agent_tool_call_parser(),
    )
    metrics = result.metrics_frame().to_dict("records")
    if result.status != "trained":
        log.warning(
            "train iter %d trained nothing (%s): %s; the next policy is the same weights",
            ctx.iteration,
            result.status,
            result.reason,
        )
    return StageResult(
        {
            "checkpoint": (schemas.CHECKPOINT, [result.checkpoint_row()]),
            "metrics": (schemas.TRAIN_METRICS, metrics),
        },
        dirs=[MODEL_DIR],
        summary={
            "status": result.status,
            "reason": result.reason.splitlines()[0] if result.reason else "",
            "steps": len(metrics),
            "checkpoint": str(result.checkpoint_dir),
            "continued_adapter": str(adapter) if adapter else "",
            # where GRPO's old-policy logprobs came from: the server, or frozen at phase start
            "logprobs_recorded": result.counts.get("grpo_logprobs_recorded", 0),
            "logprobs_frozen": result.counts.get("grpo_logprobs_frozen", 0),
            # how the trained tokens were built: the server's sampled ids, the tokenised sampled
            # text, or dropped (sampled text unknown); and logprob / end-of-turn trouble
            **token_summary(result.counts),
            "train_seconds": round(result.duration_s, 2),
        },
    )


STAGE = StageSpec(
    "train", run, config_slice, module=__name__, upstream=("rollout",), previous=("train",)
)
