"""storage/ on a real S3 API (moto's server over HTTP, see conftest.py), checked with boto3 behind
clawloop's back: objects written whole in one PUT (no temp objects, no copy-and-delete rename), the
manifest last, no stale listings, missing buckets never created, and errors that say what to do."""

from __future__ import annotations

import json
import time

import pandas as pd
import pyarrow as pa
import pytest

from clawloop.storage import artifacts, fs
from clawloop.storage.blobs import BlobError, BlobStore
from clawloop.storage.manifest import MANIFEST, is_complete, read_manifest, why_incomplete
from clawloop.tasks.config import ConfigError, parse_config

SCHEMA = pa.schema([("task_id", pa.string()), ("score", pa.float64())])
ROWS = [{"task_id": "a", "score": 1.5}, {"task_id": "b", "score": 0.0}]


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


def test_a_committed_stage_is_two_objects_readable_by_plain_pandas(s3):
    url = fs.stage_url(s3.root, "r", 1, "s")
    _commit(url)
    assert s3.objects() == ["runs/r/iter-1/s/manifest.json", "runs/r/iter-1/s/things.parquet"]
    manifest = json.loads(s3.get("runs/r/iter-1/s/manifest.json"))
    assert manifest["inputs_hash"] == "k1" and manifest["status"] == "complete"
    assert [f["name"] for f in manifest["files"]] == ["things.parquet"]
    assert is_complete(url, "k1")
    frame = pd.read_parquet(f"{url}/things.parquet", storage_options=s3.options)
    assert frame["task_id"].tolist() == ["a", "b"]


def test_writes_never_rename_or_copy_objects(s3, monkeypatch):
    """Object stores have no rename (s3fs's mv is copy + delete, not atomic): one PUT per file."""

    def no_copy(*a, **k):
        raise AssertionError("an object was copied or moved: writes must be one PUT")

    import s3fs

    patched = [
        n for n in ("mv", "copy", "_copy", "_cp_file", "cp_file") if hasattr(s3fs.S3FileSystem, n)
    ]
    assert "_cp_file" in patched  # where every s3fs copy (and so mv) ends up
    for name in patched:
        monkeypatch.setattr(s3fs.S3FileSystem, name, no_copy)
    url = fs.stage_url(s3.root, "r", 1, "s")
    _commit(url)
    BlobStore(s3.root).put_bytes(b"tar")
    assert not [k for k in s3.objects() if fs.TMP_PREFIX in k]


def test_a_rerun_drops_the_manifest_first_and_removes_stale_tables(s3):
    url = fs.stage_url(s3.root, "r", 1, "s")
    _commit(url)
    artifacts.write_table(url, "old", ROWS, SCHEMA)  # a table the next attempt no longer writes
    artifacts.open_stage(url)
    assert f"runs/r/iter-1/s/{MANIFEST}" not in s3.objects()
    assert read_manifest(url) is None and "no manifest" in why_incomplete(url, "k1")
    _commit(url, key="k2")
    assert "runs/r/iter-1/s/old.parquet" not in s3.objects()
    assert is_complete(url, "k2")


def test_objects_changed_or_deleted_behind_its_back_are_found(s3):
    url = fs.stage_url(s3.root, "r", 1, "s")
    _commit(url)
    assert is_complete(url, "k1")  # reads (and could cache) every listing first
    key = "runs/r/iter-1/s/things.parquet"
    data = s3.get(key)
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=data[:-10] + b"0123456789")
    assert "corrupted" in why_incomplete(url, "k1")
    s3.client.delete_object(Bucket=s3.bucket, Key=key)
    assert "things.parquet is missing" in why_incomplete(url, "k1")


def test_an_unchanged_object_is_downloaded_once_to_check_it(s3, monkeypatch):
    """A checkpoint is checked by every stage that reads it: hash it again only if it changed."""
    import s3fs

    url = fs.stage_url(s3.root, "r", 1, "s")
    _commit(url)
    opened: list[str] = []
    real_open = s3fs.S3FileSystem._open
    monkeypatch.setattr(
        s3fs.S3FileSystem,
        "_open",
        lambda self, path, *a, **k: opened.append(path) or real_open(self, path, *a, **k),
    )
    for _ in range(3):
        assert is_complete(url, "k1")
    assert [p for p in opened if p.endswith("things.parquet")] == [
        f"{s3.bucket}/runs/r/iter-1/s/things.parquet"
    ]
    key = "runs/r/iter-1/s/things.parquet"
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=s3.get(key)[:-1] + b"!")
    assert "corrupted" in why_incomplete(url, "k1")


def test_listings_see_what_another_process_wrote(s3):
    """s3fs caches listings by default; a resumed run or `clawloop runs` must see the bucket."""
    assert fs.listdir(s3.root) == []
    s3.client.put_object(Bucket=s3.bucket, Key="runs/r1/run.json", Body=b"{}")
    assert fs.listdir(s3.root) == ["r1"]
    assert fs.exists(fs.join(s3.root, "r1", "run.json"))
    s3.client.put_object(Bucket=s3.bucket, Key="runs/r2/run.json", Body=b"{}")
    s3.client.delete_object(Bucket=s3.bucket, Key="runs/r1/run.json")
    assert fs.listdir(s3.root) == ["r2"]
    assert not fs.exists(fs.join(s3.root, "r1", "run.json"))
    assert fs.listdir(fs.join(s3.root, "nothing-here")) == []


