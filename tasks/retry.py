"""Which faults are retried: transient sandbox infrastructure, never the task's own code.

Plain Python (no Prefect), shared by the Prefect tasks here and the thread mapper in flows/.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from clawloop.harness.sandbox.base import SandboxError

SANDBOX_RETRIES = 3  # the mission's rule: failed sandbox builds are retried up to three times


def is_transient(exc: BaseException | object) -> bool:
    """Faults worth retrying: the sandbox failed to start or died, not the generator or agent."""
    return isinstance(exc, SandboxError)


def call_with_retries(
    fn: Callable[[Any], Any], item: Any, retries: int, delay_s: float = 0.5
) -> Any:
    """fn(item), retrying transient faults up to `retries` times with a growing pause."""
    for attempt in range(retries + 1):
        try:
            return fn(item)
        except Exception as exc:
            if attempt == retries or not is_transient(exc):
                raise
            time.sleep(delay_s * (attempt + 1))
    raise RuntimeError("unreachable: the loop returns or raises")
