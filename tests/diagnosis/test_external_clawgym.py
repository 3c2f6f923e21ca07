"""External eval sets of ClawGym folders (diagnose.eval_tasks): the sets, their fingerprint, the
tasks made runnable, and the figures the report shows with their 95 % intervals."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from clawloop.diagnosis.diagnose import DiagnoseConfig
from clawloop.diagnosis.external import (
    eval_set_folders,
    external_fingerprint,
    external_pass_rates,
    external_report,
    external_sets,
    external_summary,
    mean_interval,
    wilson_interval,
)
from clawloop.flows.report import IterationFigures, external_cells
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.folder import read_harbor_task_info
from clawloop.tasks.diagnose import external_tasks

FIXTURES = Path(__file__).parents[1] / "fixtures" / "clawgym"


def test_wilson_and_mean_intervals() -> None:
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and math.isclose(hi, 0.2775, abs_tol=1e-4)  # not empty at 0/n
    lo, hi = wilson_interval(5, 10)
    assert math.isclose(lo, 0.2366, abs_tol=1e-4) and math.isclose(hi, 0.7634, abs_tol=1e-4)
    assert math.isclose(wilson_interval(10, 10)[1], 1.0) and math.isnan(wilson_interval(0, 0)[0])
    mean, lo, hi = mean_interval([0.0, 0.5, 1.0, 0.5])
    assert mean == 0.5 and math.isclose(hi - mean, 1.96 * math.sqrt(1 / 6) / 2, rel_tol=1e-3)
    assert mean_interval([0.2]) == (0.2, 0.2, 0.2) and math.isnan(mean_interval([])[0])


def test_clawgym_folders_are_an_eval_set(tmp_path: Path) -> None:
    assert [p.name for p in eval_set_folders(FIXTURES)] == sorted(
        p.name for p in FIXTURES.iterdir()
    )
    [(label, folders)] = external_sets([str(FIXTURES)])
    assert label == "clawgym" and len(folders) == 8
    before = external_fingerprint([str(FIXTURES)])
    data = tmp_path / "clawgym"
    shutil.copytree(FIXTURES, data)
    (data / "task_0081/reward/check.py").write_text("print('{}')\n")  # an edited checker
    after = dict(external_fingerprint([str(data)])[0][1])
    assert after["task_0081"] != dict(before[0][1])["task_0081"]
    assert after["task_0133"] == dict(before[0][1])["task_0133"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_external_tasks_prepares_clawgym_folders(tmp_path: Path) -> None:
    diagnose = DiagnoseConfig(eval_tasks=[str(FIXTURES)], eval_pass_threshold=0.5)
    sandbox = SimpleNamespace(to_sandbox_config=lambda: SandboxConfig(backend="bwrap"))
    ctx = SimpleNamespace(
        config=SimpleNamespace(diagnose=diagnose, sandbox=sandbox), stage="diagnose", resume="x"
    )
    tasks = external_tasks(ctx, tmp_path)
    assert len(tasks) == 8
    folder, row, box = tasks[0]
    assert row["split"] == "external" and row["eval_set"] == "clawgym"
    assert row["capability"].startswith("clawgym-") and box.backend == "bwrap"
    assert read_harbor_task_info(folder).task_id == row["task_id"]
    assert "THRESHOLD=0.5" in (folder / "tests/test.sh").read_text()
    assert (folder / "environment/workspace/input").is_dir()  # input_files laid out


def test_summary_and_report_carry_intervals() -> None:
    tasks = [{"task_id": f"t{i}", "capability": "clawgym-csv", "eval_set": "cg"} for i in range(4)]
    rewards = [1.0, 0.5, 0.25, 0.0]
    rows = [
        {"task_id": f"t{i}", "capability": "clawgym-csv", "passed": r >= 1.0, "reward": r,
         "end_reason": "finished"}
        for i, r in enumerate(rewards)
    ]  # fmt: skip
    rates = external_pass_rates(rows, tasks, 1)
    s = external_summary(rates, 4, rows)
    assert s["external_pass_rate"] == 0.25 and s["external_mean_reward"] == 0.4375
    lo, hi = s["external_pass_rate_ci"]
    assert (lo, hi) == pytest.approx(wilson_interval(1, 4))
    assert s["external_mean_reward_ci"][0] < 0.4375 < s["external_mean_reward_ci"][1]
    import pandas as pd

    md = external_report(pd.DataFrame(rates), 1)
    assert "95 % Wilson" in md and "| 25% [" in md and "0.438 |" in md
    it = IterationFigures(
        iteration=1,
        external_pass_rate=0.25,
        external_pass_ci=(lo, hi),
        external_mean=0.4375,
        external_mean_ci=tuple(s["external_mean_reward_ci"]),
    )
    cells = external_cells(it)
    assert cells[0].startswith("25.0% [") and cells[1].startswith("0.438 [")
    assert external_cells(IterationFigures(iteration=2)) == ["-", "-"]


def test_external_episodes_never_reach_training() -> None:
    """Train reads the rollout stage's trajectories only; external episodes are diagnose's
    external_trajectories (split "external"), a table of another stage."""
    from clawloop.diagnosis.external import EXTERNAL_SPLIT
    from clawloop.tasks.train import STAGE

    assert STAGE.upstream == ("rollout",) and EXTERNAL_SPLIT == "external"
