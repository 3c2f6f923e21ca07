"""How much GPU memory a train config needs, per GPU, before it runs.

    plan = memory_plan(shape_of(model_dir), cfg, gpus=8, zero3=True, device="cuda")
    print(plan_table([plan]))      # `clawloop plan --config X` prints it

Bytes per part (P = the model's parameters, L = the LoRA adapter's, N = GPUs, T = max_seq_len
tokens times per_device_batch_size):

- **weights**: full fine-tune fp32 masters 4P; under ZeRO-3 DeepSpeed's bf16 copy 2P/N (its fp32
  masters are counted with the optimizer). LoRA: the frozen base in the precision plan's dtype
  (2P bf16 or 4P) (/N under ZeRO-3) + 4L.
- **grads**: 4P (fp32, the weights' dtype), ZeRO-3 4P/N; LoRA 4L.
- **optimizer**: AdamW's two fp32 moments 8P; ZeRO-3 (fp32 masters + moments) 12P/N; LoRA 8L.
- **activations**: kept for the backward, in the compute dtype (2 bytes under bf16 autocast):
  per token and layer about 16h + 8i values (attention and SwiGLU MLP, flash attention: no
  T x T scores); with gradient checkpointing only each layer's input (h values) plus one layer's
  full set.
- **logits**: T x vocab in bf16 plus its fp32 log-softmax and gradient (2 + 4 + 4 bytes).
- **gathered**: ZeRO-3 holds one layer's full weights while it computes (2 bytes per weight of
  the largest layer), and the phase-start logprob pass gathers the whole model (2P) once.

Estimates (within ~10-20 % of `torch.cuda.max_memory_allocated` on real runs is the aim; the
CUDA context and the allocator's fragmentation are extra: `headroom` keeps 10 % free).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

GiB = 1024**3


@dataclass(frozen=True)
class ModelShape:
    """The sizes the estimate needs, read from a model's config.json."""

    params: int
    lora_params: int  # the adapter's parameters at the config's rank and targets
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    largest_layer: int  # parameters of the biggest decoder layer (or the embedding)


@dataclass(frozen=True)
class MemoryPlan:
    """Estimated bytes per GPU by part, and whether it fits `gpu_bytes`."""

    label: str
    gpus: int
    zero3: bool
    lora: bool
    weights: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    gathered: float
    gpu_bytes: float

    @property
    def total(self) -> float:
        parts = (self.weights, self.grads, self.optimizer, self.activations, self.logits)
        return sum(parts) + self.gathered

    @property
    def fits(self) -> bool:
        return self.total <= 0.9 * self.gpu_bytes  # headroom: CUDA context, fragmentation

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total, "fits": self.fits}


def _config(model: str | Path) -> dict:
    path = Path(model)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(
            f"no config.json at {model}: pass a model folder or its config.json "
            "(training/configs/qwen3-8b.config.json is Qwen3-8B's)"
        )
    return json.loads(path.read_text())


