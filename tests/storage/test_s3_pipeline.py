"""The pipeline engine with `storage.root: s3://...` on moto's S3 server (conftest.py): a run, a
resumed run that skips, a forced stage and a one-stage rerun, `clawloop runs`, kill -9 mid-stage and
resume in a fresh process that finds the endpoint in the environment, and a checkpoint folder that
train writes locally, is uploaded at commit and is fetched back on a machine without it. Toy stages,
real engine: fast enough for the default run, except the kill test (slow: fresh processes); the
real six stages are in test_s3_loop.py (slow)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pyarrow as pa
import pytest

from clawloop.flows import cli, runs
from clawloop.storage import artifacts, fs, schemas
from clawloop.storage.manifest import read_manifest, why_incomplete
from clawloop.tasks import engine, policy
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

SCHEMA = pa.schema([("task_id", pa.string()), ("score", pa.float64())])
CALLS: Counter[str] = Counter()


def _a(ctx: StageContext) -> StageResult:
    CALLS["a"] += 1
    rows = [{"task_id": f"t{i}", "score": float(ctx.config.seed + i)} for i in range(3)]
    return StageResult({"items": (SCHEMA, rows)}, files={"notes.md": b"# a\n"})


def _b(ctx: StageContext) -> StageResult:
    CALLS["b"] += 1
    rows = [{**r, "score": r["score"] * 2} for r in ctx.rows("a", "items")]
    return StageResult({"doubled": (SCHEMA, rows)})


def _c(ctx: StageContext) -> StageResult:
    CALLS["c"] += 1
    return StageResult({"last": (SCHEMA, ctx.rows("b", "doubled"))})


STAGES = [
    StageSpec("a", _a, lambda c, k: {"seed": c.seed, "k": k}, previous=("c",)),
    StageSpec("b", _b, lambda c, k: {"n": c.synthesize.n_train}, upstream=("a",)),
    StageSpec("c", _c, lambda c, k: {}, upstream=("b",)),
]


def _cfg(s3, **extra):
    return parse_config(
        {"storage": {"root": s3.root, "options": s3.options}, "iterations": 2, **extra}
    )


def _run(cfg, force=()) -> dict[str, str]:
    CALLS.clear()
    out = runs.run_loop(cfg, "r", STAGES, thread_mapper(False), force=force)
    return {f"{o.iteration}{o.stage}": o.status for o in out.outcomes}


def test_run_resume_force_and_one_stage_rerun_on_s3(s3, capsys):
    cfg = _cfg(s3)
    assert set(_run(cfg).values()) == {"ran"} and sum(CALLS.values()) == 6
    stage_objects = [
        f"runs/r/iter-{k}/{s}/{f}"
        for k in (1, 2)
        for s, f in [("a", "items.parquet"), ("a", "notes.md"), ("b", "doubled.parquet")]
        + [("c", "last.parquet")]
    ]
    manifests = [f"runs/r/iter-{k}/{s}/manifest.json" for k in (1, 2) for s in "abc"]
    assert s3.objects() == sorted(
        ["runs/r/lease.json", "runs/r/run.json", *stage_objects, *manifests]
    )
    saved = json.loads(s3.get("runs/r/run.json"))
    assert saved["config"]["storage"] == {"root": s3.root, "options": s3.options}
    for key in manifests:
        m = json.loads(s3.get(key))
        assert m["status"] == "complete" and m["files"], key
    doubled = artifacts.read_rows(fs.stage_url(s3.root, "r", 2, "b"), "doubled")
    assert [r["score"] for r in doubled] == [0.0, 2.0, 4.0]

    assert set(_run(cfg).values()) == {"skipped"} and not CALLS  # the resumed run skips
    stamp = {k: s3.client.head_object(Bucket=s3.bucket, Key=k)["ETag"] for k in manifests}

    assert _run(cfg, force=["b"]) == {
        "1a": "skipped",
        "1b": "ran",
        "1c": "ran",
        "2a": "ran",
        "2b": "ran",
        "2c": "ran",
    }
    CALLS.clear()
    outcome = runs.rerun_stage(cfg, "r", 1, "b", STAGES, thread_mapper(False))
    assert outcome.status == "ran" and CALLS == {"b": 1}
    after = s3.client.head_object(Bucket=s3.bucket, Key="runs/r/iter-1/a/manifest.json")
    assert after["ETag"] == stamp["runs/r/iter-1/a/manifest.json"]  # untouched by the rerun

    (info,) = runs.list_runs(s3.root, STAGES)
    assert info.run_id == "r" and info.status == "complete", (info.status, info.reason)
    assert json.loads(s3.get("runs/r/lease.json"))["released"] is True
    assert cli.main(["runs", "--root", s3.root]) == 0
    assert "complete" in capsys.readouterr().out


def test_a_deleted_object_is_rebuilt_with_what_reads_it(s3):
    cfg = _cfg(s3, iterations=1)
    _run(cfg)
    s3.client.delete_object(Bucket=s3.bucket, Key="runs/r/iter-1/b/doubled.parquet")
    (info,) = runs.list_runs(s3.root, STAGES)
    assert info.status == "stale from iter 1 b" and "missing" in info.reason
    assert _run(cfg) == {"1a": "skipped", "1b": "ran", "1c": "skipped"}  # same bytes again


def test_a_missing_bucket_stops_the_run_before_anything_with_what_to_do(s3, capsys):
    argv = ["run", "--root", "s3://clawloop-missing-bucket/runs", "--no-prefect"]
    assert cli.main([*argv, "--run-id", "x", "--iterations", "1"]) == 2
    err = capsys.readouterr().err
    assert "bucket 'clawloop-missing-bucket' does not exist" in err and "create it" in err
    assert "clawloop-missing-bucket" not in {b["Name"] for b in s3.client.list_buckets()["Buckets"]}


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    from clawloop.flows import runs
    from clawloop.storage import artifacts, fs
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.mapping import thread_mapper
    from clawloop.tasks.stage import StageResult, StageSpec

    SCHEMA = pa.schema([("task_id", pa.string())])
    root, marker = sys.argv[1], sys.argv[2]

    def fast(ctx):
        return StageResult({"t": (SCHEMA, [{"task_id": "x"}])})

    def slow(ctx):
        if not fs.exists(marker):
            # first run: write one table for real, then hang mid-stage until killed
            artifacts.write_table(ctx.url, "part1", [{"task_id": "x"}], SCHEMA)
            fs.write_bytes_atomic(marker, b"mid-stage")
            time.sleep(120)
        return StageResult({"part1": (SCHEMA, [{"task_id": "x"}]), "part2": (SCHEMA, [{"task_id": "y"}])})

    stages = [StageSpec("fast", fast, lambda c, k: {}),
              StageSpec("slow", slow, lambda c, k: {}, upstream=("fast",))]
    s = runs.run_loop(parse_config({"storage": {"root": root}, "iterations": 1}), "r", stages, thread_mapper(False))
    print([o.status for o in s.outcomes])
    """
)


