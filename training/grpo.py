"""GRPO on pre-collected rollout groups: the math as small pure functions, and a Trainer for it.

For each kept task the N rollouts form a group. A rollout's reward is its outcome, 1.0 if the task
passed else 0.0 (`train.reward: outcome`, the default), or the recorded fraction of checks passed
(`fraction`, a shaped reward). Its advantage is that reward normalised against its group,
A = (r - mean) / (std + eps) (std with Bessel's correction, as TRL); a group whose rewards all agree
carries no signal and is dropped (under `outcome`: all passed or all failed, whatever the fractions). Every action token of a rollout gets its
rollout's advantage. The per-token objective is PPO's clipped surrogate,
    -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A),   ratio = exp(logp - logp_sampling),
where logp_sampling is the rollout (behaviour) policy's logprob, the same reference on every
path: the sampler's recorded logprob (vLLM's processed_logprobs, the local server's log-softmax;
both the model's plain log-softmax since GRPO refuses rollout.temperature != 1 and requests pin
top-k/top-p/min-p neutral: tasks.config.untrainable), or, when the server recorded
none, that same checkpoint's logprob computed once before the first step and kept fixed
(`freeze_old_logprobs`: GRPO starts from the rollout policy, the train stage runs it before SFT),
so the ratio moves as the policy does and clipping engages.

Turns sampled under a grammar (rollout.tool_choice: required) count as recording none: vLLM masks
the logits with the grammar's bitmask before its sampler, so their logprobs are log p - log Z (Z
the allowed mass; 0 on a forced token), which as the ratio's reference would start it at Z < 1
(measured on vLLM-CPU: benchmarks/sampler_mismatch.py) and clip away the negative advantages. The
trainer's own logprobs of the rollout policy are the reference there, so the ratio is that of the
unmasked model (the gradient of log Z, which needs the grammar's mask, is left out), and the
tokens the grammar forced leave the loss (`unforced`). TIS weights only tokens whose sampler
logprobs are the model's. An optional KL penalty to the phase's start
model (its logprobs taken in the same pass; a continued LoRA adapter is part of that start) uses the
k3 estimator exp(ref - logp) - (ref - logp) - 1. The loss is the mean over all action tokens of the
optimizer step (summed here, divided by the Trainer's action-token count across micro-batches).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from transformers import Trainer

from clawloop.storage.schemas import INFRA_END_REASONS
from clawloop.training.config import TrainConfig
from clawloop.training.sequences import (
    EncodeReport,
    TokenSample,
    ToolCallParser,
    encode_episode,
)
from clawloop.training.trainer_base import MetricsMixin, gathered_weights


# ---------------------------------------------------------------------------- pure math
def episode_reward(row: Mapping[str, Any], kind: str = "outcome") -> float:
    """The reward GRPO trains on: outcome = 1.0 if the episode passed else 0.0; fraction = the
    recorded fraction of checks passed."""
    if kind == "outcome":
        return 1.0 if bool(row["passed"]) else 0.0
    if kind == "fraction":
        return float(row["reward"])
    raise ValueError(f"reward kind {kind!r}: use outcome or fraction")


def group_advantages(
    rewards: Sequence[float], eps: float = 1e-4, min_std: float = 1e-6
) -> list[float] | None:
    """(r - mean) / (std + eps) per rollout; None for a group too small or with no reward spread."""
    n = len(rewards)
    if n < 2:
        return None
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    if std <= min_std:
        return None
    return [(r - mean) / (std + eps) for r in rewards]


def selective_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per position, without keeping a full-vocab log-prob tensor."""
    if logits.dtype in (torch.float32, torch.float64):
        return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
    # Half precision: log_softmax row by row in float32, bounding the extra memory to one row.
    rows = [
        torch.log_softmax(row.float(), -1).gather(-1, t.unsqueeze(-1)).squeeze(-1)
        for row, t in zip(logits, targets, strict=True)
    ]
    return torch.stack(rows)


