"""A stage's manifest.json: what it read, what it wrote, and proof that the files are intact.

The manifest is the stage's commit record. It is written last (atomically), after every Parquet file
is in place, and it lists each file's sha256. `is_complete` trusts a stage only if its manifest
exists, was made from the expected inputs, says `complete`, and every listed file still hashes to the
recorded value. Anything else (a kill mid-stage, a deleted or corrupted file, changed inputs) means
"rebuild", and the reason is logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from clawloop.storage import fs

MANIFEST = "manifest.json"
# Written instead of a manifest when a stage fails: the error, so `clawloop runs` can say why.
FAILURE = "failure.json"
log = logging.getLogger("clawloop.storage")


@dataclass(frozen=True)
class FileEntry:
    name: str  # file name inside the stage folder, e.g. candidates.parquet
    sha256: str
    rows: int  # row count (Parquet); -1 for other files
    bytes: int


@dataclass(frozen=True)
class Manifest:
    stage: str
    iteration: int
    run_id: str
    inputs_hash: str  # the stage's cache key: config slice + upstream manifests + code version
    code_version: str
    upstream: dict[str, str]  # "iter-<k>/<stage>" -> that manifest's content hash
    files: list[FileEntry]
    status: str = "complete"  # only complete manifests are ever written; kept for readers
    started_at: float = 0.0
    finished_at: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)  # small key figures for humans/UI

    @property
    def rows(self) -> dict[str, int]:
        return {f.name: f.rows for f in self.files}

    @property
    def duration_s(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    def content_hash(self) -> str:
        """Identity of what this stage produced (its file digests), independent of timings.

        Downstream cache keys use this, so a re-run that produces the same bytes (say, after a
        config change that did not matter) does not invalidate later stages; any change does.
        """
        ident = {
            "stage": self.stage,
            "iteration": self.iteration,
            "files": sorted((f.name, f.sha256) for f in self.files),
        }
        return sha256_json(ident)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse a manifest; ValueError saying what is wrong (not JSON, not an object, a field
        missing or of the wrong type)."""
        return parse_manifest(text)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "stage": (str,),
    "iteration": (int,),
    "run_id": (str,),
    "inputs_hash": (str,),
    "code_version": (str,),
    "upstream": (dict,),
    "files": (list,),
    "status": (str,),
    "started_at": (int, float),
    "finished_at": (int, float),
    "summary": (dict,),
}
_FILE_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "sha256": (str,),
    "rows": (int,),
    "bytes": (int,),
}
_REQUIRED = ("stage", "iteration", "run_id", "inputs_hash", "code_version", "upstream", "files")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}" if value is not None else "null"
    )


def _check_fields(d: dict[str, Any], types: dict[str, tuple[type, ...]], where: str) -> None:
    unknown = sorted(set(d) - set(types))
    if unknown:
        raise ValueError(f"{where}has unknown fields {unknown}")
    for name, want in types.items():
        if name in d and (isinstance(d[name], bool) or not isinstance(d[name], want)):
            raise ValueError(f"{where}{name!r} is {_kind(d[name])}, not {want[0].__name__}")


def parse_manifest(text: str | bytes) -> Manifest:
    """A manifest from its JSON; ValueError naming what is wrong with it."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:
        raise ValueError("not JSON (its bytes are not UTF-8 text)") from None
    if not isinstance(d, dict):
        raise ValueError(f"its top level is {_kind(d)}, not an object")
    missing = [f for f in _REQUIRED if f not in d]
    if missing:
        raise ValueError(f"it has no {', '.join(repr(m) for m in missing)}")
    _check_fields(d, _FIELD_TYPES, "")
    files = []
    for i, f in enumerate(d["files"]):
        if not isinstance(f, dict):
            raise ValueError(f"files[{i}] is {_kind(f)}, not an object")
        lacking = [k for k in _FILE_TYPES if k not in f]
        if lacking:
            raise ValueError(f"files[{i}] has no {', '.join(repr(k) for k in lacking)}")
        _check_fields(f, _FILE_TYPES, f"files[{i}] ")
        files.append(FileEntry(**f))
    return Manifest(**{**d, "files": files})


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    """sha256 of the canonical JSON form of `obj` (sorted keys, no whitespace)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


