"""A synthesis source's step (tasks/source.py) runs once per key: the same inputs again reuse its
kept product, other inputs or a forced run make it again, and a damaged product is a miss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawloop.storage import fs
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.source import Product, Source, run_step
from clawloop.tasks.stage import StageContext


def _source(calls: list[Any]) -> Source:
    def make(ctx: StageContext, asked: Any) -> Product:
        calls.append(asked)
        rows = [{"task_id": f"t{i}", "score": 0.1 * i} for i in range(asked)]
        return Product(rows, {"made": asked}, {"extra_table": [{"n": asked}]})

    return Source(
        "fake",
        "clawloop.tasks.library_source",
        enabled=lambda cfg: True,
        config_slice=lambda cfg, k: {"seed": cfg.seed},
        make=make,
        place=lambda rows, product: rows + product.candidates,
        off=lambda cfg: Product([], {}),
        ask=lambda cfg, k, rows: len(rows),
    )


def _ctx(root: Path, force: bool = False, seed: int = 0) -> StageContext:
    cfg = parse_config({"storage": {"root": str(root)}, "seed": seed})
    return StageContext("r", 1, cfg, "synthesize", thread_mapper(False), force=force)


def test_a_step_runs_once_per_key(tmp_path):
    calls: list[Any] = []
    source = _source(calls)
    rows = [{"task_id": "a"}, {"task_id": "b"}]
    first, cached = run_step(_ctx(tmp_path), source, rows)
    assert not cached and calls == [2]
    again, cached = run_step(_ctx(tmp_path), source, rows)
    assert cached and calls == [2]
    assert again == first  # the kept product is the one made, floats and all
    _, cached = run_step(_ctx(tmp_path), source, rows[:1])  # what it asked changed
    assert not cached and calls == [2, 1]
    _, cached = run_step(_ctx(tmp_path, seed=1), source, rows[:1])  # its config changed
    assert not cached and calls == [2, 1, 1]
    _, cached = run_step(_ctx(tmp_path, force=True), source, rows[:1])
    assert not cached and calls == [2, 1, 1, 1]


def test_a_damaged_kept_product_is_made_again(tmp_path):
    calls: list[Any] = []
    source = _source(calls)
    run_step(_ctx(tmp_path), source, [])
    kept = Path(fs.join(_ctx(tmp_path).url, "steps", "fake.json.gz"))
    assert kept.is_file()
    kept.write_bytes(b"not gzip")
    product, cached = run_step(_ctx(tmp_path), source, [])
    assert not cached and calls == [0, 0] and product.summary == {"made": 0}
