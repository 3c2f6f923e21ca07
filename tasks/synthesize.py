"""Synthesize: candidate tasks (generator code + seed + split) for one iteration, weighted by the
previous iteration's diagnosis guidance, from its sources in order.

Each source (tasks/source.py) is a separately cached step: the built-in library and the user's
generator files (tasks/library_source.py), LLM-written generators (tasks/llm_source.py), domain-
grounded tasks (tasks/domain_source.py), SkillSynth tasks (tasks/skill_source.py) and imported
tasks (tasks/external_source.py); each after
the first swaps its candidates into the ones so far. The stage's cache key holds only what the
config turns on: the config slices of the enabled sources and the import closures of their
modules (a source that is off costs nothing and keys nothing), so a grader edit with only the
library on leaves synthesize up to date. When the stage runs, a source whose step key is
unchanged is not run again (its product is kept in the stage folder under steps/).

A new source is a module defining `SOURCE = Source(...)`, named in SOURCES where its candidates go.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from clawloop.storage import schemas
from clawloop.tasks.source import Row, Source, run_step
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.synthesize")
# The sources in the order they fill the candidates. Named, not imported here: the stage's code
# is this module's closure and the enabled sources' (StageSpec.code_modules), not every source's.
SOURCES = (
    "clawloop.tasks.library_source",
    "clawloop.tasks.llm_source",
    "clawloop.tasks.domain_source",
    "clawloop.tasks.skill_source",
    "clawloop.tasks.external_source",
)


def sources() -> list[Source]:
    return [importlib.import_module(name).SOURCE for name in SOURCES]


def enabled(cfg: RunConfig) -> list[Source]:
    return [s for s in sources() if s.enabled(cfg)]


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    """Each enabled source's config slice, by its name."""
    return {s.name: s.config_slice(cfg, iteration) for s in enabled(cfg)}


def code_modules(cfg: RunConfig) -> tuple[str, ...]:
    return (__name__, *(s.module for s in enabled(cfg)))


def run(ctx: StageContext) -> StageResult:
    rows: list[Row] = []
    summary: dict[str, Any] = {}
    tables: dict[str, tuple[Any, list[Row]]] = {}
    steps: dict[str, str] = {}
    for source in sources():
        if source.enabled(ctx.config):
            product, cached = run_step(ctx, source, rows)
            steps[source.name] = "cached" if cached else "ran"
        else:
            product = source.off(ctx.config)
            steps[source.name] = "off"
        rows = source.place(rows, product)
        summary.update(product.summary)
        for name, schema in source.tables.items():
            tables[name] = (schema, product.tables.get(name, []))
    outputs = {"candidates": (schemas.CANDIDATES, rows), **tables}
    return StageResult(outputs, summary={**summary, "synthesis_steps": steps})


STAGE = StageSpec(
    "synthesize",
    run,
    config_slice,
    module=__name__,
    previous=(
        "diagnose",
        "synthesize",
        "forge",
        "verify",
        "train",
        "rollout",
    ),  # what its sources read: each source's step keys only its own (Source.previous)
    workers=lambda cfg: cfg.synthesize.writer.workers,
    code_modules=code_modules,
)
