"""Finding or starting a local Prefect server, and serving the deployments on it.

`clawloop serve` uses the server PREFECT_API_URL points at when it answers; otherwise it starts
`prefect server start` on 127.0.0.1 (its own process group, stopped on exit) and points this process
at it. It then serves three deployments from this process: `nightly` (cron, the loop on a fresh run
id), `rerun-stage` (run id, iteration, stage) and `loop` (trigger a run from the UI).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_PORT = 4200


class ServerError(RuntimeError):
    """No Prefect server could be reached or started."""


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    """True when `<api_url>/health` answers 200."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_healthy(
    api_url: str, timeout_s: float, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if healthy(api_url):
            return
        if proc is not None and proc.poll() is not None:
            raise ServerError(
                f"`prefect server start` exited with code {proc.returncode}; see its log for why"
            )
        time.sleep(0.5)
    raise ServerError(
        f"the Prefect server at {api_url} did not become healthy within {timeout_s:.0f}s"
    )


@contextmanager
def local_server(
    port: int = DEFAULT_PORT, log_path: Path | None = None, timeout_s: float = 90.0
) -> Iterator[str]:
    """Yield a healthy API URL: PREFECT_API_URL's server if it answers, else one we start and stop."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured and healthy(configured):
        yield configured
        return
    if configured:
        raise ServerError(
            f"PREFECT_API_URL={configured} does not answer: start that server, or unset the variable to use a local one"
        )
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        yield api_url
        return
    log = open(log_path or os.devnull, "ab")  # noqa: SIM115 - closed in finally
    prefect_bin = Path(sys.executable).with_name("prefect")
    cmd = [
        str(prefect_bin) if prefect_bin.exists() else "prefect",
        "server",
        "start",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_API_URL": api_url}
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        wait_healthy(api_url, timeout_s, proc)
        yield api_url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def serve_deployments(cron: str, config_path: str | None, root: str) -> None:
    """Serve nightly + rerun-stage + loop from this process until interrupted (blocks)."""
    from prefect import serve

    from clawloop.flows.pipeline import loop_flow, nightly_flow, rerun_stage_flow
    from clawloop.flows.runs import resolve_config

    cfg = resolve_config(config_path, None, root=root)
    serve(
        nightly_flow.to_deployment(
            name="nightly", cron=cron, parameters={"config_path": config_path}, tags=["clawloop"]
        ),
        rerun_stage_flow.to_deployment(
            name="rerun-stage", parameters={"root": cfg.storage.root}, tags=["clawloop"]
        ),
        loop_flow.to_deployment(
            name="loop", parameters={"config": cfg.model_dump(mode="json")}, tags=["clawloop"]
        ),
    )
