"""Where artifacts live: fsspec URLs, the run layout, and atomic writes with clear errors.

Every path in clawloop's storage is a URL string (`runs/x`, `file:///data/runs`, `s3://bucket/runs`)
resolved through fsspec, so the same code writes to local disk or an object store. A file is never
seen half-written under its real name:

- on a local disk it goes to a hidden temp name beside its target and is renamed over it (a killed
  process leaves at most a stray `.tmp-*` file, swept at the next stage start);
- on an object store (S3, GCS, Azure, memory) it is one PUT of the whole object, which the store
  makes visible all at once or not at all. Object stores have no rename (fsspec's `mv` there is
  copy + delete) and no folders, so neither is used: no folder is ever "created", which also means
  a missing bucket is an error, never silently created.

Object-store listings are never cached (s3fs would otherwise keep answering from a listing made
before another process wrote), and every failure (no such bucket, refused credentials, nothing
answering at the endpoint) becomes a StorageError that says what failed, where, and what to do.

Options for a protocol (endpoint_url, profile, region, ...) come from `configure`, which the run
config's `storage.options` feeds; credentials and the endpoint may instead come from the usual
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_ENDPOINT_URL).
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fsspec
from fsspec.spec import AbstractFileSystem

TMP_PREFIX = ".tmp-"
LOCAL_PROTOCOLS = frozenset({"file", "local"})
# Stores without folders or rename: one PUT per object is the atomic write.
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory"})
# Passed to every filesystem of the protocol unless `configure` says otherwise: listings cached by
# s3fs/gcsfs/adlfs go stale as soon as another process writes (a resumed run, `clawloop runs`).
DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    p: {"use_listings_cache": False} for p in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
}
_OPTIONS: dict[str, dict[str, Any]] = {}  # protocol -> storage options set by `configure`
NO_BUCKET = "no such bucket"
# Storage option names that carry credentials: refused in configs (see tasks/settings.py).
SECRET_OPTIONS = frozenset(
    {"key", "secret", "token", "password", "account_key", "sas_token", "connection_string"}
    | {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "client_secret"}
)
STORE_ERROR_MODULES = ("botocore", "aiobotocore", "aiohttp", "google", "azure")


class StorageError(OSError):
    """Artifact storage cannot be read or written (disk full, permission, missing bucket)."""

    def __str__(self) -> str:  # the message alone, without OSError's "[Errno N]" prefix
        return self.strerror if self.errno is not None and self.strerror else super().__str__()


def protocol(url: str) -> str:
    """The URL's fsspec protocol ("file" for plain paths)."""
    proto, _ = fsspec.core.split_protocol(url)
    return proto or "file"


def is_local(url: str) -> bool:
    return protocol(url) in LOCAL_PROTOCOLS


def is_object_store(url: str) -> bool:
    return protocol(url) in OBJECT_STORES


def configure(url: str, options: Mapping[str, Any] | None) -> None:
    """Storage options (fsspec keyword arguments, e.g. endpoint_url) for every URL of `url`'s
    protocol in this process; `None` or {} drops what an earlier call set."""
    proto = protocol(url)
    if proto in LOCAL_PROTOCOLS:
        return
    if options:
        _OPTIONS[proto] = dict(options)
    else:
        _OPTIONS.pop(proto, None)


def options_for(url: str) -> dict[str, Any]:
    proto = protocol(url)
    return {**DEFAULT_OPTIONS.get(proto, {}), **_OPTIONS.get(proto, {})}


def resolve(url: str) -> tuple[AbstractFileSystem, str]:
    """(filesystem, path) for a URL or plain local path."""
    fs, path = fsspec.core.url_to_fs(url, **options_for(url))
    return fs, path


def join(url: str, *parts: str) -> str:
    """Join path parts onto a URL with `/` (object stores and local paths alike)."""
    return posixpath.join(url.rstrip("/") if url not in ("/", "") else url, *parts)


def stage_url(root: str, run_id: str, iteration: int, stage: str) -> str:
    """runs/<run_id>/iter-<k>/<stage>: where one stage of one iteration writes."""
    return join(root, run_id, f"iter-{iteration}", stage)


