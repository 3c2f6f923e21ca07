"""The synthesize stage's external source (`synthesize.external_tasks: [{path, share}]`): each
source's share of the train candidates swapped for imported tasks (origin external:clawgym), and
forge and verify take them as imported (tasks/external_rows.py). Rollout, the band filter and
train then treat them as any train task.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from clawloop.synthesis.external import draw, external_candidate
from clawloop.synthesis.synthesize import SynthesizeConfig, share_of
from clawloop.tasks.external_rows import read_imported
from clawloop.tasks.stage import StageContext, StageError

Row = dict[str, Any]


def external_digest(s: SynthesizeConfig) -> dict[str, str]:
    """Each source file's sha256 (the cache key: re-importing re-runs synthesis)."""
    out = {}
    for src in s.external_tasks:
        p = Path(src.path).expanduser()
        out[src.path] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "missing"
    return out


def add_external_tasks(ctx: StageContext, rows: list[Row]) -> tuple[list[Row], dict[str, Any]]:
    """(rows with each source's share of the train candidates swapped for its imported tasks,
    the built-in ones first, summary)."""
    s = ctx.config.synthesize
    if not s.external_tasks:
        return rows, {}
    train = [i for i, r in enumerate(rows) if r["split"] == "train"]
    train.sort(key=lambda i: rows[i]["origin"] != "builtin")  # built-in slots go first
    out, used, per = list(rows), 0, {}
    taken = {r["task_id"] for r in rows}
    for src in s.external_tasks:
        imported = read_imported(src.path)
        n = min(share_of(len(train), src.share), len(train) - used)
        picks = [imported[i] for i in draw(len(imported), n, ctx.config.seed, ctx.iteration,
                                           src.path)]  # fmt: skip
        clash = sorted(taken & {r["task_id"] for r in picks})
        if clash:
            raise StageError(
                f"synthesize.external_tasks: task id {clash[0]} of {src.path} is already a "
                "candidate (two sources share ids); import them into one file"
            )
        for slot, row in zip(train[used : used + len(picks)], picks, strict=True):
            out[slot] = external_candidate(row)
            taken.add(row["task_id"])
        used += len(picks)
        per[src.path] = {"available": len(imported), "drawn": len(picks)}
    return out, {"external_tasks": used, "external_sources": per}
