"""The loop trains: K=2 through the plain engine with a scripted policy over HTTP that passes some
episodes, so the band keeps groups with reward spread, train runs SFT and GRPO on the tiny offline
model, and iteration 2's rollout is served by iteration 1's checkpoint (`llm.reload: restart`).

The policy is a FakeOpenAI router: of every `tally` task it solves the first attempt (replays the
forged reference solution) and spoils the second (right files, wrong content), so each group of
n=2 has one pass and one fail (band [1, 1] keeps it, GRPO sees reward spread); every `audit` task
it spoils, so the band drops those. The fake's /v1/models reports as `root` the newest checkpoint
train has committed: a vLLM server the user restarts on each iteration's weights.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from doubles.fake_openai import (
    FakeOpenAI,
    ToolStep,
    first_user_text,
    solution_steps,
    wrong_steps,
)
from safetensors.torch import load_file

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.prompts import task_message
from clawloop.harness.taskfolder.folder import unpack_tar
from clawloop.storage import artifacts
from clawloop.storage.manifest import read_manifest
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.training.tiny_model import ensure_tiny_model

RUN = "trains"
MODEL = "policy"
NOT_A_TASK_REPLY = "I cannot tell what went wrong."  # failure-summary requests: plain text

# The end-to-end test's generator, with the seed in the instruction so that every task has its
# own first user message (the fake policy tells tasks apart by it).
GENERATOR = '''"""Sum log entries per {domain} site."""
GENERATOR = {{"capability": "{cap}", "domain": "{domain}", "multihop": 0, "dirtiness": 0, "output_format": "json"}}
import json, os, random

def build(seed):
    rng = random.Random(seed)
    rows = [{{"site": rng.choice("ABCD"), "qty": rng.randint(1, 9)}} for _ in range(20)]
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    return {{"instruction": f"Sum qty per site in log.json (batch {{seed}}); write output/totals.json mapping site to total.",
            "files": {{"log.json": json.dumps(rows)}},
            "answer": {{"output/totals.json": total}},
            "contract": {{"outputs": [{{"path": "output/totals.json", "format": "json", "schema": {{"type": "object"}}}}],
                         "tolerance": {{"abs": 0, "rel": 0}}, "decisions": ["Sum every row"]}}}}

def solve(workspace):
    rows = json.load(open(os.path.join(workspace, "log.json")))
    total = {{}}
    for r in rows:
        total[r["site"]] = total.get(r["site"], 0) + r["qty"]
    os.makedirs(os.path.join(workspace, "output"), exist_ok=True)
    json.dump(total, open(os.path.join(workspace, "output/totals.json"), "w"))
'''
GENERATORS = [("tally", "apiary"), ("tally", "orchard"), ("audit", "marina")]
SOLVED = "tally"  # half of its attempts pass; every other capability's attempts fail


class HalfSolvingPolicy:
    """Router: forged task (found by its first user message) -> solve or spoil it.

    The decision is taken on an episode's first request and is readable from every later one:
    a solution replay starts with list_dir, a spoiled one with run_shell (see solution_steps and
    wrong_steps), so the router stays a function of the conversation after its first turn."""

    def __init__(self, run_dir: Path, cache: Path) -> None:
        self.run_dir, self.cache = run_dir, cache
        self.tasks: dict[str, tuple[str, Path]] = {}  # task message -> (capability, folder)
        self.first_turns: Counter[str] = Counter()  # task message -> episodes started
        self.decisions: list[tuple[str, bool]] = []  # (capability, solved) per episode started
        self._lock = threading.Lock()

    def _find(self, message: str) -> tuple[str, Path] | None:
        if message not in self.tasks:  # a new iteration's forge wrote more tasks
            for parquet in sorted(self.run_dir.glob("iter-*/forge/tasks.parquet")):
                frame = pd.read_parquet(
                    parquet, columns=["task_id", "status", "task_tar", "capability"]
                )
                for row in frame[frame["status"] == "ok"].itertuples():
                    dest = self.cache / row.task_id
                    if not (dest / "instruction.md").is_file():
                        unpack_tar(row.task_tar, dest)
                    text = task_message((dest / "instruction.md").read_text())
                    self.tasks[text] = (row.capability, dest)
        return self.tasks.get(message)

    def __call__(self, messages: list[dict[str, Any]]) -> list[ToolStep] | str:
        with self._lock:
            found = self._find(first_user_text(messages))
            if found is None:
                return NOT_A_TASK_REPLY
            capability, task_dir = found
            replies = [m for m in messages if m.get("role") == "assistant"]
            if replies:
                first_call = (replies[0].get("tool_calls") or [{}])[0]
                solve = first_call.get("function", {}).get("name") == "list_dir"
            else:
                message = first_user_text(messages)
                self.first_turns[message] += 1
                solve = capability == SOLVED and self.first_turns[message] % 2 == 1
                self.decisions.append((capability, solve))
        return solution_steps(task_dir) if solve else wrong_steps(task_dir)


def newest_checkpoint(run_dir: Path, base: str) -> str:
    """The folder a server restarted after every train stage serves: the newest committed
    trained checkpoint, else the base model."""
    served = base
    for k in range(1, 100):
        stage = run_dir / f"iter-{k}" / "train"
        if read_manifest(str(stage)) is None:
            break
        row = artifacts.read_rows(str(stage), "checkpoint")[0]
        if row["kind"] != "base":
            served = row["checkpoint_path"]
    return served


def weights(model_dir: str | Path) -> dict[str, Any]:
    files = sorted(Path(model_dir).glob("*.safetensors"))
    assert files, f"no safetensors weights in {model_dir}"
    out: dict[str, Any] = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_two_iterations_train_and_iteration_2_rolls_out_the_checkpoint(tmp_path):
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    base = ensure_tiny_model()
    run_dir = tmp_path / "runs" / RUN
    policy = HalfSolvingPolicy(run_dir, tmp_path / "policy-tasks")
    with FakeOpenAI(
        "routed",
        router=policy,
        model=MODEL,
        served_root=lambda: newest_checkpoint(run_dir, str(base)),
    ) as fake:
        url = fake.base_url
        cfg = parse_config(
            {
                "iterations": 2,
                "storage": {"root": str(tmp_path / "runs")},
                "sandbox": {"backend": "bwrap"},
                "llm": {
                    "base_url": url,
                    "model": MODEL,
                    "api_key_env": "",
                    "reload": "restart",
                },
                "synthesize": {
                    "builtin": False,
                    "generator_paths": [str(gens)],
                    "n_train": 3,
                    "n_eval": 1,
                    "eval_fraction": 0.25,
                },
                # a solution replay is 5 replies, a spoiled one 7
                "rollout": {"n": 2, "band": [1, 1], "max_turns": 8, "workers": 2},
                "train": {
                    "base_model": str(base),
                    "phases": "sft+grpo",
                    "sft_max_steps": 1,
                    "grpo_max_steps": 1,
                    "max_seq_len": 4096,  # the system prompt and tools alone are ~2k tiny-model tokens
                    "per_device_batch_size": 2,
                },
                "diagnose": {"embedder": "hashed", "summary_attempts": 1},
            }
        )
        out = runs.run_loop(cfg, RUN, STAGES, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
    assert [(o.iteration, o.stage) for o in out.outcomes] == [
        (k, s.name) for k in (1, 2) for s in STAGES
    ]
    assert {o.status for o in out.outcomes} == {"ran"}

    # The policy passed some episodes and failed others.
    assert any(solved for _, solved in policy.decisions)
    assert any(not solved for _, solved in policy.decisions)

    ckpt: dict[int, str] = {}
    for k in (1, 2):
        it = run_dir / f"iter-{k}"
        traj = artifacts.read_table(str(it / "rollout"), "trajectories")
        band = artifacts.read_table(str(it / "rollout"), "band")
        # Every tally group split 1 pass / 1 fail and was kept; audit groups never passed.
        assert len(traj) == 2 * len(band) and set(traj["attempt"]) == {0, 1}
        kept = band[band["kept"]]
        assert len(kept) > 0, band.to_dict("records")
        assert set(kept["capability"]) == {SOLVED}, band.to_dict("records")
        assert (band.loc[band["capability"] != SOLVED, "passes"] == 0).all()
        assert (kept["passes"] == 1).all()
        assert traj["passed"].any() and not traj["passed"].all()

        metrics = artifacts.read_table(str(it / "train"), "metrics")
        phases = Counter(metrics["phase"])
        assert phases["sft"] >= 1 and phases["grpo"] >= 1, metrics.to_dict("records")
        assert metrics["loss"].notna().all() and (metrics["action_tokens"] > 0).all()
        grpo = metrics[metrics["phase"] == "grpo"]
        assert (grpo["kept_groups"] == len(kept)).all()

        (row,) = artifacts.read_rows(str(it / "train"), "checkpoint")
        assert row["status"] == "trained" and row["kind"] == "full", row
        assert row["phases"] == "sft,grpo" and row["kept_groups"] == len(kept), row
        ckpt[k] = row["checkpoint_path"]
        assert Path(ckpt[k]).is_relative_to(it / "train"), row
        assert ckpt[k] != str(base)

    # The checkpoint holds different weights than the base model (same tensors, changed values).
    before, after = weights(base), weights(ckpt[1])
    assert before.keys() == after.keys()
    changed = [n for n in before if not before[n].equal(after[n])]
    assert changed, "iteration 1's checkpoint has the base model's weights"

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
    assert f"iteration 2's checkpoint {ckpt[2]}" in summaries[2, "diagnose"]["policy"]
    assert json.loads((run_dir / "iter-1/diagnose/guidance.json").read_text())
