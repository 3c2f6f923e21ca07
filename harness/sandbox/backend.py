"""Sandboxes: pick a backend, open a sandbox, sweep what killed runs left behind.

    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.harness.sandbox.backend import open_sandbox
    with open_sandbox(SandboxConfig(backend="auto")) as sb:
        sb.exec("python3 -c 'print(1)'")

Backends import lazily: the docker SDK is loaded only when the docker backend is used.
"""

from __future__ import annotations

import functools
import os
import shutil

from .base import Backend, Sandbox, SandboxConfig, SandboxError


def docker_available(image: str = "clawloop-base:latest") -> str | None:
    """None when a Docker engine answers and holds `image`, else the reason it cannot be used."""
    if not (os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock")):
        return "no DOCKER_HOST and no /var/run/docker.sock (start one: scripts/start-dockerd.sh)"
    try:
        import docker.errors
    except ImportError:
        return "the docker SDK is not installed (pip install 'docker>=7.1')"
    from .docker_engine import client

    try:
        cli = client(timeout=10)
    except SandboxError as exc:
        return str(exc)
    try:
        cli.images.get(image)
    except docker.errors.ImageNotFound:
        return f"the engine has no image {image} (build it: scripts/build-base-image.sh)"
    except docker.errors.DockerException as exc:
        return f"docker engine error: {exc}"
    finally:
        cli.close()
    return None


@functools.lru_cache(maxsize=8)
def _auto(image: str) -> str:
    why_not_docker = docker_available(image)
    if why_not_docker is None:
        return "docker"
    if shutil.which("bwrap"):
        return "bwrap"
    raise SandboxError(
        "no sandbox backend is available: Docker is not usable "
        f"({why_not_docker}) and bubblewrap is not installed. Install one: "
        "`apt-get install -y bubblewrap` (daemonless), or `apt-get install -y docker.io debootstrap` "
        "then scripts/start-dockerd.sh and scripts/build-base-image.sh"
    )


def resolve_backend(backend: Backend | str = "auto", image: str = "clawloop-base:latest") -> str:
    """`auto` -> "docker" when an engine answers and has the base image, else "bwrap" when
    bubblewrap is installed, else SandboxError saying what to install. The auto answer is
    cached per process; CLAWLOOP_SANDBOX overrides `auto`."""
    if backend == "auto":
        backend = os.environ.get("CLAWLOOP_SANDBOX", "auto")
    if backend == "auto":
        return _auto(image)
    if backend not in ("docker", "bwrap"):
        raise ValueError(f"unknown sandbox backend {backend!r}: use auto, docker or bwrap")
    return backend


def check_backend(cfg: SandboxConfig) -> str:
    """The backend `cfg` resolves to, once it is known to be usable; SandboxError saying what is
    missing and what to do otherwise (an engine that does not answer, an image it lacks). A pool
    (`cfg.docker_hosts`) is checked host by host: hosts down are left out, a host without the
    image or no host answering is an error (pool.DockerPool.check)."""
    if cfg.docker_hosts:
        if cfg.backend == "bwrap":
            raise SandboxError(
                "sandbox.docker_hosts needs sandbox.backend docker (or auto), not bwrap"
            )
        from .pool import pool_for

        pool_for(cfg).check()
        return "docker"
    backend = resolve_backend(cfg.backend, cfg.image)
    if backend == "docker":
        why = docker_available(cfg.image)
        if why is not None:
            raise SandboxError(
                f"sandbox.backend is docker but {why}: build or load the image "
                "(scripts/build-base-image.sh makes clawloop-base:latest), set sandbox.image to "
                "one the engine has, or set sandbox.backend: bwrap"
            )
    elif not shutil.which("bwrap"):
        raise SandboxError(
            "sandbox.backend is bwrap but bubblewrap is not installed: "
            "`apt-get install -y bubblewrap`, or set sandbox.backend: docker"
        )
    return backend


def open_sandbox(cfg: SandboxConfig | None = None) -> Sandbox:
    """A sandbox for `cfg`, not yet started: use it as `with open_sandbox(cfg) as sb:`."""
    cfg = cfg or SandboxConfig()
    backend = "docker" if cfg.docker_hosts else resolve_backend(cfg.backend, cfg.image)
    if backend == "docker":
        from .docker import DockerSandbox

        return DockerSandbox(cfg)
    from .bwrap import BwrapSandbox
    from .pool import note

    note("bwrap")
    return BwrapSandbox(cfg)


def sweep() -> dict[str, list[str]]:
    """Remove what killed runs left: clawloop containers, bwrap dirs, host temp dirs and helper
    processes (the local policy server) whose owner process is dead. Call at pipeline start; safe
    while other runs are live (their owners are alive)."""
    from clawloop.harness import owned

    from .bwrap import sweep_bwrap
    from .scratch import scratch_dir

    left = owned.sweep([scratch_dir(), None])
    removed: dict[str, list[str]] = {"bwrap": sweep_bwrap(), "docker": [], **left}
    if os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock"):
        from .docker_engine import sweep_docker

        removed["docker"] = sweep_docker()
    return removed
