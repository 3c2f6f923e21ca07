"""`clawloop audit` over ClawGym folders: the checked values the instruction gives away, answer
files, the probes scored by the task's own verifier, and the --json shape."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from clawloop.flows.cli import main
from clawloop.harness.audit import (
    TaskAudit,
    answer_like,
    audit_clawgym,
    compared_values,
    grade_files,
    leaks,
    summarize,
)
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.clawgym import probes, read_task, write_harbor_folder

FIXTURES = Path(__file__).parents[1] / "fixtures" / "clawgym"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def test_compared_values_and_leaks() -> None:
    check = (
        "EXPECTED_TOTAL = 1234.5\n"
        "expected = {'rows': [17, 'ab-901']}\n"
        "def f(x):\n    return x['mean'] == 3.25 and x['id'] in ('k', 'q') and x['n'] > 99\n"
    )
    vals = compared_values(check)
    assert {"1234.5", "17", "ab-901", "3.25", "k"} <= vals and "99" not in vals  # > is no answer
    query = "Write the total (it should be 1234.5) and the mean 3.25 for ab-901 to output/a.json."
    assert leaks(vals, query, inputs_text="") == ["1234.5", "ab-901", "3.25"]
    assert leaks(vals, query, inputs_text="id,ab-901\n") == ["1234.5", "3.25"]  # data, read
    # the spec is no leak: paths, dates the query sets, years, bare words, small numbers
    assert not any(map(answer_like, ["output/a.csv", "2020-12-31", "2021", "mean", "42", ", x="]))


def test_summary_counts() -> None:
    a = TaskAudit("t1", "p", 0.0, {"empty": 0.2}, ["probe_scores:empty", "answer_file:x"])
    b = TaskAudit("t2", "p", 1.0, {"empty": 1.0}, ["noop_passes", "probe_passes:empty"])
    s = summarize([a, b])
    assert s["tasks"] == 2 and s["noop_passes"] == 1 and s["noop_mean"] == 0.5
    assert s["probes"]["empty"] == {"tasks": 2, "mean": 0.6, "above_0": 2, "passes": 1}
    assert s["flags"] == {"probe_scores": 1, "answer_file": 1, "noop_passes": 1, "probe_passes": 1}


@needs_bwrap
def test_audit_scores_are_the_verifiers_own(tmp_path: Path) -> None:
    box = SandboxConfig(backend="bwrap")
    data = tmp_path / "task_0197"
    shutil.copytree(FIXTURES / "task_0197", data)
    (data / "input_files/input/expected_output.json").write_text("{}")
    res = audit_clawgym(data, box)
    assert res.task_id == "task_0197" and res.noop == 0.0
    assert "answer_file:input/expected_output.json" in res.flags
    task = read_task(data)
    harbor = write_harbor_folder(task, tmp_path / "h")
    again, _, _ = grade_files(harbor, probes(task)["echo_query"], box, tmp_path / "w")
    assert res.probes["echo_query"] == again > 0.0 and "probe_scores:echo_query" in res.flags


@needs_bwrap
@pytest.mark.slow  # the CLI's first import costs ~10-30 s here
def test_audit_cli_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "set"
    data.mkdir()
    for name in ("task_0081", "task_0062"):
        shutil.copytree(FIXTURES / name, data / name)
    out = tmp_path / "audit.parquet"
    code = main(["audit", str(data), "--json", "--backend", "bwrap", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(printed)
    assert set(doc) == {"tasks", "summary"}
    assert [t["task_id"] for t in doc["tasks"]] == ["task_0062", "task_0081"]
    for t in doc["tasks"]:
        assert set(t) == {"task_id", "noop", "probes", "flags"}
        assert all(isinstance(v, float) for v in t["probes"].values())
    assert doc["summary"]["tasks"] == 2
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 2
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # a normal file, not mkstemp's 0600
    assert main(["audit", str(tmp_path / "nope")]) == 2
    assert "no such task folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["audit", str(tmp_path / "empty")]) == 2
    assert "neither a ClawGym nor a Harbor" in capsys.readouterr().err