def next_token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Log-prob of token j given tokens < j, for j = 1..L-1 (shape [B, L-1])."""
    return selective_logprobs(logits[:, :-1, :], input_ids[:, 1:])


def grpo_token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    recorded: torch.Tensor | None = None,
    trainer_logp: torch.Tensor | None = None,
    tis_cap: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token loss [B, T] (zero off the mask) and detached stats.

    `old_logp` holds NaN where the sampling logprob is unknown; there the ratio is taken against
    the detached current logprob. `advantages` is one value per sequence [B], or one per token
    [B, T] (a packed row holds several sequences, each token its own one's). `recorded` (1/0)
    says which old logprobs the server recorded (the rest were computed before the first step):
    `offpolicy_frac` is their share of the action tokens; without it, the finite old logprobs'.

    Truncated importance sampling (`tis_cap`, with `trainer_logp`: the trainer's own logprobs of
    the rollout policy, NaN where unknown): the ratio is taken against `trainer_logp` where
    finite, and each token whose sampler logprob was recorded has its loss weighted by
    min(exp(trainer_logp - old_logp), tis_cap) (detached, as TRL's token_truncate), which
    corrects for the sampler and the trainer computing the same policy differently. Stats:
    `tis_mean` and `tis_capped_frac` over those tokens, `logp_diff_mean` = mean |trainer -
    sampler| there, `tis_tokens` = how many there are (the three means are NaN when none).
    """
    mask = mask.to(logp.dtype)
    known = torch.isfinite(old_logp)
    rec_flags = known if recorded is None else (recorded.bool() & known)
    tis = None
    if tis_cap is not None and trainer_logp is not None:
        own = torch.isfinite(trainer_logp)
        both = own & rec_flags
        diff = torch.where(both, trainer_logp.to(logp.dtype) - old_logp.to(logp.dtype), 0.0)
        tis = torch.where(both, torch.clamp(torch.exp(diff), max=tis_cap), 1.0).detach()
        old_logp = torch.where(own, trainer_logp.to(old_logp.dtype), old_logp)
        known = torch.isfinite(old_logp)
    base = torch.where(known, old_logp.to(logp.dtype), logp.detach())
    ratio = torch.exp(logp - base)
    adv = advantages.to(logp.dtype)
    adv = adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)
    unclipped = -ratio * adv
    clipped = -torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    per_token = torch.maximum(unclipped, clipped)
    kl = torch.zeros_like(logp)
    if ref_logp is not None and beta > 0:
        delta = ref_logp.detach() - logp
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + beta * kl
    if tis is not None:
        per_token = per_token * tis
    per_token = per_token * mask
    n = mask.sum().clamp(min=1.0)
    rec = known if recorded is None else recorded.bool()
    stats = {
        "clip_frac": (((clipped > unclipped).to(logp.dtype) * mask).sum() / n).detach(),
        "ratio_mean": ((ratio * mask).sum() / n).detach(),
        "kl": ((kl * mask).sum() / n).detach(),
        "offpolicy_frac": ((rec.to(logp.dtype) * mask).sum() / n).detach(),
    }
    if tis is not None:
        weighed = both.to(logp.dtype) * mask
        m = weighed.sum()
        # no weighted token (every sampler logprob unknown or under a grammar): NaN, not a 0.0
        # that reads like a measurement; `tis_tokens` says how many tokens each mean is over
        stats["tis_tokens"] = m.detach()
        stats["tis_mean"] = ((tis * weighed).sum() / m).detach()
        stats["tis_capped_frac"] = (((tis >= tis_cap).to(logp.dtype) * weighed).sum() / m).detach()
        stats["logp_diff_mean"] = ((diff.abs() * weighed).sum() / m).detach()
    return per_token, stats


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
) -> torch.Tensor:
    """Mean per-token loss over the action tokens of the batch."""
    per_token, _ = grpo_token_loss(logp, old_logp, advantages, mask, clip_eps, ref_logp, beta)
    return per_token.sum() / mask.sum().clamp(min=1.0)


