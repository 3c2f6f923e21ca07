"""Self-distillation SFT on the successful trajectories of kept tasks, with observations masked.

Only tokens the policy sampled carry loss (assistant text, tool-call JSON, the end-of-turn token);
system, user and tool-observation tokens (tool outputs, file contents) are context only. Sequences
and masks come from `training.sequences` (recorded token ids first, else the tokenised sampled
text, else, where the sampled text is unknown, the chat template's rendering of the parsed reply
if it round-trips through the agent's tool-call parser). Training goes through `transformers.Trainer`, whose causal-LM loss averages over the
labelled tokens of the whole accumulated step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from transformers import Trainer

from clawloop.training.config import TrainConfig
from clawloop.training.sequences import (
    EncodeReport,
    TokenSample,
    ToolCallParser,
    encode_episode,
)
from clawloop.training.trainer_base import MetricsMixin


@dataclass
class SFTReport:
    """What the SFT phase found to train on."""

    episodes: int = 0
    tasks: int = 0
    samples: int = 0
    encode: EncodeReport = field(default_factory=EncodeReport)


def successful_episodes(trajectories: pd.DataFrame, band: pd.DataFrame, split: str) -> pd.DataFrame:
    """Passed episodes of tasks the band filter kept, in the given split."""
    if not len(trajectories) or not len(band):
        return trajectories.iloc[0:0]
    kept = set(band.loc[band["kept"].astype(bool), "task_id"])
    df = trajectories[trajectories["task_id"].isin(kept) & trajectories["passed"].astype(bool)]
    if "split" in df.columns:
        df = df[df["split"] == split]
    return df


def sft_samples(
    trajectories: pd.DataFrame,
    band: pd.DataFrame,
    tokenizer,
    cfg: TrainConfig,
    parser: ToolCallParser | None = None,
) -> tuple[list[TokenSample], SFTReport]:
    """Training sequences of the successful episodes, with their action masks; `parser` (the
    agent's tool-call parser) enables the template fallback when cfg.turn_source allows it."""
    parser = parser if cfg.turn_source == "template_ok" else None
    report = SFTReport()
    df = successful_episodes(trajectories, band, cfg.split)
    report.episodes = len(df)
    report.tasks = df["task_id"].nunique() if len(df) else 0
    samples: list[TokenSample] = []
    for row in df.to_dict("records"):
        seqs, enc = encode_episode(tokenizer, row, cfg.max_seq_len, cfg.use_recorded_tokens, parser)
        report.encode.add(enc)
        samples.extend(seqs)
    report.samples = len(samples)
    return samples, report


class MaskedSFTTrainer(MetricsMixin, Trainer):
    """Trainer with the model's own causal-LM loss on `labels` (-100 off the action tokens)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._init_metrics("sft")

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self._count(inputs)
        if "position_ids" in inputs and "attention_mask" not in inputs:
            # packed (train.pack): without a KV cache transformers keeps attention per sample
            inputs = {**inputs, "use_cache": False}
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
