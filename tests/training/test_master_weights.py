"""bf16 training keeps fp32 master weights: one small AdamW step moves as many parameters as fp32.

A model loaded in bf16 and stepped in bf16 rounds an update of lr 1e-6 away on almost every weight
(bf16 has 8 bits of mantissa: an update below ~1/256 of a weight's magnitude is lost). With fp32
master weights and bf16 autocast for the compute, the step lands on every weight as in fp32.
"""

from __future__ import annotations

import pandas as pd
import torch
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.sft import sft_samples
from clawloop.training.stage import make_trainer
from clawloop.training.trainer_base import PolicyRef, load_tokenizer


def changed_fraction(tiny_model_dir, tmp_path, bf16: bool) -> float:
    """Fraction of parameter elements one AdamW step at lr 1e-6 changed (SFT, tiny model)."""
    traj = pd.DataFrame([episode_row("t1", 0, 1.0), episode_row("t1", 1, 0.0, variant=1)])
    band = band_frame(["t1"], [True])
    cfg = TrainConfig(
        phases="sft", sft_max_steps=1, sft_learning_rate=1e-6, bf16=bf16, per_device_batch_size=1
    )
    tok = load_tokenizer(tiny_model_dir)
    samples, _ = sft_samples(traj, band, tok, cfg)
    trainer = make_trainer("sft", samples, PolicyRef(tiny_model_dir), tok, cfg, tmp_path)
    before = {n: p.detach().float().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    changed = total = 0
    for n, p in trainer.model.named_parameters():
        changed += int((p.detach().float() != before[n]).sum())
        total += p.numel()
    return changed / total


def test_bf16_step_moves_the_weights_fp32_moves(tiny_model_dir, tmp_path):
    fp32 = changed_fraction(tiny_model_dir, tmp_path / "fp32", bf16=False)
    bf16 = changed_fraction(tiny_model_dir, tmp_path / "bf16", bf16=True)
    print(f"changed fraction after one AdamW step at lr 1e-6: fp32 {fp32:.4f}, bf16 {bf16:.4f}")
    assert fp32 > 0.9
    assert bf16 >= 0.95 * fp32


def test_bf16_training_holds_fp32_weights(tiny_model_dir):
    from clawloop.training.trainer_base import load_policy

    model = load_policy(PolicyRef(tiny_model_dir), TrainConfig(bf16=True))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_bf16_grpo_step_trains_and_starts_at_ratio_one(tiny_model_dir, tmp_path):
    """The frozen old logprobs are taken at the training forward's precision: step 0 ratio 1."""
    traj = pd.DataFrame([episode_row("t1", i, float(i % 2), variant=i) for i in range(4)])
    cfg = TrainConfig(phases="grpo", grpo_max_steps=1, bf16=True, per_device_batch_size=4)
    from clawloop.training.stage import train_stage

    result = train_stage(traj, band_frame(["t1"], [True]), cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained"
    assert abs(result.metrics[0]["ratio_mean"] - 1.0) < 1e-3
