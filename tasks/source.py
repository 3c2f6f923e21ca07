"""A synthesis source: one separately cached step of the synthesize stage (tasks/synthesize.py).

A source makes candidates (and tables beside them) for the iteration. It says whether the config
turns it on (off, it costs nothing and keys nothing: its `off` product is only its summary note
and empty tables), the slice of the config its product depends on, the previous-iteration stages
it reads, what of the candidates so far it depends on (`ask`: JSON), and how its product goes
into them (`place`, pure). Its step is keyed by (its config slice, the import closure of its
module, the content hashes of the previous stages it reads, its ask) and its product kept in the
stage folder under steps/<name>.json.gz with that key: when the stage runs again (another source's
config or code changed), a source whose key is unchanged is not run again (unless the stage run is
forced: then every enabled source runs, as a forced stage always did).

A source module defines `SOURCE = Source(...)`; tasks/synthesize.py lists the modules in order.
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from clawloop.diagnosis.guidance import read_guidance
from clawloop.storage import fs
from clawloop.storage.cache_key import code_version
from clawloop.storage.manifest import sha256_json
from clawloop.tasks.stage import StageContext

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.synthesize")
Row = dict[str, Any]
STEPS = "steps"  # the stage folder's subfolder holding each source's last product


@dataclass
class Product:
    """What a source made: its own candidates, a summary for the manifest, the tables it writes
    beside the candidates (every one, empty when it made none), and what `place` needs beyond
    the candidates so far (`extra`, JSON)."""

    candidates: list[Row]
    summary: dict[str, Any]
    tables: dict[str, list[Row]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _no_ask(cfg: RunConfig, iteration: int, rows: list[Row]) -> Any:
    return None


@dataclass(frozen=True)
class Source:
    name: str  # its step: steps/<name>.json.gz
    module: str  # the module defining it: its import closure is the step's code version
    enabled: Callable[[RunConfig], bool]
    config_slice: Callable[[RunConfig, int], dict[str, Any]]
    make: Callable[[StageContext, Any], Product]  # (ctx, what `ask` took) -> its product
    place: Callable[[list[Row], Product], list[Row]]  # the candidates with its product in them
    off: Callable[[RunConfig], Product]  # its product when the config turns it off
    ask: Callable[[RunConfig, int, list[Row]], Any] = _no_ask  # what of the rows so far it reads
    previous: tuple[str, ...] = ()  # previous-iteration stages it reads
    tables: dict[str, pa.Schema] = field(default_factory=dict)  # what it writes beside candidates


def previous_guidance(ctx: StageContext) -> dict[str, Any] | None:
    """The previous iteration's diagnosis guidance (None at iteration 1 or without one)."""
    k = ctx.iteration
    if k > 1 and ctx.manifest("diagnose", k - 1) is not None:
        return read_guidance(ctx.stage_url("diagnose", k - 1))
    return None


def step_key(ctx: StageContext, source: Source, asked: Any) -> str:
    """The source's step key: its config slice, code, the previous stages it reads, its ask."""
    k = ctx.iteration - 1
    previous = {}
    for name in source.previous if k >= 1 else ():
        m = ctx.manifest(name, k)
        previous[name] = None if m is None else m.content_hash()
    return sha256_json(
        {
            "source": source.name,
            "config": source.config_slice(ctx.config, ctx.iteration),
            "code": code_version(source.module),
            "previous": previous,
            "ask": asked,
        }
    )


def _step_url(ctx: StageContext, source: Source) -> str:
    return fs.join(ctx.url, STEPS, f"{source.name}.json.gz")


def cached_product(ctx: StageContext, source: Source, key: str) -> Product | None:
    """The product the source's step made last time in this stage folder, if its key matches
    (anything unreadable is a miss: the step runs)."""
    url = _step_url(ctx, source)
    try:
        if not fs.exists(url):
            return None
        saved = json.loads(gzip.decompress(fs.read_bytes(url)))
        if saved.get("key") != key:
            return None
        return Product(**saved["product"])
    except (OSError, EOFError, zlib.error, ValueError, TypeError, KeyError) as exc:
        log.warning(
            "synthesize: %s's cached step at %s is unreadable (%s); it runs", source.name, url, exc
        )
        return None


def save_product(ctx: StageContext, source: Source, key: str, product: Product) -> None:
    """Keep the step's product beside the stage's tables (a cache: failing to keep it only costs
    the next run of the stage this step again)."""
    try:
        data = json.dumps({"key": key, "product": asdict(product)}, sort_keys=True, allow_nan=False)
        # gzip: candidates are generator sources, much alike (mtime 0: the same bytes each time)
        fs.write_bytes_atomic(_step_url(ctx, source), gzip.compress(data.encode(), mtime=0))
    except (OSError, ValueError, TypeError) as exc:
        log.warning(
            "synthesize: could not keep %s's step (%s); it runs again next time", source.name, exc
        )


def run_step(ctx: StageContext, source: Source, rows: list[Row]) -> tuple[Product, bool]:
    """(the source's product for the candidates so far, whether it came from its cached step)."""
    asked = source.ask(ctx.config, ctx.iteration, rows)
    key = step_key(ctx, source, asked)
    cached = None if ctx.force else cached_product(ctx, source, key)
    if cached is not None:
        log.info(
            "synthesize iter %d: %s step skipped: its inputs are unchanged",
            ctx.iteration,
            source.name,
        )
        return cached, True
    product = source.make(ctx, asked)
    save_product(ctx, source, key, product)
    return product, False
