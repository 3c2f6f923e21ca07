"""Per-sandbox memory cgroups (cgroup v1): cap the memory of everything one bwrap sandbox runs.

RLIMIT_AS caps one process; a sandbox that forks `pids` processes could otherwise hold
`pids x memory_mb`. Each bubblewrap sandbox therefore gets a child memory cgroup created beneath
the cgroup this process itself lives in (read from /proc/self/cgroup, so a runner confined to its
own cgroup stays inside it), named `clawloop-<sandbox dir name>`. The sandbox's launcher moves itself in
before it execs bwrap (bwrap_launch.py `_enter`), so everything the sandbox forks is charged there and the kernel's OOM killer acts inside the sandbox only.

Where the memory controller is absent or not writable (not root, cgroup v2 only, a read-only
/sys), sandboxes still run with their per-process limits, and that is logged once.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path

MEMORY_MOUNT = Path("/sys/fs/cgroup/memory")
PREFIX = "clawloop-"

log = logging.getLogger(__name__)


def own_memory_path(proc_self_cgroup: str) -> str | None:
    """The memory cgroup path in a /proc/<pid>/cgroup text (v1 line `N:memory:/path`), or None."""
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            return parts[2]
    return None


def memory_bytes(memory_mb: int, tmpfs_mb: int | None) -> int:
    """The cgroup cap for one sandbox. Files written to a tmpfs are RAM charged to the writer's
    cgroup, so a sandbox whose disk is a tmpfs gets its disk budget on top of its memory budget:
    processes plus files never pin more than memory_mb + disk_mb of host RAM, and a full disk
    reads as ENOSPC rather than an OOM kill."""
    return (memory_mb + (tmpfs_mb or 0)) << 20


@functools.lru_cache(maxsize=1)
def memory_base() -> Path | None:
    """Our own memory cgroup dir when children can be created in it, else None (logged once)."""
    if os.environ.get("CLAWLOOP_NO_CGROUP"):
        return None
    why = None
    try:
        own = own_memory_path(Path("/proc/self/cgroup").read_text())
    except OSError as exc:
        own, why = None, f"cannot read /proc/self/cgroup ({exc})"
    if own is None:
        why = why or "no cgroup v1 memory controller in /proc/self/cgroup"
    else:
        base = MEMORY_MOUNT / own.lstrip("/")
        if not (base / "memory.limit_in_bytes").exists():
            why = f"{base} is not a mounted cgroup v1 memory controller"
        elif not os.access(base, os.W_OK):
            why = f"{base} is not writable (not root?)"
        else:
            return base
    log.warning(
        "bwrap sandboxes run without a per-sandbox memory cgroup: %s; each process is still "
        "capped by RLIMIT_AS, but a sandbox's processes together are not",
        why,
    )
    return None


def create(name: str, limit: int) -> Path | None:
    """A fresh memory cgroup `clawloop-<name>` capped at `limit` bytes (swap included where the
    kernel accounts it), or None when cgroups are unusable here."""
    base = memory_base()
    if base is None:
        return None
    path = base / f"{PREFIX}{name}"
    try:
        path.mkdir()
    except FileExistsError:
        pass  # left by a run that died: reuse it, the sandbox dir claim makes it ours
    except OSError as exc:
        log.warning("cannot create memory cgroup %s (%s): sandbox memory is per process", path, exc)
        return None
    try:
        _write(path / "memory.limit_in_bytes", limit)
        # memsw >= limit is required, so it is set after; absent when swap accounting is off.
        if (path / "memory.memsw.limit_in_bytes").exists():
            _write(path / "memory.memsw.limit_in_bytes", limit)
    except OSError:
        remove(path)
        raise
    return path


def open_tasks(path: Path) -> int:
    """The cgroup's `tasks` file opened for writing (close-on-exec): a process that writes "0"
    to it moves itself in, with the opener's permission."""
    return os.open(path / "tasks", os.O_WRONLY | os.O_CLOEXEC)


def remove(path: Path, wait_s: float = 1.0) -> bool:
    """rmdir the cgroup; processes killed a moment ago may still be exiting, so retry briefly.
    Returns False (leaving it to the sweep) when it is still busy."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def list_groups() -> list[Path]:
    """The `clawloop-*` cgroups beneath ours."""
    base = memory_base()
    if base is None:
        return []
    try:
        return [c for c in base.iterdir() if c.name.startswith(PREFIX) and c.is_dir()]
    except OSError:
        return []


def remove_orphans(groups: list[Path], live: set[str]) -> list[str]:
    """Remove those of `groups` whose sandbox dir name is not in `live` (and that are empty)."""
    removed = []
    for group in groups:
        if group.name[len(PREFIX) :] not in live and remove(group, wait_s=0):
            removed.append(str(group))
    return removed


def _write(path: Path, value: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)
