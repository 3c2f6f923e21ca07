"""Row "base" (diagnose.baseline) on a real K=2 run (tests/doubles/k2_loop.py: user generators,
bubblewrap, a scripted policy over HTTP, SFT + GRPO on the tiny model): iteration 1's rollout
stage grades the base policy on the held-out tasks while it serves it for the rollout, so the
base weights are served once, before train; diagnose carries the episodes and counts them, and
`clawloop report --json` shows the row in issue 33 item 6's exact shape. Slow: a K=2 run.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from doubles.k2_loop import run_k2

from clawloop.flows.cli import main
from clawloop.storage import artifacts
from clawloop.storage.manifest import read_manifest

pytestmark = pytest.mark.slow

RUN = "based"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_row_base_is_graded_by_iteration_1s_rollout_and_reported(tmp_path, capsys, caplog):
    with caplog.at_level(logging.INFO, "clawloop.episodes"):
        k2 = run_k2(tmp_path, RUN, text_tool_calls=True, baseline=True)
    one = k2.run_dir / "iter-1"
    # the held-out episodes ran in the train rollout's map (one pool: the server batches both)
    shared = [r.getMessage() for r in caplog.records if "in one map with" in r.getMessage()]
    assert len(shared) == 2 and all(m.startswith("rollout: ") for m in shared), shared
    rolled = artifacts.read_table(str(one / "rollout"), "baseline_trajectories")
    carried = artifacts.read_table(str(one / "diagnose"), "baseline_trajectories")
    train = artifacts.read_table(str(one / "rollout"), "trajectories")
    # the held-out tasks, on the policy that rollout served (the base: nothing trained yet)
    assert len(rolled) > 0 and set(rolled["split"]) == {"eval"}
    assert set(rolled["policy_id"]) == set(train["policy_id"])
    assert list(carried["episode_id"]) == list(rolled["episode_id"])
    assert not (k2.run_dir / "iter-2" / "rollout" / "baseline_trajectories.parquet").exists()
    figures = read_manifest(str(one / "diagnose")).summary["baseline"]
    assert figures["heldout_episodes"] == len(rolled)
    assert figures["heldout_passed"] == int(rolled["passed"].sum())

    capsys.readouterr()
    assert main(["report", "--run", RUN, "--root", str(k2.root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"run_id", "iterations"} and doc["run_id"] == RUN
    assert [it["label"] for it in doc["iterations"]] == ["base", "1", "2"]
    for it in doc["iterations"]:
        assert set(it) == {"label", "heldout", "external", "train"}
        assert set(it["heldout"]) == {"passed", "n"} and it["external"] is None
    base = doc["iterations"][0]
    assert base["heldout"] == {"passed": figures["heldout_passed"], "n": len(rolled)}
    assert base["train"] is None
    assert all(set(it["train"]) == {"status", "steps"} for it in doc["iterations"][1:])
