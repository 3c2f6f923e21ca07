"""A tiny compiled launcher that starts each bubblewrap exec without forking this process.

Every bwrap exec must start as the sandbox's uid, inside its memory cgroup, under its rlimits.
Python's subprocess can do that only with `user=` and a `preexec_fn`, and either one makes it
fork() this whole process instead of vfork()ing: ~2 ms per exec for a small interpreter, ~40 ms
for one holding 1 GiB (a pipeline with torch loaded). This C launcher does those steps itself and
execs bwrap, so subprocess can vfork: one extra exec of a static binary costs ~0.3 ms.

It is compiled with the system C compiler ($CC, else cc) on first use and cached, root-owned and
read-only to others, under /var/cache/clawloop/bin (as root) or ~/.cache/clawloop/bin. Without a
compiler bwrap.py falls back to the preexec_fn path, with the same isolation (logged once).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from clawloop.storage.cache_key import data_text

log = logging.getLogger(__name__)


# The launcher's C source (launcher.c, shipped as package data), compiled on first use.
SOURCE = data_text(__file__, "launcher.c")


def cache_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/cache/clawloop/bin")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clawloop/bin"


def launcher_argv(
    launcher: str,
    uid: int | None,
    tasks_fd: int | None,
    report_fd: int,
    limits: dict[int, int],
    argv: list[str],
) -> list[str]:
    """The command line that runs `argv` through the launcher (pure). A launcher that cannot set
    the sandbox up writes why to `report_fd` (and exits 125) instead of running `argv`."""
    sets = [f"{which}={value}" for which, value in limits.items()]
    uid_arg = str(-1 if uid is None else uid)
    fd_arg = str(-1 if tasks_fd is None else tasks_fd)
    return [launcher, uid_arg, fd_arg, str(report_fd), *sets, "--", *argv]


@functools.lru_cache(maxsize=1)
def launcher_path() -> str | None:
    """The compiled launcher (built on first use), or None when it cannot be had (logged once):
    CLAWLOOP_NO_LAUNCHER set, no C compiler, or a cache dir others could write to."""
    if os.environ.get("CLAWLOOP_NO_LAUNCHER"):
        return None
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    target = cache_dir() / f"clawloop-enter-{digest}"
    try:
        if not target.exists():
            _build(target)
        _check_private(target)
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        log.warning("bwrap execs fork instead of vfork (slower, same isolation): %s", exc)
        return None
    return str(target)


def _build(target: Path) -> None:
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build the launcher: apt-get install -y gcc")
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src, out = Path(tmp, "enter.c"), Path(tmp, "enter")
        src.write_text(SOURCE)
        # Static when libc's static archive is there: no dynamic loader to run, ~0.15 ms per exec.
        for flags in (["-static"], []):
            done = subprocess.run(
                [cc, "-O2", *flags, "-o", str(out), str(src)], capture_output=True, timeout=120
            )
            if done.returncode == 0:
                break
        else:
            raise RuntimeError(f"{cc} failed to build the launcher: {done.stderr.decode()[-500:]}")
        os.chmod(out, 0o755)
        os.replace(out, target)  # atomic: concurrent builders each install a complete binary


def _check_private(target: Path) -> None:
    """The launcher runs as root before dropping privileges: refuse one that another user could
    have replaced (it or its dir not ours, or writable by group or others)."""
    for path in (target, target.parent):
        st = path.stat()
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise RuntimeError(f"{path} is not private to uid {os.geteuid()}: remove it")
