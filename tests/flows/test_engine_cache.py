"""The pipeline engine without Prefect: skip, force, single-stage rerun, corruption, kill-and-resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from prefect import task

from clawloop.flows import runs
from clawloop.storage import fs
from clawloop.storage.manifest import read_manifest, why_incomplete
from clawloop.tasks import engine
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

SCHEMA = pa.schema([("task_id", pa.string()), ("score", pa.float64())])
CALLS: Counter[str] = Counter()


def _a(ctx: StageContext) -> StageResult:
    CALLS["a"] += 1
    rows = [{"task_id": f"t{i}", "score": float(ctx.config.seed + i)} for i in range(3)]
    return StageResult({"items": (SCHEMA, rows)}, summary={"n": 3})


@task(name="double")
def _double(row: dict, factor: float) -> dict:
    return {"task_id": row["task_id"], "score": row["score"] * factor}


def _b(ctx: StageContext) -> StageResult:
    CALLS["b"] += 1
    items = ctx.rows("a", "items")
    doubled = ctx.map(_double, items, lambda r, e: None, workers=2, factor=2.0)
    return StageResult({"doubled": (SCHEMA, doubled)})


def _c(ctx: StageContext) -> StageResult:
    CALLS["c"] += 1
    return StageResult({"last": (SCHEMA, ctx.rows("b", "doubled"))})


STAGES = [
    StageSpec("a", _a, lambda c, k: {"seed": c.seed, "k": k}, previous=("c",)),
    StageSpec("b", _b, lambda c, k: {"n": c.synthesize.n_train}, upstream=("a",)),
    StageSpec("c", _c, lambda c, k: {}, upstream=("b",)),
]


def _cfg(tmp_path: Path, **extra) -> object:
    return parse_config({"storage": {"root": str(tmp_path)}, "iterations": 1, **extra})


def _run(cfg, force=()) -> dict[str, str]:
    CALLS.clear()
    summary = runs.run_loop(cfg, "r", STAGES, thread_mapper(False), force=force)
    return {f"{o.iteration}{o.stage}": o.status for o in summary.outcomes}


def test_second_run_skips_everything_and_config_change_reruns_from_that_stage(tmp_path):
    cfg = _cfg(tmp_path, iterations=2)
    assert set(_run(cfg).values()) == {"ran"}
    assert _run(cfg) == {
        "1a": "skipped",
        "1b": "skipped",
        "1c": "skipped",
        "2a": "skipped",
        "2b": "skipped",
        "2c": "skipped",
    }
    assert not CALLS
    changed = _run(_cfg(tmp_path, iterations=2, synthesize={"n_train": 3}))
    assert changed["1a"] == "skipped" and changed["1b"] == "ran"
    # b's output bytes did not change, so c (and iteration 2's a, which reads c) stay cached
    assert changed["1c"] == "skipped" and changed["2a"] == "skipped"


def test_force_reruns_the_stage_and_everything_that_reads_it(tmp_path):
    cfg = _cfg(tmp_path)
    _run(cfg)
    assert _run(cfg, force=["b"]) == {"1a": "skipped", "1b": "ran", "1c": "ran"}
    assert engine.dependents(STAGES, ["b"]) == {"b", "c"}
    assert engine.dependents(STAGES, [], previous_forced={"c"}) == {
        "a",
        "b",
        "c",
    }  # c feeds next iteration's a


def test_single_stage_rerun_touches_only_that_stage(tmp_path):
    cfg = _cfg(tmp_path)
    _run(cfg)
    before = {s: read_manifest(fs.stage_url(str(tmp_path), "r", 1, s)).finished_at for s in "ac"}
    CALLS.clear()
    out = runs.rerun_stage(cfg, "r", 1, "b", STAGES, thread_mapper(False))
    assert out.status == "ran" and Counter({"b": 1}) == CALLS
    assert {
        s: read_manifest(fs.stage_url(str(tmp_path), "r", 1, s)).finished_at for s in "ac"
    } == before


def test_corrupted_or_deleted_parquet_is_detected_and_rebuilt(tmp_path):
    cfg = _cfg(tmp_path)
    _run(cfg)
    path = tmp_path / "r" / "iter-1" / "b" / "doubled.parquet"
    path.write_bytes(path.read_bytes()[:-20] + b"X" * 20)
    assert _run(cfg) == {"1a": "skipped", "1b": "ran", "1c": "skipped"}
    (tmp_path / "r" / "iter-1" / "a" / "items.parquet").unlink()
    assert _run(cfg)["1a"] == "ran"
    assert why_incomplete(fs.stage_url(str(tmp_path), "r", 1, "a")) is None


def test_a_failing_stage_is_an_outcome_and_leaves_nothing_that_looks_complete(tmp_path):
    def broken(ctx):
        raise ValueError("generator exploded")

    stages = [STAGES[0], StageSpec("b", broken, lambda c, k: {}, upstream=("a",)), STAGES[2]]
    summary = runs.run_loop(_cfg(tmp_path), "r", stages, thread_mapper(False))
    assert [(o.stage, o.status) for o in summary.outcomes] == [("a", "ran"), ("b", "failed")]
    assert "generator exploded" in summary.outcomes[-1].error and not summary.ok
    url = fs.stage_url(str(tmp_path), "r", 1, "b")
    assert read_manifest(url) is None
    assert "failed last time: ValueError: generator exploded" in why_incomplete(url)
    # resumed with the stage fixed, it runs again (and the failure record goes)
    fixed = runs.run_loop(_cfg(tmp_path), "r", STAGES, thread_mapper(False))
    assert [o.status for o in fixed.outcomes] == ["skipped", "ran", "ran"]
    assert why_incomplete(url) is None and not (tmp_path / "r/iter-1/b/failure.json").exists()


def test_a_stage_whose_upstream_is_missing_is_blocked(tmp_path):
    out = engine.run_stage(STAGES[1], STAGES, _cfg(tmp_path), "r", 1, thread_mapper(False))
    assert out.status == "blocked" and "needs a of iter 1" in out.reason


def test_mapper_turns_item_failures_into_rows_and_keeps_order():
    @task(name="times")
    def fn(x: int, k: int) -> int:
        if x == 3:
            raise KeyError("bad item")
        return x * k

    out = thread_mapper(False)(
        fn, list(range(6)), lambda x, e: f"failed {x}: {type(e).__name__}", workers=3, k=10
    )
    assert out == [0, 10, 20, "failed 3: KeyError", 40, 50]


def test_mapper_retries_transient_faults_only_up_to_the_tasks_retries():
    from clawloop.harness.sandbox.base import SandboxError

    calls: Counter[str] = Counter()

    @task(name="flaky", retries=2)
    def flaky(kind: str) -> str | None:
        calls[kind] += 1
        if kind == "sandbox" or (kind == "once" and calls[kind] == 1):
            raise SandboxError("engine went away")
        if kind == "bug":
            raise ValueError("a bug")
        return None

    out = thread_mapper(False)(flaky, ["sandbox", "once", "bug"], lambda x, e: type(e).__name__)
    assert out == ["SandboxError", None, "ValueError"]
    assert calls == {"sandbox": 3, "once": 2, "bug": 1}


KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import pyarrow as pa
    from clawloop.flows import runs
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.mapping import thread_mapper
    from clawloop.storage import artifacts
    from clawloop.tasks.stage import StageResult, StageSpec

    SCHEMA = pa.schema([("task_id", pa.string())])
    root, marker = sys.argv[1], Path(sys.argv[2])

    def slow(ctx):
        if not marker.exists():
            # first run: write one table for real, then hang mid-stage until killed
            artifacts.write_table(ctx.url, "part1", [{"task_id": "x"}], SCHEMA)
            marker.write_text("mid-stage")
            time.sleep(60)
        return StageResult({"part1": (SCHEMA, [{"task_id": "x"}]), "part2": (SCHEMA, [{"task_id": "y"}])})

    stages = [StageSpec("slow", slow, lambda c, k: {})]
    s = runs.run_loop(parse_config({"storage": {"root": root}, "iterations": 1}), "r", stages, thread_mapper(False))
    print([o.status for o in s.outcomes])
    """
)


