"""Truncated importance sampling (train.tis_cap, as TRL's vllm_importance_sampling_cap): the
ratio is taken against the trainer's own logprobs of the rollout policy, each token whose sampler
logprob was recorded is weighted by min(exp(trainer - sampler), cap), and the weights and the
sampler-trainer mismatch are logged per step. Off, a sampler that computed the policy
differently shows up in the ratio itself."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from doubles.episodes import band_frame
from test_ratio_reference import _id_rows

from clawloop.training.config import TrainConfig
from clawloop.training.grpo import grpo_token_loss
from clawloop.training.result import tis_summary
from clawloop.training.stage import train_stage
from clawloop.training.trainer_base import step_means


def test_tis_weights_the_loss_and_ratios_against_the_trainer():
    logp = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], requires_grad=True)
    sampler = torch.tensor([[-1.5, -4.0, math.nan, -3.0]])  # 3rd: not recorded (frozen elsewhere)
    trainer = logp.detach().clone()
    mask = torch.ones(1, 4)
    recorded = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    adv = torch.tensor([1.0])
    per_token, stats = grpo_token_loss(
        logp, sampler, adv, mask, 0.2, recorded=recorded, trainer_logp=trainer, tis_cap=3.0
    )
    weights = [math.exp(0.5), 3.0, 1.0, 1.0]  # exp(2) = 7.4 truncated at the cap
    assert per_token.detach()[0].tolist() == pytest.approx([-w for w in weights])  # ratio 1
    assert stats["ratio_mean"].item() == pytest.approx(1.0)
    assert stats["tis_mean"].item() == pytest.approx((math.exp(0.5) + 3.0 + 1.0) / 3)
    assert stats["tis_capped_frac"].item() == pytest.approx(1 / 3)
    assert stats["logp_diff_mean"].item() == pytest.approx((0.5 + 2.0 + 0.0) / 3)
    # off: the ratio is against the sampler's recorded logprobs, unweighted
    per_token, stats = grpo_token_loss(logp, sampler, adv, mask, 10.0, recorded=recorded)
    assert per_token.detach()[0, 0].item() == pytest.approx(-math.exp(0.5))
    assert "tis_mean" not in stats


def _shifted(rows: list[dict], shift: float) -> list[dict]:
    """The same episodes as a sampler whose logprobs are `shift` below the trainer's."""
    out = []
    for row in rows:
        turns = json.loads(row["turns_json"])
        for t in turns:
            t["logprobs"] = [x - shift for x in t["logprobs"]]
        out.append({**row, "turns_json": json.dumps(turns)})
    return out


def test_a_grpo_step_logs_tis_per_step(tiny_model_dir, tiny_tokenizer, tmp_path):
    rows = _shifted(_id_rows(tiny_tokenizer, tiny_model_dir, True), 0.3)
    traj, band = pd.DataFrame(rows), band_frame(["t1"], [True])
    base = {"phases": "grpo", "grpo_max_steps": 1, "per_device_batch_size": 8, "bf16": False}
    on = train_stage(traj, band, TrainConfig(**base, tis_cap=2.0), tiny_model_dir, tmp_path / "a")
    row = on.metrics[0]
    assert row["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # against the trainer's own
    assert row["logp_diff_mean"] == pytest.approx(0.3, abs=1e-3)
    assert row["tis_mean"] == pytest.approx(math.exp(0.3), abs=1e-3)
    assert row["tis_capped_frac"] == 0.0
    assert not math.isnan(on.metrics_frame()["tis_mean"].iloc[0])
    off = train_stage(traj, band, TrainConfig(**base), tiny_model_dir, tmp_path / "b")
    assert off.metrics[0]["ratio_mean"] == pytest.approx(math.exp(0.3), abs=1e-3)
    assert math.isnan(off.metrics_frame()["tis_mean"].iloc[0])


def test_tis_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="tis_cap must be >= 1"):
        TrainConfig(tis_cap=0.5)


def test_no_weighted_token_gives_no_tis_figure_not_a_zero():
    """Every sampler logprob unknown to TIS (e.g. all turns under the tool-call grammar): the
    means are NaN with a token count of 0, not a 0.0 that reads like a measurement."""
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    sampler = torch.tensor([[math.nan, math.nan]])
    _, stats = grpo_token_loss(
        logp,
        sampler,
        torch.tensor([1.0]),
        torch.ones(1, 2),
        0.2,
        recorded=torch.zeros(1, 2),
        trainer_logp=logp.detach().clone(),
        tis_cap=2.0,
    )
    assert stats["tis_tokens"].item() == 0
    assert math.isnan(stats["tis_mean"].item()) and math.isnan(stats["logp_diff_mean"].item())


def test_a_steps_tis_mean_is_over_its_weighted_tokens_not_its_micro_batches():
    # two micro-batches: 3 weighted tokens at mean 1.5, then one with none (NaN)
    noted = {"tis_mean": [1.5, math.nan], "tis_tokens": [3.0, 0.0], "clip_frac": [0.2, 0.4]}
    step = step_means(noted)
    assert step["tis_mean"] == 1.5 and step["tis_tokens"] == 3.0
    assert step["clip_frac"] == pytest.approx(0.3)  # per-batch stats stay averaged
    assert step_means({"tis_mean": [2.0, 1.0], "tis_tokens": [1.0, 3.0]})["tis_mean"] == 1.25
    assert math.isnan(step_means({"tis_mean": [math.nan], "tis_tokens": [0.0]})["tis_mean"])


def test_stage_summary_says_why_there_is_no_tis_mean():
    counts = {
        "grpo_logprobs_recorded": 0,
        "grpo_logprobs_frozen": 40,
        "grpo_logprobs_constrained": 5,
    }
    none = [{"phase": "grpo", "tis_mean": math.nan, "tis_tokens": 0.0}]
    out = tis_summary(none, counts)
    assert out["tis_mean"] is None and out["tis_tokens"] == 0
    assert "0 of 40 action tokens" in out["tis_note"] and "tool_choice: required" in out["tis_note"]
    some = [
        {"phase": "grpo", "tis_mean": 1.2, "tis_tokens": 10.0},
        {"phase": "grpo", "tis_mean": math.nan, "tis_tokens": 0.0},
        {"phase": "grpo", "tis_mean": 1.0, "tis_tokens": 30.0},
    ]
    assert tis_summary(some, counts) == {"tis_mean": 1.05, "tis_tokens": 40}
    assert tis_summary([{"phase": "sft", "loss": 1.0}], counts) == {}  # TIS off / no GRPO


def test_a_grpo_step_on_constrained_turns_only_logs_no_tis_mean(
    tiny_model_dir, tiny_tokenizer, tmp_path
):
    rows = _id_rows(tiny_tokenizer, tiny_model_dir, True)
    for row in rows:  # every turn sampled under the tool-call grammar
        turns = [{**t, "logprobs_constrained": True} for t in json.loads(row["turns_json"])]
        row["turns_json"] = json.dumps(turns)
    traj, band = pd.DataFrame(rows), band_frame(["t1"], [True])
    cfg = TrainConfig(
        phases="grpo", grpo_max_steps=1, per_device_batch_size=8, bf16=False, tis_cap=2.0
    )
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained", result.reason
    frame = result.metrics_frame()
    assert frame["tis_tokens"].iloc[0] == 0 and math.isnan(frame["tis_mean"].iloc[0])
    summary = tis_summary(result.metrics, result.counts)
    assert summary["tis_mean"] is None and "grammar" in summary["tis_note"]
