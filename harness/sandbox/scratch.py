"""Host scratch space for task files in transit between the host and a sandbox."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile

from clawloop.harness import owned

# Host scratch for task files in transit (uploads, downloads, unpacked tars). A RAM-backed
# /dev/shm is preferred: forge+verify create and delete dozens of small files per task, and on
# a disk file system each unlink/rmdir can cost about a millisecond of kernel time.
SHM = "/dev/shm"
MIN_SHM_FREE = 512 * 1024 * 1024


@functools.lru_cache(maxsize=1)
def scratch_dir() -> str | None:
    """Where to put short-lived host temp dirs: $CLAWLOOP_SCRATCH if set, else /dev/shm when it
    is writable with room to spare (a container's default 64 MiB is not), else None (the
    system temp dir). Decided once per process."""
    if env := os.environ.get("CLAWLOOP_SCRATCH"):
        return env
    try:
        if os.access(SHM, os.W_OK | os.X_OK) and shutil.disk_usage(SHM).free >= MIN_SHM_FREE:
            return SHM
    except OSError:
        pass
    return None


def scratch(prefix: str) -> tempfile.TemporaryDirectory:
    """A temp dir in the host scratch space (see scratch_dir), removed when the `with` ends, and
    by the next run's sweep if this process is killed first (harness.owned)."""
    return owned.temp_dir(prefix, scratch_dir())