@pytest.mark.slow  # two fresh Python processes importing clawloop: ~30 s on 2 loaded cores
def test_kill_minus_9_mid_stage_then_resume_in_a_fresh_process(s3, tmp_path, monkeypatch):
    """The child processes know the endpoint only from AWS_ENDPOINT_URL (no storage.options)."""
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    marker = fs.join(s3.root, "marker")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    env = dict(os.environ)  # `clawloop` resolves in the child as it does here
    argv = [sys.executable, str(script), s3.root, marker]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not fs.exists(marker) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert fs.exists(marker), proc.communicate(timeout=10) if proc.poll() is not None else "hung"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    slow = fs.stage_url(s3.root, "r", 1, "slow")
    assert "runs/r/iter-1/slow/part1.parquet" in s3.objects()  # a real object of the killed stage
    assert "no manifest" in why_incomplete(slow)  # ... that never makes it look complete
    assert json.loads(s3.get("runs/r/lease.json"))["released"] is False  # killed: never let go
    (info,) = runs.list_runs(s3.root, [StageSpec(n, _a, lambda c, k: {}) for n in ("fast", "slow")])
    assert not info.status.startswith("running")  # the killed holder's lease is recognised as dead
    fast_etag = s3.client.head_object(Bucket=s3.bucket, Key="runs/r/iter-1/fast/manifest.json")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "['skipped', 'ran']" in done.stdout
    assert why_incomplete(slow) is None
    assert read_manifest(slow).rows == {"part1.parquet": 1, "part2.parquet": 1}
    again = s3.client.head_object(Bucket=s3.bucket, Key="runs/r/iter-1/fast/manifest.json")
    assert again["ETag"] == fast_etag["ETag"]
    assert not [k for k in s3.objects() if fs.TMP_PREFIX in k]
    assert "took over run r" in done.stderr  # the dead holder's lease, with a warning


