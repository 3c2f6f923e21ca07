"""The sandbox interface: one small abstract class, two backends (docker, bubblewrap).

Everything the agent or an LLM-written generator runs goes through a `Sandbox`. A sandbox has a
fixed layout the rest of clawloop relies on:

    /workspace      the task's working directory (writable; the agent's cwd)
    /tests          the verifier (uploaded only when grading)
    /solution       the reference solution (uploaded only for the oracle check)
    /logs/verifier  where tests/test.sh writes reward.json
    /logs/grading   the grading kit (taskenv.upload_kit): written only from the host, sealed
    /tmp            scratch

/tests and /logs/grading hold what grading reads (`upload_sealed`): where the backend can, the
sandbox's own commands may read but never change, replace or rename what is put there, so code
the verifier runs (the agent's program) cannot rewrite the rest of the verifier.

No network, no host paths beyond these, and limits on CPU time, memory, processes, file size and
wall time. Commands are treated as hostile: a timeout or a crash is an `ExecResult`, not an
exception. `SandboxError` is raised only for infrastructure faults (engine down, start failed),
which callers may retry.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

WORKSPACE = "/workspace"
TESTS = "/tests"
SOLUTION = "/solution"
VERIFIER_LOGS = "/logs/verifier"
GRADING_KIT = "/logs/grading"
# The folders `upload_sealed` seals: files there are only ever the host's.
SEALED = (TESTS, GRADING_KIT)

Backend = Literal["auto", "docker", "bwrap"]


class SandboxError(RuntimeError):
    """Infrastructure failure of a sandbox (not of the command run in it). Transient: retryable."""


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every command in a sandbox."""

    wall_seconds: float = 60.0  # default per-exec wall clock; exec(timeout=...) overrides
    cpu_seconds: int = 60  # RLIMIT_CPU per process
    memory_mb: int = 1024  # address space / cgroup memory
    pids: int = 256  # processes + threads
    file_size_mb: int = 64  # largest single file a command may write
    cpus: float = 1.0  # CPU share (docker nano_cpus)
    # Files a sandbox writes: bwrap: all together (one tmpfs; its cgroup allows memory_mb +
    # disk_mb); docker: each writable dir (tmpfs volumes, counted in the container's memory_mb).
    disk_mb: int = 2048


@dataclass(frozen=True)
class DockerHost:
    """One engine of a pool (`SandboxConfig.docker_hosts`): its DOCKER_HOST URL and how many
    sandboxes this process runs on it at once."""

    url: str
    capacity: int = 4


@dataclass(frozen=True)
class SandboxConfig:
    backend: Backend = "auto"
    image: str = "clawloop-base:latest"  # docker only
    limits: Limits = field(default_factory=Limits)
    # Docker only: a pool of engines (harness/sandbox/pool.py). Empty: the one engine DOCKER_HOST
    # names (or /var/run/docker.sock), as before.
    docker_hosts: tuple[DockerHost, ...] = ()


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(abc.ABC):
    """A started, isolated environment. Use as a context manager so `stop` always runs."""

    backend: str

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def exec(
        self,
        cmd: list[str] | str,
        timeout: float | None = None,
        cwd: str = WORKSPACE,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `cmd` (argv list, or a string for `bash -lc`) inside the sandbox."""

    @abc.abstractmethod
    def upload(self, local: Path, remote: str) -> None:
        """Copy a host file or directory to `remote` (a directory's contents land in `remote`)."""

    def upload_sealed(self, local: Path, remote: str) -> bool:
        """`upload`, then make what landed at `remote` (under one of SEALED) read-only to the
        sandbox's commands, which may then read it but never change, replace, rename or chmod
        it. True when sealed; False where the backend cannot (this default; bubblewrap run
        without root, whose commands run as our own uid)."""
        self.upload(local, remote)
        return False

    @abc.abstractmethod
    def download(self, remote: str, local: Path) -> None:
        """Copy `remote` (file or directory) out to the host path `local`."""

    @abc.abstractmethod
    def kill_strays(self) -> bool:
        """Kill every process the sandbox's commands left behind (background loops, `setsid` or
        `nohup` daemons), keeping the sandbox usable. Call it between commands, never while one
        runs (it would be killed too); graders call it before and after the verifier so that
        nothing the graded code started can rewrite the verdict. True when nothing is left;
        False when the leftovers could not be killed (e.g. they fill the process limit, so no
        killer can start): nothing in the sandbox is trustworthy then. Raises SandboxError only
        for an infrastructure fault."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Kill everything in the sandbox and remove it. Idempotent."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
