"""Which dtype each part of the policy is held and computed in, chosen per device, measured.

    plan = precision_plan(cfg.bf16, cfg.lora, device="cuda" | "cpu", cpu_amx=cpu_has_amx())

The rule that does not change: what is trained is held in float32 (master weights: an update
below ~1/256 of a bf16 weight rounds away; tests/training/test_master_weights.py). What changes
per device is the rest:

| device | full fine-tune | LoRA |
|---|---|---|
| CUDA with bf16 | fp32 weights, bf16 autocast | frozen base bf16, adapters fp32, bf16 autocast |
| CPU with AMX (`amx_bf16`) | fp32 weights, bf16 autocast | frozen base bf16, adapters fp32, bf16 autocast |
| CPU without AMX | fp32, no autocast | fp32 base and adapters, no autocast |

On a CPU without AMX bf16 matmuls have no matrix unit (avx512_bf16 only converts and dots), so
bf16 is slower than fp32 there: one LoRA step of Qwen2.5-Coder-1.5B cut to 2 layers, 512 tokens,
2 threads, took 8.8-32 s in fp32 and 77-92 s with a bf16 frozen base on this host (shared, so
ranges). `train.bf16: true` still forces bf16 there; `false` forces fp32 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class PrecisionPlan:
    """How the policy is held and computed; `why` says which rule chose it."""

    frozen_dtype: torch.dtype  # the LoRA base's weights (what is not trained)
    trained_dtype: torch.dtype  # what the optimizer updates: always float32
    autocast_bf16: bool  # the Trainer's bf16 flag: forward and backward under bf16 autocast
    why: str

    def describe(self) -> str:
        name = {torch.float32: "fp32", torch.bfloat16: "bf16"}
        return (
            f"frozen {name.get(self.frozen_dtype, self.frozen_dtype)}, trained "
            f"{name.get(self.trained_dtype, self.trained_dtype)}, "
            f"{'bf16 autocast' if self.autocast_bf16 else 'no autocast'} ({self.why})"
        )


def cpu_has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU has AMX bf16 tiles (the `amx_bf16` flag): bf16 matmuls run on them."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return "amx_bf16" in line.split()
    return False


def cuda_bf16() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def precision_plan(bf16: bool | None, lora: bool, device: str, cpu_amx: bool) -> PrecisionPlan:
    """The plan for `device` ("cuda" or "cpu"); `bf16` is train.bf16 (None: the device decides)."""
    if bf16 is None:
        if device == "cuda":
            on, why = True, "CUDA with bf16"
        elif cpu_amx:
            on, why = True, "CPU with AMX bf16"
        else:
            on, why = False, "CPU without AMX: bf16 is slower than fp32 here"
    else:
        on, why = bool(bf16), f"train.bf16: {str(bool(bf16)).lower()}"
    frozen = torch.bfloat16 if on and lora else torch.float32
    return PrecisionPlan(frozen, torch.float32, on, why)


def plan_for(bf16: bool | None, lora: bool) -> PrecisionPlan:
    """The plan on this process's device."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and bf16 is None and not cuda_bf16():
        return PrecisionPlan(torch.float32, torch.float32, False, "CUDA without bf16")
    return precision_plan(bf16, lora, device, cpu_has_amx())