def _train(ctx: StageContext) -> StageResult:
    """A train stage like tasks/train.py: weights written under its folder's local path."""
    model = policy.local_stage_dir(ctx) / policy.MODEL_DIR / "sft" / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "weights.bin").write_bytes(bytes(range(256)) * 64)
    (model / "config.json").write_text('{"arch": "toy"}')
    row = artifacts.empty_row(
        schemas.CHECKPOINT, status="trained", kind="full", checkpoint_path=str(model)
    )
    return StageResult({"checkpoint": (schemas.CHECKPOINT, [row])}, dirs=[policy.MODEL_DIR])


def test_a_checkpoint_folder_goes_up_at_commit_and_comes_back_where_it_is_missing(
    s3, tmp_path, monkeypatch
):
    spec = StageSpec("train", _train, lambda c, k: {})
    cfg = _cfg(s3, iterations=2)
    assert engine.run_stage(spec, [spec], cfg, "r", 1, thread_mapper(False)).status == "ran"
    prefix = "runs/r/iter-1/train/model/sft/model/"
    assert s3.objects(prefix) == [prefix + "config.json", prefix + "weights.bin"]
    assert s3.get(prefix + "weights.bin") == bytes(range(256)) * 64
    manifest = read_manifest(fs.stage_url(s3.root, "r", 1, "train"))
    assert {"model/sft/model/weights.bin", "model/sft/model/config.json"} <= set(manifest.rows)

    # Another machine (its own cache folder, nothing trained there): iteration 2 asks for the
    # policy iteration 1 trained and gets a local folder fetched from the bucket.
    monkeypatch.setenv("CLAWLOOP_CACHE", str(tmp_path / "other-machine"))
    ctx = StageContext("r", 2, cfg, "rollout", thread_mapper(False))
    got = policy.checkpoint_after(ctx, 1)
    assert got.is_relative_to(tmp_path / "other-machine")
    assert (got / "weights.bin").read_bytes() == bytes(range(256)) * 64
    assert json.loads((got / "config.json").read_text()) == {"arch": "toy"}
    k, row = policy.trained_checkpoint(ctx, 1)
    assert k == 1 and row["checkpoint_path"] == str(got)

    # A damaged local copy is replaced from the bucket; a damaged object re-runs train.
    shutil.rmtree(got.parent)
    policy._FETCHED.clear()
    assert (policy.checkpoint_after(ctx, 1) / "weights.bin").is_file()
    s3.client.put_object(Bucket=s3.bucket, Key=prefix + "weights.bin", Body=b"garbage")
    assert "weights.bin is corrupted" in why_incomplete(fs.stage_url(s3.root, "r", 1, "train"))
    assert engine.run_stage(spec, [spec], cfg, "r", 1, thread_mapper(False)).status == "ran"
    assert s3.get(prefix + "weights.bin") == bytes(range(256)) * 64
