"""SFT packing (train.pack): a micro-batch as one row, attention kept within each sequence; the
loss and gradients equal the padded batch's, and no pad token is computed."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from doubles.episodes import band_frame, episode_row

from clawloop.training.batching import SampleCollator
from clawloop.training.config import TrainConfig
from clawloop.training.sequences import truncate
from clawloop.training.sft import sft_samples
from clawloop.training.stage import train_stage
from clawloop.training.trainer_base import PolicyRef, load_policy


def _samples(tok, n=3):
    traj = pd.DataFrame([episode_row("t1", i, 1.0, variant=i * 5) for i in range(n)])
    samples, _ = sft_samples(traj, band_frame(["t1"], [True]), tok, TrainConfig())
    # cut to different lengths (each still ends inside a trained span): padding would be needed
    samples = [truncate(s, len(s.input_ids) - 37 * i) for i, s in enumerate(samples)]
    assert len({len(s.input_ids) for s in samples}) == n
    return samples


def _loss_and_grads(model, batch):
    model.zero_grad()
    extra = {"use_cache": False} if "attention_mask" not in batch else {}
    loss = model(**batch, **extra).loss
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_packed_batch_has_the_padded_batchs_loss_and_gradients(tiny_model_dir, tiny_tokenizer):
    samples = _samples(tiny_tokenizer)
    model = load_policy(PolicyRef(tiny_model_dir), TrainConfig(bf16=False))
    padded = SampleCollator(tiny_tokenizer.pad_token_id)(samples)
    packed = SampleCollator(tiny_tokenizer.pad_token_id, pack=True)(samples)
    assert packed["input_ids"].shape == (1, sum(len(s.input_ids) for s in samples))
    assert int(packed["labels"].ne(-100).sum()) == int(padded["labels"][:, 1:].ne(-100).sum())
    loss_pad, g_pad = _loss_and_grads(model, padded)
    loss_pack, g_pack = _loss_and_grads(model, packed)
    assert loss_pack == pytest.approx(loss_pad, rel=1e-5)
    worst = max(float((g_pad[n] - g_pack[n]).abs().max()) for n in g_pad)
    assert worst < 1e-5
    # without position ids the rows would attend across samples: the check is not vacuous
    mixed = {"input_ids": packed["input_ids"], "labels": packed["labels"]}
    assert abs(model(**mixed, use_cache=False).loss.item() - loss_pad) > 1e-4


def test_a_packed_sft_stage_trains(tiny_model_dir, tmp_path):
    traj = pd.DataFrame([episode_row("t1", i, 1.0, variant=i * 5) for i in range(3)])
    cfg = TrainConfig(phases="sft", pack=True, sft_max_steps=2, per_device_batch_size=3)
    result = train_stage(traj, band_frame(["t1"], [True]), cfg, tiny_model_dir, tmp_path)
    assert result.status == "trained" and len(result.metrics) == 2
    assert torch.isfinite(torch.tensor([r["loss"] for r in result.metrics])).all()
