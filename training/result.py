"""What the train stage hands back (TrainResult) and how it fails (TrainError): shared by the
stage (training/stage.py) and the launcher that runs it in a subprocess (training/launch.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

METRIC_EXTRAS = (
    "clip_frac",
    "ratio_mean",
    "kl",
    "offpolicy_frac",
    "tis_mean",
    "tis_capped_frac",
    "logp_diff_mean",
    "tis_tokens",
)


def tis_summary(metrics: list[dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    """The stage summary's truncated-importance-sampling figures (train.tis_cap on, GRPO ran):
    `tis_mean` over every weighted token of the stage and `tis_tokens`, how many. With no token
    weighted `tis_mean` is None and `tis_note` says why, rather than a number that reads like a
    measurement. Empty when TIS was off or GRPO did not run."""
    rows = [r for r in metrics if r.get("phase") == "grpo" and "tis_tokens" in r]
    if not rows:
        return {}
    weighted = [(float(r["tis_mean"]), float(r["tis_tokens"])) for r in rows if r["tis_tokens"] > 0]
    n = sum(w for _, w in weighted)
    if n > 0:
        return {"tis_mean": round(sum(v * w for v, w in weighted) / n, 4), "tis_tokens": int(n)}
    recorded = counts.get("grpo_logprobs_recorded", 0)
    action = recorded + counts.get("grpo_logprobs_frozen", 0)
    constrained = counts.get("grpo_logprobs_constrained", 0)
    why = (
        f"no GRPO token was weighted by TIS: {recorded} of {action} action tokens carry a "
        "sampler logprob of the model's own distribution"
    )
    if constrained:
        why += (
            f"; {constrained} turns were sampled under the tool-call grammar "
            "(rollout.tool_choice: required), whose logprobs vLLM renormalises over the allowed "
            "tokens, so they are not the model's"
        )
    why += (
        "; the ratio was taken against the trainer's own logprobs of the rollout policy, unweighted"
    )
    return {"tis_mean": None, "tis_tokens": 0, "tis_note": why}


class TrainError(RuntimeError):
    """A training phase crashed: what failed, in which output folder, and what to do."""


@dataclass
class TrainResult:
    """What the train stage made: where the next policy is, how training went, and why."""

    status: str  # trained | nothing_to_train
    reason: str
    checkpoint_dir: Path  # servable model folder; the base model when nothing was trained
    adapter_dir: Path | None
    base_model: str
    kind: str  # full | lora | base
    phases_run: list[str] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0  # wall time of the stage; not in checkpoint_row (rows hold no timing)
    dtype: str = ""  # what checkpoint_dir's weights hold (its config.json says the same)

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON values (what a launched stage hands back: training/launch.py)."""
        out = asdict(self)
        out["checkpoint_dir"] = str(self.checkpoint_dir)
        out["adapter_dir"] = str(self.adapter_dir) if self.adapter_dir else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainResult:
        """The inverse of `to_json`."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["checkpoint_dir"] = Path(values["checkpoint_dir"])
        if values.get("adapter_dir"):
            values["adapter_dir"] = Path(values["adapter_dir"])
        return cls(**values)

    def metrics_frame(self) -> pd.DataFrame:
        """Rows for the TRAIN_METRICS Parquet file (GRPO-only columns are NaN for SFT rows)."""
        cols = [
            "step",
            "phase",
            "loss",
            "tokens",
            "action_tokens",
            "kept_groups",
            "grad_norm",
            "lr",
        ]
        cols += list(METRIC_EXTRAS)
        rows = [{c: r.get(c, math.nan) for c in cols} for r in self.metrics]
        return pd.DataFrame(rows, columns=cols)

    def checkpoint_row(self) -> dict[str, Any]:
        """The one row of the CHECKPOINT Parquet file."""
        c = self.counts
        return {
            "status": self.status,
            "reason": self.reason,
            "checkpoint_path": str(self.checkpoint_dir),
            "adapter_path": str(self.adapter_dir) if self.adapter_dir else "",
            "base_model": self.base_model,
            "kind": self.kind,
            "phases": ",".join(self.phases_run),
            "sft_episodes": c.get("sft_episodes", 0),
            "sft_samples": c.get("sft_samples", 0),
            "grpo_samples": c.get("grpo_samples", 0),
            "kept_groups": c.get("kept_groups", 0),
            "dropped_zero_variance": c.get("dropped_zero_variance", 0),
            "steps": len(self.metrics),
            "dtype": self.dtype,
        }
