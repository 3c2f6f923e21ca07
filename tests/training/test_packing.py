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


def _grpo_samples(model, tok):
    """Three rollouts of one group (advantages of both signs), cut to different lengths, with
    old logprobs that differ from the model's (some recorded, some frozen) and a KL reference,
    so ratios move off 1, clipping engages and every per-token tensor matters."""
    from clawloop.training.grpo import freeze_old_logprobs, grpo_samples

    rows = [episode_row("t1", i, r, variant=i * 5) for i, r in enumerate([1.0, 0.0, 0.0])]
    cfg = TrainConfig(phases="grpo")
    samples, _ = grpo_samples(pd.DataFrame(rows), band_frame(["t1"], [True]), tok, cfg)
    samples = [truncate(s, len(s.input_ids) - 41 * i) for i, s in enumerate(samples)]
    gen = torch.Generator().manual_seed(0)
    for k, s in enumerate(samples):  # the first sample's logprobs "recorded", off the model's
        if k == 0:
            s.old_logprobs = [-1.0 - float(torch.rand(1, generator=gen)) for _ in s.input_ids]
    freeze_old_logprobs(model, samples, "cpu", with_ref=True)
    for s in samples[1:]:  # frozen ones moved, so the ratio is not 1 there either
        s.old_logprobs = [x + 0.3 * float(torch.randn(1, generator=gen)) for x in s.old_logprobs]
    assert len({s.advantage > 0 for s in samples}) == 2
    assert len({len(s.input_ids) for s in samples}) == 3
    return samples


def test_packed_grpo_batch_has_the_padded_batchs_loss_gradients_and_ratios(
    tiny_model_dir, tiny_tokenizer
):
    from clawloop.training.grpo import batch_token_loss

    model = load_policy(PolicyRef(tiny_model_dir), TrainConfig(bf16=False))
    samples = _grpo_samples(model, tiny_tokenizer)
    cfg = TrainConfig(phases="grpo", kl_beta=0.05, clip_eps=0.2)
    padded = SampleCollator(tiny_tokenizer.pad_token_id, with_rl=True)(samples)
    packed = SampleCollator(tiny_tokenizer.pad_token_id, with_rl=True, pack=True)(samples)
    assert packed["input_ids"].shape == (1, sum(len(s.input_ids) for s in samples))
    assert "attention_mask" not in packed

    def run(batch):
        model.zero_grad()
        per_token, stats, mask, _ = batch_token_loss(model, batch, cfg)
        loss = per_token.sum() / mask.sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return loss.item(), {k: float(v) for k, v in stats.items()}, mask.sum().item(), grads

    loss_pad, stats_pad, n_pad, g_pad = run(padded)
    loss_pack, stats_pack, n_pack, g_pack = run(packed)
    assert n_pack == n_pad  # the same action tokens
    assert stats_pad["clip_frac"] > 0 and abs(stats_pad["ratio_mean"] - 1) > 1e-3
    assert loss_pack == pytest.approx(loss_pad, rel=1e-5, abs=1e-7)
    for k in ("ratio_mean", "clip_frac", "kl", "offpolicy_frac"):
        assert stats_pack[k] == pytest.approx(stats_pad[k], rel=1e-5, abs=1e-7), k
    worst = max(float((g_pad[n] - g_pack[n]).abs().max()) for n in g_pad)
    assert worst < 1e-5
    # one advantage for the whole row (what an unpacked collator would give) differs: the
    # per-token advantages are what keeps the check from being vacuous
    wrong = {**packed, "advantages": torch.tensor([samples[0].advantage])}
    assert abs(batch_token_loss(model, wrong, cfg)[0].sum().item() / n_pack - loss_pad) > 1e-4


def test_a_packed_grpo_stage_trains_as_the_padded_one(tiny_model_dir, tiny_tokenizer, tmp_path):
    from clawloop.training.grpo import grpo_samples
    from clawloop.training.stage import make_trainer

    rows = [episode_row("t1", i, r, variant=i * 5) for i, r in enumerate([1.0, 0.0, 0.0])]
    losses = {}
    for pack in (False, True):
        cfg = TrainConfig(phases="grpo", pack=pack, grpo_max_steps=2, per_device_batch_size=3)
        samples, rep = grpo_samples(
            pd.DataFrame(rows), band_frame(["t1"], [True]), tiny_tokenizer, cfg
        )
        trainer = make_trainer(
            "grpo", samples, PolicyRef(tiny_model_dir), tiny_tokenizer, cfg, tmp_path / str(pack), 1
        )
        batch = trainer.data_collator(samples)
        assert ("position_ids" in batch) is pack and ("attention_mask" in batch) is not pack
        trainer.train()
        losses[pack] = [r["loss"] for r in trainer.metric_rows]
    assert len(losses[True]) == 2
    assert losses[True] == pytest.approx(losses[False], rel=1e-4, abs=1e-6)
