"""Where artifacts live: fsspec URLs, the run layout, and atomic writes with clear errors.

Every path in clawloop's storage is a URL string (`runs/x`, `file:///data/runs`, `s3://bucket/runs`)
resolved through fsspec, so the same code writes to local disk or an object store. A file is never
written in place: it goes to a hidden temp name beside its target and is renamed over it, so a killed
process leaves at most a stray `.tmp-*` file, never a half-written artifact under its real name.
"""

from __future__ import annotations

import errno
import posixpath
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import fsspec
from fsspec.spec import AbstractFileSystem

TMP_PREFIX = ".tmp-"


class StorageError(OSError):
    """Artifact storage cannot be read or written (disk full, permission, missing bucket)."""


def resolve(url: str) -> tuple[AbstractFileSystem, str]:
    """(filesystem, path) for a URL or plain local path."""
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def join(url: str, *parts: str) -> str:
    """Join path parts onto a URL with `/` (object stores and local paths alike)."""
    return posixpath.join(url.rstrip("/") if url not in ("/", "") else url, *parts)


def stage_url(root: str, run_id: str, iteration: int, stage: str) -> str:
    """runs/<run_id>/iter-<k>/<stage>: where one stage of one iteration writes."""
    return join(root, run_id, f"iter-{iteration}", stage)


def explain(exc: OSError, url: str, action: str) -> StorageError:
    """Turn an OSError into a StorageError that says what failed and what to do."""
    if exc.errno == errno.ENOSPC:
        hint = "the disk is full: free space, or point storage.root at a larger volume"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        hint = "permission denied: fix the folder's permissions or point storage.root elsewhere"
    elif exc.errno == errno.EROFS:
        hint = "the file system is read-only: point storage.root at a writable location"
    else:
        hint = f"{exc.strerror or exc}"
    err = StorageError(exc.errno, f"cannot {action} {url}: {hint}")
    err.__cause__ = exc
    return err


@contextmanager
def _storage_errors(url: str, action: str) -> Iterator[None]:
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise explain(exc, url, action) from exc


def makedirs(url: str) -> None:
    with _storage_errors(url, "create folder"):
        fs, path = resolve(url)
        fs.makedirs(path, exist_ok=True)


def write_bytes_atomic(url: str, data: bytes) -> None:
    """Write `data` to `url` via a temp file + rename, so readers see all of it or none."""
    fs, path = resolve(url)
    parent = posixpath.dirname(path)
    tmp = posixpath.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{posixpath.basename(path)}")
    with _storage_errors(url, "write"):
        fs.makedirs(parent, exist_ok=True)
        try:
            with fs.open(tmp, "wb") as f:
                f.write(data)
            fs.mv(tmp, path)
        except BaseException:
            # Best effort: a temp file left by a crash here is swept by `remove_temp_files`.
            if fs.exists(tmp):
                fs.rm(tmp)
            raise


def read_bytes(url: str) -> bytes:
    with _storage_errors(url, "read"):
        fs, path = resolve(url)
        with fs.open(path, "rb") as f:
            return f.read()


def exists(url: str) -> bool:
    fs, path = resolve(url)
    return bool(fs.exists(path))


def remove(url: str) -> None:
    """Delete a file if it exists."""
    with _storage_errors(url, "delete"):
        fs, path = resolve(url)
        if fs.exists(path):
            fs.rm(path)


def listdir(url: str) -> list[str]:
    """Names (not paths) directly under a folder; [] when it does not exist."""
    fs, path = resolve(url)
    if not fs.exists(path):
        return []
    return sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))


def remove_temp_files(url: str) -> int:
    """Delete temp files a killed writer left in a folder; returns how many."""
    stale = [n for n in listdir(url) if n.startswith(TMP_PREFIX)]
    for name in stale:
        remove(join(url, name))
    return len(stale)
