"""A real `prefect server start` for the Prefect tests: on a free port (`free_port`, the one
clawloop's servers use), in its own session so it and its children stop as a group, waited for
through /api/health."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from clawloop.harness.serve import free_port

__all__ = ["free_port", "healthy", "start_prefect_server", "stop_group", "wait_for"]

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T], timeout: float, pause: float = 1.0) -> T:
    """`check()`'s first truthy value, polled every `pause` s; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(pause)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


def healthy(api: str) -> bool:
    """Whether the Prefect API at `api` (…/api) answers its health check."""
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_prefect_server(port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    """`prefect server start` on 127.0.0.1:`port` with `env` (PREFECT_HOME etc.), output to `log`;
    not waited for: `wait_for("the Prefect server", lambda: healthy(api), ...)` when needed."""
    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
    return subprocess.Popen(
        [*argv, "--port", str(port)],
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the server
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop `proc`'s process group (started with start_new_session): `sig`, then SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
