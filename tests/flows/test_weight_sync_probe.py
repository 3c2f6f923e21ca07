"""The weight-sync probe: does what train made reach the sampler? (Users of other RL stacks have
trained for weeks on updates that never reached it.) K=2 through the real loop (every stage of
flows.pipeline.STAGES), the real policy server on the tiny offline model, real SFT + GRPO, with
one change: a toy reward that one iteration can move.

The toy reward: an episode passes when the policy's first sampled token is a word (its text starts
with an ASCII letter). The tiny random model samples its 1,321 tokens almost uniformly and 358 of
them are words, so ~27 % of replies pass and nearly every group of 8 has spread; SFT on the passed
replies and GRPO on the groups push the first token toward words. The rollout stage runs as it is;
its episodes are then re-scored by that reward (band and pass rates with it).

Asserted, for each way new weights reach the server:
- iteration 2 was served by iteration 1's checkpoint: its policy_id is that checkpoint (or adapter),
  and the logprobs the server recorded for iteration 2's sampled tokens are the checkpoint's own
  (the trainer's forward pass on the same ids) far more than the base model's;
- iteration 2's samples moved in the rewarded direction: clearly more first tokens are words.

Paths: the local policy server (a new server per checkpoint; `slow`) and the managed vLLM
restarted on the new checkpoint (`vllm`: `make test-vllm`). Not here: the runtime-LoRA path. LoRA
cannot move the tiny random model: its activations are ~0.02-scale, so adapter deltas on its linear
layers barely reach the logits, and the first token comes from the tied embeddings LoRA does not
train (measured: 10 AdamW steps toward 6 first tokens after one prompt, LoRA r16 all-linear lr 0.1
plateaus at loss 6.71, full fine-tuning lr 0.05 reaches 1.86 = ln 6). That path needs a model
with trained activations (tests/flows/test_vllm_loop.py checks which adapter vLLM serves).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from doubles.k2_loop import GENERATOR, GENERATORS
from transformers import AutoModelForCausalLM, AutoTokenizer

from clawloop.flows import runs
from clawloop.flows.pipeline import STAGES
from clawloop.harness.rollout import band_filter, pass_rates
from clawloop.storage import artifacts
from clawloop.tasks import rollout as rollout_stage
from clawloop.tasks.config import parse_config
from clawloop.tasks.mapping import thread_mapper
from clawloop.tasks.stage import StageContext, StageResult
from clawloop.training.tiny_model import ensure_tiny_model

pytestmark = [
    pytest.mark.timeout(1800),  # two iterations of every stage: ~3-10 min on a busy 2-core host
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]
N = 8  # episodes per task
RUN = "probe"


@cache
def word_tokens() -> frozenset[int]:
    """The tiny model's token ids whose text starts with an ASCII letter (358 of 1,321)."""
    tok = AutoTokenizer.from_pretrained(str(ensure_tiny_model()))
    words = set()
    for t in range(len(tok)):
        head = tok.decode([t]).lstrip()[:1]
        if head.isascii() and head.isalpha():
            words.add(t)
    return frozenset(words)


