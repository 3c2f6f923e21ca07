"""Agent episodes for the rollout and diagnose stages: verified task folders in, one Prefect task
run per episode (`run_episode`), trajectory rows out in (task, attempt) order.

Episodes go through `ctx.map` like forge and verify, so the UI lists each one and the stage's
task runner bounds how many are in flight. A fault inside an episode is a row with an end reason
(`safe_attempt`), never a crashed stage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.harness.llm import PolicyConfig, chat_token_counter, make_client
from clawloop.harness.rollout import RolloutConfig, safe_attempt
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.folder import unpack_tar
from clawloop.harness.tools import TOOLS
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.tasks.stage import StageContext

log = logging.getLogger("clawloop.episodes")
Job = tuple[Path, dict[str, Any], int]  # (task folder, task row without its tar, attempt)


def verified_tasks(ctx: StageContext, split: str, into: Path) -> list[tuple[Path, dict[str, Any]]]:
    """This iteration's kept tasks of one split, unpacked into task folders under `into`."""
    kept = {
        v["task_id"] for v in ctx.rows("verify", "verdicts") if v["kept"] and v["split"] == split
    }
    out = []
    for row in ctx.rows("forge", "tasks"):
        if row["task_id"] in kept:
            folder = unpack_tar(row["task_tar"], into / row["task_id"])
            out.append((folder, {k: v for k, v in row.items() if k != "task_tar"}))
    return out


@task(
    name="run-episode",
    task_run_name="episode-{job[1][task_id]}-{job[2]}",
    cache_policy=NO_CACHE,
    persist_result=False,
)
def run_episode(
    job: Job,
    policy: PolicyConfig,
    client: openai.OpenAI,
    sandbox: SandboxConfig,
    cfg: RolloutConfig,
    count_tokens: Callable[[list[dict]], int] | None,
) -> dict[str, Any]:
    """One episode of one task in a fresh sandbox, graded: a TRAJECTORIES row. A sandbox that
    fails to start is retried inside (`SANDBOX_START_ATTEMPTS`); any other fault is a row."""
    task_dir, task_row, attempt = job
    return safe_attempt(task_dir, task_row, policy, client, attempt, sandbox, cfg, count_tokens)


def _lost(job: Job, exc: BaseException) -> dict[str, Any]:
    task_dir, row, attempt = job
    log.error("episode %d of %s was lost: %s", attempt, task_dir, exc)
    return empty_row(
        schemas.TRAJECTORIES,
        task_id=str(row.get("task_id", "")),
        capability=str(row.get("capability", "")),
        split=str(row.get("split", "")),
        attempt=attempt,
        end_reason="harness_error",
        error=f"{type(exc).__name__}: {exc}",
    )


def roll_out(
    ctx: StageContext,
    tasks: list[tuple[Path, dict[str, Any]]],
    policy: PolicyConfig,
    cfg: RolloutConfig,
    workers: int,
) -> list[dict[str, Any]]:
    """`cfg.n` episodes of every task through `ctx.map`, ordered by task then attempt."""
    jobs: list[Job] = [(d, row, a) for d, row in tasks for a in range(cfg.n)]
    t0 = time.monotonic()
    rows = ctx.map(
        run_episode,
        jobs,
        _lost,
        workers=workers,
        policy=policy,
        client=make_client(policy.endpoint()),
        sandbox=ctx.config.sandbox.to_sandbox_config(),
        cfg=cfg,
        count_tokens=chat_token_counter(policy.tokenizer, TOOLS) if policy.tokenizer else None,
    )
    log.info(
        "%s: %d episodes of %d tasks in %.1fs, %d passed (policy %s)",
        ctx.stage,
        len(rows),
        len(tasks),
        time.monotonic() - t0,
        sum(bool(r["passed"]) for r in rows),
        policy.id,
    )
    return rows