def _endpoint(url: str) -> str:
    opts = options_for(url)
    endpoint = (
        opts.get("endpoint_url")
        or (opts.get("client_kwargs") or {}).get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    return str(endpoint) if endpoint else ""


def _bucket(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]


def _no_bucket(exc: BaseException) -> bool:
    """A FileNotFoundError that says the bucket itself is missing (s3fs: "The specified bucket
    does not exist", NoSuchBucket), not just a key."""
    text = str(exc).lower()
    return any(s in text for s in ("specified bucket does not exist", "nosuchbucket", NO_BUCKET))


def _store_hint(exc: BaseException, url: str) -> str | None:
    """What to do about an object-store failure (None: not one we recognise)."""
    if is_local(url):
        return None
    name, text = type(exc).__name__, str(exc)
    where = f" at {_endpoint(url)}" if _endpoint(url) else ""
    creds = (
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE / storage.options.profile) "
        "to credentials that may read and write the bucket"
    )
    if isinstance(exc, FileNotFoundError) and _no_bucket(exc):
        return (
            f"bucket {_bucket(url)!r} does not exist{where}: create it (aws s3 mb "
            f"s3://{_bucket(url)}) or point storage.root at an existing bucket"
        )
    if isinstance(exc, PermissionError):
        return f"access refused{where} ({text}): {creds}"
    if name == "NoCredentialsError" or "unable to locate credentials" in text.lower():
        return f"no credentials found for {url}: {creds}"
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError") or (
        "could not connect" in text.lower()
    ):
        return (
            f"nothing answers{where or ' at the storage endpoint'} ({text}): start the object "
            "store or fix storage.options.endpoint_url (or AWS_ENDPOINT_URL)"
        )
    return None


def explain(exc: BaseException, url: str, action: str) -> StorageError:
    """Turn a storage failure into a StorageError that says what failed and what to do."""
    code = getattr(exc, "errno", None)
    hint = _store_hint(exc, url)
    if hint is not None:
        pass
    elif code == errno.ENOSPC:
        hint = "the disk is full: free space, or point storage.root at a larger volume"
    elif code in (errno.EACCES, errno.EPERM):
        hint = "permission denied: fix the folder's permissions or point storage.root elsewhere"
    elif code == errno.EROFS:
        hint = "the file system is read-only: point storage.root at a writable location"
    else:
        hint = f"{getattr(exc, 'strerror', None) or exc}"
    text = f"cannot {action} {url}: {hint}"
    err = StorageError(code, text) if isinstance(code, int) else StorageError(text)
    err.__cause__ = exc
    return err


def _is_store_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) or type(exc).__module__.startswith(STORE_ERROR_MODULES)


@contextmanager
def storage_errors(url: str, action: str) -> Iterator[None]:
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        if not _is_store_error(exc):
            raise
        raise explain(exc, url, action) from exc


def check_root(root: str) -> None:
    """StorageError (what, where, what to do) unless the storage root can be reached: for an
    object store, that its bucket exists and the credentials may list it. Local roots pass (their
    folders are made on first write)."""
    if not is_object_store(root) or protocol(root) == "memory":
        return
    with storage_errors(root, "reach storage.root"):
        f_sys, path = resolve(root)
        bucket = path.split("/", 1)[0]
        try:
            f_sys.ls(bucket, detail=False)
        except FileNotFoundError as exc:
            raise explain(FileNotFoundError(f"{NO_BUCKET}: {exc}"), root, "reach") from exc


def makedirs(url: str) -> None:
    """Make a folder (object stores have none: nothing to do, and no bucket is ever created)."""
    if is_object_store(url):
        return
    with storage_errors(url, "create folder"):
        fs, path = resolve(url)
        fs.makedirs(path, exist_ok=True)