def first_turn(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(row["turns_json"])[0]


def starts_with_word(row: dict[str, Any]) -> bool:
    """The toy reward: the episode's first sampled token is a word."""
    ids = first_turn(row)["completion_token_ids"] or []
    return bool(ids) and ids[0] in word_tokens()


def rescored(row: dict[str, Any]) -> dict[str, Any]:
    ok = starts_with_word(row)
    return {**row, "reward": float(ok), "passed": ok}


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


def probe_config(root: Path, gens: Path, llm: dict[str, Any], train: dict[str, Any]):
    return parse_config(
        {
            "iterations": 2,
            "storage": {"root": str(root)},
            "sandbox": {"backend": "bwrap"},
            "llm": {"request_timeout_s": 600, **llm},
            "synthesize": {
                "builtin": False,
                "generator_paths": [str(gens)],
                "n_train": 3,
                "eval_fraction": 0.0,  # no held-out split: diagnose grades nothing
            },
            # one token per episode: the reward's whole subject, and all that train learns from
            "rollout": {
                "n": N,
                "band": [1, N - 1],
                "max_turns": 1,
                "max_tokens": 1,
                "context_len": 4096,
                "workers": 4,
            },
            "train": {
                "base_model": str(ensure_tiny_model()),
                "phases": "grpo+sft",
                "sft_epochs": 3,
                "grpo_epochs": 1,
                "max_seq_len": 4096,  # system prompt + tools: ~2k tiny-model tokens
                "per_device_batch_size": 2,
                **train,
            },
            "diagnose": {"embedder": "hashed", "summary_attempts": 1, "max_summaries": 2},
        }
    )


def run_probe(tmp_path: Path, llm: dict[str, Any], train: dict[str, Any]) -> Path:
    gens = tmp_path / "gens"
    gens.mkdir()
    for cap, dom in GENERATORS:
        (gens / f"{cap}_{dom}.py").write_text(GENERATOR.format(cap=cap, domain=dom))
    root = tmp_path / "runs"
    stages = [
        dataclasses.replace(s, run=toy_reward_rollout) if s.name == "rollout" else s for s in STAGES
    ]
    out = runs.run_loop(probe_config(root, gens, llm, train), RUN, stages, thread_mapper(False))
    assert out.ok, [(o.iteration, o.stage, o.status, o.error[:800]) for o in out.outcomes]
    return root / RUN


def served_gap(model: torch.nn.Module, turns: list[dict[str, Any]]) -> float:
    """Mean |logprob the server recorded - logprob of `model`| over the sampled tokens."""
    diffs = []
    for t in turns:
        prompt, ids = t["prompt_token_ids"], t["completion_token_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        mine = [float(logp[len(prompt) - 1 + k, tok]) for k, tok in enumerate(ids)]
        diffs += [abs(a - b) for a, b in zip(mine, t["logprobs"], strict=True)]
    return sum(diffs) / len(diffs)


def word_rate(rows: list[dict[str, Any]]) -> float:
    return sum(starts_with_word(r) for r in rows) / len(rows)


def check_probe(
    run_dir: Path, kind: str, served_key: str
) -> tuple[dict[str, Any], list[dict[str, Any]], float]:
    """The checks every path shares (`served_key`: the checkpoint column iteration 2's server
    should have served: checkpoint_path for full or merged weights, adapter_path); returns (iteration 1's checkpoint row, iteration 2's first
    turns, how far iteration 2's recorded logprobs lie from the base model's)."""
    it1, it2 = (str(run_dir / f"iter-{k}") for k in (1, 2))
    first = artifacts.read_rows(f"{it1}/rollout", "trajectories")
    second = artifacts.read_rows(f"{it2}/rollout", "trajectories")
    (ckpt,) = artifacts.read_rows(f"{it1}/train", "checkpoint")
    metrics = artifacts.read_rows(f"{it1}/train", "metrics")

    # iteration 1 had a signal and trained on it, in both phases
    band = artifacts.read_rows(f"{it1}/rollout", "band")
    assert any(b["kept"] for b in band), band
    assert ckpt["status"] == "trained" and ckpt["kind"] == kind, ckpt
    assert {m["phase"] for m in metrics} == {"sft", "grpo"}, metrics

    # iteration 1 sampled the base model, iteration 2 what iteration 1 trained
    base = str(ensure_tiny_model())
    served = ckpt[served_key]
    assert {r["policy_id"] for r in first} == {base}
    assert {r["policy_id"] for r in second} == {str(served)} != {base}

    # ... and its samples moved toward the reward: the base starts ~27 % of replies with a word
    # (24 replies: sd ~0.09); trained, clearly more
    before, after = word_rate(first), word_rate(second)
    assert after >= before + 0.3, (before, after)

    turns = [first_turn(r) for r in second]
    assert all(len(t["logprobs"]) == len(t["completion_token_ids"]) > 0 for t in turns)
    plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    return ckpt, turns, served_gap(plain, turns)


def vllm_starts(run_dir: Path) -> int:
    return (run_dir / "vllm.log").read_text(errors="replace").count("== clawloop starts vLLM")


def load(folder: str) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@pytest.mark.slow
def test_local_server_iteration_2_samples_the_checkpoint_and_moves_toward_the_reward(tmp_path):
    # no base_url: the local policy server serves each checkpoint (full fine-tune, fp32)
    run_dir = run_probe(tmp_path, {}, {"sft_learning_rate": 5e-2, "grpo_learning_rate": 1e-3})
    ckpt, turns, on_base = check_probe(run_dir, "full", "checkpoint_path")
    on_ckpt = served_gap(load(ckpt["checkpoint_path"]), turns)
    # the local server runs the checkpoint in fp32 with the trainer's own code: the same numbers
    assert on_ckpt < 0.02 and on_base > 10 * on_ckpt, (on_ckpt, on_base)


# CPU: no torch.compile warm-up
VLLM_LLM = {"server": "vllm", "token_ids": "on", "vllm_args": ["--enforce-eager"]}


@pytest.mark.vllm
def test_vllm_restart_serves_the_checkpoint_and_moves_toward_the_reward(tmp_path):
    # a full checkpoint folder: the managed vLLM is restarted on it (a merged LoRA takes the same
    # path; LoRA cannot move the tiny random model, see the module docstring)
    run_dir = run_probe(tmp_path, VLLM_LLM, {"sft_learning_rate": 5e-2, "grpo_learning_rate": 1e-3})
    ckpt, turns, on_base = check_probe(run_dir, "full", "checkpoint_path")
    assert vllm_starts(run_dir) == 2  # started on the base, restarted once on the new weights
    on_ckpt = served_gap(load(ckpt["checkpoint_path"]), turns)
    # bf16 serving and the grammar-free residual of tests/flows/test_vllm_loop.py: the ordering
    assert on_base > 3 * on_ckpt, (on_ckpt, on_base)
