"""Prefect tasks for the per-task work of a stage (forge one task, verify one, roll out one episode).

Stage functions hand their per-item work to `ctx.map(name, fn, items, on_error, ...)`; under Prefect
that is `prefect_mapper`, which runs each item as a Prefect task named `<stage>-task`. Transient
sandbox faults are retried by Prefect (up to `retries`, 3 for sandbox builds); anything else fails
at once and becomes a failed row through `on_error`, so one bad generator never stops the stage.
Results are not persisted or cached by Prefect: the stage's own manifest is the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.states import State

from clawloop.tasks.progress import progress_bar
from clawloop.tasks.retry import is_transient


def _retry_transient(_task: Task[..., Any], _run: TaskRun, state: State[Any]) -> bool:
    return is_transient(state.result(raise_on_failure=False))


def unit_task(name: str, fn: Callable[[Any], Any], retries: int) -> Task[..., Any]:
    """A Prefect task that runs `fn(item)`, retried on transient sandbox faults only."""

    def run_one(item: Any) -> Any:
        return fn(item)

    return task(
        run_one,
        name=f"{name}-task",
        retries=retries,
        retry_delay_seconds=1,
        retry_condition_fn=_retry_transient,
        cache_policy=NO_CACHE,
        persist_result=False,
        log_prints=False,
    )


def prefect_mapper(
    name: str,
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    on_error: Callable[[Any, BaseException], Any],
    workers: int = 2,
    retries: int = 0,
) -> list[Any]:
    """The `flows.engine.Mapper` for Prefect runs: one task run per item, on the flow's runner.

    Concurrency is the enclosing flow's ThreadPoolTaskRunner (flows/pipeline.py sizes it from the
    stage's `workers`)."""
    unit = unit_task(name, fn, retries)
    futures = [unit.submit(item) for item in items]
    out = []
    with progress_bar() as bar:
        tid = bar.add_task(name, total=len(futures))
        for item, fut in zip(items, futures, strict=True):
            try:
                out.append(fut.result(raise_on_failure=True))
            except Exception as exc:
                out.append(on_error(item, exc))
            bar.advance(tid)
    return out
