"""Task folders as deterministic tars (the Parquet blob a forged row carries) and back: pack a
folder on disk or a folder given as files, read a tar's members safely, write them out.

A task tar is sorted, with mtime 0, owner root and fixed modes, so equal folders give byte-equal
tars and the blob's sha256 identifies the task. Unpacking refuses links, devices, absolute or
escaping paths and contents over MAX_UNPACKED_BYTES.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
from pathlib import Path

from clawloop.harness.taskfolder.folder import TaskFolderError

MAX_UNPACKED_BYTES = 64 * 1024 * 1024


def check_folder_size(root: Path, cap: int = MAX_UNPACKED_BYTES) -> None:
    """TaskFolderError when the files under `root` add up to more than `cap` bytes (the unpack
    limit a task tar must fit), from their sizes alone: nothing is read."""
    total = 0
    for top, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
            if total > cap:
                raise TaskFolderError(
                    f"{root}: the task folder holds over {cap // (1024 * 1024)} MiB "
                    f"(at {os.path.join(top, name)}); a task must fit the {cap} byte unpack limit"
                )


def _tar(entries: list[tuple[str, bytes | None, bool]]) -> bytes:
    """A deterministic tar of (relative path, data or None for a folder, executable) entries:
    sorted names, mtime 0, owner root, fixed modes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel, data, executable in sorted(entries, key=lambda e: e[0]):
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o755 if executable else 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pack_files(files: dict[str, tuple[str, bool]]) -> bytes:
    """The tar of a task folder given as task_files() returns it, without writing it to disk;
    byte-equal to pack_dir() of the same folder written by write_task_folder()."""
    folders = {posixpath.dirname(rel) for rel in files}
    for rel in list(folders):
        while rel:
            folders.add(rel)
            rel = posixpath.dirname(rel)
    folders.discard("")
    entries: list[tuple[str, bytes | None, bool]] = [(d, None, False) for d in folders]
    entries += [(rel, text.encode(), ex) for rel, (text, ex) in files.items()]
    return _tar(entries)


def pack_dir(root: Path) -> bytes:
    """A deterministic tar of `root`'s contents: sorted names, mtime 0, owner root, fixed modes.
    Equal folders give byte-equal tars, so the blob's sha256 identifies the task."""
    root = Path(root)
    entries: list[tuple[str, bytes | None, bool]] = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise TaskFolderError(f"{path}: symlinks are not allowed in a task folder")
        if path.is_dir():
            entries.append((rel, None, False))
        else:
            entries.append((rel, path.read_bytes(), bool(path.stat().st_mode & 0o111)))
    return _tar(entries)


def tar_files(blob: bytes) -> dict[str, tuple[bytes, bool] | None]:
    """A task tar's members as {normalised relative path: (data, executable)}, None for a
    folder, refusing links, devices, absolute or escaping paths and oversize contents (what
    unpack_tar writes; verify puts them in a sandbox without a folder on disk in between)."""
    out: dict[str, tuple[bytes, bool] | None] = {}
    total = 0
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
        for m in tar.getmembers():
            norm = posixpath.normpath(m.name)
            if m.name.startswith("/") or norm.startswith("..") or norm == ".":
                raise TaskFolderError(f"task tar member {m.name!r} escapes the task folder")
            if m.isdir():
                out.setdefault(norm, None)
                continue
            if not m.isfile():
                raise TaskFolderError(f"task tar member {m.name!r} is not a regular file or folder")
            total += m.size
            if total > MAX_UNPACKED_BYTES:
                raise TaskFolderError(f"task tar unpacks to over {MAX_UNPACKED_BYTES} bytes")
            src = tar.extractfile(m)
            out[norm] = (src.read() if src else b"", bool(m.mode & 0o111))
    return out


def write_files(files: dict[str, tuple[bytes, bool] | None], dest: Path) -> Path:
    """Write tar_files()'s entries under `dest` (created)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for rel, entry in files.items():
        target = dest / rel
        if entry is None:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(entry[0])
        target.chmod(0o755 if entry[1] else 0o644)
    return dest


def unpack_tar(blob: bytes, dest: Path) -> Path:
    """Extract a task tar into `dest`, refusing links, devices, absolute or escaping paths."""
    return write_files(tar_files(blob), dest)
