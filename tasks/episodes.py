"""Agent episodes for the rollout and diagnose stages: verified task folders in, one Prefect task
run per episode (`run_episode`), trajectory rows out in (task, attempt) order.

Episodes go through `ctx.map` like forge and verify, so the UI lists each one and the stage's
task runner bounds how many are in flight. The policy failing a task is a result; an episode that
ends in an infrastructure fault (the endpoint stopped answering, the sandbox failed, the harness
broke: `INFRA_END_REASONS`) says nothing about the policy, so it is retried, and if it persists
the stage fails (nothing committed) with what to fix, and a resumed run runs it again.
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
from clawloop.harness.sandbox.pool import HOST_COLUMN, hosts_used
from clawloop.harness.taskfolder.folder import TaskFolder
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.harness.tools import TOOLS
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.storage.schemas import INFRA_END_REASONS, Trajectory
from clawloop.tasks.mapping import InfraFault, retry_transient
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, fail_on_infra

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
    retries=2,
    retry_delay_seconds=[2, 5],
    retry_condition_fn=retry_transient,
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
) -> Trajectory:
    """One episode of one task in a fresh sandbox, graded: a TRAJECTORIES row. An episode that
    ended in an infrastructure fault raises InfraFault (retried; the row travels with it)."""
    task_dir, task_row, attempt = job
    with hosts_used() as hosts:
        task = TaskFolder.for_row(task_dir, task_row)
        row = safe_attempt(task, policy, client, attempt, sandbox, cfg, count_tokens)
    row = {**row, HOST_COLUMN: hosts.label()}
    if row["end_reason"] in INFRA_END_REASONS:
        raise InfraFault(f"{row['end_reason']}: {row['error'] or 'no detail'}", row)
    return row


def _lost(job: Job, exc: BaseException) -> Trajectory:
    task_dir, row, attempt = job
    if isinstance(exc, InfraFault) and exc.row is not None:
        return exc.row
    log.error("episode %d of %s was lost: %s", attempt, task_dir, exc)
    return empty_row(
        schemas.TRAJECTORIES,
        task_id=str(row.get("task_id", "")),
        capability=str(row.get("capability", "")),
        split=str(row.get("split", "")),
        attempt=attempt,
        end_reason="harness_error",
        error=f"{type(exc).__name__}: {exc}",
    ) | {HOST_COLUMN: ""}


def roll_out(
    ctx: StageContext,
    tasks: list[tuple[Path, dict[str, Any]]],
    policy: PolicyConfig,
    cfg: RolloutConfig,
    workers: int,
    sandbox: SandboxConfig | None = None,
) -> list[dict[str, Any]]:
    """`cfg.n` episodes of every task through `ctx.map`, ordered by task then attempt, in
    `sandbox` (default: the run's sandbox config, checked)."""
    return roll_out_sets(ctx, [(tasks, cfg.n)], policy, cfg, workers, sandbox)[0]


def roll_out_sets(
    ctx: StageContext,
    sets: list[tuple[list[tuple[Path, dict[str, Any]]], int]],
    policy: PolicyConfig,
    cfg: RolloutConfig,
    workers: int,
    sandbox: SandboxConfig | None = None,
) -> list[list[dict[str, Any]]]:
    """Several sets of tasks, `n` episodes per task of each `(tasks, n)`, in ONE `ctx.map`: at
    most `workers` episodes of all sets in flight (under a Prefect flow, the stage's runner), so
    the server batches the requests of every set and no set waits for another's last episode.
    Each episode runs with `cfg`'s settings but its set's `n` (an episode never reads `n`).
    Returns each set's rows, ordered by task then attempt."""
    jobs: list[Job] = [(d, row, a) for tasks, n in sets for d, row in tasks for a in range(n)]
    t0 = time.monotonic()
    rows = ctx.map(
        run_episode,
        jobs,
        _lost,
        workers=workers,
        policy=policy,
        client=make_client(policy.endpoint()),
        sandbox=sandbox or sandbox_for(ctx),
        cfg=cfg,
        count_tokens=chat_token_counter(policy.tokenizer, TOOLS) if policy.tokenizer else None,
    )
    infra = [
        f"{r['task_id']} attempt {r['attempt']}: {r['end_reason']}: {r['error'][:300]}"
        for r in rows
        if r["end_reason"] in INFRA_END_REASONS
    ]
    fix = (
        f"check the policy endpoint {policy.base_url} (is it up, does it serve {policy.model}?) "
        "and the sandbox engine"
    )
    fail_on_infra(ctx, "episodes", infra, len(rows), fix)
    wall = time.monotonic() - t0
    out: list[list[dict[str, Any]]] = []
    for tasks, n in sets:
        part, rows = rows[: len(tasks) * n], rows[len(tasks) * n :]
        out.append(part)
        log.info(
            "%s: %d episodes of %d tasks in %.1fs%s, %d passed (policy %s)",
            ctx.stage,
            len(part),
            len(tasks),
            wall,
            f" (in one map with {len(jobs) - len(part)} other episodes)" if len(sets) > 1 else "",
            sum(bool(r["passed"]) for r in part),
            policy.id,
        )
    return out
