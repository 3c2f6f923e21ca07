"""The precision plan per device, a LoRA's frozen base in bf16 with fp32 adapters, the phase-start
pass on ZeRO-3-partitioned weights (gathered), and checkpoints that say the dtype they hold."""

from __future__ import annotations

import json
import sys
import types
from contextlib import contextmanager

import pandas as pd
import pytest
import torch
from doubles.episodes import band_frame, episode_row

from clawloop.training.config import TrainConfig
from clawloop.training.grpo import freeze_old_logprobs
from clawloop.training.precision import cpu_has_amx, precision_plan
from clawloop.training.sequences import encode_episode
from clawloop.training.stage import train_stage
from clawloop.training.trainer_base import PolicyRef, held_dtypes, load_policy, stamp_dtype

BF16, FP32 = torch.bfloat16, torch.float32


@pytest.mark.parametrize(
    ("bf16", "lora", "device", "amx", "frozen", "autocast"),
    [
        (None, True, "cuda", False, BF16, True),
        (None, False, "cuda", False, FP32, True),
        (None, True, "cpu", True, BF16, True),
        (None, False, "cpu", True, FP32, True),
        (None, True, "cpu", False, FP32, False),  # no AMX: bf16 is slower than fp32
        (None, False, "cpu", False, FP32, False),
        (True, True, "cpu", False, BF16, True),  # said explicitly: honoured
        (False, True, "cuda", False, FP32, False),
    ],
)
def test_precision_plan_per_device(bf16, lora, device, amx, frozen, autocast):
    plan = precision_plan(bf16, lora, device, amx)
    assert (plan.frozen_dtype, plan.autocast_bf16) == (frozen, autocast)
    assert plan.trained_dtype == FP32  # what is trained is always fp32


def test_amx_is_read_from_the_cpu_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu avx512f avx512_bf16\n")
    assert not cpu_has_amx(info)
    info.write_text("processor : 0\nflags : fpu avx512_bf16 amx_bf16 amx_tile\n")
    assert cpu_has_amx(info)
    assert not cpu_has_amx(tmp_path / "missing")


def test_lora_holds_a_bf16_base_and_fp32_adapters(tiny_model_dir):
    model = load_policy(PolicyRef(tiny_model_dir), TrainConfig(lora=True, bf16=True))
    trained = {p.dtype for p in model.parameters() if p.requires_grad}
    frozen = {p.dtype for p in model.parameters() if not p.requires_grad}
    assert trained == {FP32} and frozen == {BF16}
    full = load_policy(PolicyRef(tiny_model_dir), TrainConfig(bf16=True))
    assert {p.dtype for p in full.parameters()} == {FP32}


def _partition(model) -> dict:
    """Make the model look like DeepSpeed ZeRO-3 partitioned it: every weight emptied, `ds_id`
    set; returns the full tensors a gather would bring back."""
    full = {}
    for i, p in enumerate(model.parameters()):
        full[i] = p.data
        p.ds_id = i
        p.data = torch.empty(0, dtype=p.dtype)
    return full


def _fake_deepspeed(full: dict, calls: list) -> types.ModuleType:
    @contextmanager
    def gathered(params, modifier_rank=None):
        calls.append((len(params), modifier_rank))
        for p in params:
            p.data = full[p.ds_id]
        try:
            yield
        finally:
            for p in params:
                p.data = torch.empty(0, dtype=p.dtype)

    ds = types.ModuleType("deepspeed")
    ds.zero = types.SimpleNamespace(GatheredParameters=gathered)
    return ds


def test_phase_start_pass_gathers_partitioned_weights(tiny_model_dir, tiny_tokenizer, monkeypatch):
    row = episode_row("t1", 0, 1.0)
    (sample,), _ = encode_episode(tiny_tokenizer, row, 100_000)
    (plain,), _ = encode_episode(tiny_tokenizer, row, 100_000)
    cfg = TrainConfig(bf16=False)
    freeze_old_logprobs(load_policy(PolicyRef(tiny_model_dir), cfg), [plain], "cpu")
    model = load_policy(PolicyRef(tiny_model_dir), cfg)
    calls: list = []
    monkeypatch.setitem(sys.modules, "deepspeed", _fake_deepspeed(_partition(model), calls))
    assert freeze_old_logprobs(model, [sample], "cpu") > 0
    assert calls == [(len(list(model.parameters())), None)]  # gathered once, read-only
    assert sample.old_logprobs == pytest.approx(plain.old_logprobs, nan_ok=True, abs=1e-5)
    assert all(p.numel() == 0 for p in model.parameters())  # released after the pass


def test_a_checkpoint_says_the_dtype_it_holds(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    folder = tmp_path / "zero3-save"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=FP32)
    model.to(BF16).save_pretrained(str(folder))  # 16-bit tensors, as ZeRO-3's gathered save
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "float32"  # what the fp32 master model's config says
    (folder / "config.json").write_text(json.dumps(config))
    assert held_dtypes(folder) == {"bfloat16"}
    assert stamp_dtype(folder) == "bfloat16"
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"


def test_a_merged_lora_checkpoint_from_a_bf16_base(tiny_model_dir, tmp_path):
    rows = [episode_row("t1", i, float(i % 2), variant=i) for i in range(2)]
    cfg = TrainConfig(phases="sft", lora=True, bf16=True, sft_max_steps=1)
    result = train_stage(pd.DataFrame(rows), band_frame(["t1"], [True]), cfg, tiny_model_dir,
                         tmp_path)  # fmt: skip
    assert result.status == "trained", result.reason
    folder = result.checkpoint_dir
    held = held_dtypes(folder)
    assert held == {"float32"}  # merged into an fp32 load of the base: the delta is not rounded
    assert json.loads((folder / "config.json").read_text())["dtype"] == "float32"
    assert result.checkpoint_row()["dtype"] == "float32"
