"""What SFT and GRPO share: TrainingArguments from a TrainConfig, per-step metrics rows, loading
the policy (full or LoRA) and writing the checkpoint folder the next rollout serves.

Both phases go through `transformers.Trainer`, so `accelerate launch` (DDP, DeepSpeed ZeRO-3),
gradient accumulation, bf16 and gradient checkpointing come from it unchanged.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

from clawloop.training.config import TrainConfig


class TrainError(RuntimeError):
    """Training could not start or finish; the message says where and what to check."""


def bf16_enabled(cfg: TrainConfig) -> bool:
    if cfg.bf16 is not None:
        return cfg.bf16
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def training_arguments(cfg: TrainConfig, phase: str, out_dir: Path) -> TrainingArguments:
    """TrainingArguments for one phase (`sft` or `grpo`); nothing is reported to trackers."""
    lr = cfg.sft_learning_rate if phase == "sft" else cfg.grpo_learning_rate
    epochs = cfg.sft_epochs if phase == "sft" else cfg.grpo_epochs
    max_steps = cfg.sft_max_steps if phase == "sft" else cfg.grpo_max_steps
    # only passed when on: the flag is being renamed (activation_checkpointing) in transformers v5
    extra: dict[str, Any] = {"gradient_checkpointing": True} if cfg.gradient_checkpointing else {}
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
            for k, vals in self._extra.items():
                row[k] = sum(vals) / len(vals)
                logs[k] = row[k]
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

    Always float32, whatever the checkpoint's dtype: these are the master weights. With bf16 on,
    the Trainer runs the forward and backward under bf16 autocast (accelerate's mixed precision;
    DeepSpeed keeps its own fp32 copy the same way), while AdamW updates the fp32 weights. Loaded
    in bf16 instead, an update below ~1/256 of a weight rounds away: one step at lr 1e-6 changed
    2 % of the tiny model's parameters (tests/training/test_master_weights.py). The checkpoint is
    written in float32 too, so the next phase and iteration continue from unrounded weights."""
    try:
        model = AutoModelForCausalLM.from_pretrained(str(ref.model_dir), dtype=torch.float32)
    except OSError as exc:
        raise TrainError(
            f"cannot load base model from {ref.model_dir}: {exc}; pass a folder with config.json "
            "and weights (build the tiny one with `python -m training.tiny_model DIR`)"
        ) from exc
    if cfg.gradient_checkpointing:
        model.config.use_cache = False
    if not cfg.lora:
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    if cfg.gradient_checkpointing:
        model.enable_input_require_grads()
    if ref.adapter_dir is not None:
        return PeftModel.from_pretrained(model, str(ref.adapter_dir), is_trainable=True)
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
    return get_peft_model(model, lora)


def save_policy(trainer: Trainer, tokenizer, out_dir: Path, cfg: TrainConfig) -> PolicyRef:
    """Write `out_dir/model` (servable full weights) and, with LoRA, `out_dir/adapter`."""
    model_dir, adapter_dir = out_dir / "model", None
    for d in (model_dir, out_dir / "adapter"):
        if d.exists():
            shutil.rmtree(d)
    if not cfg.lora:
        trainer.save_model(str(model_dir))  # gathers ZeRO-3 shards on save
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(str(model_dir))
        return PolicyRef(model_dir)
    adapter_dir = out_dir / "adapter"
    trainer.save_model(str(adapter_dir))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(adapter_dir))
        if cfg.merge_lora:
            merged = trainer.accelerator.unwrap_model(trainer.model)
            # merge into a copy of the weights: the trainer's model stays a live adapter
            import copy

            merged = copy.deepcopy(merged).merge_and_unload()
            merged.save_pretrained(str(model_dir))
            tokenizer.save_pretrained(str(model_dir))
    if not cfg.merge_lora:
        base = trainer.accelerator.unwrap_model(trainer.model).peft_config["default"]
        return PolicyRef(Path(base.base_model_name_or_path), adapter_dir)
    return PolicyRef(model_dir, None)
