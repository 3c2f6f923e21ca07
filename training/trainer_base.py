"""What SFT and GRPO share: TrainingArguments from a TrainConfig, per-step metrics rows, loading
the policy (full or LoRA) and writing the checkpoint folder the next rollout serves.

Both phases go through `transformers.Trainer`, so `accelerate launch` (DDP, DeepSpeed ZeRO-3),
gradient accumulation, bf16 and gradient checkpointing come from it unchanged.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from clawloop.training.config import TrainConfig
from clawloop.training.precision import PrecisionPlan, plan_for


class TrainError(RuntimeError):
    """Training could not start or finish; the message says where and what to check."""


def precision(cfg: TrainConfig) -> PrecisionPlan:
    """This device's precision plan for `cfg` (training/precision.py)."""
    return plan_for(cfg.bf16, cfg.lora)


def bf16_enabled(cfg: TrainConfig) -> bool:
    """bf16 autocast for the forward and backward: the precision plan's choice."""
    return precision(cfg).autocast_bf16


def checkpointing_enabled(cfg: TrainConfig) -> bool:
    """Gradient checkpointing: train.gradient_checkpointing, else on when training on CUDA."""
    if cfg.gradient_checkpointing is not None:
        return cfg.gradient_checkpointing
    return torch.cuda.is_available()


