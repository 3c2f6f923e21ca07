"""One reference for GRPO's ratio: the rollout (behaviour) policy, the same on every path.

On identical tokens, an episode whose server recorded the sampling logprobs and one whose server
did not must give GRPO the same old logprobs: the rollout policy's. GRPO runs before SFT in one
train stage, so its start model is the rollout policy: step 0 has ratio 1 on both paths, however
far SFT then moves the weights. (SFT first, on the same episodes, was off-policy: the demo's
iteration 1 had ratio_mean 166, loss 296.8 and grad_norm 1.2e4.)"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.grpo import next_token_logprobs
from clawloop.training.sequences import _loads, episode_turns
from clawloop.training.stage import train_stage
from clawloop.training.trainer_base import PolicyRef, load_policy


def _id_rows(tok, model_dir, recorded: bool) -> list[dict]:
    """Four episodes as id turns (the text path's tokens); with the base model's logprobs
    recorded, as a server that samples from it returns them, or with none."""
    model = load_policy(PolicyRef(model_dir), TrainConfig(bf16=False)).eval()
    rows = []
    for i in range(4):
        row = episode_row("t1", i, float(i % 2), variant=i)
        msgs, tools = _loads(row["messages_json"], []), _loads(row["tools_json"], None)
        turns, _ = episode_turns(tok, msgs, tools, _loads(row["turns_json"], []), True)
        recs = []
        for t in turns:
            lps = None
            if recorded:
                ids = torch.tensor([t.prompt_ids + t.completion_ids])
                with torch.no_grad():
                    logp = next_token_logprobs(model(input_ids=ids).logits.float(), ids)[0]
                lps = logp[len(t.prompt_ids) - 1 :].tolist()
            recs.append(
                {
                    "prompt_token_ids": t.prompt_ids,
                    "completion_token_ids": t.completion_ids,
                    "logprobs": lps,
                    "finish_reason": "stop",
                }
            )
        rows.append({**row, "turns_json": json.dumps(recs)})
    return rows


def _first_grpo_row(tok, model_dir, tmp_path, phases: str, recorded: bool, sft_lr=1e-2):
    cfg = TrainConfig(
        phases=phases,
        sft_max_steps=2,
        sft_learning_rate=sft_lr,
        grpo_max_steps=1,
        per_device_batch_size=8,
    )
    traj = pd.DataFrame(_id_rows(tok, model_dir, recorded))
    result = train_stage(traj, band_frame(["t1"], [True]), cfg, model_dir, tmp_path)
    assert result.status == "trained", result.reason
    key = "grpo_logprobs_recorded" if recorded else "grpo_logprobs_frozen"
    assert result.counts[key] > 0
    if "sft" in phases:
        assert result.phases_run == ["grpo", "sft"], result.reason
        assert result.checkpoint_dir == tmp_path / "sft" / "model"  # SFT trained GRPO's result
    return next(r for r in result.metrics if r["phase"] == "grpo")


def test_unrecorded_logprobs_are_the_rollout_policys(tiny_model_dir, tiny_tokenizer, tmp_path):
    """The fill GRPO uses (its start model, the rollout policy): exactly what the rollout policy's
    server would record."""
    from clawloop.training.grpo import freeze_old_logprobs
    from clawloop.training.sequences import encode_episode

    rec_rows = _id_rows(tiny_tokenizer, tiny_model_dir, True)[:1]
    unrec_rows = _id_rows(tiny_tokenizer, tiny_model_dir, False)[:1]
    (rec,), _ = encode_episode(tiny_tokenizer, rec_rows[0], 100_000)
    (unrec,), _ = encode_episode(tiny_tokenizer, unrec_rows[0], 100_000)
    model = load_policy(PolicyRef(tiny_model_dir), TrainConfig(bf16=False))
    assert freeze_old_logprobs(model, [unrec], torch.device("cpu")) > 0
    assert unrec.input_ids == rec.input_ids
    pairs = [(a, b) for a, b, m in zip(rec.old_logprobs, unrec.old_logprobs, rec.action_mask,
                                       strict=True) if m]  # fmt: skip
    assert pairs and max(abs(a - b) for a, b in pairs) < 1e-4


def test_grpo_and_sft_on_the_same_episodes_keep_grpo_on_policy(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    """Both phases on one set of episodes, SFT at a rate that moves the tiny model a long way in
    two steps: GRPO's first step still has ratio 1 and a loss bounded by its advantages (with SFT
    first it was ratioed against a policy SFT had moved: ratio_mean far from 1, loss unbounded)."""
    row = _first_grpo_row(tiny_tokenizer, tiny_model_dir, tmp_path, "grpo+sft", True, sft_lr=5e-2)
    print(f"grpo step 0: ratio_mean {row['ratio_mean']:.4f} loss {row['loss']:.4f} "
          f"grad_norm {row['grad_norm']:.4f}")  # fmt: skip
    assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-3)
    assert row["clip_frac"] == 0.0
    # ratio 1: the per-token loss is -A, so the token mean lies within the advantages' range
    # (rewards 0, 1, 0, 1: A = +-0.866)
    assert abs(row["loss"]) <= 0.87


def test_the_older_spelling_of_both_phases_runs_grpo_first():
    assert TrainConfig(phases="sft+grpo").phases == "grpo+sft" == TrainConfig().phases
    assert TrainConfig.from_dict({"phases": "sft+grpo"}).phases == "grpo+sft"


@pytest.mark.slow
def test_both_phases_start_grpo_at_ratio_one_on_both_paths(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    for phases in ("grpo", "grpo+sft"):
        for recorded in (True, False):
            row = _first_grpo_row(tiny_tokenizer, tiny_model_dir, tmp_path / f"{phases}{recorded}",
                                  phases, recorded)  # fmt: skip
            assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
            assert row["clip_frac"] == 0.0
            assert row["offpolicy_frac"] == (1.0 if recorded else 0.0)  # recorded share
