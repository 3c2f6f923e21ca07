"""The memory plan per GPU (weights, grads, optimizer, activations, logits) for Qwen3-8B from its
config alone, `clawloop plan`, and a full fine-tune refused before it loads when it cannot fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawloop.flows.cli.train import main as train_cli
from clawloop.training.config import TrainConfig
from clawloop.training.memory import GiB, full_finetune_refusal, memory_plan, shape_of

QWEN3_8B = Path(__file__).resolve().parents[2] / "training/configs/qwen3-8b.config.json"


@pytest.fixture(scope="module")
def qwen3_8b():
    return shape_of(QWEN3_8B)


def _plan(shape, lora, gpus, zero3):
    return memory_plan(shape, lora=lora, gpus=gpus, zero3=zero3, seq_len=4096, batch=1,
                       checkpointing=True, bf16=True, gpu_bytes=80 * GiB)  # fmt: skip


def test_qwen3_8b_plans(qwen3_8b):
    assert 8.1e9 < qwen3_8b.params < 8.3e9 and 40e6 < qwen3_8b.lora_params < 50e6
    full_1 = _plan(qwen3_8b, False, 1, False)
    assert full_1.optimizer == 8 * qwen3_8b.params and not full_1.fits  # 16 bytes/param
    full_z3 = _plan(qwen3_8b, False, 8, True)
    assert full_z3.fits and full_z3.optimizer == pytest.approx(12 * qwen3_8b.params / 8)
    lora_1 = _plan(qwen3_8b, True, 1, False)
    assert lora_1.fits and lora_1.weights == pytest.approx(2 * qwen3_8b.params + 4 * 43.6e6,
                                                           rel=0.01)  # fmt: skip
    # checkpointing keeps one layer's activations, not all 36
    no_ckpt = memory_plan(qwen3_8b, lora=True, gpus=1, zero3=False, seq_len=4096, batch=1,
                          checkpointing=False, bf16=True, gpu_bytes=80 * GiB)  # fmt: skip
    assert no_ckpt.activations > 10 * lora_1.activations


def test_a_full_finetune_that_cannot_fit_is_refused(tiny_model_dir):
    cfg = TrainConfig()
    msg = full_finetune_refusal(cfg, tiny_model_dir, 0.001 * GiB)
    assert "GiB per GPU" in msg and "train.lora: true" in msg and "clawloop plan" in msg
    assert full_finetune_refusal(cfg, tiny_model_dir, 80 * GiB) == ""
    assert full_finetune_refusal(TrainConfig(lora=True), tiny_model_dir, 0.001 * GiB) == ""
    with pytest.raises(Exception, match="qwen3-8b"):
        raise RuntimeError(full_finetune_refusal(TrainConfig(), QWEN3_8B, 80 * GiB))


def test_plan_cli_prints_the_table(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"train:\n  base_model: {QWEN3_8B}\n  num_processes: 8\n")
    assert train_cli(["plan", "--config", str(cfg), "--matrix"]) == 0
    out = capsys.readouterr().out
    for word in ("8.19B parameters", "weights", "optimizer", "activations", "logits", "NO (80)"):
        assert word in out, out
    assert out.count("| qwen3-8b") == 6
