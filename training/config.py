"""The train stage's settings: one pydantic model, one line of help per field, defaults for the CPU demo.

Every field becomes a CLI flag of `clawloop train` (flows/cli/train.py; the help text is the
flag's help), and it is a run's YAML `train:` section itself (tasks/config.py validates the section
into this class, so a typo or a bad value fails when the file loads). GPU cluster values are in
the README.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

PHASES = ("sft", "grpo", "grpo+sft")
# The spelling of both phases before GRPO ran first (training/stage.py says why); read as grpo+sft.
OLD_BOTH = "sft+grpo"
REWARDS = ("outcome", "fraction")
TURN_SOURCES = ("sampled", "template_ok")
LAUNCHERS = ("auto", "accelerate", "torchrun")


class TrainConfigError(ValueError):
    """A train setting is out of range; the message names the field and the allowed values."""


def _f(default: Any, help: str) -> Any:
    return Field(default, description=help)


class TrainConfig(BaseModel):
    """Settings of the train stage (GRPO on rollout groups, then SFT on successes). A bad value is
    a ValueError naming the field (pydantic's ValidationError; from_dict: a TrainConfigError)."""

    model_config = ConfigDict(extra="forbid")  # a typo in the run YAML's train: is an error

    phases: str = _f(
        "grpo+sft",
        "what to run: sft | grpo | grpo+sft (GRPO on the rollout policy, on-policy, then SFT on "
        "its result; the older spelling sft+grpo means the same)",
    )
    # --- data
    split: str = _f("train", "only trajectories of this split are trained on")
    max_seq_len: int = _f(4096, "longest token sequence; longer ones are cut at the right end")
    max_truncated_share: float = _f(
        0.05,
        "a phase that loses more than this share of its supervised tokens to max_seq_len says "
        "so in the stage's status (every cut turn is counted either way)",
    )
    turn_source: Literal["sampled", "template_ok"] = _f(
        "template_ok",
        "turns whose sampled text the server did not return (tool calls parsed, no token ids): "
        "template_ok = train the chat template's rendering of the parsed reply where it "
        "round-trips through the agent's tool-call parser; sampled = drop them",
    )
    use_recorded_tokens: bool = _f(
        True,
        "build sequences from recorded token ids when present (else the tokenised sampled text)",
    )
    # --- optimisation (shared)
    per_device_batch_size: int = _f(2, "sequences per device per micro-batch")
    gradient_accumulation_steps: int = _f(1, "micro-batches per optimizer step")
    max_grad_norm: float = _f(1.0, "gradient clipping norm (0 disables)")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    warmup_ratio: float = _f(0.0, "fraction of steps with linear learning-rate warm-up")
    lr_scheduler_type: str = _f(
        "constant", "transformers scheduler name: constant | linear | cosine"
    )
    seed: int = _f(0, "seed for data order and initialisation of LoRA weights")
    bf16: bool | None = _f(
        None,
        "bf16 autocast (and, with LoRA, a bf16 frozen base; trained weights stay fp32); None = "
        "the device decides: on for CUDA with bf16 and CPUs with AMX, off for CPUs without "
        "AMX, where bf16 is slower than fp32 (training/precision.py)",
    )
    gradient_checkpointing: bool | None = _f(
        None, "recompute activations to save memory; None = on when training on CUDA"
    )
    num_processes: int = _f(
        1,
        "processes (GPUs) to train on; > 1, train.deepspeed or train.accelerate_config runs the "
        "train stage under a launcher (train.launcher) as a subprocess on this host, whose "
        "checkpoint and metrics the stage reads back (training/launch.py)",
    )
    deepspeed: str | None = _f(
        None,
        "DeepSpeed JSON for the Trainer (e.g. training/configs/zero3.json): launched with "
        "`accelerate launch --use_deepspeed --deepspeed_config_file` (needs CUDA)",
    )
    accelerate_config: str | None = _f(
        None,
        "an accelerate config YAML (e.g. training/configs/zero3.yaml) for `accelerate launch "
        "--config_file`; train.num_processes overrides its num_processes",
    )
    launcher: Literal["auto", "accelerate", "torchrun"] = _f(
        "auto",
        "what starts the processes: accelerate (`accelerate launch`), torchrun, or auto = "
        "accelerate, except torchrun for num_processes > 1 on a host without CUDA (accelerate "
        "starts one CPU process without MPI)",
    )
    # --- both phases
    pack: bool = _f(
        False,
        "SFT and GRPO: pack each micro-batch's sequences into one row (position ids restart per "
        "sequence, attention stays within each), so no pad tokens are computed; same tokens, "
        "same per-token advantages and ratios, same loss",
    )
    # --- SFT
    sft_learning_rate: float = _f(1e-4, "SFT learning rate (GPU profile: 1e-5 full, 1e-4 LoRA)")
    sft_epochs: float = _f(1.0, "passes over the successful trajectories")
    sft_max_steps: int = _f(-1, "stop SFT after this many optimizer steps (-1: epochs decide)")
    # --- GRPO
    reward: Literal["outcome", "fraction"] = _f(
        "outcome",
        "GRPO reward per episode: outcome = 1.0 if the task passed else 0.0; "
        "fraction = the recorded fraction of checks passed (shaped)",
    )
    grpo_learning_rate: float = _f(1e-5, "GRPO learning rate (GPU profile: 1e-6 full, 1e-5 LoRA)")
    grpo_epochs: float = _f(1.0, "passes over the kept rollout groups")
    grpo_max_steps: int = _f(-1, "stop GRPO after this many optimizer steps (-1: epochs decide)")
    clip_eps: float = _f(0.2, "PPO clip range: ratio is clipped to [1-clip_eps, 1+clip_eps]")
    adv_eps: float = _f(1e-4, "epsilon in (r - mean) / (std + eps)")
    min_group_std: float = _f(1e-6, "groups whose reward std is at or below this are dropped")
    tis_cap: float | None = _f(
        None,
        "truncated importance sampling (TRL's vllm_importance_sampling_cap; 3.0 there): GRPO's "
        "ratio is taken against the trainer's own logprobs of the rollout policy and each token's "
        "loss is weighted by min(exp(trainer - sampler), tis_cap), correcting what the sampler "
        "(vLLM's kernels, bf16) computed differently; logged per step (tis_mean, "
        "tis_capped_frac, logp_diff_mean); None = off: the ratio is against the sampler's logprobs",
    )
    kl_beta: float = _f(
        0.0,
        "weight of the KL penalty to the reference: the phase's start model (a continued LoRA "
        "adapter included), its logprobs frozen once before the first step; 0 = no KL",
    )
    # --- LoRA
    lora: bool = _f(False, "train a LoRA adapter (peft) instead of all weights")
    lora_r: int = _f(16, "LoRA rank")
    lora_alpha: int = _f(32, "LoRA alpha")
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lora_target_modules: str = _f("all-linear", "peft target modules (comma list or all-linear)")
    merge_lora: bool = _f(
        True,
        "also write the merged full model (servable by any server) after the stage's last phase; "
        "the adapters are kept too",
    )
    merged_dtype: Literal["float32", "bfloat16"] = _f(
        "float32",
        "the dtype the merged model is written in (merged in float32 either way): bfloat16 halves "
        "its disk where the server serves bf16 anyway (vLLM's --dtype auto does for a float32 "
        "checkpoint) and the next iteration's trainer then starts from the weights it sampled "
        "with; float32 keeps the delta's bits below bf16's rounding for the next iteration",
    )
    # --- logging
    logging_steps: int = _f(1, "one metrics row every this many optimizer steps")
    # --- where the pipeline starts (tasks/policy.py reads it; `clawloop train` has its own
    # required --base-model, which sets it)
    base_model: str | None = _f(
        None, "policy checkpoint to start from; None = the tiny offline model"
    )

    @field_validator("phases", mode="before")
    @classmethod
    def _both_phases(cls, value: Any) -> Any:
        """`sft+grpo` (a run's YAML or stored config from before GRPO ran first) is `grpo+sft`:
        the same two phases, in the only order that keeps GRPO on-policy."""
        return "grpo+sft" if value == OLD_BOTH else value

    @model_validator(mode="after")
    def _in_range(self) -> TrainConfig:
        if self.phases not in PHASES:
            raise TrainConfigError(f"TrainConfig.phases={self.phases!r}: use one of {PHASES}")
        if self.reward not in REWARDS:
            raise TrainConfigError(f"TrainConfig.reward={self.reward!r}: use one of {REWARDS}")
        if self.launcher not in LAUNCHERS:
            raise TrainConfigError(
                f"TrainConfig.launcher={self.launcher!r}: use one of {LAUNCHERS}"
            )
        if self.turn_source not in TURN_SOURCES:
            raise TrainConfigError(
                f"TrainConfig.turn_source={self.turn_source!r}: use one of {TURN_SOURCES}"
            )
        for name in (
            "per_device_batch_size",
            "gradient_accumulation_steps",
            "max_seq_len",
            "num_processes",
        ):
            if getattr(self, name) < 1:
                raise TrainConfigError(
                    f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}"
                )
        if not 0 < self.clip_eps < 1:
            raise TrainConfigError(f"TrainConfig.clip_eps must be in (0, 1), got {self.clip_eps}")
        if not 0 <= self.max_truncated_share <= 1:
            raise TrainConfigError(
                f"TrainConfig.max_truncated_share must be in [0, 1], got {self.max_truncated_share}"
            )
        if self.tis_cap is not None and not self.tis_cap >= 1:
            raise TrainConfigError(
                f"TrainConfig.tis_cap must be >= 1 (e.g. 2 or 3) or null (off), got {self.tis_cap}"
            )
        if self.kl_beta < 0:
            raise TrainConfigError(f"TrainConfig.kl_beta must be >= 0, got {self.kl_beta}")
        return self

    @property
    def run_sft(self) -> bool:
        return "sft" in self.phases

    @property
    def run_grpo(self) -> bool:
        return "grpo" in self.phases

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a YAML/JSON mapping; unknown keys are an error that lists the known ones."""
        known = set(cls.model_fields)
        unknown = sorted(set(data) - known)
        if unknown:
            raise TrainConfigError(f"unknown train settings {unknown}; known: {sorted(known)}")
        try:
            return cls(**data)
        except ValidationError as exc:
            raise TrainConfigError(
                "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            ) from None

    def help_lines(self) -> dict[str, str]:
        return {name: info.description or "" for name, info in type(self).model_fields.items()}
