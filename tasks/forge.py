"""Forge: each candidate's generator builds its seed in a sandbox into a task folder row.

A sandbox fault is transient and retried inside `forge_candidate` (its row counts the attempts,
`forge.retries` of them at most); a generator bug is not retried and becomes a failed row. The
`forge:` section is generators.forge.ForgeConfig.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.generators.forge import forge_candidate
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.sandbox.pool import HOST_COLUMN, hosts_used, with_host_column
from clawloop.harness.taskfolder.rows import forged_row
from clawloop.storage import schemas
from clawloop.storage.schemas import Candidate, Forged
from clawloop.synthesis.external import is_external
from clawloop.tasks.external_rows import forged_external
from clawloop.tasks.mapping import is_transient
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, StageResult, StageSpec, fail_on_infra

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.forge")


@task(
    name="forge-one",
    task_run_name="forge-{candidate[task_id]}",
    cache_policy=NO_CACHE,
    persist_result=False,
)
def forge_one(candidate: Candidate, sandbox: SandboxConfig, retries: int) -> Forged:
    """A CANDIDATES row -> a FORGED row (status ok, or failed with error and error_kind), with
    the host its sandbox ran on."""
    with hosts_used() as hosts:
        row = forge_candidate(candidate, sandbox, retries=retries)
    return {**row, HOST_COLUMN: hosts.label()}


def _crashed(candidate: Candidate, exc: BaseException) -> Forged:
    log.warning("forge of %s raised instead of returning a row: %s", candidate["task_id"], exc)
    return forged_row(
        candidate,
        error=f"{type(exc).__name__}: {exc}",
        error_kind="sandbox" if is_transient(exc) else "crash",
        attempts=1,
        **{HOST_COLUMN: ""},
    )


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {"sandbox": cfg.sandbox.cache_slice(), "retries": cfg.forge.retries}


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config
    candidates = ctx.rows("synthesize", "candidates")
    external = [c for c in candidates if is_external(c)]  # imported: already task folders
    rows = ctx.map(
        forge_one,
        [c for c in candidates if not is_external(c)],
        _crashed,
        workers=cfg.forge.workers,
        sandbox=sandbox_for(ctx),
        retries=cfg.forge.retries,
    ) + forged_external(ctx, external)
    infra = [f"{r['task_id']}: {r['error']}" for r in rows if r["error_kind"] == "sandbox"]
    fail_on_infra(ctx, "tasks", infra, len(rows), "fix the sandbox engine (see the error)")
    ok = sum(r["status"] == "ok" for r in rows)
    kinds: dict[str, int] = {}
    for r in rows:
        if r["status"] != "ok":
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    return StageResult(
        {"tasks": (with_host_column(schemas.FORGED), rows)},
        summary={"forged": ok, "failed": len(rows) - ok, "failures": kinds},
    )


STAGE = StageSpec(
    "forge",
    run,
    config_slice,
    module=__name__,
    upstream=("synthesize",),
    workers=lambda cfg: cfg.forge.workers,
)
