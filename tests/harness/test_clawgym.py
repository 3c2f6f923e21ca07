"""ClawGym task folders (tests/fixtures/clawgym: 8 eval tasks of different families): import into
FORGED rows, the Harbor folder made of each, and grading parity with the task's own reward.sh."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clawloop.flows.cli import main
from clawloop.harness.audit import grade_files, reference_score
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskenv import parse_reward
from clawloop.harness.taskfolder.clawgym import (
    checker_modules,
    clawgym_folders,
    expected_outputs,
    probes,
    read_task,
    write_harbor_folder,
)
from clawloop.harness.taskfolder.folder import TaskFolderError, read_harbor_task_info
from clawloop.harness.taskfolder.foreign import check_folder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "clawgym"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
BWRAP = SandboxConfig(backend="bwrap")


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _task(tmp: Path, name: str, check: str, reward_sh: str | None = None) -> Path:
    """A minimal ClawGym task folder: a query naming output/a.json, a checker."""
    d = tmp / name
    (d / "reward").mkdir(parents=True)
    (d / "input_files/input").mkdir(parents=True)
    (d / "input_files/input/x.txt").write_text("x\n")
    entry = {"task_id": name, "user_query": "Write output/a.json.", "input_mount_dir": ""}
    (d / "data_entry.json").write_text(json.dumps(entry))
    (d / "reward/check.py").write_text(check)
    src = FIXTURES / "task_0062/reward/reward.sh"
    (d / "reward/reward.sh").write_text(reward_sh or src.read_text())
    return d


def test_read_fixtures_families_and_outputs() -> None:
    tasks = [read_task(f) for f in clawgym_folders(FIXTURES)]
    assert [t.task_id for t in tasks] == sorted(p.name for p in FIXTURES.iterdir())
    assert len({t.family for t in tasks}) >= 6  # the sample spans families
    t = read_task(FIXTURES / "task_0133")
    assert t.mount_dir == "/root/.openclaw/workspace" and t.family == "csv"
    # the inputs the query names are not outputs
    outs = expected_outputs(t.user_query, {"input/x.csv"})
    assert outs and all(not o.startswith("input/x.csv") for o in outs)


def test_bad_entries_are_refused(tmp_path: Path) -> None:
    d = _task(tmp_path, "t1", "print('{}')\n")
    (d / "data_entry.json").write_text('{"task_id": "../x", "user_query": "q"}')
    with pytest.raises(TaskFolderError, match="not a plain name"):
        read_task(d)
    (d / "data_entry.json").write_text("{nope")
    with pytest.raises(TaskFolderError, match="not readable JSON"):
        read_task(d)
    assert clawgym_folders(tmp_path / "missing") == []


def test_checker_modules_top_level_vs_nested(tmp_path: Path) -> None:
    check = "import json, yaml\nfrom os import path\ndef f():\n    import pytest\ntry:\n    import toml\nexcept ImportError:\n    pass\n"
    d = _task(tmp_path, "t1", check)
    (d / "reward/helper.py").write_text("")
    (d / "reward/check.py").write_text(check + "import helper\n")
    required, nested = checker_modules(d)
    assert required == {"json", "yaml", "os"} and nested == {"pytest", "toml"}


def test_harbor_folder_is_a_base_only_foreign_task(tmp_path: Path) -> None:
    t = read_task(FIXTURES / "task_0081")
    h = write_harbor_folder(t, tmp_path / "h", threshold=0.5)
    assert check_folder(h).needs_build == ""  # runs on any backend, no docker build
    header = read_harbor_task_info(h)
    assert header.task_id == "task_0081" and header.capability == f"clawgym-{t.family}"
    assert (h / "instruction.md").read_text().strip() == t.user_query.strip()
    for f in (FIXTURES / "task_0081/reward").iterdir():  # the checker verbatim
        assert (h / "tests/reward" / f.name).read_bytes() == f.read_bytes()
    assert "THRESHOLD=0.5" in (h / "tests/test.sh").read_text()
    with pytest.raises(TaskFolderError, match="threshold"):
        write_harbor_folder(t, tmp_path / "h2", threshold=0.0)


def test_pass_threshold_in_reward_json() -> None:
    assert parse_reward('{"reward": 0.8, "pass_threshold": 0.75}').passed
    g = parse_reward('{"reward": 0.7, "pass_threshold": 0.75}')
    assert not g.passed and g.reward == 0.7
    assert not parse_reward('{"reward": 0.8}').passed  # without it: passed at 1.0, as before
    assert parse_reward('{"reward": 1.0, "pass_threshold": 1.0}').passed
    assert not parse_reward('{"reward": 0.9, "pass_threshold": "x"}').passed


@needs_bwrap
@pytest.mark.slow  # the CLI's first import costs ~10-30 s here
def test_import_clawgym_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "set"
    shutil.copytree(FIXTURES, data)
    _task(data, "needs_missing", "import no_such_module_here\nprint('{}')\n")
    (data / "broken").mkdir()
    (data / "broken/reward").mkdir()
    (data / "broken/reward/reward.sh").write_text("echo 1\n")
    (data / "broken/data_entry.json").write_text('{"task_id": "broken"}')
    out = tmp_path / "tasks.parquet"
    code, text, err = run(capsys, "import", "clawgym", str(data), "--out", str(out),
                          "--backend", "bwrap")  # fmt: skip
    assert code == 0, err
    assert "imported 8 of 10 ClawGym task(s)" in text and "dropped 2" in text
    assert "no_such_module_here, which the sandbox's python3 lacks" in text
    assert "user_query is missing" in text
    rows = pq.read_table(out).to_pylist()
    assert sorted(r["task_id"] for r in rows) == sorted(p.name for p in FIXTURES.iterdir())
    row = next(r for r in rows if r["task_id"] == "task_0133")
    assert row["domain"] == "clawgym" and row["capability"] == "clawgym-csv"
    with tarfile.open(fileobj=io.BytesIO(row["task_tar"])) as tar:
        names = set(tar.getnames())
    assert {"tests/reward/reward.sh", "tests/test.sh", "environment/Dockerfile"} <= names

    # format detection; and each verb refuses the other format with the way out
    code, text, err = run(capsys, "import", "auto", str(FIXTURES), "--out", str(tmp_path / "a.pq"),
                          "--backend", "bwrap")  # fmt: skip
    assert code == 0 and "detected format: clawgym" in text
    code, _, err = run(capsys, "import", "harbor", str(FIXTURES), "--out", str(tmp_path / "b.pq"))
    assert code == 2 and "task.toml" in err
    (tmp_path / "nothing").mkdir()
    code, _, err = run(capsys, "import", "clawgym", str(tmp_path / "nothing"), "--out",
                       str(tmp_path / "c.pq"), "--backend", "bwrap")  # fmt: skip
    assert code == 2 and "not a ClawGym task folder" in err
    code, _, err = run(capsys, "import", "clawgym", str(tmp_path / "absent"), "--out",
                       str(tmp_path / "c.pq"), "--backend", "bwrap")  # fmt: skip
    assert code == 2 and "no such task folder" in err


def _parity(task_dir: Path, tmp: Path) -> dict[str, float]:
    """Our grade of the noop and of the scripted partial solution == reward.sh's own print."""
    task = read_task(task_dir)
    harbor = write_harbor_folder(task, tmp / task.task_id)
    got = {}
    for name, files in {"noop": {}, "partial": probes(task)["partial"]}.items():
        ours, passed, _ = grade_files(harbor, files, BWRAP, tmp / "work")
        theirs = reference_score(task, files)
        assert theirs != "" and ours == float(theirs), (task.task_id, name, ours, theirs)
        assert not passed
        got[name] = ours
    return got


@needs_bwrap
def test_grading_parity_two_tasks(tmp_path: Path) -> None:
    got = _parity(FIXTURES / "task_0130", tmp_path)
    assert got["noop"] == 0.0 and 0.0 < got["partial"] < 1.0  # a fractional score, kept


@needs_bwrap
@pytest.mark.slow
def test_grading_parity_whole_sample(tmp_path: Path) -> None:
    for folder in clawgym_folders(FIXTURES):
        _parity(folder, tmp_path)


@needs_bwrap
def test_threshold_and_a_checker_that_cannot_score(tmp_path: Path) -> None:
    task = read_task(FIXTURES / "task_0130")
    harbor = write_harbor_folder(task, tmp_path / "h", threshold=0.1)
    reward, passed, reason = grade_files(harbor, probes(task)["partial"], BWRAP, tmp_path / "w")
    assert passed and 0.1 <= reward < 1.0 and reason == ""
    broken = read_task(_task(tmp_path, "crash", "raise SystemExit(3)\n"))
    harbor = write_harbor_folder(broken, tmp_path / "hb")
    reward, passed, reason = grade_files(harbor, {}, BWRAP, tmp_path / "w")
    assert (reward, passed) == (0.0, False) and "reward.sh printed no score" in reason
