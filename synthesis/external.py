"""Imported external tasks as a synthesis source (`synthesize.external.tasks: [{path, share}]`):
the config entry, and the pure parts (which imported tasks an iteration draws, the candidate row
that stands for one). The stage side (reading the imported rows, forge's and verify's handling)
is tasks/external_source.py.

An imported task (`clawloop import clawgym|harbor ... --out tasks.parquet`) is already a task
folder: its candidate carries no generator (generator_code ""), its generator_sha256 is the
task's sha256, its origin `external:<domain>` (external:clawgym).
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ORIGIN_PREFIX = "external:"


class ExternalTaskSource(BaseModel):
    """One source of imported tasks mixed into the train split."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="a tasks.parquet written by `clawloop import clawgym|harbor`")
    share: float = Field(
        ge=0.0, le=1.0, description="fraction of the train candidates drawn from this source"
    )


def is_external(candidate: dict[str, Any]) -> bool:
    return str(candidate.get("origin") or "").startswith(ORIGIN_PREFIX)


def draw(n_rows: int, n: int, seed: int, iteration: int, path: str) -> list[int]:
    """Which `n` of `n_rows` imported tasks an iteration draws: a fixed shuffle of the source per
    run seed, walked in turn, so iterations see different tasks until the source is used up."""
    if n_rows == 0 or n == 0:
        return []
    order = list(range(n_rows))
    random.Random(f"{seed}:{path}").shuffle(order)
    start = ((iteration - 1) * n) % n_rows
    return [order[(start + i) % n_rows] for i in range(min(n, n_rows))]


def external_candidate(row: dict[str, Any]) -> dict[str, Any]:
    """The CANDIDATES row that stands for an imported FORGED row in the train split."""
    return {
        "task_id": str(row["task_id"]),
        "generator_code": "",
        "generator_sha256": str(row["task_sha256"]),
        "seed": 0,
        "capability": str(row["capability"]),
        "domain": str(row["domain"]),
        "multihop": 0,
        "dirtiness": 0,
        "output_format": "",
        "split": "train",
        "origin": f"{ORIGIN_PREFIX}{row['domain'] or 'imported'}",
        "skill_path": None,
    }
