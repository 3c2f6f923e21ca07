"""Mapping a stage's per-item Prefect task over its items: retries for transient faults only,
failures as rows, results in item order.

A stage calls `ctx.map(task, items, on_error, **shared)`. Under a Prefect flow that is
`prefect_mapper`: one task run per item on the flow's task runner (so the UI shows every forge,
verify, episode and summary, and the runner's size is the one concurrency setting); outside one
(tests, scripts) it is `thread_mapper`, a bounded thread pool calling the task's function. Both
retry a transient fault (sandbox, endpoint: `is_transient`) up to the task's `retries`, never
the task's own code.

On a task runner whose workers are other processes (Dask, Ray: `execution.runner`), every task
argument travels pickled. Items are plain rows already; each `**shared` value is pickled once
per map (`ship`): thread locks travel as fresh locks and an OpenAI client as the settings it
was made with, so a closure holding either (a circuit breaker, a token counter) still goes; a
value that cannot travel fails the map naming the argument. The bytes travel as a Prefect
`opaque` annotation that Prefect unwraps when the task run resolves its inputs: each worker
process rebuilds a shipped value once and shares it between its threads, as the flow's threads
share the original.
"""

from __future__ import annotations

import copyreg
import hashlib
import io
import pickle
import sys
import threading
import time
from collections import ChainMap, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Protocol

import cloudpickle
from prefect import Task
from prefect.client.schemas.objects import TaskRun
from prefect.states import State
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import opaque
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

    def __reduce__(self) -> tuple[Any, ...]:
        # From a worker process the row must come back with the fault (args holds only the text).
        return (type(self), (str(self), self.row))


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


# ---- shared arguments on their way to worker processes -------------------------------------


class UnshippableArgument(TypeError):
    """A mapped task's shared argument cannot be pickled to worker processes."""


def _openai_client(settings: dict[str, Any]) -> Any:
    import openai

    return openai.OpenAI(**settings)


def _reduce_openai(client: Any) -> tuple[Any, ...]:
    settings = {
        "base_url": str(client.base_url),
        "api_key": client.api_key,  # travels to the worker like any task argument
        "timeout": client.timeout,
        "max_retries": client.max_retries,
    }
    return (_openai_client, (settings,))


def _reductions() -> dict[type, Callable[[Any], tuple[Any, ...]]]:
    """What a pickled shared value holds that pickle refuses, and how it travels."""
    out: dict[type, Callable[[Any], tuple[Any, ...]]] = {
        type(threading.Lock()): lambda _: (threading.Lock, ()),
        type(threading.RLock()): lambda _: (threading.RLock, ()),
    }
    try:
        import openai

        out[openai.OpenAI] = _reduce_openai
    except ImportError:  # pragma: no cover - openai is a core dependency
        pass
    return out


class _ShippingPickler(cloudpickle.Pickler):
    # The C pickler reads dispatch_table when it is made: a class attribute, not set per instance.
    dispatch_table = ChainMap(
        _reductions(), cloudpickle.Pickler.dispatch_table, copyreg.dispatch_table
    )


_LANDED: OrderedDict[str, Any] = OrderedDict()  # per process: digest -> the value it stands for
_LANDED_MAX = 32
_LANDED_LOCK = threading.Lock()


def _landed(digest: str, blob: bytes) -> Any:
    """The value a `Shipped` stands for: rebuilt once per process, then shared by its threads."""
    with _LANDED_LOCK:
        if digest not in _LANDED:
            _LANDED[digest] = pickle.loads(blob)
            while len(_LANDED) > _LANDED_MAX:
                _LANDED.popitem(last=False)
        _LANDED.move_to_end(digest)
        return _LANDED[digest]


class Shipped(opaque[Any]):
    """A shared argument pickled once for worker processes. It stays these bytes wherever it
    is pickled and unpickled on the way (Dask's scheduler unpickles the task graph and pickles
    its tasks again for the workers); Prefect unwraps an annotation when the task run resolves
    its inputs, which here rebuilds the value, so the task gets the value itself, never this."""

    def __new__(cls, blob: bytes, name: str = "") -> Shipped:
        self = super().__new__(cls, blob)
        self.name = name
        self.digest = hashlib.sha256(blob).hexdigest()
        return self

    def unwrap(self) -> Any:
        return _landed(self.digest, self[0])

    def rewrap(self, value: Any) -> Shipped:
        raise TypeError("a shipped argument is not rewrapped")  # visits never modify it

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shipped, (self[0], self.name))

    def __repr__(self) -> str:
        return f"<shipped {self.name}: {len(self[0])} bytes>"


_PLAIN = (str, bytes, int, float, bool, type(None))


def ship(task_name: str, shared: dict[str, Any]) -> dict[str, Any]:
    """`shared` ready for worker processes: each non-plain value as a `Shipped`; a value that
    cannot be pickled raises UnshippableArgument naming the task, the argument and the cause."""
    out: dict[str, Any] = {}
    for name, value in shared.items():
        if isinstance(value, _PLAIN):
            out[name] = value
            continue
        buf = io.BytesIO()
        try:
            _ShippingPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        except Exception as exc:
            raise UnshippableArgument(
                f"{task_name}: its argument {name!r} ({type(value).__name__}) cannot be sent to "
                f"worker processes: {type(exc).__name__}: {exc}. Pass picklable settings (a "
                "dataclass, the endpoint) and build the object in the task, or use "
                "execution.runner: threads"
            ) from exc
        shipped = Shipped(buf.getvalue(), name)
        with _LANDED_LOCK:  # this process already holds the value: unwrapping here gives it
            _LANDED[shipped.digest] = value
        out[name] = shipped
    return out


def runs_in_other_processes() -> bool:
    """Whether the current flow's task runner runs tasks outside this process (not threads)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    runner = getattr(ctx, "task_runner", None) if ctx else None
    return runner is not None and not isinstance(runner, ThreadPoolTaskRunner)


def prefect_mapper(
    task: Task[..., Any],
    items: Sequence[Any],
    on_error: Callable[[Any, BaseException], Any],
    workers: int = 2,
    **shared: Any,
) -> list[Any]:
    """The Mapper inside a Prefect flow: `task.submit` per item on the flow's task runner (whose
    size, set by flows/pipeline.py from the stage's workers, bounds concurrency). On a runner
    with worker processes (Dask, Ray) `shared` is shipped first (`ship`)."""
    if items and runs_in_other_processes():
        shared = ship(task.name, shared)
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