def shape_of(model: str | Path, lora_r: int = 16, lora_targets: str = "all-linear") -> ModelShape:
    """Exact parameter counts from the architecture, built on the meta device (no weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = _config(model)
    config = AutoConfig.for_model(**raw)
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in net.parameters())
    targets = None if lora_targets == "all-linear" else {t.strip() for t in lora_targets.split(",")}
    lora = 0
    for name, mod in net.named_modules():
        linear = isinstance(mod, torch.nn.Linear) and "lm_head" not in name
        if linear and (targets is None or name.rsplit(".", 1)[-1] in targets):
            lora += lora_r * (mod.in_features + mod.out_features)
    layers = [m for n, m in net.named_modules() if n.endswith("layers.0")]
    largest = max([sum(p.numel() for p in layers[0].parameters())] if layers else [0])
    largest = max(largest, net.get_input_embeddings().weight.numel())
    text = getattr(config, "text_config", config)
    return ModelShape(
        params=params,
        lora_params=lora,
        layers=text.num_hidden_layers,
        hidden=text.hidden_size,
        intermediate=getattr(text, "intermediate_size", 4 * text.hidden_size),
        vocab=text.vocab_size,
        largest_layer=largest,
    )


def memory_plan(
    shape: ModelShape,
    *,
    lora: bool,
    gpus: int,
    zero3: bool,
    seq_len: int,
    batch: int,
    checkpointing: bool,
    bf16: bool,
    gpu_bytes: float,
    label: str = "",
) -> MemoryPlan:
    """Bytes per GPU for one train config (see the module docstring for each part)."""
    p, a = float(shape.params), float(shape.lora_params)
    shard = gpus if zero3 else 1
    act_bytes = 2 if bf16 else 4
    if lora:
        weights = (2 if bf16 else 4) * p / shard + 4 * a
        grads, optimizer = 4 * a, 8 * a
    elif zero3:
        weights, grads, optimizer = 2 * p / shard, 4 * p / shard, 12 * p / shard
    else:
        weights, grads, optimizer = 4 * p, 4 * p, 8 * p
    tokens = float(seq_len * batch)
    per_layer = tokens * (16 * shape.hidden + 8 * shape.intermediate) * act_bytes
    if checkpointing:
        activations = shape.layers * tokens * shape.hidden * act_bytes + per_layer
    else:
        activations = shape.layers * per_layer
    logits = tokens * shape.vocab * (2 + 4 + 4)
    gathered = 2.0 * max(p, shape.largest_layer) if zero3 else 0.0
    return MemoryPlan(
        label=label,
        gpus=gpus,
        zero3=zero3,
        lora=lora,
        weights=weights,
        grads=grads,
        optimizer=optimizer,
        activations=activations,
        logits=logits,
        gathered=gathered,
        gpu_bytes=gpu_bytes,
    )


def zero_stage(deepspeed: str | None) -> int:
    """The ZeRO stage a DeepSpeed JSON (train.deepspeed) asks for; 0 without one."""
    if not deepspeed:
        return 0
    path = Path(deepspeed)
    if not path.is_file():
        raise FileNotFoundError(f"train.deepspeed {deepspeed} does not exist")
    return int(json.loads(path.read_text()).get("zero_optimization", {}).get("stage", 0))


def plan_table(plans: list[MemoryPlan]) -> str:
    """A markdown table, GiB per GPU."""
    head = (
        "| plan | GPUs | ZeRO-3 | weights | grads | optimizer | activations | logits | "
        "gathered | total GiB/GPU | fits |"
    )
    rows = [head, "|" + "---|" * 11]
    for m in plans:
        cells = [m.weights, m.grads, m.optimizer, m.activations, m.logits, m.gathered, m.total]
        gib = " | ".join(f"{c / GiB:.1f}" for c in cells)
        fits = f"yes ({m.gpu_bytes / GiB:.0f} GiB)" if m.fits else f"NO ({m.gpu_bytes / GiB:.0f})"
        rows.append(f"| {m.label} | {m.gpus} | {'yes' if m.zero3 else 'no'} | {gib} | {fits} |")
    return "\n".join(rows)


def refusal(plan: MemoryPlan, what: str) -> str:
    """The message for a full fine-tune that cannot fit, with the ways out; "" when it fits."""
    if plan.fits:
        return ""
    return (
        f"{what}: the memory plan needs {plan.total / GiB:.1f} GiB per GPU (weights "
        f"{plan.weights / GiB:.1f}, grads {plan.grads / GiB:.1f}, optimizer "
        f"{plan.optimizer / GiB:.1f}, activations {plan.activations / GiB:.1f}, logits "
        f"{plan.logits / GiB:.1f}) but the GPU has {plan.gpu_bytes / GiB:.0f} GiB (90 % usable): "
        "set train.lora: true, or train.num_processes and train.deepspeed "
        "(training/configs/zero3.json) to shard it, or lower train.max_seq_len / "
        "per_device_batch_size; `clawloop plan --config X` shows the estimate"
    )


def full_finetune_refusal(cfg, model_dir: str | Path, gpu_bytes: float) -> str:
    """Why a full fine-tune of `model_dir` under `cfg` cannot fit a GPU of `gpu_bytes` ("" when
    it can, and always for LoRA): checked before the model loads on CUDA."""
    if cfg.lora:
        return ""
    shape = shape_of(model_dir, cfg.lora_r, cfg.lora_target_modules)
    plan = memory_plan(
        shape,
        lora=False,
        gpus=cfg.num_processes,
        zero3=zero_stage(cfg.deepspeed) == 3,
        seq_len=cfg.max_seq_len,
        batch=cfg.per_device_batch_size,
        checkpointing=cfg.gradient_checkpointing is not False,
        bf16=cfg.bf16 is not False,
        gpu_bytes=gpu_bytes,
        label="full",
    )
    return refusal(plan, f"full fine-tune of {model_dir}")
