"""Mapping a stage's per-item Prefect task over its items: retries for transient faults only,
failures as rows, results in item order.

A stage calls `ctx.map(task, items, on_error, **shared)`. Under a Prefect flow that is
`prefect_mapper`: one task run per item on the flow's task runner (so the UI shows every forge,
verify, episode and summary, and the runner's size is the one concurrency setting); outside one
(tests, scripts) it is `thread_mapper`, a bounded thread pool calling the task's function. Both
retry a transient fault (sandbox, endpoint: `is_transient`) up to the task's `retries`, never
the task's own code.
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


class InfraFault(RuntimeError):
    """An item failed for a reason outside its task and the policy (the endpoint stopped
    answering, the sandbox engine went away). Retried like a sandbox fault; if it persists its
    stage fails instead of committing the item as a result. `row` is what the item recorded."""

    def __init__(self, message: str, row: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.row = row


def is_transient(exc: BaseException | object) -> bool:
    """Faults worth retrying: infrastructure (sandbox, endpoint), never the generator or agent."""
    return isinstance(exc, SandboxError | InfraFault)


def retry_transient(_task: Task[..., Any], _run: TaskRun, state: State[Any]) -> bool:
    """Prefect `retry_condition_fn`: retry only transient faults."""
    return is_transient(state.result(raise_on_failure=False))


def _delay(task: Task[..., Any], attempt: int) -> float:
    """The pause before retry `attempt` (0-based): the task's retry_delay_seconds, as Prefect."""
    delay = task.retry_delay_seconds
    if isinstance(delay, list | tuple):
        return float(delay[min(attempt, len(delay) - 1)]) if delay else 0.0
    return float(delay or 0.0)


def call_with_retries(
    fn: Callable[[], Any], retries: int, delay_s: Callable[[int], float] = lambda a: 0.5 * (a + 1)
) -> Any:
    """fn(), retrying transient faults up to `retries` times, pausing `delay_s(attempt)`."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == retries or not is_transient(exc):
                raise
            time.sleep(delay_s(attempt))
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
                pool.submit(
                    call_with_retries,
                    lambda it=item: task.fn(it, **shared),
                    retries,
                    lambda a: _delay(task, a),
                ): i
                for i, item in enumerate(items)
            }
            for fut in as_completed(futures):
                i = futures[fut]
                exc = fut.exception()
                results[i] = on_error(items[i], exc) if exc is not None else fut.result()
                bar.advance(tid)
        return results

    return run
