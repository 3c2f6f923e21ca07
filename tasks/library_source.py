"""The synthesize stage's first source: the built-in generator library and the user's generator
files (synthesis/synthesize.py samples them), steered by the previous iteration's guidance. It
runs no generator, so its step's code reaches neither the sandbox nor the grader."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.synthesis.synthesize import synthesize
from clawloop.tasks.source import Product, Row, Source, previous_guidance
from clawloop.tasks.stage import StageContext

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig


def _user_files_digest(paths: list[str]) -> dict[str, str]:
    """Content hashes of user generator files, so editing one re-runs synthesis."""
    out: dict[str, str] = {}
    for p in paths:
        path = Path(p).expanduser()
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    s = cfg.synthesize
    return {
        "seed": cfg.seed,
        "iteration": iteration,
        # fixed_eval keys the sample only when on, so runs from before it keep their keys
        "synthesize": {
            k: v for k, v in s.sample_dump().items() if k != "fixed_eval" or s.fixed_eval
        },
        "user_files": _user_files_digest(s.generator_paths),
    }


def make(ctx: StageContext, _asked: Any) -> Product:
    guidance = previous_guidance(ctx)
    rows, summary = synthesize(ctx.config.synthesize, ctx.config.seed, ctx.iteration, guidance)
    return Product(rows, summary)


def place(rows: list[Row], product: Product) -> list[Row]:
    return list(rows) + product.candidates


SOURCE = Source(
    "library",
    __name__,
    enabled=lambda cfg: True,  # the candidates the other sources swap theirs into
    config_slice=config_slice,
    make=make,
    place=place,
    off=lambda cfg: Product([], {}),
    previous=("diagnose",),
)
