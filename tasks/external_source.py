"""The synthesize stage's external source (tasks/source.py; `synthesize.external.tasks:
[{path, share}]`): each file's share of the train candidates swapped for its imported tasks
(origin external:clawgym), built-in slots first; forge and verify take them as imported
(tasks/external_rows.py). Rollout, the band filter and train then treat them as any train task.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.synthesis.config import SynthesizeConfig
from clawloop.synthesis.external import draw, external_candidate
from clawloop.synthesis.synthesize import share_of
from clawloop.tasks.external_rows import read_imported
from clawloop.tasks.source import Product, Source
from clawloop.tasks.stage import StageContext, StageError

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

Row = dict[str, Any]


def external_digest(s: SynthesizeConfig) -> dict[str, str]:
    """Each source file's sha256 (the cache key: re-importing re-runs synthesis)."""
    out = {}
    for src in s.external.tasks:
        p = Path(src.path).expanduser()
        out[src.path] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "missing"
    return out


def train_slots(rows: list[Row]) -> list[int]:
    """The train candidates' positions, built-in ones first: the slots external tasks take."""
    train = [i for i, r in enumerate(rows) if r["split"] == "train"]
    return sorted(train, key=lambda i: rows[i]["origin"] != "builtin")


def enabled(cfg: RunConfig) -> bool:
    return bool(cfg.synthesize.external.tasks)


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    s = cfg.synthesize
    return {
        "seed": cfg.seed,
        "iteration": iteration,
        "external": s.external.model_dump(mode="json"),
        "external_files": external_digest(s),
    }


def off(cfg: RunConfig) -> Product:
    return Product([], {})


def ask(cfg: RunConfig, iteration: int, rows: list[Row]) -> dict[str, Any]:
    """How many train slots there are, and the task ids already taken (ids must not clash)."""
    return {"slots": len(train_slots(rows)), "taken": sorted(r["task_id"] for r in rows)}


def make(ctx: StageContext, asked: dict[str, Any]) -> Product:
    """Each file's share of the train slots' worth of its imported tasks, drawn by (run seed,
    iteration, path)."""
    slots, taken = asked["slots"], set(asked["taken"])
    made: list[Row] = []
    per: dict[str, Any] = {}
    for src in ctx.config.synthesize.external.tasks:
        imported = read_imported(src.path)
        n = min(share_of(slots, src.share), slots - len(made))
        picks = [imported[i] for i in draw(len(imported), n, ctx.config.seed, ctx.iteration,
                                           src.path)]  # fmt: skip
        clash = sorted(taken & {r["task_id"] for r in picks})
        if clash:
            raise StageError(
                f"synthesize.external.tasks: task id {clash[0]} of {src.path} is already a "
                "candidate (two sources share ids); import them into one file"
            )
        made += [external_candidate(row) for row in picks]
        taken |= {r["task_id"] for r in picks}
        per[src.path] = {"available": len(imported), "drawn": len(picks)}
    return Product(made, {"external_tasks": len(made), "external_sources": per})


def place(rows: list[Row], product: Product) -> list[Row]:
    """`rows` with the first train slots (built-in first) given to the external tasks."""
    out = list(rows)
    for slot, cand in zip(train_slots(rows), product.candidates, strict=False):
        out[slot] = cand
    return out


SOURCE = Source(
    "external",
    __name__,
    enabled=enabled,
    config_slice=config_slice,
    make=make,
    place=place,
    off=off,
    ask=ask,
)
