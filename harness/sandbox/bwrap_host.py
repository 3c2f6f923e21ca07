"""The bwrap backend's side effects on the host: its root, tmpfs mounts, kills, teardown, sweep.

A sandbox's host directory lives under the prepared sandbox root (`_prepared_root`), gets a
size-capped tmpfs where we are root (`_mount_tmpfs`), and is torn down with everything running as
its uid, its memory cgroup and its files (`_teardown`). `sweep_bwrap` does the same for the
sandboxes of runs that were killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import cgroup
from .base import Limits, SandboxError
from .claim import OWNER_FILE, _check_traversable, _read_owner, _sweep_roots


@functools.lru_cache(maxsize=8)
def _prepared_root(root: Path) -> Path:
    """Check for bwrap and make the sandbox root, once per process and root."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bubblewrap is not installed: apt-get install -y bubblewrap")
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)  # sandbox uids may traverse to their own dir, not list others
    if os.geteuid() == 0:
        _check_traversable(root)
    return root


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


_LIBC = _libc()
MNT_DETACH = 2


def _mount_tmpfs(fs: Path, limits: Limits) -> bool:
    """A size-capped tmpfs under the sandbox dir caps its total disk use (RLIMIT_FSIZE caps only
    single files). Needs root; without it the plain host directory is used. Called through libc:
    a `mount` subprocess would cost more than the rest of start()."""
    if os.geteuid() != 0 or _LIBC is None:
        return False
    opts = f"size={limits.disk_mb}m,mode=0755".encode()
    return _LIBC.mount(b"clawloop-sandbox", str(fs).encode(), b"tmpfs", 0, opts) == 0


def _umount(fs: Path) -> None:
    if _LIBC is not None and _LIBC.umount2(str(fs).encode(), MNT_DETACH) == 0:
        return
    subprocess.run(["umount", "-l", str(fs)], capture_output=True)


def _kill_uid(uid: int | None) -> None:
    """SIGKILL every process of a sandbox uid (`kill -1` as that uid reaches exactly those)."""
    if uid is None:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["kill", "-KILL", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            capture_output=True,
            timeout=10,
        )


def _mkdirs(dest: Path, top: Path, uid: int | None) -> None:
    """Create `dest` and its missing parents, owned by the sandbox uid."""
    missing = []
    probe = dest
    while not probe.exists() and probe != top:
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        path.mkdir()
        if uid is not None:
            os.chown(path, uid, uid)


def _teardown(path: Path, uid: int | None, kill: bool = True, group: Path | None = None) -> None:
    """Kill what runs in a sandbox, unmount its tmpfs, remove its cgroup, then its dir (releasing
    the uid). A cgroup that stays busy keeps the dir, so a later sweep still finds both."""
    if kill:
        _kill_uid(uid)
    fs = path / "fs"
    if os.path.ismount(fs):
        _umount(fs)
    if group is not None and not cgroup.remove(group):
        _kill_uid(uid)
        if not cgroup.remove(group, wait_s=2.0):
            return
    # The tmpfs is gone, so usually only owner.json and empty dirs are left: remove them
    # directly, and walk the tree only when the host-dir fallback left files behind.
    try:
        (path / OWNER_FILE).unlink(missing_ok=True)
        fs.rmdir()
        path.rmdir()
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def sweep_bwrap() -> list[str]:
    """Remove sandbox dirs whose owner process is dead (a killed run); return what was removed."""
    removed: list[str] = []
    # Cgroups are listed before the dirs: a sandbox claims its dir before it creates its cgroup
    # and removes the cgroup before its dir, so a cgroup listed here whose dir is missing from
    # the later listing is truly orphaned, never one being set up right now.
    groups = cgroup.list_groups()
    live: set[str] = set()
    for root in _sweep_roots():
        if not root.is_dir():
            continue
        for path in root.iterdir():
            try:
                owner = _read_owner(path)
                if owner is not None and owner.alive():
                    live.add(path.name)
                    continue
                if owner is None and time.time() - path.stat().st_mtime < 60:
                    live.add(path.name)
                    continue  # being claimed right now: the owner file is written after mkdir
            except FileNotFoundError:
                continue  # its owner (or another sweep) removed it meanwhile
            uid = owner.uid if owner is not None and owner.uid >= 0 else None
            group = Path(owner.cgroup) if owner is not None and owner.cgroup else None
            _teardown(path, uid, group=group)
            if path.exists():
                live.add(path.name)  # its cgroup is still busy: the next sweep retries
            else:
                removed.append(str(path))
    cgroup.remove_orphans(groups, live)
    return removed