def write_bytes_atomic(url: str, data: bytes) -> None:
    """Write `data` to `url` so readers see all of it or none: one PUT on an object store, a
    temp file + rename elsewhere."""
    fs, path = resolve(url)
    if is_object_store(url):
        with storage_errors(url, "write"):
            fs.pipe_file(path, data)
        return
    parent = posixpath.dirname(path)
    tmp = posixpath.join(parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{posixpath.basename(path)}")
    with storage_errors(url, "write"):
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


# -- compare-and-swap of one small object (a run's lease) ----------------------------------------
# A version names one state of the object: its sha256 on a local disk and in memory, its ETag on
# S3. `create_exclusive` and `replace_if` succeed for one writer only: on S3 a conditional PUT
# (If-None-Match: * / If-Match: ETag); on a local disk a hard link (fails if the name exists) and a
# rename made under an flock of a `.<name>.lock` file beside it. Other object stores (GCS, Azure)
# get "create" from fsspec and a read-compare-write replace (a narrow race, said here).
_MEMORY_LOCK = threading.Lock()


def _etag(info: Mapping[str, Any]) -> str | None:
    tag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    return str(tag) if tag else None


def read_versioned(url: str) -> tuple[bytes, str] | None:
    """(bytes, version) of a small object, None when it does not exist."""
    with storage_errors(url, "read"):
        f_sys, path = resolve(url)
        if protocol(url) in ("s3", "s3a"):
            try:
                tag = _etag(f_sys.info(path))  # the version first: a later change fails the CAS
                data = f_sys.cat_file(path)
            except FileNotFoundError:
                return None
            return data, tag or hashlib.sha256(data).hexdigest()
        try:
            data = f_sys.cat_file(path)
        except FileNotFoundError:
            return None
        return data, hashlib.sha256(data).hexdigest()


@contextmanager
def _local_lock(path: str) -> Iterator[None]:
    import fcntl

    lock = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _precondition_failed(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "pre-condition" in text or "precondition" in text or "412" in text


def create_exclusive(url: str, data: bytes) -> str | None:
    """Write `url` only if it does not exist: its version, or None when it already exists."""
    with storage_errors(url, "create"):
        f_sys, path = resolve(url)
        if is_local(url):
            parent = posixpath.dirname(path)
            f_sys.makedirs(parent, exist_ok=True)
            tmp = posixpath.join(
                parent, f"{TMP_PREFIX}{uuid.uuid4().hex}-{posixpath.basename(path)}"
            )
            with open(tmp, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            try:
                os.link(tmp, path)  # atomic, complete, and refused when the name exists
            except FileExistsError:
                return None
            finally:
                os.unlink(tmp)
            return hashlib.sha256(data).hexdigest()
        if protocol(url) == "memory":
            with _MEMORY_LOCK:
                if f_sys.exists(path):
                    return None
                f_sys.pipe_file(path, data)
            return hashlib.sha256(data).hexdigest()
        try:
            out = f_sys.pipe_file(path, data, mode="create")
        except FileExistsError:
            return None
        except OSError as exc:
            if _precondition_failed(exc):
                return None
            raise
        tag = _etag(out) if isinstance(out, Mapping) else None
        return tag or _etag(f_sys.info(path)) or hashlib.sha256(data).hexdigest()


def replace_if(url: str, data: bytes, version: str) -> str | None:
    """Replace `url` with `data` only if it is still at `version`: the new version, or None when
    another writer changed it first."""
    with storage_errors(url, "replace"):
        f_sys, path = resolve(url)
        if is_local(url):
            with _local_lock(path):
                current = read_versioned(url)
                if current is None or current[1] != version:
                    return None
                write_bytes_atomic(url, data)
            return hashlib.sha256(data).hexdigest()
        if protocol(url) in ("s3", "s3a"):
            try:
                out = f_sys.pipe_file(path, data, IfMatch=version)
            except OSError as exc:
                if _precondition_failed(exc) or isinstance(exc, FileNotFoundError):
                    return None
                raise
            tag = _etag(out) if isinstance(out, Mapping) else None
            return tag or _etag(f_sys.info(path)) or hashlib.sha256(data).hexdigest()
        with _MEMORY_LOCK:  # memory: one process; other stores: read-compare-write
            current = read_versioned(url)
            if current is None or current[1] != version:
                return None
            f_sys.pipe_file(path, data)
        return hashlib.sha256(data).hexdigest()


def read_bytes(url: str) -> bytes:
    with storage_errors(url, "read"):
        fs, path = resolve(url)
        return fs.cat_file(path)


def exists(url: str) -> bool:
    with storage_errors(url, "look up"):
        fs, path = resolve(url)
        return bool(fs.exists(path))


def size(url: str) -> int:
    with storage_errors(url, "look up"):
        fs, path = resolve(url)
        return int(fs.size(path))


def version(url: str) -> str | None:
    """An object's identity on an object store (ETag, size, modification time), which changes
    whenever its bytes do; None elsewhere or when the store gives no ETag."""
    if not is_object_store(url):
        return None
    with storage_errors(url, "look up"):
        fs, path = resolve(url)
        info = fs.info(path)
    etag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
    if not etag:
        return None
    return f"{etag}:{info.get('size')}:{info.get('LastModified') or info.get('mtime') or ''}"


def remove(url: str) -> None:
    """Delete a file if it exists."""
    with storage_errors(url, "delete"):
        fs, path = resolve(url)
        if fs.exists(path):
            fs.rm(path)


def listdir(url: str) -> list[str]:
    """Names (not paths) directly under a folder; [] when it does not exist."""
    with storage_errors(url, "list"):
        fs, path = resolve(url)
        try:
            found = fs.ls(path, detail=False)
        except FileNotFoundError as exc:
            if is_object_store(url) and _no_bucket(exc):
                raise
            return []
        here = path.rstrip("/")
        return sorted(posixpath.basename(p.rstrip("/")) for p in found if p.rstrip("/") != here)


def find(url: str) -> list[str]:
    """Paths (relative to `url`, `/`-separated) of every file under a folder; [] if none."""
    with storage_errors(url, "list"):
        fs, base = resolve(url)
        if not is_object_store(url) and not fs.exists(base):
            return []
        base = base.rstrip("/")
        out = []
        for p in fs.find(base):
            rel = p[len(base) :].lstrip("/")
            if rel:
                out.append(rel)
        return sorted(out)


def remove_temp_files(url: str) -> int:
    """Delete temp files a killed writer left in a folder; returns how many."""
    if is_object_store(url):
        return 0  # objects are written in one PUT: there are no temp files
    stale = [n for n in listdir(url) if n.startswith(TMP_PREFIX)]
    for name in stale:
        remove(join(url, name))
    return len(stale)


# -- local copies of object-store folders -------------------------------------------------------
# Some consumers need real files (a model checkpoint that a trainer writes and a server loads).
# For a remote storage root they work on a local copy at `local_path(url)`, and `upload_folder` /
# `download_file` move files between it and the store.


def cache_dir() -> Path:
    """Where local copies of object-store files live: $CLAWLOOP_CACHE/storage (default
    ~/.cache/clawloop/storage)."""
    env = os.environ.get("CLAWLOOP_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "clawloop") / "storage"


def local_path(url: str) -> Path:
    """The local path of `url`: itself on a local file system, else its copy under `cache_dir()`
    (`<cache>/<protocol>/<bucket>/<key>`)."""
    _, path = resolve(url)
    if is_local(url):
        return Path(path)
    return cache_dir() / protocol(url) / path.lstrip("/")


def upload_folder(local: Path, url: str) -> list[str]:
    """Make the folder at `url` hold exactly the files under `local` (one PUT per file; objects
    the folder had that `local` lacks are deleted). Returns the relative paths uploaded."""
    local = Path(local)
    rels = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    with storage_errors(url, "upload"):
        f_sys, base = resolve(url)
        for rel in rels:
            f_sys.put_file(str(local / rel), posixpath.join(base, rel))
        extra = sorted(set(find(url)) - set(rels))
        for rel in extra:
            f_sys.rm(posixpath.join(base, rel))
    return rels


def download_file(url: str, dest: Path, sha256: str | None = None) -> None:
    """Copy one object to a local file (temp + rename, so a killed copy leaves no half file);
    with `sha256`, a copy whose bytes do not match is an error (StorageError)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{dest.name}")
    with storage_errors(url, "download"):
        f_sys, path = resolve(url)
        try:
            f_sys.get_file(path, str(tmp))
            if sha256 is not None and file_sha256(tmp) != sha256:
                raise StorageError(
                    errno.EIO,
                    f"cannot download {url}: its bytes do not match the manifest's sha256; "
                    "re-run the stage that wrote it",
                )
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
