"""Issue 11 item 6: GRPO's KL reference is the phase's start model, as documented: with a LoRA
adapter continued from the previous iteration it is base + that adapter, not the base with the
adapter switched off. In one stage GRPO runs first, so its start is the rollout policy."""

from __future__ import annotations

import pandas as pd
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.stage import train_stage


def _frames():
    rows = [episode_row("t1", i, r, variant=i) for i, r in enumerate([1.0, 0.0, 0.0])]
    return pd.DataFrame(rows), band_frame(["t1"], [True])


def _grpo_kl(result) -> list[float]:
    return [r["kl"] for r in result.metrics if r["phase"] == "grpo"]


def test_kl_reference_of_a_continued_adapter_is_the_phase_start(tiny_model_dir, tmp_path):
    traj, band = _frames()
    lora = dict(lora=True, lora_r=4, merge_lora=False, per_device_batch_size=3)
    kl = dict(kl_beta=0.5, grpo_max_steps=2, grpo_learning_rate=1e-2)
    # Both phases in one stage: GRPO first, from the rollout policy; SFT after it.
    cfg = TrainConfig(phases="grpo+sft", sft_max_steps=3, sft_learning_rate=5e-2, **lora, **kl)
    result = train_stage(traj, band, cfg, tiny_model_dir, tmp_path / "one")
    assert result.phases_run == ["grpo", "sft"], result.reason
    first, last = _grpo_kl(result)
    assert abs(first) < 1e-6, first
    assert last > 1e-6  # and the KL grows as GRPO moves away from its start
    # An adapter continued from the previous iteration: the same.
    sft = train_stage(
        traj, band, TrainConfig(phases="sft", sft_max_steps=3, sft_learning_rate=5e-2, **lora),
        tiny_model_dir, tmp_path / "iter-1",
    )  # fmt: skip
    again = train_stage(
        traj, band, TrainConfig(phases="grpo", **lora, **kl), tiny_model_dir,
        tmp_path / "iter-2", init_adapter=sft.adapter_dir,
    )  # fmt: skip
    assert abs(_grpo_kl(again)[0]) < 1e-6, _grpo_kl(again)
