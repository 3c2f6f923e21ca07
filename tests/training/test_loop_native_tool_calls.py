"""The whole loop (K=2) against a scripted OpenAI-compatible server that returns parsed tool calls
only (native `tool_calls`, no token ids, no raw text: a tool parser on, no id extension). Before
the template fallback every assistant turn was dropped and train said `nothing_to_train` with
exit 0; now both iterations train (steps > 0, weights change) on round-tripped template
renderings, and the train stage reports `turns_from_template`.

Reuses tests/flows/test_loop_trains.py's generators and half-solving policy (loaded by path)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.storage import artifacts
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.training.tiny_model import ensure_tiny_model

_spec = importlib.util.spec_from_file_location(
    "loop_trains", Path(__file__).parents[1] / "flows" / "test_loop_trains.py"
)
loop = importlib.util.module_from_spec(_spec)
sys.modules["loop_trains"] = loop  # its dataclasses look their module up
_spec.loader.exec_module(loop)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_two_iterations_train_against_a_server_with_parsed_tool_calls_only(tmp_path):
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in loop.GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(loop.GENERATOR.format(cap=cap, domain=dom))
    base = ensure_tiny_model()
    run_dir = tmp_path / "runs" / loop.RUN
    policy = loop.HalfSolvingPolicy(run_dir, tmp_path / "policy-tasks")
    with FakeOpenAI(
        "routed",
        router=policy,
        model=loop.MODEL,
        served_root=lambda: loop.newest_checkpoint(run_dir, str(base)),
    ) as fake:  # native tool_calls, no token ids, no raw text
        cfg = parse_config(
            {
                "iterations": 2,
                "storage": {"root": str(tmp_path / "runs")},
                "sandbox": {"backend": "bwrap"},
                "llm": {
                    "base_url": fake.base_url,
                    "model": loop.MODEL,
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
                "rollout": {"n": 2, "band": [1, 1], "max_turns": 8, "workers": 2},
                "train": {
                    "base_model": str(base),
                    "phases": "sft+grpo",
                    "sft_max_steps": 1,
                    "grpo_max_steps": 1,
                    "max_seq_len": 4096,
                    "per_device_batch_size": 2,
                },
                "diagnose": {"embedder": "hashed", "summary_attempts": 1},
            }
        )
        out = runs.run_loop(cfg, loop.RUN, STAGES, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
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
        before, after = loop.weights(starts[-1]), loop.weights(row["checkpoint_path"])
        assert any(not before[n].equal(after[n]) for n in before), "training changed nothing"
        starts.append(row["checkpoint_path"])
