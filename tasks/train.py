"""Train: GRPO on the groups of band-kept tasks, then SFT on their passed episodes; writes a
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
    release_for_training,
)
from clawloop.tasks.settings import section_dump
from clawloop.tasks.stage import StageContext, StageResult, StageSpec
from clawloop.training.result import tis_summary
from clawloop.training.stage import token_summary, train_stage

if TYPE_CHECKING:
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


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {"train": section_dump(cfg.train), **policy_slice(cfg)}


def run(ctx: StageContext) -> StageResult:
    tcfg = ctx.config.train  # checked when the config was loaded
    traj = artifacts.read_table(ctx.stage_url("rollout"), "trajectories")
    band = artifacts.read_table(ctx.stage_url("rollout"), "band")
    adapter = policy_adapter(ctx, ctx.iteration - 1) if tcfg.lora else None
    release_for_training(ctx.config)  # a managed vLLM the new weights will restart anyway
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
            # train.tis_cap: mean truncated IS weight and its token count, or why there is none
            **tis_summary(result.metrics, result.counts),
            "train_seconds": round(result.duration_s, 2),
        },
    )


STAGE = StageSpec(
    "train", run, config_slice, module=__name__, upstream=("rollout",), previous=("train",)
)
