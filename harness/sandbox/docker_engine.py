"""The Docker engines themselves: a client per engine, whether one answers and holds the image,
the labels that say whose a container is, and the removal of containers whose owner is gone.

docker.py (the sandbox) and pool.py (the hosts a sandbox may take) both talk to engines through
this module. The `docker` SDK is imported inside the functions that call it: it is an optional
dependency, and a bubblewrap-only install never needs it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from typing import Any

from clawloop.harness.owned import start_ticks

from .base import SandboxError

PING_TIMEOUT_S = 5
LABEL = "clawloop.sandbox"
LABEL_PID = "clawloop.owner_pid"
LABEL_START = "clawloop.owner_start"
LABEL_HOST = "clawloop.owner_host"
LABEL_RUN = "clawloop.run_id"
LABEL_STAGE = "clawloop.stage"
# Set by the pipeline (flows/) while a stage runs: the run and stage that own new sandboxes.
ENV_RUN, ENV_STAGE = "CLAWLOOP_RUN_ID", "CLAWLOOP_STAGE"


def client(timeout: int = 60, base_url: str | None = None) -> Any:
    """A pinged client for `base_url` (None: docker.from_env(), which honours DOCKER_HOST), or
    SandboxError saying how to get an engine."""
    try:
        import docker
    except ImportError as exc:
        raise SandboxError("the docker SDK is missing: pip install 'docker>=7.1'") from exc
    try:
        if base_url is None:
            cli = docker.from_env(timeout=timeout)
        else:
            cli = docker.DockerClient(base_url=base_url, timeout=timeout)
        cli.ping()
    except Exception as exc:
        where = base_url or os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxError(
            f"no Docker engine answers at {where} ({exc}); start one with scripts/start-dockerd.sh "
            "or use --backend bwrap"
        ) from exc
    return cli


def engine_errors() -> tuple[type[BaseException], ...]:
    """What a call to an engine raises when the engine fails: the SDK's own errors, and the
    connection errors of `requests` (an engine that went away mid-call raises those, not
    docker.errors: left alone they would read as the task's own OSError)."""
    import docker.errors
    import requests.exceptions

    return (docker.errors.DockerException, requests.exceptions.RequestException)


_clients = threading.local()


def shared_client(base_url: str | None = None) -> Any:
    """This thread's client for `base_url` (None: DOCKER_HOST's engine), made (and pinged) once:
    a sandbox start then costs no extra connection and ping, and clients are not leaked one per
    sandbox. Per thread because the SDK's HTTP session is not documented as thread-safe."""
    if getattr(_clients, "pid", None) != os.getpid():  # not across a fork
        _clients.by_url = {}
        _clients.pid = os.getpid()
    cli = _clients.by_url.get(base_url)
    if cli is None:
        cli = _clients.by_url[base_url] = client(base_url=base_url)
    return cli


def owner_labels() -> dict[str, str]:
    pid = os.getpid()
    labels = {
        LABEL_PID: str(pid),
        LABEL_START: str(start_ticks(pid) or 0),
        LABEL_HOST: socket.gethostname(),
    }
    run, stage = os.environ.get(ENV_RUN, ""), os.environ.get(ENV_STAGE, "")
    if run:
        labels[LABEL_RUN] = run
    if stage:
        labels[LABEL_STAGE] = stage
    return labels


def _name_part(text: str, limit: int) -> str:
    """`text` as a piece of a container name (Docker allows [a-zA-Z0-9_.-])."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", text)[:limit]


def container_name(labels: dict[str, str], suffix: str) -> str | None:
    """`clawloop-<run id>-<stage>-<suffix>` for a sandbox of a run (None outside a run: the
    engine picks a name, the labels still say whose it is)."""
    run = labels.get(LABEL_RUN)
    if not run:
        return None
    parts = ["clawloop", _name_part(run, 128)]
    if labels.get(LABEL_STAGE):
        parts.append(_name_part(labels[LABEL_STAGE], 32))
    return "-".join([*parts, suffix])


# ---- clean-up: containers whose owner process is gone ----------------------------------------------


def remove_containers(base_url: str, ids: list[str]) -> None:
    """Remove containers by id from the engine at `base_url` (best effort)."""
    try:
        cli = client(timeout=30, base_url=base_url)
    except SandboxError:
        return
    try:
        for cid in ids:
            with contextlib.suppress(Exception):
                cli.containers.get(cid).remove(force=True, v=True)
    finally:
        cli.close()


def sweep_docker(base_url: str | None = None) -> list[str]:
    """Remove clawloop containers whose owner process on this host is gone from the engine at
    `base_url` (None: DOCKER_HOST's); return their names (ids when unnamed). Containers owned by another host (a
    shared remote engine) are left to that host's sweep."""
    try:
        cli = client(timeout=30, base_url=base_url)
    except SandboxError:
        return []
    removed: list[str] = []
    here = socket.gethostname()
    try:
        # sparse: the list call's own data (labels included), no per-container inspect that
        # would fail on a container another run removes meanwhile.
        found = cli.containers.list(all=True, filters={"label": f"{LABEL}=1"}, sparse=True)
    except Exception:
        return removed
    for c in found:
        labels = c.attrs.get("Labels") or {}
        if labels.get(LABEL_HOST) != here:
            continue
        try:
            pid, start = int(labels.get(LABEL_PID, "0")), int(labels.get(LABEL_START, "0"))
        except ValueError:
            pid, start = 0, 0
        if pid and start_ticks(pid) == start:
            continue  # its owner is alive: a sandbox in use
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
            names = [n.lstrip("/") for n in c.attrs.get("Names") or []]
            removed.append(names[0] if names else c.short_id)
    return removed


# ---- is an engine there, with the image ------------------------------------------------------------


def ping(url: str, timeout: int = PING_TIMEOUT_S) -> str | None:
    """None when the engine at `url` answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install 'docker>=7.1')"
    try:
        api = docker.APIClient(base_url=url, timeout=timeout)
    except Exception as exc:  # no answer to the version query, or a malformed URL
        return reason(exc)
    try:
        api.ping()
    except Exception as exc:
        return reason(exc)
    finally:
        api.close()
    return None


def reason(exc: BaseException) -> str:
    """A short why for an engine call that failed: the operating system's error underneath the
    SDK's and urllib3's wrappers when there is one ("ConnectionRefusedError: Connection refused")."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    found: BaseException | None = None
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and type(e).__module__ == "builtins":
            found = e
        todo.extend(
            x for x in (e.__cause__, e.__context__, *e.args) if isinstance(x, BaseException)
        )
    if found is not None:
        return f"{type(found).__name__}: {found.strerror or found}"
    return f"{type(exc).__name__}: {exc}"[:300]


def image_missing(url: str, image: str) -> str | None:
    """None when the engine at `url` answers and holds `image`; else what is wrong (a string
    starting "down: " when the engine does not answer, "no image: " when it lacks the image)."""
    why = ping(url)
    if why is not None:
        return f"down: {why}"
    import docker.errors

    import docker

    cli = docker.DockerClient(base_url=url, timeout=30)
    try:
        cli.images.get(image)
    except docker.errors.ImageNotFound:
        return f"no image: {image}"
    except Exception as exc:
        return f"down: {reason(exc)}"
    finally:
        cli.close()
    return None
