"""Stage cache keys: hash(config slice, upstream manifests' hashes, code version).

A stage is skipped when its committed manifest carries the same key. The code version is a digest
of the source files of the packages a stage runs (not the git commit), so editing the forge code
re-runs forge and what depends on it, while editing the README re-runs nothing.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from clawloop.storage.manifest import sha256_json

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=64)
def code_version(packages: tuple[str, ...]) -> str:
    """sha256 over the .py files of `packages` (paths relative to the project root), sorted."""
    h = hashlib.sha256()
    for pkg in sorted(packages):
        base = PROJECT_ROOT / pkg
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        for f in files:
            if "__pycache__" in f.parts or not f.exists():
                continue
            h.update(str(f.relative_to(PROJECT_ROOT)).encode())
            h.update(b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def inputs_hash(config_slice: dict[str, Any], upstream: dict[str, str], code: str) -> str:
    """The cache key of one stage run."""
    return sha256_json(
        {"config": config_slice, "upstream": dict(sorted(upstream.items())), "code": code}
    )
