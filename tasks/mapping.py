"""Mapping a stage's per-item Prefect task over its items: retries for transient faults only,
failures as rows, results in item order.

A stage calls `ctx.map(task, items, on_error, **shared)`. Under a Prefect flow that is
`prefect_mapper`: one task run per item on the flow's task runner (so the UI shows every forge,
verify, episode and summary, and the runner's size is the one concurrency setting); outside one
(tests, scripts) it is `thread_mapper`, a bounded thread pool calling the task's function. Both
retry a transient sandbox fault up to the task's `retries`, never the task's own code.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Protocol

from prefect import Task
from prefect.client.schemas.objects import TaskRun
from prefect.states import State
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from clawloop.harness.sandbox.base import SandboxError

SANDBOX_RETRIES = 3  # the mission's rule: failed sandbox builds are retried up to three times


class Mapper(Protocol):
    """Runs `task` over `items` (each call gets `**shared` too), results in item order; an item
    that still fails after its retries becomes `on_error(item, exc)`."""

    def __call__(
        self,
        task: Task[..., Any],
        items: Sequence[Any],
        on_error: Callable[[Any, BaseException], Any],
        workers: int = 2,
        **shared: Any,
    ) -> list[Any]: ...


def is_transient(exc: BaseException | object) -> bool:
    """Faults worth retrying: the sandbox failed to start or died, not the generator or agent."""
    return isinstance(exc, SandboxError)


def retry_transient(_task: Task[..., Any], _run: TaskRun, state: State[Any]) -> bool:
    """Prefect `retry_condition_fn`: retry only transient faults."""
    return is_transient(state.result(raise_on_failure=False))


def call_with_retries(fn: Callable[[], Any], retries: int, delay_s: float = 0.5) -> Any:
    """fn(), retrying transient faults up to `retries` times with a growing pause."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == retries or not is_transient(exc):
                raise
            time.sleep(delay_s * (attempt + 1))
    raise RuntimeError("unreachable: the loop returns or raises")


def progress_bar(enabled: bool | None = None) -> Progress:
    """A Progress that renders only when stderr is a terminal (unless `enabled` says otherwise)."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not show,
    )


def prefect_mapper(
    task: Task[..., Any],
    items: Sequence[Any],
    on_error: Callable[[Any, BaseException], Any],
    workers: int = 2,
    **shared: Any,
) -> list[Any]:
    """The Mapper inside a Prefect flow: `task.submit` per item on the flow's task runner (whose
    size, set by flows/pipeline.py from the stage's workers, bounds concurrency)."""
    futures = [task.submit(item, **shared) for item in items]
    out = []
    with progress_bar() as bar:
        tid = bar.add_task(task.name, total=len(futures))
        for item, fut in zip(items, futures, strict=True):
            try:
                out.append(fut.result(raise_on_failure=True))
            except Exception as exc:
                out.append(on_error(item, exc))
            bar.advance(tid)
    return out


def thread_mapper(progress: bool | None = None) -> Mapper:
    """A Mapper without Prefect: `task.fn` on a bounded thread pool, with the task's retries."""

    def run(
        task: Task[..., Any],
        items: Sequence[Any],
        on_error: Callable[[Any, BaseException], Any],
        workers: int = 2,
        **shared: Any,
    ) -> list[Any]:
        items = list(items)
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        retries = int(task.retries or 0)
        with (
            progress_bar(progress) as bar,
            ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=task.name) as pool,
        ):
            tid = bar.add_task(task.name, total=len(items))
            futures = {
                pool.submit(call_with_retries, lambda it=item: task.fn(it, **shared), retries): i
                for i, item in enumerate(items)
            }
            for fut in as_completed(futures):
                i = futures[fut]
                exc = fut.exception()
                results[i] = on_error(items[i], exc) if exc is not None else fut.result()
                bar.advance(tid)
        return results

    return run