def freeze_old_logprobs(
    model, samples: list[TokenSample], device, with_ref: bool = False, with_trainer: bool = False
) -> int:
    """One no-grad pass of the phase's start model before the first step.

    Fills every action token's unknown sampling logprob (NaN: the server returned none) with the
    start model's and keeps it: the ratio then moves as training moves the policy, across steps
    and epochs, and clipping can engage. Recorded logprobs (vLLM, the local server) are kept as
    they are. `with_ref` (KL): every sample's `ref_logprobs` are the start model's too, so the KL
    reference is exactly the phase's start (a continued LoRA adapter included) and no second copy
    of the model is held. `with_trainer` (train.tis_cap): every sample that has none yet gets
    `trainer_logprobs`, this model's logprob of every action token (call it on the rollout
    policy). Under DeepSpeed ZeRO-3 the partitioned weights are gathered for the pass
    (`trainer_base.gathered_weights`). Returns the old-logprob tokens filled."""
    filled = 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), gathered_weights(model):
            for s in samples:
                if not s.recorded:  # before any fill: what the server recorded
                    s.recorded = [int(math.isfinite(x)) for x in s.old_logprobs]
                missing = [
                    j
                    for j in range(1, len(s.input_ids))
                    if s.action_mask[j] and not math.isfinite(s.old_logprobs[j])
                ]
                own = with_trainer and not s.trainer_logprobs
                if not missing and not with_ref and not own:
                    continue
                ids = torch.tensor([s.input_ids], device=device)
                logp = next_token_logprobs(model(input_ids=ids).logits.float(), ids)[0].tolist()
                for j in missing:
                    s.old_logprobs[j] = float(logp[j - 1])
                filled += len(missing)
                if own:
                    s.trainer_logprobs = [math.nan] + [
                        float(x) if s.action_mask[j + 1] else math.nan for j, x in enumerate(logp)
                    ]
                if with_ref:
                    s.ref_logprobs = [math.nan] + [
                        float(x) if s.action_mask[j + 1] else math.nan for j, x in enumerate(logp)
                    ]
    finally:
        model.train(was_training)
    return filled


# ---------------------------------------------------------------------------- data
@dataclass
class GroupReport:
    """How many groups the GRPO phase trains on, and why the others were left out."""

    reward: str = "outcome"  # which reward the advantages came from (TrainConfig.reward)
    groups_seen: int = 0
    kept_groups: int = 0
    dropped_zero_variance: int = 0
    dropped_not_kept: int = 0
    dropped_singletons: int = 0  # groups of one rollout: no group to compare against
    episodes: int = 0
    samples: int = 0
    encode: EncodeReport = field(default_factory=EncodeReport)


def grpo_samples(
    trajectories: pd.DataFrame,
    band: pd.DataFrame,
    tokenizer,
    cfg: TrainConfig,
    parser: ToolCallParser | None = None,
) -> tuple[list[TokenSample], GroupReport]:
    """Sequences of every rollout in kept, non-degenerate groups, each carrying its advantage and
    the reward (cfg.reward) it was computed from; `parser` as in `sft.sft_samples`."""
    parser = parser if cfg.turn_source == "template_ok" else None
    report = GroupReport(reward=cfg.reward)
    kept = set(band.loc[band["kept"].astype(bool), "task_id"]) if len(band) else set()
    df = trajectories
    if "split" in df.columns and len(df):
        df = df[df["split"] == cfg.split]
    if "end_reason" in df.columns and len(df):
        # An infrastructure fault says nothing about the policy; its reward would be noise.
        df = df[~df["end_reason"].isin(INFRA_END_REASONS)]
    samples: list[TokenSample] = []
    for task_id, group in df.groupby("task_id", sort=True) if len(df) else []:
        report.groups_seen += 1
        if task_id not in kept:
            report.dropped_not_kept += 1
            continue
        rows = group.sort_values("attempt").to_dict("records")
        rewards = [episode_reward(r, cfg.reward) for r in rows]
        if len(rows) < 2:
            report.dropped_singletons += 1
            continue
        adv = group_advantages(rewards, eps=cfg.adv_eps, min_std=cfg.min_group_std)
        if adv is None:
            report.dropped_zero_variance += 1
            continue
        report.kept_groups += 1
        for row, r, a in zip(rows, rewards, adv, strict=True):
            seqs, enc = encode_episode(
                tokenizer, row, cfg.max_seq_len, cfg.use_recorded_tokens, parser
            )
            report.encode.add(enc)
            report.episodes += 1
            for s in seqs:
                if not unforced(s):
                    continue
                s.reward = r
                s.advantage = a
                samples.append(s)
    report.samples = len(samples)
    return samples, report


