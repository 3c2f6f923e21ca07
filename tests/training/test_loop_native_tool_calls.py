"""The whole loop (K=2) against a scripted OpenAI-compatible server that returns parsed tool calls
only (native `tool_calls`, no token ids, no raw text: a tool parser on, no id extension). Before
the template fallback every assistant turn was dropped and train said `nothing_to_train` with
exit 0; now both iterations train (steps > 0, weights change) on round-tripped template
renderings, and the train stage reports `turns_from_template`.

The loop is tests/doubles/k2_loop.py's `run_k2` (test_loop_trains.py's, with native tool calls)."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from doubles.k2_loop import run_k2, weights

from clawloop.storage import artifacts


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_two_iterations_train_against_a_server_with_parsed_tool_calls_only(tmp_path):
    # native tool_calls, no token ids, no raw text
    k2 = run_k2(tmp_path, "trains", text_tool_calls=False)
    out, run_dir, base = k2.out, k2.run_dir, k2.base
    summaries = {
        (o.iteration, o.stage): o.manifest.summary for o in out.outcomes if o.manifest is not None
    }
    starts = [str(base)]
    for k in (1, 2):
        it = run_dir / f"iter-{k}"
        traj = artifacts.read_table(str(it / "rollout"), "trajectories")
        assert traj["passed"].any() and not traj["passed"].all()
        summary = summaries[k, "train"]
        print(f"iteration {k} train: {summary}")
        assert summary["status"] == "trained" and summary["steps"] > 0, summary
        assert summary["turns_from_template"] > 0 and summary["turns_from_ids"] == 0, summary
        assert "turns from the chat template" in summary["reason"], summary
        metrics = artifacts.read_table(str(it / "train"), "metrics")
        assert Counter(metrics["phase"]) == {"sft": 1, "grpo": 1}
        (row,) = artifacts.read_rows(str(it / "train"), "checkpoint")
        before, after = weights(starts[-1]), weights(row["checkpoint_path"])
        assert any(not before[n].equal(after[n]) for n in before), "training changed nothing"
        starts.append(row["checkpoint_path"])
