"""Stage artifacts on disk: atomic writes, manifests that detect deletion and corruption, blobs."""

from __future__ import annotations

import errno
import json
import time

import pandas as pd
import pyarrow as pa
import pytest

from clawloop.storage import artifacts, fs
from clawloop.storage.blobs import BlobError, BlobStore
from clawloop.storage.cache_key import inputs_hash
from clawloop.storage.manifest import is_complete, read_manifest, why_incomplete

SCHEMA = pa.schema([("task_id", pa.string()), ("score", pa.float64()), ("ok", pa.bool_())])
ROWS = [{"task_id": "a", "score": 1.5, "ok": True}, {"task_id": "b", "score": 0.0, "ok": False}]


def _commit(url: str, key: str = "k1", rows: list[dict] = ROWS) -> None:
    artifacts.open_stage(url)
    entry = artifacts.write_table(url, "things", rows, SCHEMA)
    artifacts.commit_stage(
        url,
        stage="s",
        iteration=1,
        run_id="r",
        inputs_hash=key,
        code_version="c",
        upstream={},
        files=[entry],
        started_at=time.time(),
    )


def test_committed_stage_is_complete_and_readable_with_plain_pandas(tmp_path):
    url = str(tmp_path / "r" / "iter-1" / "s")
    _commit(url)
    assert is_complete(url, "k1")
    df = pd.read_parquet(tmp_path / "r" / "iter-1" / "s" / "things.parquet")
    assert df["task_id"].tolist() == ["a", "b"]
    m = read_manifest(url)
    assert m is not None and m.rows == {"things.parquet": 2} and m.status == "complete"
    assert (
        json.loads((tmp_path / "r" / "iter-1" / "s" / "manifest.json").read_text())["inputs_hash"]
        == "k1"
    )


def test_changed_inputs_deleted_or_corrupted_file_mean_not_complete(tmp_path):
    url = str(tmp_path / "s")
    _commit(url)
    assert "inputs changed" in why_incomplete(url, "other-key")
    path = tmp_path / "s" / "things.parquet"
    data = path.read_bytes()
    path.write_bytes(data[:-10] + b"0123456789")
    assert "corrupted" in why_incomplete(url, "k1")
    path.unlink()
    assert "missing" in why_incomplete(url, "k1")
    assert not is_complete(url, "k1")


def test_open_stage_drops_the_manifest_first(tmp_path):
    url = str(tmp_path / "s")
    _commit(url)
    artifacts.open_stage(url)  # a re-run starts: the old result must stop looking complete
    assert read_manifest(url) is None
    assert not is_complete(url)


def test_crash_during_write_leaves_no_target_and_no_temp(tmp_path, monkeypatch):
    url = str(tmp_path / "s")
    fs.makedirs(url)

    def boom(*a, **k):
        raise RuntimeError("killed")

    monkeypatch.setattr("fsspec.implementations.local.LocalFileSystem.mv", boom)
    with pytest.raises(RuntimeError):
        artifacts.write_table(url, "things", ROWS, SCHEMA)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == []


def test_leftover_temp_files_are_swept(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / f"{fs.TMP_PREFIX}abc-things.parquet").write_bytes(b"half")
    artifacts.open_stage(str(tmp_path / "s"))
    assert list((tmp_path / "s").iterdir()) == []


def test_rows_that_do_not_fit_the_schema_are_refused_with_the_column(tmp_path):
    with pytest.raises(artifacts.SchemaError, match="missing \\['ok'\\]"):
        artifacts.write_table(str(tmp_path), "t", [{"task_id": "a", "score": 1.0}], SCHEMA)
    with pytest.raises(artifacts.SchemaError, match="wrong type"):
        artifacts.write_table(
            str(tmp_path), "t", [{"task_id": "a", "score": "high", "ok": True}], SCHEMA
        )


def test_empty_row_follows_the_schema():
    row = artifacts.empty_row(SCHEMA, task_id="x")
    assert row == {"task_id": "x", "score": 0.0, "ok": False}
    with pytest.raises(artifacts.SchemaError):
        artifacts.empty_row(SCHEMA, nope=1)


def test_full_disk_and_permission_errors_say_what_to_do(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("fsspec.implementations.local.LocalFileSystem.open", full)
    with pytest.raises(fs.StorageError, match="disk is full"):
        fs.write_bytes_atomic(str(tmp_path / "x.bin"), b"data")

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("fsspec.implementations.local.LocalFileSystem.open", denied)
    with pytest.raises(fs.StorageError, match="permission denied"):
        fs.write_bytes_atomic(str(tmp_path / "x.bin"), b"data")


def test_object_store_urls_work_through_fsspec():
    url = "memory://clawloop-test/runs/r/iter-1/s"
    _commit(url)
    assert is_complete(url, "k1")
    assert artifacts.read_rows(url, "things")[1]["task_id"] == "b"


def test_blobs_are_content_addressed_deduplicated_and_checked(tmp_path):
    store = BlobStore(str(tmp_path))
    ref = store.put_bytes(b"checkpoint")
    assert ref.startswith("sha256:") and store.put_bytes(b"checkpoint") == ref
    assert store.get_bytes(ref) == b"checkpoint"
    blob_files = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
    assert len(blob_files) == 1
    blob_files[0].write_bytes(b"tampered")
    with pytest.raises(BlobError, match="corrupted"):
        store.get_bytes(ref)
    with pytest.raises(BlobError, match="not a blob reference"):
        store.get_bytes("md5:abc")


def test_cache_key_moves_with_config_upstream_and_code():
    base = inputs_hash({"n": 1}, {"iter-1/a": "h"}, "code")
    assert base == inputs_hash({"n": 1}, {"iter-1/a": "h"}, "code")
    assert base != inputs_hash({"n": 2}, {"iter-1/a": "h"}, "code")
    assert base != inputs_hash({"n": 1}, {"iter-1/a": "h2"}, "code")
    assert base != inputs_hash({"n": 1}, {"iter-1/a": "h"}, "code2")