def unforced(sample: TokenSample) -> bool:
    """Take the tokens a grammar forced (`sample.forced`: tool_choice required, the only token
    the sampler allowed) out of the sample's action mask: the sampled policy had probability 1
    there whatever the weights, so they carry no gradient of its objective. False when no action
    token is left (nothing to train)."""
    for j in sample.forced:
        sample.action_mask[j] = 0
    return sum(sample.action_mask[1:]) > 0


# ---------------------------------------------------------------------------- trainer
class GRPOGroupTrainer(MetricsMixin, Trainer):
    """Trainer whose loss is the clipped GRPO objective over the batch's action tokens."""

    def __init__(self, *args, cfg: TrainConfig, kept_groups: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.cfg = cfg
        self._init_metrics("grpo", kept_groups)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self._count(inputs)
        per_token, stats, mask, out = batch_token_loss(model, inputs, self.cfg)
        if num_items_in_batch is not None:
            # Mean over every action token of the optimizer step (all micro-batches, all ranks).
            loss = per_token.sum() / num_items_in_batch
            if self.args.average_tokens_across_devices and self.args.world_size > 1:
                loss = loss * self.args.world_size  # DDP averages gradients over ranks
            self.loss_is_scaled_for_ga = True
        else:
            loss = per_token.sum() / mask.sum().clamp(min=1.0)
            self.loss_is_scaled_for_ga = False
        self._note(**{k: float(v) for k, v in stats.items()})
        return (loss, out) if return_outputs else loss


def _ref_logprobs(inputs, logp: torch.Tensor, cfg: TrainConfig) -> torch.Tensor | None:
    """The KL reference's logprobs: the phase's start model's, frozen before the first step."""
    if cfg.kl_beta <= 0:
        return None
    if "ref_logprobs" not in inputs:
        raise ValueError(
            "kl_beta > 0 but the batch has no reference logprobs: call "
            "freeze_old_logprobs(model, samples, device, with_ref=True) before training"
        )
    ref = inputs["ref_logprobs"][:, 1:].to(logp.dtype)
    return torch.where(torch.isfinite(ref), ref, logp.detach())


def batch_token_loss(model, inputs, cfg: TrainConfig):
    """(per-token loss [B, T-1], stats, action mask, model output) of one collated batch, padded
    or packed (`position_ids` and no attention mask: one row of several sequences, attention kept
    within each, per-token advantages); the same tokens give the same values either way."""
    ids = inputs["input_ids"]
    if "position_ids" in inputs and "attention_mask" not in inputs:
        out = model(input_ids=ids, position_ids=inputs["position_ids"], use_cache=False)
    else:
        out = model(input_ids=ids, attention_mask=inputs["attention_mask"])
    logp = next_token_logprobs(out.logits, ids)
    mask = inputs["action_mask"][:, 1:]
    adv = inputs["advantages"]
    per_token, stats = grpo_token_loss(
        logp,
        inputs["old_logprobs"][:, 1:],
        adv[:, 1:] if adv.dim() == 2 else adv,
        mask,
        cfg.clip_eps,
        _ref_logprobs(inputs, logp, cfg),
        cfg.kl_beta,
        inputs["recorded"][:, 1:] if "recorded" in inputs else None,
        inputs["trainer_logprobs"][:, 1:] if "trainer_logprobs" in inputs else None,
        cfg.tis_cap,
    )
    return per_token, stats, mask, out
