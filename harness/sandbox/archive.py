"""Tar streams between the host and a sandbox: the one way files cross the boundary.

Docker's put_archive/get_archive speak tar, and the bubblewrap backend uses the same format so both
backends share one set of rules: uploads carry no host ownership, downloads are unpacked with
Python's "data" filter, which refuses absolute paths, `..`, device files and links that point out
of the destination — a sandbox cannot plant a symlink that makes the host read or overwrite its
own files.
"""

from __future__ import annotations

import io
import os
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

# Largest archive a download may produce; beyond it the sandbox is treated as hostile.
MAX_DOWNLOAD_BYTES = 1 << 30


def owner_filter(
    uid: int = 0, readonly: bool = False
) -> Callable[[tarfile.TarInfo], tarfile.TarInfo]:
    """A tar filter giving every member the owner `uid` (never the host's), and with `readonly`
    the mode 0555 (folders, executables) or 0444: anyone may read, nobody may write."""

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = uid
        info.uname = info.gname = "root" if uid == 0 else ""
        if readonly and not info.issym():
            info.mode = 0o555 if info.isdir() or info.mode & 0o111 else 0o444
        return info

    return reset


def pack(local: Path, name: str, prefix: str = "", uid: int = 0, readonly: bool = False) -> bytes:
    """Tar `local` for upload. A file becomes the single member `name`; a directory's contents
    become the top-level members (so they land inside the remote directory). `prefix` (a
    relative path) is put in front of every member name. Members are owned by `uid`; with
    `readonly` nobody may write them, and a directory packed under a `prefix` gets that folder's
    own member too (else the engine would make it, writable)."""
    local = Path(local)
    buf = io.BytesIO()
    reset = owner_filter(uid, readonly)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if local.is_dir():
            if prefix and readonly:
                tar.add(str(local), arcname=prefix, recursive=False, filter=reset)
            for child in sorted(local.iterdir()):
                tar.add(str(child), arcname=posixpath.join(prefix, child.name), filter=reset)
        elif local.is_file():
            tar.add(str(local), arcname=posixpath.join(prefix, name), filter=reset)
        else:
            raise FileNotFoundError(f"upload source {local} is neither a file nor a directory")
    return buf.getvalue()


def split_remote(remote: str) -> tuple[str, str]:
    """`/workspace/a/b.txt` -> (`/workspace/a`, `b.txt`), normalised; refuses relative paths."""
    if not remote.startswith("/"):
        raise ValueError(f"sandbox path {remote!r} must be absolute (e.g. /workspace/{remote})")
    norm = posixpath.normpath(remote)
    if norm == "/":
        raise ValueError("sandbox path '/' cannot be uploaded to or downloaded from as a whole")
    return posixpath.dirname(norm), posixpath.basename(norm)


def unpack(data: bytes, local: Path) -> None:
    """Unpack a download (a tar whose top member is the remote file or directory) to `local`:
    a file lands at `local`, a directory's contents inside `local`."""
    local = Path(local)
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise OSError(f"download of {len(data)} bytes exceeds the {MAX_DOWNLOAD_BYTES} byte cap")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        members = tar.getmembers()
        if not members:
            raise FileNotFoundError(f"download for {local}: the archive is empty")
        top = members[0].name.split("/")[0]
        local.parent.mkdir(parents=True, exist_ok=True)
        # Extract beside the target, then move into place: a half-extracted download never looks
        # complete, and the data filter checks every member against the staging directory.
        with tempfile.TemporaryDirectory(prefix=".clawloop-dl-", dir=local.parent) as stage:
            try:
                tar.extractall(stage, filter="data")
            except tarfile.FilterError as exc:
                # An OSError, so callers that treat a failed download as "no file" keep working.
                raise PermissionError(f"download to {local} refused: {exc}") from exc
            got = Path(stage, top)
            if got.is_dir() and not got.is_symlink():
                local.mkdir(parents=True, exist_ok=True)
                for child in got.iterdir():
                    dest = local / child.name
                    if dest.is_dir() and not dest.is_symlink():
                        shutil.rmtree(dest)
                    elif dest.exists() or dest.is_symlink():
                        dest.unlink()
                    os.replace(child, dest)
            else:
                if local.is_dir() and not local.is_symlink():
                    shutil.rmtree(local)
                os.replace(got, local)
