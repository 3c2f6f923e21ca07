"""`clawloop export harbor` / `import harbor` and Harbor's rules: [task] name "<org>/<task_id>"
(--org, default clawloop), the bare task_id in rows, older folders still imported (bubblewrap)."""

from __future__ import annotations

import shutil
import tomllib
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


def _name(folder: Path) -> str:
    return tomllib.loads((folder / "task.toml").read_text())["task"]["name"]


@pytest.fixture
def forged(tmp_path: Path, capsys: pytest.CaptureFixture) -> Path:
    task = tmp_path / "task"
    argv = ["forge", str(FIXTURES / "good.py"), "--seed", "2", "--out", str(task)]
    code, out, err = run(capsys, *argv, "--backend", "bwrap")
    assert code == 0, err
    return task


def test_export_import_round_trip_with_org(
    forged: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    parquet = tmp_path / "tasks.parquet"
    assert run(capsys, "import", "harbor", str(forged), "--out", str(parquet))[0] == 0
    task_id = pq.read_table(parquet).to_pylist()[0]["task_id"]
    assert "/" not in task_id and _name(forged) == f"clawloop/{task_id}"

    code, out, err = run(
        capsys, "export", "harbor", "--tasks", str(parquet), "--out", str(tmp_path / "e")
    )
    assert code == 0 and err == "" and _name(tmp_path / "e" / task_id) == f"clawloop/{task_id}"
    code, out, err = run(
        capsys, "export", "harbor", "--tasks", str(parquet), "--out", str(tmp_path / "a"),
        "--org", "acme",
    )  # fmt: skip
    assert code == 0 and err == "" and _name(tmp_path / "a" / task_id) == f"acme/{task_id}"

    # the acme folder imports back to the same bare task_id
    again = tmp_path / "again.parquet"
    assert (
        run(capsys, "import", "harbor", str(tmp_path / "a" / task_id), "--out", str(again))[0] == 0
    )
    assert pq.read_table(again).to_pylist()[0]["task_id"] == task_id


def test_export_refuses_an_org_harbor_would_refuse(
    forged: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    parquet = tmp_path / "tasks.parquet"
    assert run(capsys, "import", "harbor", str(forged), "--out", str(parquet))[0] == 0
    for org in ("a/b", "-x", ""):
        code, _, err = run(
            capsys, "export", "harbor", "--tasks", str(parquet), "--out", str(tmp_path / "o"),
            f"--org={org}",
        )  # fmt: skip
        assert code == 2 and err.count("\n") == 1 and "--org" in err, err
    assert not (tmp_path / "o").exists()


def test_older_folders_import_and_export_with_a_note(
    forged: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A folder written before names had an org and reward.json held numbers only."""
    toml = forged / "task.toml"
    name = _name(forged)
    toml.write_text(toml.read_text().replace(f'"{name}"', f'"{name.split("/")[1]}"'))
    (forged / "tests/test.sh").write_text(  # the verifier such folders carry
        "#!/bin/bash\nmkdir -p /logs/verifier\nrm -f /logs/verifier/reward.*\n"
        "python3 -I -S /tests/grader.py --out /logs/verifier/reward.json\nexit 0\n"
    )
    parquet = tmp_path / "tasks.parquet"
    assert run(capsys, "import", "harbor", str(forged), "--out", str(parquet))[0] == 0
    task_id = pq.read_table(parquet).to_pylist()[0]["task_id"]
    assert task_id == name.split("/")[1]
    code, out, err = run(
        capsys, "export", "harbor", "--tasks", str(parquet), "--out", str(tmp_path / "e")
    )
    assert code == 0 and _name(tmp_path / "e" / task_id) == f"clawloop/{task_id}"
    assert "forged before reward.json held numbers only" in err and err.count("\n") == 1
