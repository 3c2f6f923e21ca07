"""Forge's and verify's handling of external candidates (synthesize.external.tasks, see
tasks/external_source.py): forge takes the imported row instead of running a generator, verify
keeps it without the generator checks (it has no reference solution; its own verifier grades
it, `clawloop audit` probes it). Kept apart from the synthesize side so forge and verify do not
depend on the synthesis library's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from clawloop.harness.sandbox.pool import HOST_COLUMN
from clawloop.storage import schemas
from clawloop.storage.artifacts import empty_row
from clawloop.synthesis.external import is_external
from clawloop.tasks.stage import StageContext, StageError

Row = dict[str, Any]
VERIFY_REASON = "external task: graded by its own verifier (no reference solution to check)"


def read_imported(path: str) -> list[Row]:
    p = Path(path).expanduser()
    try:
        rows = pq.read_table(p).to_pylist()
    except (OSError, pa.ArrowInvalid) as exc:
        raise StageError(
            f"synthesize.external.tasks: {p} is not a readable tasks.parquet ({exc}); write one "
            "with `clawloop import clawgym DIR --out tasks.parquet`"
        ) from exc
    if rows and "task_tar" not in rows[0]:
        raise StageError(f"synthesize.external.tasks: {p} has no task_tar column; not an import")
    return [r for r in rows if r.get("status") == "ok"]


def forged_external(ctx: StageContext, candidates: list[Row]) -> list[Row]:
    """Forge's rows for the external candidates: the imported FORGED rows themselves."""
    if not candidates:
        return []
    by_sha: dict[str, Row] = {}
    for src in ctx.config.synthesize.external.tasks:
        by_sha.update({r["task_sha256"]: r for r in read_imported(src.path)})
    out = []
    for c in candidates:
        row = by_sha.get(c["generator_sha256"])
        if row is None:
            raise StageError(
                f"forge: external task {c['task_id']} is no longer in synthesize.external.tasks' "
                "files (re-imported since synthesize ran?); re-run from synthesize"
            )
        out.append({**row, "split": "train", HOST_COLUMN: ""})
    return out


def split_external(ctx: StageContext, rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """(rows of external candidates, the others), by this iteration's candidates' origin."""
    ids = {c["task_id"] for c in ctx.rows("synthesize", "candidates") if is_external(c)}
    return [r for r in rows if r["task_id"] in ids], [r for r in rows if r["task_id"] not in ids]


def external_verdicts(rows: list[Row]) -> list[tuple[list[Row], Row]]:
    """Verify's (checks, verdict) for external rows: kept, saying why no check ran."""
    out = []
    for r in rows:
        check = empty_row(schemas.CHECKS, task_id=r["task_id"], check="external", passed=True,
                          reason=VERIFY_REASON)  # fmt: skip
        verdict = empty_row(schemas.VERDICTS, task_id=r["task_id"], kept=True,
                            reason=VERIFY_REASON, capability=r["capability"],
                            domain=r["domain"], split=r["split"])  # fmt: skip
        out.append(([check], {**verdict, HOST_COLUMN: ""}))
    return out