def training_arguments(cfg: TrainConfig, phase: str, out_dir: Path) -> TrainingArguments:
    """TrainingArguments for one phase (`sft` or `grpo`); nothing is reported to trackers."""
    lr = cfg.sft_learning_rate if phase == "sft" else cfg.grpo_learning_rate
    epochs = cfg.sft_epochs if phase == "sft" else cfg.grpo_epochs
    max_steps = cfg.sft_max_steps if phase == "sft" else cfg.grpo_max_steps
    # only passed when on: the flag is being renamed (activation_checkpointing) in transformers v5
    extra: dict[str, Any] = {"gradient_checkpointing": True} if checkpointing_enabled(cfg) else {}
    if bf16_enabled(cfg) and not torch.cuda.is_available():
        extra["use_cpu"] = True  # bf16 autocast on the CPU (tests, small runs) needs it said
    return TrainingArguments(
        **extra,
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=cfg.per_device_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=lr,
        num_train_epochs=epochs,
        max_steps=max_steps,
        max_grad_norm=cfg.max_grad_norm,
        weight_decay=cfg.weight_decay,
        warmup_steps=cfg.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        lr_scheduler_type=cfg.lr_scheduler_type,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=bf16_enabled(cfg),
        deepspeed=cfg.deepspeed,
        logging_steps=cfg.logging_steps,
        save_strategy="no",
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


# Stats that are means over some of a step's tokens: taken over those tokens (weighted by the
# count stat named here), not over micro-batches, so a micro-batch with none does not pull the
# step's mean toward its NaN or 0. The count stats themselves are summed over the step.
TOKEN_WEIGHTED = {
    "tis_mean": "tis_tokens",
    "tis_capped_frac": "tis_tokens",
    "logp_diff_mean": "tis_tokens",
}
COUNTS = frozenset(TOKEN_WEIGHTED.values())


def step_means(noted: dict[str, list[float]]) -> dict[str, float]:
    """One step's value of each stat its micro-batches noted: counts summed, token-weighted
    means over the tokens they cover (NaN when the step had none), other stats averaged."""
    out: dict[str, float] = {}
    for key, vals in noted.items():
        weight_key = TOKEN_WEIGHTED.get(key)
        if key in COUNTS:
            out[key] = float(sum(vals))
        elif weight_key is not None and len(noted.get(weight_key, ())) == len(vals):
            pairs = [(v, w) for v, w in zip(vals, noted[weight_key], strict=True) if w > 0]
            total = sum(w for _, w in pairs)
            out[key] = sum(v * w for v, w in pairs) / total if total else math.nan
        else:
            out[key] = sum(vals) / len(vals)
    return out


class MetricsMixin:
    """Mixed into a Trainer: counts tokens per step and turns each training log into a row."""

    phase: str = ""
    kept_groups: int = 0

    def _init_metrics(self, phase: str, kept_groups: int = 0) -> None:
        self.phase = phase
        self.kept_groups = kept_groups
        self.metric_rows: list[dict[str, Any]] = []
        self._tokens = 0
        self._action_tokens = 0
        self._extra: dict[str, list[float]] = {}

    def _count(self, inputs: dict[str, torch.Tensor]) -> None:
        mask = inputs.get("attention_mask")
        self._tokens += int(mask.sum().item() if mask is not None else inputs["input_ids"].numel())
        self._action_tokens += int(inputs["labels"][:, 1:].ne(-100).sum().item())

    def _note(self, **values: float) -> None:
        for k, v in values.items():
            self._extra.setdefault(k, []).append(float(v))

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs:
            row = {
                "step": int(self.state.global_step),
                "phase": self.phase,
                "loss": float(logs["loss"]),
                "tokens": self._tokens,
                "action_tokens": self._action_tokens,
                "kept_groups": int(self.kept_groups),
                "grad_norm": float(logs.get("grad_norm", math.nan)),
                "lr": float(logs.get("learning_rate", math.nan)),
            }
            for k, value in step_means(self._extra).items():
                row[k] = logs[k] = value
            self.metric_rows.append(row)
            self._tokens = self._action_tokens = 0
            self._extra = {}
        super().log(logs, *args, **kwargs)


@dataclass
class PolicyRef:
    """Where a phase starts from: a full model folder, plus a LoRA adapter folder to continue."""

    model_dir: Path
    adapter_dir: Path | None = None


def load_tokenizer(model_dir: Path):
    from clawloop.training.gguf import model_folder

    tok = AutoTokenizer.from_pretrained(str(model_folder(model_dir)))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_policy(ref: PolicyRef, cfg: TrainConfig):
    """The trainable model: all weights, or a LoRA adapter (new, or continued from `adapter_dir`).

    What is trained is always float32, whatever the checkpoint's dtype: the master weights. A
    LoRA adapter's frozen base is held in the precision plan's frozen dtype (bf16 on CUDA and on
    a CPU with AMX: half the memory, the matrix units; fp32 elsewhere). With bf16 on,
    the Trainer runs the forward and backward under bf16 autocast (accelerate's mixed precision;
    DeepSpeed keeps its own fp32 copy the same way), while AdamW updates the fp32 weights. Loaded
    in bf16 instead, an update below ~1/256 of a weight rounds away: one step at lr 1e-6 changed
    2 % of the tiny model's parameters (tests/training/test_master_weights.py). What is trained
    is written in float32 too (full weights, adapters), so the next phase and iteration continue
    from unrounded weights; a merged LoRA model is the next iteration's frozen base, not trained,
    and is written in train.merged_dtype."""
    plan = precision(cfg)
    dtype = plan.frozen_dtype if cfg.lora else plan.trained_dtype
    try:
        model = AutoModelForCausalLM.from_pretrained(str(ref.model_dir), dtype=dtype)
    except OSError as exc:
        raise TrainError(
            f"cannot load base model from {ref.model_dir}: {exc}; pass a folder with config.json "
            "and weights (build the tiny one with `python -m training.tiny_model DIR`)"
        ) from exc
    if checkpointing_enabled(cfg):
        model.config.use_cache = False
    if not cfg.lora:
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    if checkpointing_enabled(cfg):
        model.enable_input_require_grads()
    if ref.adapter_dir is not None:
        return _trained_fp32(
            PeftModel.from_pretrained(model, str(ref.adapter_dir), is_trainable=True)
        )
    targets: str | list[str] = cfg.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )
    return _trained_fp32(get_peft_model(model, lora))


def _trained_fp32(model):
    """Every trainable parameter in float32 (the master-weight rule), the frozen ones as loaded."""
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model


