"""Starting one bwrap exec: its rlimits, the switch to the sandbox uid and cgroup, its output.

One exec is one vfork and two execs: a tiny compiled launcher (launcher.py) moves itself into the
sandbox's cgroup, lowers its rlimits and becomes the sandbox uid, then execs bwrap; everything
bwrap starts inherits all three. Without a C compiler the same steps run in a preexec_fn of a
forked child (`_enter`): slower (fork copies this process), same isolation. `_spawn` picks the
path; `_pump` drains the running exec's stdout and stderr until it exits or its deadline passes.
"""

from __future__ import annotations

import os
import resource
import selectors
import subprocess
import time
from collections.abc import Callable

from . import launcher
from .base import Limits


def rlimits(limits: Limits, nproc: int | None) -> dict[int, int]:
    """One exec's rlimits (set soft = hard, so the sandbox cannot raise them)."""
    values = {
        resource.RLIMIT_CPU: limits.cpu_seconds,
        resource.RLIMIT_AS: limits.memory_mb << 20,
        resource.RLIMIT_FSIZE: limits.file_size_mb << 20,
        resource.RLIMIT_CORE: 0,
    }
    if nproc is not None:
        values[resource.RLIMIT_NPROC] = nproc
    return values


_PRLIMIT_FLAGS = {
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_NPROC: "--nproc",
}


def rlimit_args(limits: Limits, nproc: int | None) -> list[str]:
    """The same limits as prlimit(1) flags: how the benchmark's raw baseline applies them."""
    return [f"{_PRLIMIT_FLAGS[which]}={value}" for which, value in rlimits(limits, nproc).items()]


def capped(limits: dict[int, int]) -> dict[int, int]:
    """Rlimits no higher than our own hard limits (the most an unprivileged process may set)."""
    out = {}
    for which, value in limits.items():
        hard = resource.getrlimit(which)[1]
        out[which] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return out


def _enter(tasks_fd: int | None, limits: dict[int, int]) -> Callable[[], None]:
    """The fallback launcher: code the forked child (already the sandbox uid) runs just before it
    execs bwrap, doing what launcher.py's C launcher does.

    It joins the sandbox's memory cgroup by writing "0" to the cgroup's `tasks` file through an
    fd this (root) process opened: a thread moving itself skips the global lock that moving
    another process takes (a synchronize_rcu, ~10 ms per exec), and the fd carries root's
    permission, so the cgroup files need not be handed to the sandbox uid. Then it lowers its
    rlimits (already capped to ours, so no privilege is needed). Python's preexec_fn warning (a
    lock another thread held at fork time) does not bite: the hook only calls os.write and
    resource.setrlimit, bound before the fork, and CPython resets its own locks in the child as
    it does for os.fork()."""
    pairs = list(limits.items())
    setrlimit, write = resource.setrlimit, os.write

    def enter() -> None:
        if tasks_fd is not None:
            write(tasks_fd, b"0")
        for which, value in pairs:
            setrlimit(which, (value, value))

    return enter


def _spawn(
    argv: list[str], uid: int | None, tasks_fd: int | None, report_fd: int, limits: dict[int, int]
) -> tuple[list[str], dict]:
    """The argv and Popen keyword arguments that start `argv` as `uid`, in the cgroup behind
    `tasks_fd`, under `limits`: through the compiled launcher (vfork; it reports a failed set-up
    on `report_fd`) when there is one, else through subprocess's user switch and a preexec_fn
    (fork; subprocess raises a failed set-up itself)."""
    limits = capped(limits)
    path = launcher.launcher_path()
    if path is not None:
        fds = (report_fd,) if tasks_fd is None else (report_fd, tasks_fd)
        argv = launcher.launcher_argv(path, uid, tasks_fd, report_fd, limits, argv)
        return argv, {"pass_fds": fds}
    return argv, {
        "preexec_fn": _enter(tasks_fd, limits),
        "user": uid,
        "group": uid,
        "extra_groups": [] if uid is not None else None,
    }


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float) -> bool:
    """Drain stdout/stderr into capped buffers until both close and the process has exited, or
    the deadline passes. Returns True when the deadline passed. The exit is watched through a
    pidfd in the same select: Popen.wait(timeout) would poll with sleeps (0.5 ms, 1 ms, ...)."""
    sel = selectors.DefaultSelector()
    for stream, sink in sinks.items():
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, sink)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # Linux < 5.3: fall back to Popen.wait below
        pidfd = None
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, None)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(timeout=min(left, 1.0)):
                if key.data is None:  # the pidfd: the process has exited
                    sel.unregister(key.fileobj)
                    continue
                chunk = os.read(key.fileobj.fileno(), 65536)
                if chunk:
                    key.data.write(chunk)
                else:
                    sel.unregister(key.fileobj)
        if pidfd is None:
            # Pipes closed: the command ended (or closed them); wait for it within the deadline.
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                return True
        return False
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        for stream in sinks:
            stream.close()


def _exit_code(code: int) -> int:
    # A signal death reads as 128+N, as a shell (and Docker) reports it.
    return 128 - code if code < 0 else code