def test_a_missing_bucket_is_a_clear_error_and_is_never_created(s3):
    root = "s3://clawloop-no-such-bucket/runs"
    with pytest.raises(fs.StorageError) as err:
        fs.check_root(root)
    msg = str(err.value)
    assert "clawloop-no-such-bucket" in msg and "does not exist" in msg and s3.endpoint in msg
    assert "create it" in msg
    with pytest.raises(fs.StorageError, match="does not exist.*create it"):
        _commit(fs.stage_url(root, "r", 1, "s"))
    with pytest.raises(fs.StorageError, match="does not exist"):
        fs.listdir(root)
    buckets = {b["Name"] for b in s3.client.list_buckets()["Buckets"]}
    assert "clawloop-no-such-bucket" not in buckets
    fs.check_root(s3.root)  # the fixture's bucket is fine


def test_refused_credentials_say_which_variables_to_set(s3, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG0")
    s3.set_auth(0)  # from now on moto checks every request's credentials
    try:
        with pytest.raises(fs.StorageError) as err:
            fs.check_root(s3.root)
        with pytest.raises(fs.StorageError, match="access refused"):
            fs.write_bytes_atomic(fs.join(s3.root, "x.json"), b"{}")
    finally:
        s3.set_auth(float("inf"))
    msg = str(err.value)
    assert "access refused" in msg and "AWS_ACCESS_KEY_ID" in msg and s3.root in msg


def test_no_credentials_at_all_say_which_variables_to_set(s3, monkeypatch):
    import s3fs

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role lookup either
    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.raises(fs.StorageError) as err:
        fs.check_root(s3.root)
    msg = str(err.value)
    assert msg.startswith(f"cannot reach storage.root {s3.root}: no credentials found"), msg
    assert "AWS_ACCESS_KEY_ID" in msg and "AWS_PROFILE" in msg


def test_nothing_answering_at_the_endpoint_is_a_clear_error(s3):
    from clawloop.harness.serve import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    fast = {"retries": {"max_attempts": 1}, "connect_timeout": 1}
    fs.configure("s3://", {"endpoint_url": dead, "config_kwargs": fast})
    with pytest.raises(fs.StorageError) as err:
        fs.read_bytes(fs.join(s3.root, "r", "run.json"))
    msg = str(err.value)
    assert "nothing answers at" in msg and dead in msg and "endpoint_url" in msg


def test_the_endpoint_can_come_from_the_environment(s3, monkeypatch):
    fs.configure("s3://", None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    url = fs.join(s3.root, "r", "run.json")
    fs.write_bytes_atomic(url, b'{"a": 1}')
    assert s3.get("runs/r/run.json") == b'{"a": 1}'
    assert fs.read_bytes(url) == b'{"a": 1}'


def test_storage_options_come_from_the_run_config_and_refuse_credentials(s3):
    fs.configure("s3://", None)
    cfg = parse_config({"storage": {"root": s3.root, "options": {"endpoint_url": s3.endpoint}}})
    assert fs.options_for(cfg.storage.root)["endpoint_url"] == s3.endpoint
    fs.write_bytes_atomic(fs.join(cfg.storage.root, "probe"), b"1")
    assert s3.objects("runs/") == ["runs/probe"]
    with pytest.raises(ConfigError) as err:
        parse_config({"storage": {"root": s3.root, "options": {"secret": "s3cr3t"}}})
    assert "storage.options.secret" in str(err.value)
    assert "AWS_SECRET_ACCESS_KEY" in str(err.value) and "s3cr3t" not in str(err.value)


def test_blobs_are_content_addressed_objects_and_checked_on_read(s3):
    store = BlobStore(s3.root)
    ref = store.put_bytes(b"task tar")
    assert store.put_bytes(b"task tar") == ref and store.has(ref)
    digest = ref.removeprefix("sha256:")
    key = f"runs/blobs/sha256/{digest[:2]}/{digest}"
    assert s3.objects("runs/blobs/") == [key]
    assert store.get_bytes(ref) == b"task tar"
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=b"tampered")
    with pytest.raises(BlobError, match="corrupted"):
        store.get_bytes(ref)
    s3.client.delete_object(Bucket=s3.bucket, Key=key)
    with pytest.raises(BlobError, match="missing"):
        store.get_bytes(ref)


def test_a_folder_written_in_the_local_copy_is_uploaded_at_commit_and_fetched_back(s3):
    url = fs.stage_url(s3.root, "r", 1, "train")
    local = fs.local_path(fs.join(url, "model"))
    assert local.is_relative_to(fs.cache_dir())
    (local / "sft").mkdir(parents=True)
    (local / "sft" / "weights.bin").write_bytes(b"w" * 1000)
    (local / "config.json").write_text("{}")
    s3.client.put_object(Bucket=s3.bucket, Key="runs/r/iter-1/train/model/old.bin", Body=b"x")
    entries = artifacts.hash_folder(url, "model")
    assert sorted(e.name for e in entries) == ["model/config.json", "model/sft/weights.bin"]
    assert s3.objects("runs/r/iter-1/train/model/") == [
        "runs/r/iter-1/train/model/config.json",
        "runs/r/iter-1/train/model/sft/weights.bin",
    ]  # the object the folder no longer has is gone
    weights = next(e for e in entries if e.name.endswith("weights.bin"))
    assert weights.bytes == 1000
    dest = fs.cache_dir() / "elsewhere" / "weights.bin"
    fs.download_file(fs.join(url, weights.name), dest, weights.sha256)
    assert dest.read_bytes() == b"w" * 1000
    with pytest.raises(fs.StorageError, match="do not match the manifest"):
        fs.download_file(fs.join(url, weights.name), dest.with_name("bad"), "0" * 64)
    assert not dest.with_name("bad").exists()
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(fs.TMP_PREFIX)]
