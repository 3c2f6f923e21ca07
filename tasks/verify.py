"""Verify: the agent-free checks on each forged task (oracle, no-op, leak, trivial probes,
determinism); one verdict per task, kept or dropped with the reason. The `verify:` section is
generators.verify.VerifyConfig."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.generators.verify import verify_tasks
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.sandbox.pool import HOST_COLUMN, hosts_used, with_host_column
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.storage.schemas import Check, Forged, Verdict
from clawloop.tasks.external_rows import external_verdicts, split_external
from clawloop.tasks.mapping import SANDBOX_RETRIES, is_transient, retry_transient
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, StageResult, StageSpec, fail_on_infra

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.verify")
Checked = tuple[list[Check], Verdict]


def _run_name() -> str:
    """verify-<first task id>+<how many more> in the Prefect UI."""
    from prefect.runtime import task_run

    rows = task_run.parameters.get("forged") or [{"task_id": "?"}]
    return f"verify-{rows[0]['task_id']}" + (f"+{len(rows) - 1}" if len(rows) > 1 else "")


@task(
    name="verify-batch",
    task_run_name=_run_name,
    retries=SANDBOX_RETRIES,
    retry_delay_seconds=[1, 2, 4],
    retry_condition_fn=retry_transient,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def verify_batch(forged: list[Forged], sandbox: SandboxConfig) -> list[Checked]:
    """FORGED rows -> each one's CHECKS rows and VERDICTS row (naming the hosts the batch's
    sandboxes ran on); a sandbox fault raises (the batch is retried)."""
    with hosts_used() as hosts:
        results = verify_tasks(forged, sandbox)
    return [(checks, {**verdict, HOST_COLUMN: hosts.label()}) for checks, verdict in results]


def _crashed(forged: Forged, exc: BaseException) -> Checked:
    reason = f"verify could not run: {type(exc).__name__}: {exc}"
    log.warning("verify of %s raised: %s", forged["task_id"], reason)
    check = empty_row(
        schemas.CHECKS, task_id=forged["task_id"], check="verify", passed=False, reason=reason
    )
    verdict = empty_row(
        schemas.VERDICTS,
        task_id=forged["task_id"],
        kept=False,
        reason=reason,
        capability=forged["capability"],
        domain=forged["domain"],
        split=forged["split"],
    )
    return [check], {**verdict, HOST_COLUMN: ""}


def batches(rows: list[Forged], size: int, workers: int) -> list[list[Forged]]:
    """Consecutive batches of at most `size` rows, small enough that `workers` all get one."""
    if not rows:
        return []
    per = max(1, min(size, -(-len(rows) // max(1, workers))))
    return [rows[i : i + per] for i in range(0, len(rows), per)]


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {"sandbox": cfg.sandbox.cache_slice()}


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    external, forged = split_external(ctx, ctx.rows("forge", "tasks"))  # imported: no checks
    infra: list[str] = []

    def crashed(batch: list[Forged], exc: BaseException) -> list[Checked]:
        if is_transient(exc):
            infra.extend(f"{row['task_id']}: {type(exc).__name__}: {exc}" for row in batch)
        return [_crashed(row, exc) for row in batch]

    box = sandbox_for(ctx) if forged else cfg.sandbox.to_sandbox_config()
    groups = batches(forged, cfg.verify.batch, cfg.verify.workers)
    done = ctx.map(verify_batch, groups, crashed, workers=cfg.verify.workers, sandbox=box)
    results = [r for batch in done for r in batch] + external_verdicts(external)
    fail_on_infra(ctx, "tasks", infra, len(forged), "fix the sandbox engine (see the error)")
    checks = [c for cs, _ in results for c in cs]
    verdicts = [v for _, v in results]
    kept = sum(v["kept"] for v in verdicts)
    return StageResult(
        {
            "checks": (schemas.CHECKS, checks),
            "verdicts": (with_host_column(schemas.VERDICTS), verdicts),
        },
        summary={
            "kept": kept,
            "dropped": len(verdicts) - kept,
            "kept_train": sum(v["kept"] and v["split"] == "train" for v in verdicts),
        },
    )


STAGE = StageSpec(
    "verify",
    run,
    config_slice,
    module=__name__,
    upstream=("forge",),
    workers=lambda cfg: cfg.verify.workers,
)
