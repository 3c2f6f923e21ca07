"""Content-addressed blobs: large binary outputs (task tars, checkpoints) stored once by sha256.

A blob lives at `<root>/blobs/sha256/<aa>/<digest>` and is referenced from Parquet rows as
`sha256:<digest>`. Identical content is stored once across stages, iterations and runs; a blob is
written atomically and re-hashed on read, so a corrupted blob is an error, never silent bad data.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from clawloop.storage import fs

REF_PREFIX = "sha256:"


class BlobError(ValueError):
    """A blob reference is malformed, missing, or its content no longer matches its digest."""


class BlobStore:
    """Blobs under one storage root (a URL: local path or object store)."""

    def __init__(self, root: str) -> None:
        self.root = fs.join(root, "blobs", "sha256")

    def url(self, ref: str) -> str:
        digest = _digest(ref)
        return fs.join(self.root, digest[:2], digest)

    def put_bytes(self, data: bytes) -> str:
        """Store `data` (no-op if already present); returns its reference."""
        digest = hashlib.sha256(data).hexdigest()
        ref = REF_PREFIX + digest
        url = self.url(ref)
        if not fs.exists(url):
            fs.write_bytes_atomic(url, data)
        return ref

    def put_file(self, path: Path) -> str:
        return self.put_bytes(Path(path).read_bytes())

    def get_bytes(self, ref: str) -> bytes:
        url = self.url(ref)
        if not fs.exists(url):
            raise BlobError(f"blob {ref} is missing at {url}: re-run the stage that wrote it")
        data = fs.read_bytes(url)
        if hashlib.sha256(data).hexdigest() != _digest(ref):
            raise BlobError(
                f"blob {ref} at {url} is corrupted: delete it and re-run the stage that wrote it"
            )
        return data

    def has(self, ref: str) -> bool:
        return fs.exists(self.url(ref))


def _digest(ref: str) -> str:
    digest = ref.removeprefix(REF_PREFIX)
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise BlobError(f"{ref!r} is not a blob reference (expected 'sha256:<64 hex digits>')")
    return digest
