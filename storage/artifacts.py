"""Reading and writing a stage's Parquet tables, and committing the stage with its manifest.

A stage write goes: `open_stage` (drop the old manifest first, so the folder stops looking complete,
and sweep temp files a killed writer left) -> `write_table` per table (atomic, schema-checked) ->
`commit_stage` (manifest last). Read back with `read_table`, or with plain pandas:
`pd.read_parquet("runs/<run>/iter-1/forge/tasks.parquet")`.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable, Mapping
from posixpath import basename as posixpath_basename
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from clawloop.storage import fs
from clawloop.storage.manifest import (
    FAILURE,
    MANIFEST,
    FileEntry,
    Manifest,
    read_manifest,
    sha256_bytes,
    sha256_file,
    write_manifest,
)


class SchemaError(ValueError):
    """Rows do not fit the stage's pyarrow schema."""


def _table(rows: Iterable[Mapping[str, Any]], schema: pa.Schema, where: str) -> pa.Table:
    rows = list(rows)
    names = set(schema.names)
    for i, row in enumerate(rows):
        extra = set(row) - names
        missing = names - set(row)
        if extra or missing:
            raise SchemaError(
                f"{where}: row {i} does not match the schema: "
                f"missing {sorted(missing)}, unexpected {sorted(extra)}; "
                "add the column to storage/schemas.py or fix the stage's row builder"
            )
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaError(f"{where}: a value has the wrong type for the schema: {exc}") from exc


def empty_row(schema: pa.Schema, **values: Any) -> dict[str, Any]:
    """A row with every column of `schema` at its type's zero value, overridden by `values`.

    Lets a stage build a "failed" row that stays valid when other stages add columns."""
    row: dict[str, Any] = {}
    for f in schema:
        t = f.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            row[f.name] = ""
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            row[f.name] = b""
        elif pa.types.is_boolean(t):
            row[f.name] = False
        elif pa.types.is_integer(t):
            row[f.name] = 0
        elif pa.types.is_floating(t):
            row[f.name] = 0.0
        else:
            row[f.name] = None
    unknown = set(values) - set(row)
    if unknown:
        raise SchemaError(f"empty_row: {sorted(unknown)} are not columns of the schema")
    row.update(values)
    return row


def parquet_bytes(
    rows: Iterable[Mapping[str, Any]], schema: pa.Schema, where: str = "table"
) -> tuple[bytes, int]:
    """Serialise rows to Parquet bytes with `schema`; returns (bytes, row count)."""
    table = _table(rows, schema, where)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue(), table.num_rows


def open_stage(stage_url: str) -> None:
    """Mark a stage folder as in progress: remove its manifest, failure record and temp files."""
    fs.makedirs(stage_url)
    fs.remove(fs.join(stage_url, MANIFEST))
    fs.remove(fs.join(stage_url, FAILURE))
    fs.remove_temp_files(stage_url)


def record_failure(stage_url: str, error: str) -> None:
    """Note why a stage failed, in place of a manifest: the folder stays incomplete (it re-runs)."""
    body = json.dumps({"status": "failed", "error": error, "finished_at": time.time()}, indent=2)
    fs.write_bytes_atomic(fs.join(stage_url, FAILURE), body.encode())


def write_table(
    stage_url: str, name: str, rows: Iterable[Mapping[str, Any]], schema: pa.Schema
) -> FileEntry:
    """Atomically write `<stage_url>/<name>.parquet`; returns its manifest entry."""
    file_name = name if name.endswith(".parquet") else f"{name}.parquet"
    data, n = parquet_bytes(rows, schema, where=fs.join(stage_url, file_name))
    fs.write_bytes_atomic(fs.join(stage_url, file_name), data)
    return FileEntry(name=file_name, sha256=sha256_bytes(data), rows=n, bytes=len(data))


def write_file(stage_url: str, name: str, data: bytes) -> FileEntry:
    """Atomically write a non-Parquet file (a report, a plot) that the manifest also guards."""
    fs.write_bytes_atomic(fs.join(stage_url, name), data)
    return FileEntry(name=name, sha256=sha256_bytes(data), rows=-1, bytes=len(data))


def hash_folder(stage_url: str, sub: str) -> list[FileEntry]:
    """Manifest entries for every file under `<stage_url>/<sub>` (written by the stage itself).

    On an object store the stage wrote the folder in its local copy (`fs.local_path`): it is
    uploaded first (one PUT per file, objects it no longer has deleted), before the manifest."""
    folder = fs.join(stage_url, sub)
    if not fs.is_local(folder) and fs.local_path(folder).is_dir():
        fs.upload_folder(fs.local_path(folder), folder)
    entries = []
    for found in fs.find(folder):
        rel = fs.join(sub, found)
        if posixpath_basename(rel).startswith(fs.TMP_PREFIX):
            continue
        url = fs.join(stage_url, rel)
        entries.append(FileEntry(name=rel, sha256=sha256_file(url), rows=-1, bytes=fs.size(url)))
    return entries


def commit_stage(
    stage_url: str,
    *,
    stage: str,
    iteration: int,
    run_id: str,
    inputs_hash: str,
    code_version: str,
    upstream: dict[str, str],
    files: list[FileEntry],
    started_at: float,
    summary: dict[str, Any] | None = None,
) -> Manifest:
    """Write the manifest last: from this moment the stage counts as complete."""
    stale = sorted(
        n
        for n in fs.listdir(stage_url)
        if n.endswith(".parquet") and n not in {f.name for f in files}
    )
    for name in stale:  # files from an older run of this stage would mislead pandas readers
        fs.remove(fs.join(stage_url, name))
    manifest = Manifest(
        stage=stage,
        iteration=iteration,
        run_id=run_id,
        inputs_hash=inputs_hash,
        code_version=code_version,
        upstream=dict(upstream),
        files=list(files),
        status="complete",
        started_at=started_at,
        finished_at=time.time(),
        summary=dict(summary or {}),
    )
    write_manifest(stage_url, manifest)
    return manifest


def read_table(stage_url: str, name: str) -> pd.DataFrame:
    """One table of a stage as a DataFrame (`name` with or without .parquet)."""
    file_name = name if name.endswith(".parquet") else f"{name}.parquet"
    url = fs.join(stage_url, file_name)
    return pq.read_table(io.BytesIO(fs.read_bytes(url))).to_pandas()


def read_rows(stage_url: str, name: str) -> list[dict[str, Any]]:
    """One table of a stage as a list of plain dicts (what stage functions consume)."""
    file_name = name if name.endswith(".parquet") else f"{name}.parquet"
    url = fs.join(stage_url, file_name)
    return pq.read_table(io.BytesIO(fs.read_bytes(url))).to_pylist()


def stage_rows(stage_url: str) -> dict[str, int]:
    """Row count per table from the manifest ({} when the stage is not committed)."""
    m = read_manifest(stage_url)
    return {} if m is None else {f.name: f.rows for f in m.files if f.rows >= 0}
