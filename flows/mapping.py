"""Running one function over many tasks without Prefect: a bounded thread pool with a progress bar.

Forge, verify and rollout are bound by sandbox subprocesses, so threads are enough (and cheap on two
cores). Prefect runs use flows/pipeline.py's mapper instead, which submits Prefect tasks; both obey
the `flows.engine.Mapper` contract: results in order, transient faults retried, failures as data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from clawloop.tasks.progress import progress_bar
from clawloop.tasks.retry import call_with_retries


def thread_mapper(progress: bool | None = None) -> Callable[..., list[Any]]:
    """A `Mapper` over a bounded ThreadPoolExecutor; shows a rich progress bar on a terminal."""

    def run(
        name: str,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        on_error: Callable[[Any, BaseException], Any],
        workers: int = 2,
        retries: int = 0,
    ) -> list[Any]:
        items = list(items)
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        with (
            progress_bar(progress) as bar,
            ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name) as pool,
        ):
            tid = bar.add_task(name, total=len(items))
            futures = {
                pool.submit(call_with_retries, fn, item, retries): i for i, item in enumerate(items)
            }
            for fut in as_completed(futures):
                i = futures[fut]
                exc = fut.exception()
                results[i] = on_error(items[i], exc) if exc is not None else fut.result()
                bar.advance(tid)
        return results

    return run
