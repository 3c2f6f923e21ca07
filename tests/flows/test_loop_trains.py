"""The loop trains: K=2 through the plain engine with a scripted policy over HTTP that passes some
episodes, so the band keeps groups with reward spread, train runs SFT and GRPO on the tiny offline
model, and iteration 2's rollout is served by iteration 1's checkpoint (`llm.reload: restart`).

The loop, its generators and the half-solving policy are tests/doubles/k2_loop.py's `run_k2`:
of every task the policy solves the first attempt and spoils the second, so each group of n=2
has one pass and one fail; the first train task of each iteration it always spoils, so the band
drops that group. The fake's /v1/models reports as `root` the newest checkpoint train has
committed. About 20 s on 2 CPU cores (bubblewrap sandboxes).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from doubles.k2_loop import MODEL, run_k2, weights

from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts

RUN = "trains"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_two_iterations_train_and_iteration_2_rolls_out_the_checkpoint(tmp_path):
    # the sampled text, tool calls in it: what train tokenises
    k2 = run_k2(tmp_path, RUN, text_tool_calls=True)
    out, run_dir, base, policy, url = k2.out, k2.run_dir, k2.base, k2.policy, k2.base_url
    assert [(o.iteration, o.stage) for o in out.outcomes] == [
        (k, s.name) for k in (1, 2) for s in STAGES
    ]
    assert {o.status for o in out.outcomes} == {"ran"}

    hopeless = {t.task_id for t in policy.tasks.values() if t.hopeless}
    ckpt: dict[int, str] = {}
    for k in (1, 2):
        it = run_dir / f"iter-{k}"
        traj = artifacts.read_table(str(it / "rollout"), "trajectories")
        band = artifacts.read_table(str(it / "rollout"), "band")
        # The real verifier graded the fake's replays as the policy meant them: one pass in two
        # per group, none for the hopeless task; the band kept exactly the groups with a pass.
        assert len(traj) == 2 * len(band) and set(traj["attempt"]) == {0, 1}
        passes = dict(zip(band["task_id"], band["passes"], strict=True))
        assert passes == {t: sum(policy.solved[t]) for t in passes}, band.to_dict("records")
        assert {t: int(p) for t, p in passes.items()} == {
            t: 0 if t in hopeless else 1 for t in passes
        }, band.to_dict("records")
        assert list(band["kept"]) == [p == 1 for p in band["passes"]]
        kept = band[band["kept"]]
        assert 0 < len(kept) < len(band), band.to_dict("records")

        metrics = artifacts.read_table(str(it / "train"), "metrics")
        phases = Counter(metrics["phase"])
        assert phases["sft"] >= 1 and phases["grpo"] >= 1, metrics.to_dict("records")
        assert metrics["loss"].notna().all() and (metrics["action_tokens"] > 0).all()
        grpo = metrics[metrics["phase"] == "grpo"]
        assert (grpo["kept_groups"] == len(kept)).all()

        (row,) = artifacts.read_rows(str(it / "train"), "checkpoint")
        assert row["status"] == "trained" and row["kind"] == "full", row
        assert row["phases"] == "grpo,sft" and row["kept_groups"] == len(kept), row
        assert row["sft_episodes"] == len(kept), row  # the one passed episode of each kept group
        ckpt[k] = row["checkpoint_path"]
        assert Path(ckpt[k]).is_relative_to(it / "train"), row
        # iteration 1 trains the base model, iteration 2 continues from iteration 1's checkpoint
        assert row["base_model"] == (str(base) if k == 1 else ckpt[1]), row

    # Each checkpoint holds different weights than the model it started from (same tensors).
    for start, trained in ((str(base), ckpt[1]), (ckpt[1], ckpt[2])):
        before, after = weights(start), weights(trained)
        assert before.keys() == after.keys()
        changed = [n for n in before if not before[n].equal(after[n])]
        assert changed, f"{trained} has the weights of {start}: training changed nothing"

    # Iteration 1 rolled out the base model; iteration 2 the checkpoint iteration 1 trained.
    traj1 = artifacts.read_table(str(run_dir / "iter-1/rollout"), "trajectories")
    traj2 = artifacts.read_table(str(run_dir / "iter-2/rollout"), "trajectories")
    assert set(traj1["policy_id"]) == {str(base)}
    assert set(traj2["policy_id"]) == {ckpt[1]}
    summaries = {
        (o.iteration, o.stage): o.manifest.summary for o in out.outcomes if o.manifest is not None
    }
    assert "the base model: nothing trained yet" in summaries[1, "rollout"]["policy"]
    assert summaries[2, "rollout"]["policy"] == (
        f"policy: iteration 1's checkpoint {ckpt[1]}, served by {url} as {MODEL}"
    )
    # diagnose of iteration k evaluates the checkpoint train just wrote
    for k in (1, 2):
        assert f"iteration {k}'s checkpoint {ckpt[k]}" in summaries[k, "diagnose"]["policy"]
    assert {b["model"] for b in k2.fake.requests} == {MODEL}
    assert json.loads((run_dir / "iter-1/diagnose/guidance.json").read_text())
