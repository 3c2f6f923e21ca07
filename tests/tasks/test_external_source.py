"""synthesize.external.tasks: imported ClawGym tasks swapped into the train split (origin
external:clawgym), taken as they are by forge, kept by verify without generator checks, and
runnable as rollout runs a train task (the unpacked row, no preparation)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.clawgym import clawgym_folders, clawgym_row, read_task
from clawloop.harness.taskfolder.packing import unpack_tar
from clawloop.storage.artifacts import parquet_bytes
from clawloop.storage.schemas import FORGED
from clawloop.synthesis.config import SynthesizeConfig
from clawloop.synthesis.external import draw, is_external
from clawloop.tasks.external_rows import external_verdicts, forged_external, split_external
from clawloop.tasks.external_source import SOURCE
from clawloop.tasks.stage import StageError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "clawgym"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [clawgym_row(read_task(f), 1.0) for f in clawgym_folders(FIXTURES)]
    out = tmp_path_factory.mktemp("imp") / "tasks.parquet"
    out.write_bytes(parquet_bytes(rows, FORGED, where="test")[0])
    return out


def add_external_tasks(ctx, rows: list[dict]) -> tuple[list[dict], dict]:
    """The external source's step as the synthesize stage runs it (tasks/source.py)."""
    if not SOURCE.enabled(ctx.config):
        return rows, {}
    product = SOURCE.make(ctx, SOURCE.ask(ctx.config, ctx.iteration, rows))
    return SOURCE.place(rows, product), product.summary


def _cands(n_train: int) -> list[dict]:
    return [
        {"task_id": f"b{i}", "split": "train" if i < n_train else "eval", "origin": "builtin"}
        for i in range(n_train + 2)
    ]


def _ctx(path: Path, share: float, iteration: int = 1, candidates: list | None = None):
    s = SynthesizeConfig(external={"tasks": [{"path": str(path), "share": share}]})
    return SimpleNamespace(
        config=SimpleNamespace(synthesize=s, seed=7),
        iteration=iteration,
        rows=lambda stage, table, k=None: candidates or [],
    )


def test_share_swaps_train_candidates_only(imported: Path) -> None:
    rows, summary = add_external_tasks(_ctx(imported, 0.5), _cands(4))
    ext = [r for r in rows if is_external(r)]
    assert len(ext) == 2 and summary["external_tasks"] == 2
    assert all(r["split"] == "train" and r["origin"] == "external:clawgym" for r in ext)
    assert [r["task_id"] for r in rows[-2:]] == ["b4", "b5"]  # eval candidates untouched
    # share 1.0: train on ClawGym's tasks only (the seed's comparison is one switch)
    rows, _ = add_external_tasks(_ctx(imported, 1.0), _cands(4))
    assert all(is_external(r) for r in rows if r["split"] == "train")
    # no source: nothing changes
    ctx = _ctx(imported, 0.5)
    ctx.config.synthesize = SynthesizeConfig()
    assert add_external_tasks(ctx, _cands(4)) == (_cands(4), {})


def test_iterations_draw_different_tasks() -> None:
    first, second = draw(8, 3, 7, 1, "p"), draw(8, 3, 7, 2, "p")
    assert len(set(first)) == 3 and not set(first) & set(second)
    assert draw(8, 3, 7, 1, "p") == first and draw(0, 3, 7, 1, "p") == []


def test_forge_and_verify_take_them_as_imported(imported: Path) -> None:
    rows, _ = add_external_tasks(_ctx(imported, 0.5), _cands(4))
    ctx = _ctx(imported, 0.5, candidates=rows)
    ext = [r for r in rows if is_external(r)]
    forged = forged_external(ctx, ext)
    assert [f["task_id"] for f in forged] == [c["task_id"] for c in ext]
    assert all(f["status"] == "ok" and f["task_tar"] and f["split"] == "train" for f in forged)
    others = [{"task_id": "b0"}]
    mine, rest = split_external(ctx, forged + others)
    assert mine == forged and rest == others
    [(checks, verdict)] = external_verdicts(forged[:1])
    assert verdict["kept"] and verdict["split"] == "train" and checks[0]["check"] == "external"
    gone = dict(ext[0], generator_sha256="0" * 64)
    with pytest.raises(StageError, match="no longer in synthesize.external.tasks"):
        forged_external(ctx, [gone])


def test_unreadable_source_says_what_to_do(tmp_path: Path) -> None:
    bad = tmp_path / "x.parquet"
    bad.write_text("no")
    with pytest.raises(StageError, match="clawloop import clawgym"):
        add_external_tasks(_ctx(bad, 0.5), _cands(2))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_unpacked_row_runs_as_a_train_task(imported: Path, tmp_path: Path) -> None:
    """Rollout unpacks the row and opens it as it is (no prepare_task): the starting files are
    there and its own reward.sh grades it."""
    import pyarrow.parquet as pq

    from clawloop.harness.taskenv import open_task, run_tests

    row = next(r for r in pq.read_table(imported).to_pylist() if r["task_id"] == "task_0130")
    folder = unpack_tar(row["task_tar"], tmp_path / "t")
    with open_task(folder, SandboxConfig(backend="bwrap")) as sb:
        assert sb.exec(["test", "-d", "/workspace/input"], timeout=10, cwd="/").ok
        grade = run_tests(sb, folder)
    assert grade.reward == 0.0 and not grade.passed and "scored 0" in grade.reason