def test_kill_minus_9_mid_stage_then_resume_completes(tmp_path):
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    marker = tmp_path / "marker"
    env = dict(os.environ)  # `clawloop` resolves in the child as it does here
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "runs"), str(marker)], env=env
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the stage never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    url = fs.stage_url(str(tmp_path / "runs"), "r", 1, "slow")
    assert (tmp_path / "runs" / "r" / "iter-1" / "slow" / "part1.parquet").exists()
    assert "no manifest" in why_incomplete(url)  # the half-written stage is never taken as complete
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs"), str(marker)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "['ran']" in done.stdout
    assert why_incomplete(url) is None
    assert read_manifest(url).rows == {"part1.parquet": 1, "part2.parquet": 1}


def test_a_folder_the_stage_wrote_itself_is_guarded_by_the_manifest(tmp_path):
    def train(ctx):
        model = Path(fs.resolve(ctx.url)[1]) / "model"
        model.mkdir(parents=True, exist_ok=True)
        (model / "weights.bin").write_bytes(b"w" * 100)
        return StageResult({"items": (SCHEMA, [])}, dirs=["model"])

    spec = StageSpec("train", train, lambda c, k: {})
    cfg = _cfg(tmp_path)
    assert engine.run_stage(spec, [spec], cfg, "r", 1, thread_mapper(False)).status == "ran"
    url = fs.stage_url(str(tmp_path), "r", 1, "train")
    assert "model/weights.bin" in read_manifest(url).rows
    (tmp_path / "r" / "iter-1" / "train" / "model" / "weights.bin").write_bytes(b"x")
    assert "model/weights.bin is corrupted" in why_incomplete(url)
    assert engine.run_stage(spec, [spec], cfg, "r", 1, thread_mapper(False)).status == "ran"


