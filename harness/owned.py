"""What a clawloop process leaves on this machine, so a killed run's leftovers are swept.

Every host temp dir a run makes (task folders in transit, unpacked tasks for rollout and diagnose)
lives under one folder per owning process, `<tmp>/clawloop-owned/<pid>-<start time>/`, and every
helper process it starts (the local policy server) is recorded there as a pid file. A process
killed with SIGKILL cannot clean up; the next run's start calls `sweep()`, which removes the
folders of owners that are gone and kills the helper processes recorded in them. Live owners
(a concurrent run) are left alone: the start time tells a live owner from a reused pid.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("clawloop.owned")
OWNED = "clawloop-owned"


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat clawloop reads (proc(5) numbers them from 1)."""

    state: str  # 3: R, S, D, Z (zombie), T, ...
    ppid: int  # 4
    pgrp: int  # 5: its process group
    utime: int  # 14: user-mode CPU, clock ticks
    stime: int  # 15: kernel-mode CPU, clock ticks
    start_ticks: int  # 22: start time, clock ticks since boot (tells a process from a reused pid)


def parse_proc_stat(text: str) -> ProcStat | None:
    """/proc/<pid>/stat's text as a ProcStat, None if it is not one. Field 2, the command name in
    parentheses, may hold spaces and parentheses of its own: the fields after it start after the
    last ')'."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 20:
        return None
    try:
        return ProcStat(
            state=fields[0],
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            utime=int(fields[11]),
            stime=int(fields[12]),
            start_ticks=int(fields[19]),
        )
    except ValueError:
        return None


def proc_stat(pid: int) -> ProcStat | None:
    """`pid`'s /proc/<pid>/stat, None if no such process (or /proc cannot say)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    return parse_proc_stat(text)


def start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None if it is not running."""
    stat = proc_stat(pid)
    return None if stat is None else stat.start_ticks


def start_time(pid: int) -> str | None:
    """start_ticks as the text owner folders, pid files and state files record."""
    ticks = start_ticks(pid)
    return None if ticks is None else str(ticks)


def _alive(pid: int, started: str) -> bool:
    return start_time(pid) == started


def owner_dir(base: str | None = None) -> Path:
    """This process's folder under `base` (default: the system temp dir), created on first use."""
    pid = os.getpid()
    path = Path(base or tempfile.gettempdir()) / OWNED / f"{pid}-{start_time(pid)}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def temp_dir(prefix: str, base: str | None = None) -> tempfile.TemporaryDirectory:
    """A TemporaryDirectory inside this process's owner folder (swept if the process dies)."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=owner_dir(base))


def record_child(proc: subprocess.Popen, base: str | None = None) -> Path:
    """Note a helper process this process started, so a sweep can kill it if we die first."""
    path = owner_dir(base) / f"child-{proc.pid}.json"
    info = {"pid": proc.pid, "start": start_time(proc.pid), "argv": proc.args}
    path.write_text(json.dumps(info, default=str))
    return path


def _kill_recorded(folder: Path) -> list[int]:
    killed = []
    for pidfile in folder.glob("child-*.json"):
        try:
            info = json.loads(pidfile.read_text())
            pid, started = int(info["pid"]), str(info["start"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # helpers start their own session: pgid == pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def sweep(bases: list[str | None] | None = None) -> dict[str, list[str]]:
    """Remove the owner folders of dead processes under `bases` and kill their recorded helpers.
    Returns {"dirs": removed folders, "processes": killed pids}."""
    out: dict[str, list[str]] = {"dirs": [], "processes": []}
    for base in {str(Path(b or tempfile.gettempdir())) for b in (bases or [None])}:
        root = Path(base) / OWNED
        if not root.is_dir():
            continue
        for folder in root.iterdir():
            pid, _, started = folder.name.partition("-")
            if not pid.isdigit() or _alive(int(pid), started):
                continue
            out["processes"] += [str(p) for p in _kill_recorded(folder)]
            shutil.rmtree(folder, ignore_errors=True)
            out["dirs"].append(str(folder))
    if out["dirs"]:
        log.info("swept what dead runs left: %s", out)
    return out