# (url, object version) -> sha256: an object store says when an object changed (its ETag), so
# an unchanged object (a checkpoint checked by every stage that reads it) is downloaded once.
_HASHED: dict[tuple[str, str], str] = {}


def sha256_file(url: str, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes, streamed (a checkpoint may not fit in memory)."""
    ver = fs.version(url)
    if ver is not None and (url, ver) in _HASHED:
        return _HASHED[url, ver]
    f_sys, path = fs.resolve(url)
    h = hashlib.sha256()
    with fs.storage_errors(url, "read"), f_sys.open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    if ver is not None:
        _HASHED[url, ver] = h.hexdigest()
    return h.hexdigest()


def write_manifest(stage_url: str, manifest: Manifest) -> None:
    fs.write_bytes_atomic(fs.join(stage_url, MANIFEST), manifest.to_json().encode())


def manifest_problem(stage_url: str) -> str | None:
    """One line naming a stage's manifest and what is wrong with it; None when it is absent or
    sound."""
    return check_manifest(stage_url)[1]


def check_manifest(stage_url: str) -> tuple[Manifest | None, str | None]:
    """(manifest, None), (None, None) when there is none, or (None, "<url> is damaged: why")."""
    url = fs.join(stage_url, MANIFEST)
    if not fs.exists(url):
        return None, None
    try:
        return parse_manifest(fs.read_bytes(url)), None
    except ValueError as exc:
        return None, f"{url} is damaged: {exc}"


def read_manifest(stage_url: str) -> Manifest | None:
    """The stage's manifest, or None if absent or damaged (a damaged one is logged, one line, and
    the stage counts as not complete: it is rebuilt)."""
    manifest, problem = check_manifest(stage_url)
    if problem is not None:
        log.warning("%s: the stage will be rebuilt", problem)
    return manifest


def read_failure(stage_url: str) -> dict[str, Any] | None:
    """The failure record of a stage's last attempt ({"error", "finished_at"}), if it failed."""
    url = fs.join(stage_url, FAILURE)
    if not fs.exists(url):
        return None
    try:
        data = json.loads(fs.read_bytes(url))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def why_incomplete(stage_url: str, expected_inputs_hash: str | None = None) -> str | None:
    """None if the stage is complete and intact; otherwise the reason it must be rebuilt."""
    m = read_manifest(stage_url)
    if m is None:
        failure = read_failure(stage_url)
        if failure is not None:
            return f"failed last time: {failure.get('error', '').splitlines()[0][:200]}"
        return "no manifest yet"
    if m.status != "complete":
        return f"manifest status is {m.status!r}"
    if expected_inputs_hash is not None and m.inputs_hash != expected_inputs_hash:
        return f"inputs changed (cache key {m.inputs_hash[:12]} -> {expected_inputs_hash[:12]})"
    for entry in m.files:
        url = fs.join(stage_url, entry.name)
        if not fs.exists(url):
            return f"{entry.name} is missing"
        try:
            digest = sha256_file(url)
        except OSError as exc:
            return f"{entry.name} cannot be read ({exc})"
        if digest != entry.sha256:
            return (
                f"{entry.name} is corrupted (sha256 {digest[:12]} != recorded {entry.sha256[:12]})"
            )
    return None


def is_complete(stage_url: str, expected_inputs_hash: str | None = None) -> bool:
    """True when the stage's manifest matches `expected_inputs_hash` and every file is intact."""
    reason = why_incomplete(stage_url, expected_inputs_hash)
    if reason is not None:
        log.info("stage %s is not complete: %s", stage_url, reason)
    return reason is None