def is_partitioned(model) -> bool:
    """True when DeepSpeed ZeRO-3 holds the weights partitioned across ranks (`ds_id` params)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


@contextlib.contextmanager
def gathered_weights(model) -> Iterator[None]:
    """The full weights on every rank for a pass outside the DeepSpeed engine (the phase-start
    logprobs): ZeRO-3's partitioned parameters gathered, read-only, released after; a no-op
    for an unpartitioned model. Every rank must enter it (a collective)."""
    if not is_partitioned(model):
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=None):
        yield


@contextlib.contextmanager
def without_zero_init() -> Iterator[None]:
    """Load a model whole on this rank although DeepSpeed ZeRO-3 is configured (transformers
    would partition it at load through `zero.Init`): for the merge, which runs on rank 0."""
    from transformers.integrations import deepspeed as hf_ds

    ref = getattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)
    config = ref() if ref is not None else None
    if config is None:
        yield
        return
    hf_ds.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_ds.set_hf_deepspeed_config(config)


SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}


def held_dtypes(model_dir: Path) -> set[str]:
    """The dtypes of the floating-point tensors in a folder's safetensors files, read from their
    headers (no weights loaded)."""
    found: set[str] = set()
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with f.open("rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, info in header.items():
            if name != "__metadata__" and info["dtype"] in SAFETENSORS_DTYPES:
                found.add(SAFETENSORS_DTYPES[info["dtype"]])
    return found


def stamp_dtype(model_dir: Path) -> str:
    """Make config.json say the dtype the folder's weights really hold (a ZeRO-3 16-bit save or a
    bf16-base merge writes 16-bit tensors under a config that may say float32; vLLM's `--dtype
    auto` reads it) and return it; "mixed" when the tensors differ (config left as it is)."""
    dtypes = held_dtypes(model_dir)
    if len(dtypes) != 1:
        return "mixed" if dtypes else ""
    (dtype,) = dtypes
    path = Path(model_dir) / "config.json"
    if path.is_file():
        config = json.loads(path.read_text())
        if config.get("dtype") != dtype or config.get("torch_dtype", dtype) != dtype:
            config["dtype"] = dtype
            config.pop("torch_dtype", None)
            path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return dtype


def merge_adapter(base_dir: Path, adapter_dir: Path, out_dir: Path, dtype: str = "float32") -> None:
    """The adapter merged into its base, from their folders: the base loaded whole in float32
    (so the adapter's delta is not rounded into a 16-bit grid), on this rank alone even under
    ZeRO-3 (the adapter folder was written gathered), then saved in `dtype` (train.merged_dtype:
    bfloat16 rounds the merged sum once, as a server that serves bf16 would at load). What the
    trainer held in memory (a bf16 frozen base, partitioned weights) does not matter."""
    from peft import PeftModel

    with without_zero_init():
        base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.to(getattr(torch, dtype)).save_pretrained(str(out_dir))


def save_policy(
    trainer: Trainer, tokenizer, out_dir: Path, cfg: TrainConfig, merge: bool = True
) -> PolicyRef:
    """Write `out_dir/model` (servable full weights) and, with LoRA, `out_dir/adapter`.

    With LoRA the merged model is written only when `merge` (the stage's last phase) and
    `cfg.merge_lora`; otherwise the policy is the adapter on its base, which the next phase
    continues (a merged copy would be a whole model on disk that nothing serves)."""
    model_dir, adapter_dir = out_dir / "model", None
    if trainer.is_world_process_zero():  # one rank clears; the others wait, then all save
        for d in (model_dir, out_dir / "adapter"):
            if d.exists():
                shutil.rmtree(d)
    trainer.accelerator.wait_for_everyone()
    if not cfg.lora:
        trainer.save_model(str(model_dir))  # gathers ZeRO-3 shards on save
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(str(model_dir))
            stamp_dtype(model_dir)  # ZeRO-3 saves 16-bit weights under an fp32 config
        trainer.accelerator.wait_for_everyone()  # no rank reads the folder before it is whole
        return PolicyRef(model_dir)
    adapter_dir = out_dir / "adapter"
    trainer.save_model(str(adapter_dir))  # the adapter, gathered under ZeRO-3
    base = Path(trainer.accelerator.unwrap_model(trainer.model).peft_config["default"]
                .base_model_name_or_path)  # fmt: skip
    merged = cfg.merge_lora and merge
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(adapter_dir))
        if merged:
            merge_adapter(base, adapter_dir, model_dir, cfg.merged_dtype)
            tokenizer.save_pretrained(str(model_dir))
            stamp_dtype(model_dir)
    trainer.accelerator.wait_for_everyone()  # the merged folder exists before any rank reads it
    if not merged:
        return PolicyRef(base, adapter_dir)
    return PolicyRef(model_dir, None)
