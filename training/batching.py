"""Pad `TokenSample`s into the tensors both trainers read.

The batch carries `labels` (input ids where the policy acted, -100 elsewhere) so the Trainer counts
action tokens across gradient-accumulation micro-batches and devices (`num_items_in_batch`); SFT's
cross-entropy uses them directly, GRPO divides its summed token loss by that count so the loss is a
mean over all action tokens of the optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from clawloop.training.sequences import TokenSample


class SampleDataset(Dataset):
    """A list of `TokenSample`s as a map-style dataset (the Trainer leaves its columns alone)."""

    def __init__(self, samples: Sequence[TokenSample]):
        self.samples = list(samples)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> TokenSample:
        return self.samples[i]


@dataclass
class SampleCollator:
    """Right-pads a list of samples; `with_rl` adds advantages, sampling logprobs and (KL) the
    reference logprobs for GRPO."""

    pad_token_id: int
    with_rl: bool = False
    pack: bool = False  # the micro-batch as one row, no padding (see `packed`)

    def __call__(self, samples: list[TokenSample]) -> dict[str, torch.Tensor]:
        if self.pack:
            return packed(samples, self.with_rl)
        n = max(len(s.input_ids) for s in samples)
        ids = torch.full((len(samples), n), self.pad_token_id, dtype=torch.long)
        attn = torch.zeros((len(samples), n), dtype=torch.long)
        mask = torch.zeros((len(samples), n), dtype=torch.float32)
        for i, s in enumerate(samples):
            k = len(s.input_ids)
            ids[i, :k] = torch.tensor(s.input_ids, dtype=torch.long)
            attn[i, :k] = 1
            mask[i, :k] = torch.tensor(s.action_mask, dtype=torch.float32)
        labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
        batch = {"input_ids": ids, "attention_mask": attn, "labels": labels}
        if self.with_rl:
            old = torch.full((len(samples), n), math.nan, dtype=torch.float32)
            for i, s in enumerate(samples):
                old[i, : len(s.old_logprobs)] = torch.tensor(s.old_logprobs, dtype=torch.float32)
            batch["action_mask"] = mask
            batch["old_logprobs"] = old
            batch["advantages"] = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
            if any(s.recorded for s in samples):
                rec = torch.zeros((len(samples), n), dtype=torch.float32)
                for i, s in enumerate(samples):
                    flags = s.recorded or [int(math.isfinite(x)) for x in s.old_logprobs]
                    rec[i, : len(flags)] = torch.tensor(flags, dtype=torch.float32)
                batch["recorded"] = rec
            for key in ("ref_logprobs", "trainer_logprobs"):
                if any(getattr(s, key) for s in samples):
                    values = torch.full((len(samples), n), math.nan, dtype=torch.float32)
                    for i, s in enumerate(samples):
                        row = getattr(s, key)
                        values[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
                    batch[key] = values
        return batch


def packed(samples: list[TokenSample], with_rl: bool = False) -> dict[str, torch.Tensor]:
    """The samples concatenated into one row with `position_ids` restarting at 0 per sample and
    no attention mask: transformers then attends within each sample only (its packed-sequence
    detection, which needs the forward to run without a KV cache: `use_cache=False`). Same
    tokens, same supervised labels as the padded batch, no pad tokens computed. Each sample's
    first label is -100 (it would be predicted from the previous sample's last token; the padded
    batch never trains position 0 either).

    `with_rl` (GRPO) adds the padded batch's per-token tensors laid out the same way, each
    sample's first position masked out: `action_mask`, `old_logprobs`, `recorded`,
    `ref_logprobs` and `trainer_logprobs` where any sample has them, and `advantages` per token (each token carries its
    own sample's), so every token's ratio and advantage are the padded batch's."""
    ids: list[int] = []
    pos: list[int] = []
    labels: list[int] = []
    for s in samples:
        ids += s.input_ids
        pos += list(range(len(s.input_ids)))
        labels += [-100] + [
            t if m else -100 for t, m in zip(s.input_ids[1:], s.action_mask[1:], strict=True)
        ]
    batch = {
        "input_ids": torch.tensor([ids], dtype=torch.long),
        "position_ids": torch.tensor([pos], dtype=torch.long),
        "labels": torch.tensor([labels], dtype=torch.long),
    }
    if not with_rl:
        return batch

    def row(values: list[list[float]]) -> torch.Tensor:
        return torch.tensor([[x for v in values for x in v]], dtype=torch.float32)

    batch["action_mask"] = row([[0.0] + [float(m) for m in s.action_mask[1:]] for s in samples])
    batch["old_logprobs"] = row([s.old_logprobs for s in samples])
    batch["advantages"] = row([[s.advantage] * len(s.input_ids) for s in samples])
    if any(s.recorded for s in samples):
        batch["recorded"] = row(
            [s.recorded or [int(math.isfinite(x)) for x in s.old_logprobs] for s in samples]
        )
    for key in ("ref_logprobs", "trainer_logprobs"):
        if any(getattr(s, key) for s in samples):
            batch[key] = row([getattr(s, key) or [math.nan] * len(s.input_ids) for s in samples])
    return batch
