"""One reference for GRPO's ratio: the rollout (behaviour) policy, the same on every path.

On identical tokens, an episode whose server recorded the sampling logprobs and one whose server
did not must give GRPO the same old logprobs: the rollout policy's. After SFT moved the weights,
the unrecorded ones used to be frozen from the post-SFT model instead (ratio 1.000, nothing
clipped) while the recorded ones gave the true importance ratio (1.088 on the issue's run).
GRPO alone starts from the rollout policy: step 0 has ratio 1 on both paths."""

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


def _first_grpo_row(tok, model_dir, tmp_path, phases: str, recorded: bool) -> dict:
    cfg = TrainConfig(
        phases=phases,
        sft_max_steps=2,
        sft_learning_rate=1e-2,
        grpo_max_steps=1,
        per_device_batch_size=8,
    )
    traj = pd.DataFrame(_id_rows(tok, model_dir, recorded))
    result = train_stage(traj, band_frame(["t1"], [True]), cfg, model_dir, tmp_path)
    assert result.status == "trained", result.reason
    key = "grpo_logprobs_recorded" if recorded else "grpo_logprobs_frozen"
    assert result.counts[key] > 0
    return next(r for r in result.metrics if r["phase"] == "grpo")


def test_unrecorded_logprobs_are_the_rollout_policys(tiny_model_dir, tiny_tokenizer, tmp_path):
    """The fill GRPO uses after SFT: exactly what the rollout policy's server would record."""
    from clawloop.training.sequences import encode_episode
    from clawloop.training.stage import behaviour_logprobs

    rec_rows = _id_rows(tiny_tokenizer, tiny_model_dir, True)[:1]
    unrec_rows = _id_rows(tiny_tokenizer, tiny_model_dir, False)[:1]
    (rec,), _ = encode_episode(tiny_tokenizer, rec_rows[0], 100_000)
    (unrec,), _ = encode_episode(tiny_tokenizer, unrec_rows[0], 100_000)
    cfg = TrainConfig(bf16=False)
    assert behaviour_logprobs([unrec], PolicyRef(tiny_model_dir), cfg, tmp_path) > 0
    assert unrec.input_ids == rec.input_ids
    pairs = [(a, b) for a, b, m in zip(rec.old_logprobs, unrec.old_logprobs, rec.action_mask,
                                       strict=True) if m]  # fmt: skip
    assert pairs and max(abs(a - b) for a, b in pairs) < 1e-4


@pytest.mark.slow
def test_after_sft_both_paths_are_ratioed_against_the_rollout_policy(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    rec = _first_grpo_row(tiny_tokenizer, tiny_model_dir, tmp_path / "rec", "sft+grpo", True)
    unrec = _first_grpo_row(tiny_tokenizer, tiny_model_dir, tmp_path / "un", "sft+grpo", False)
    print(f"grpo step 0 after sft: ratio recorded {rec['ratio_mean']:.4f} "
          f"/ not recorded {unrec['ratio_mean']:.4f}")  # fmt: skip
    assert abs(rec["ratio_mean"] - 1.0) > 1e-3  # SFT moved the policy away from the sampler
    assert unrec["ratio_mean"] == pytest.approx(rec["ratio_mean"], abs=1e-4)
    assert unrec["clip_frac"] == pytest.approx(rec["clip_frac"], abs=1e-6)
    assert (rec["offpolicy_frac"], unrec["offpolicy_frac"]) == (1.0, 0.0)  # recorded share


@pytest.mark.slow
def test_grpo_alone_starts_at_ratio_one_on_both_paths(tiny_model_dir, tiny_tokenizer, tmp_path):
    for recorded in (True, False):
        row = _first_grpo_row(tiny_tokenizer, tiny_model_dir, tmp_path / str(recorded), "grpo",
                              recorded)  # fmt: skip
        assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
        assert row["clip_frac"] == 0.0