def test_cli_errors_are_one_line_and_exit_2(tmp_path, capsys):
    from clawloop.flows.cli import main

    assert main(["run", "--config", str(tmp_path / "missing.yaml"), "--no-prefect"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert (
        main(
            [
                "rerun",
                "--run-id",
                "nope",
                "--iteration",
                "1",
                "--stage",
                "forge",
                "--root",
                str(tmp_path),
                "--no-prefect",
            ]
        )
        == 2
    )
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["runs", "--root", str(tmp_path)]) == 0


def test_user_errors_are_one_line_with_prefect_on_too(tmp_path, capsys, monkeypatch):
    """Checked before any flow starts: no Prefect server is started, no traceback printed."""
    from clawloop.flows import pipeline
    from clawloop.flows.cli import main

    def no_flow(*a, **k):
        raise AssertionError("a flow started for a user error")

    monkeypatch.setattr(pipeline, "loop_flow", no_flow)
    monkeypatch.setattr(pipeline, "rerun_stage_flow", no_flow)
    assert main(["run", "--root", "/proc/clawloop-cannot-write", "--iterations", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "clawloop: cannot create folder /proc/clawloop-cannot-write" in err
    )
    runs.run_loop(_cfg(tmp_path), "r", STAGES, thread_mapper(False))
    argv = ["rerun", "--run-id", "r", "--iteration", "7", "--stage", "b", "--root", str(tmp_path)]
    with pytest.raises(SystemExit):  # b is not a pipeline stage: argparse says so
        main(argv)
    argv[argv.index("b")] = "forge"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "clawloop: --iteration 7 is outside run r's 1..1"


def test_run_status_tells_complete_failed_and_stale_after_a_rerun(tmp_path):
    cfg = _cfg(tmp_path, iterations=2)
    runs.run_loop(cfg, "r", STAGES, thread_mapper(False))
    info = runs.run_info(str(tmp_path), "r", STAGES)
    assert info.status == "complete" and info.k == 2 and info.duration_s >= 0
    assert {s.status for ss in info.iterations.values() for s in ss} == {"complete"}
    # a rerun of b that writes other bytes: c (reads b) and iteration 2 (a reads c) are stale
    changed = [
        STAGES[0],
        StageSpec(
            "b",
            lambda ctx: StageResult({"doubled": (SCHEMA, [{"task_id": "x", "score": 9.0}])}),
            STAGES[1].config_slice,
            upstream=("a",),
        ),
        STAGES[2],
    ]
    assert runs.rerun_stage(cfg, "r", 1, "b", changed, thread_mapper(False)).status == "ran"
    info = runs.run_info(str(tmp_path), "r", changed)
    status = {(k, s.stage): s.status for k, ss in info.iterations.items() for s in ss}
    assert status[(1, "a")] == status[(1, "b")] == "complete"
    assert status[(1, "c")] == "stale" and status[(2, "a")] == "stale"
    assert status[(2, "c")] == "stale" and info.status == "stale from iter 1 c"
    why = {(k, s.stage): s.reason for k, ss in info.iterations.items() for s in ss}
    assert why[(1, "c")].startswith("inputs changed")
    assert why[(2, "b")] == runs.DOWNSTREAM
    # the next run re-runs every stage whose inputs changed, and of those downstream of them
    # only the ones their new output reaches
    again = runs.run_loop(cfg, "r", changed, thread_mapper(False))
    ran = {(o.iteration, o.stage) for o in again.outcomes if o.status == "ran"}
    certain = {key for key, s in status.items() if s == "stale" and why[key] != runs.DOWNSTREAM}
    assert certain <= ran <= {key for key, s in status.items() if s == "stale"}

    # a failed stage names its reason, at run level too
    def broken(ctx):
        raise ValueError("disk on fire")

    failing = [STAGES[0], StageSpec("b", broken, lambda c, k: {"x": 1}, upstream=("a",))]
    runs.run_loop(cfg, "r", failing, thread_mapper(False))
    info = runs.run_info(str(tmp_path), "r", failing)
    assert info.status == "failed at iter 1 b" and "disk on fire" in info.reason
