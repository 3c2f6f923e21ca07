"""Claiming a bubblewrap sandbox: its host dir, its unprivileged uid, and who owns it.

A sandbox is claimed with one atomic mkdir (`u<uid>` under the sandbox root, as root; a random
name otherwise), so concurrent runs on a machine never share a uid. The dir's owner.json names
the owning process (pid + start time, so a reused pid is not mistaken for it) and its memory
cgroup, which lets `sweep_bwrap` tell live sandboxes from those a killed run left behind.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from clawloop.harness.owned import start_ticks

from . import cgroup
from .base import SandboxError

# Where sandbox dirs are claimed. As root each sandbox's files live in its own tmpfs mounted in
# its dir, so the dirs themselves hold only owner.json: on /dev/shm (a tmpfs) claiming and
# releasing one costs microseconds, against milliseconds of journalled mkdir/rmdir on a disk.
# Without root the sandbox's files live in the dir itself, so it stays on disk under /tmp.
SHM_ROOT = "/dev/shm/clawloop-bwrap"
DEFAULT_ROOT = "/tmp/clawloop-bwrap"
UID_BASE = 3_000_000  # far above login users and the usual subuid ranges
UID_COUNT = 50_000
OWNER_FILE = "owner.json"


def sandbox_root() -> Path:
    """$CLAWLOOP_BWRAP_ROOT, else /dev/shm/clawloop-bwrap when we can mount each sandbox's tmpfs
    (root with CAP_SYS_ADMIN) and /dev/shm is there, else /tmp/clawloop-bwrap."""
    if os.environ.get("CLAWLOOP_BWRAP_ROOT"):
        return Path(os.environ["CLAWLOOP_BWRAP_ROOT"])
    shm = Path(SHM_ROOT).parent
    if _can_mount() and shm.is_dir() and os.access(shm, os.W_OK):
        return Path(SHM_ROOT)
    return Path(DEFAULT_ROOT)


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 21))  # CAP_SYS_ADMIN
    except (OSError, ValueError):
        pass
    return False


def _sweep_roots() -> list[Path]:
    # The root in use, plus the other default one (a run with another euid, or older code).
    roots = [sandbox_root()]
    if not os.environ.get("CLAWLOOP_BWRAP_ROOT"):
        roots += [Path(r) for r in (SHM_ROOT, DEFAULT_ROOT) if Path(r) != roots[0]]
    return roots


@dataclass(frozen=True)
class Owner:
    """Who claimed a sandbox dir: the sweep removes dirs whose owner process is gone."""

    pid: int
    start_ticks: int  # /proc/<pid>/stat start time: tells a live owner from a reused pid
    uid: int
    cgroup: str | None = None  # its memory cgroup, beneath the owner's own (not the sweeper's)

    def alive(self) -> bool:
        return start_ticks(self.pid) == self.start_ticks


def _write_owner(path: Path, uid: int) -> None:
    me = os.getpid()
    base = cgroup.memory_base()
    owner = {"pid": me, "start_ticks": start_ticks(me) or 0, "uid": uid}
    if base is not None:
        owner["cgroup"] = str(base / f"{cgroup.PREFIX}{path.name}")
    (path / OWNER_FILE).write_text(json.dumps(owner))


def _claim(root: Path) -> tuple[Path, int | None]:
    """Claim a sandbox dir (and its uid) atomically with mkdir; write who owns it."""
    if os.geteuid() != 0:
        path = root / f"p{os.getpid()}-{random.randrange(1 << 32):08x}"
        path.mkdir(mode=0o700)
        _write_owner(path, -1)
        return path, None
    offset = random.randrange(UID_COUNT)
    for i in range(UID_COUNT):
        uid = UID_BASE + (offset + i) % UID_COUNT
        path = root / f"u{uid}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        # No straggler can hold this uid: a crashed run's dir stays claimed until sweep() has
        # killed its processes and removed it.
        _write_owner(path, uid)
        return path, uid
    raise SandboxError(f"all {UID_COUNT} sandbox uids under {root} are taken: run clawloop sweep")


def _check_traversable(root: Path) -> None:
    """bwrap runs as the sandbox uid, which must be able to reach its dir under `root`."""
    for parent in root.resolve().parents:
        if not os.stat(parent).st_mode & 0o001:
            raise SandboxError(
                f"sandbox uids cannot traverse {parent} (mode {oct(os.stat(parent).st_mode)[-3:]}): "
                f"set CLAWLOOP_BWRAP_ROOT to a dir under a world-traversable path such as /tmp"
            )


def _read_owner(path: Path) -> Owner | None:
    try:
        raw = json.loads((path / OWNER_FILE).read_text())
        group = raw.get("cgroup")
        # Only a clawloop cgroup under the memory mount is ever removed on a file's say-so.
        if not (
            isinstance(group, str)
            and group.startswith(f"{cgroup.MEMORY_MOUNT}/")
            and Path(group).name == f"{cgroup.PREFIX}{path.name}"
            and ".." not in group
        ):
            group = None
        return Owner(int(raw["pid"]), int(raw["start_ticks"]), int(raw["uid"]), group)
    except (OSError, ValueError, KeyError):
        return None
