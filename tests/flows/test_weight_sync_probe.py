"""The weight-sync probe: does what train made reach the sampler? (Other RL stacks have trained for
weeks on updates that never reached it.) K=2 through the real engine, the real local policy
server on the tiny offline model, real SFT + GRPO, with one change: a toy reward that one
iteration can move. The rollout stage runs as it is, then each episode is re-scored: its reward is
the share of letters among the reply's characters, passed when at least half are (the tiny random
model solves no task, but its replies mix digits and words: letter share 0.26-0.63, mean ~0.44
over 32 replies measured, so every group has spread). GRPO trains on that shaped reward
(`train.reward: fraction`), SFT on the passed replies. Asserted: iteration 2's rollout was served
by iteration 1's checkpoint (the trained weights, not the base), and its replies hold clearly more
letters than iteration 1's, by a margin far beyond the spread of a mean over 24 base replies.

One iteration's rollouts, training and a server start per rollout: ~2-5 min on 2 busy cores, so
`slow`. The managed vLLM's reload paths get the same probe where that server is available.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from doubles.k2_loop import GENERATOR, GENERATORS

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.rollout import band_filter, pass_rates
from clawloop.storage import artifacts
from clawloop.tasks import rollout as rollout_stage
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageContext, StageResult
from clawloop.training.tiny_model import ensure_tiny_model

N = 8  # episodes per task
RUN = "probe"


def replies(row: dict[str, Any]) -> str:
    """Everything the policy sampled in the episode (each turn's reply as the server returned it)."""
    return "\n".join(str(t.get("raw_content") or "") for t in json.loads(row["turns_json"]))


def letter_share(row: dict[str, Any]) -> float:
    """The toy reward: the share of letters among the characters the policy sampled."""
    text = "".join(c for c in replies(row) if not c.isspace())
    return sum(c.isalpha() for c in text) / len(text) if text else 0.0


def rescored(row: dict[str, Any]) -> dict[str, Any]:
    reward = letter_share(row)
    return {**row, "reward": reward, "passed": reward >= 0.5}


def toy_reward_rollout(ctx: StageContext) -> StageResult:
    """The real rollout stage, its episodes re-scored by the toy reward (band and rates with it)."""
    res = rollout_stage.run(ctx)
    schema, traj = res.tables["trajectories"]
    traj = [rescored(r) for r in traj]
    rcfg = ctx.config.rollout
    band = band_filter(traj, rcfg.n, rcfg.band_lo, rcfg.band_hi)
    tables = {
        **res.tables,
        "trajectories": (schema, traj),
        "band": (res.tables["band"][0], band),
        "pass_rates": (res.tables["pass_rates"][0], pass_rates(traj, band)),
    }
    summary = {
        **res.summary,
        "passed": sum(r["passed"] for r in traj),
        "kept_tasks": sum(bool(b["kept"]) for b in band),
    }
    return StageResult(tables, files=res.files, summary=summary, dirs=res.dirs)


def probe_config(root: Path, gens: Path, base: Path, llm: dict[str, Any]) -> dict[str, Any]:
    return {
        "iterations": 2,
        "storage": {"root": str(root)},
        "sandbox": {"backend": "bwrap"},
        "llm": llm,
        "synthesize": {
            "builtin": False,
            "generator_paths": [str(gens)],
            "n_train": 3,
            "eval_fraction": 0.0,  # no held-out split: diagnose serves nothing
        },
        # one reply per episode, short: the probe is about what the sampler serves
        "rollout": {"n": N, "band": [1, N - 1], "max_turns": 1, "max_tokens": 24, "workers": 1},
        "train": {
            "base_model": str(base),
            "phases": "sft+grpo",
            "reward": "fraction",  # GRPO on the shaped toy reward
            "sft_learning_rate": 2.0e-3,  # the tiny random model: one iteration must move it
            "sft_epochs": 2,
            "grpo_learning_rate": 2.0e-3,
            "grpo_epochs": 2,
            "max_seq_len": 4096,  # system prompt + tools: ~2k tiny-model tokens
            "per_device_batch_size": 4,
        },
        "diagnose": {"embedder": "hashed", "summary_attempts": 1},
    }


def run_probe(tmp_path: Path, llm: dict[str, Any]) -> Path:
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    root = tmp_path / "runs"
    cfg = parse_config(probe_config(root, gens, ensure_tiny_model(), llm))
    stages = [
        dataclasses.replace(s, run=toy_reward_rollout) if s.name == "rollout" else s
        for s in STAGES
    ]
    out = runs.run_loop(cfg, RUN, stages, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
    return root / RUN


def mean_reward(rows: list[dict[str, Any]]) -> float:
    return sum(letter_share(r) for r in rows) / len(rows)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_iteration_2_samples_the_trained_weights_and_moves_toward_the_reward(tmp_path):
    run_dir = run_probe(tmp_path, {})  # no base_url: the local server serves each checkpoint
    it1, it2 = (str(run_dir / f"iter-{k}") for k in (1, 2))
    first = artifacts.read_rows(f"{it1}/rollout", "trajectories")
    second = artifacts.read_rows(f"{it2}/rollout", "trajectories")
    (ckpt,) = artifacts.read_rows(f"{it1}/train", "checkpoint")
    metrics = artifacts.read_rows(f"{it1}/train", "metrics")

    # iteration 1 had a signal and trained on it
    band = artifacts.read_rows(f"{it1}/rollout", "band")
    assert any(b["kept"] for b in band), band
    assert ckpt["status"] == "trained" and {m["phase"] for m in metrics} == {"sft", "grpo"}

    # iteration 1 sampled the base model, iteration 2 exactly iteration 1's checkpoint
    base = str(ensure_tiny_model())
    assert {r["policy_id"] for r in first} == {base}
    assert {r["policy_id"] for r in second} == {ckpt["checkpoint_path"]} != {base}

    # ... and its samples moved toward the reward: clearly more letters (the base's per-reply
    # share has sd ~0.09, so a mean over 24 replies ~0.02)
    before, after = mean_reward(first), mean_reward(second)
    assert after >= before + 0.1, (before, after)
