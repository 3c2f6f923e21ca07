"""`clawloop forge|verify|export|import`: exit codes, one-line errors, round trips (bubblewrap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clawloop.flows.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_forge_verify_export_import(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    task = tmp_path / "task"
    code, out, _ = run(
        capsys,
        "forge",
        str(FIXTURES / "good.py"),
        "--seed",
        "2",
        "--out",
        str(task),
        "--backend",
        "bwrap",
    )
    assert code == 0 and "forged task" in out
    assert (task / "task.toml").is_file()

    code, out, _ = run(capsys, "verify", str(task), "--backend", "bwrap")
    assert code == 0, out
    assert "PASS  oracle" in out and "KEPT" in out

    code, out, _ = run(capsys, "verify", str(task), "--json", "--backend", "bwrap")
    doc = json.loads(out)
    assert (
        code == 0
        and doc["verdict"]["kept"]
        and {c["check"] for c in doc["checks"]} >= {"oracle", "noop", "leak"}
    )

    parquet = tmp_path / "tasks.parquet"
    code, out, _ = run(capsys, "import", "harbor", str(task), "--out", str(parquet))
    assert code == 0 and pq.read_table(parquet).num_rows == 1
    code, out, _ = run(
        capsys, "export", "harbor", "--tasks", str(parquet), "--out", str(tmp_path / "exported")
    )
    assert code == 0
    task_id = pq.read_table(parquet).to_pylist()[0]["task_id"]
    assert (tmp_path / "exported" / task_id / "tests" / "answer.json").read_text() == (
        task / "tests/answer.json"
    ).read_text()


def test_verify_dropped_task_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    task = tmp_path / "bad"
    assert (
        run(
            capsys,
            "forge",
            str(FIXTURES / "bad_solve.py"),
            "--seed",
            "1",
            "--out",
            str(task),
            "--backend",
            "bwrap",
        )[0]
        == 0
    )
    code, out, _ = run(capsys, "verify", str(task), "--backend", "bwrap")
    assert code == 1 and "FAIL  oracle" in out and "DROPPED: oracle" in out


@pytest.mark.parametrize(
    "name, needle", [("wrong_shape", "failed (contract)"), ("network", "failed (crash)")]
)
def test_forge_bad_generator_exits_nonzero_with_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture, name: str, needle: str
) -> None:
    code, out, err = run(
        capsys,
        "forge",
        str(FIXTURES / f"{name}.py"),
        "--seed",
        "1",
        "--out",
        str(tmp_path / "t"),
        "--backend",
        "bwrap",
    )
    assert code == 1 and needle in err and "Traceback (most recent" not in err
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["forge", "/nonexistent/gen.py", "--seed", "1", "--out", "OUT"], "does not exist"),
        (["verify", "/nonexistent/task"], "no such task folder /nonexistent/task"),
        (["export", "harbor", "--tasks", "/nonexistent.parquet", "--out", "OUT"], "does not exist"),
        (
            ["import", "harbor", "/nonexistent/task", "--out", "OUT/x.parquet"],
            "no such task folder",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], needle: str
) -> None:
    argv = [a.replace("OUT", str(tmp_path / "o")) for a in argv]
    code, _, err = (
        run(capsys, *argv, "--backend", "bwrap")
        if argv[0] in ("forge", "verify")
        else run(capsys, *argv)
    )
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1


def test_forge_refuses_non_empty_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "keep.txt").write_text("x")
    code, _, err = run(
        capsys,
        "forge",
        str(FIXTURES / "good.py"),
        "--seed",
        "1",
        "--out",
        str(tmp_path),
        "--backend",
        "bwrap",
    )
    assert code == 2 and "not an empty folder" in err
    assert (tmp_path / "keep.txt").read_text() == "x"


def test_verify_marks_a_kept_tasks_warning(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # the decisions read as prose ("values are sums ..."): a guess, so kept with a warning
    task = tmp_path / "plots"
    plots = FIXTURES / "sound" / "plot_totals.py"
    assert run(capsys, "forge", str(plots), "--seed", "1", "--out", str(task))[0] == 0
    code, out, _ = run(capsys, "verify", str(task), "--backend", "bwrap")
    assert code == 0 and "KEPT" in out, out
    assert any(line.startswith("WARN  decision_fields") for line in out.splitlines()), out
