"""What exactly is trained: the first N training sequences with their trained spans decoded.

    text = explain(trajectories, band, tokenizer, cfg, n=3)   # `clawloop train ... --explain 3`

Each sample is built exactly as the train stage builds it (same encoding, same filters, same
phases), then printed as alternating blocks: the tail of the context (not trained: system, user,
tool observations, the template's rendering of the history) and each trained span verbatim (what
the policy sampled: reasoning, text, tool calls, the end-of-turn token), with the path each turn
took (`ids`: the server's sampled ids; `text`: the tokenised sampled text; `template`: the
chat template's rendering of the parsed reply, where the sampled text is unknown and it
round-trips). The phases' counts of
turns per path, dropped turns and logprob / end-of-turn flags close the listing.
"""

from __future__ import annotations

import pandas as pd

from clawloop.training.config import TrainConfig
from clawloop.training.sequences import EncodeReport, TokenSample, ToolCallParser


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """[(start, end)] of the runs of 1s in an action mask."""
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            out.append((start, i))
            start = None
    return out


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def explain_sample(tokenizer, sample: TokenSample, phase: str, context_chars: int = 300) -> str:
    """One sequence as context tails and decoded trained spans."""
    runs = spans(sample.action_mask)
    sources = sample.sources if len(sample.sources) == len(runs) else ["?"] * len(runs)
    head = (
        f"== {phase} sample: episode {sample.episode_id} task {sample.task_id} "
        f"reward {sample.reward:g}"
        + (f" advantage {sample.advantage:+.3f}" if phase == "grpo" else "")
        + f" | {len(sample.input_ids)} tokens, {sample.n_action_tokens} trained, "
        f"{len(runs)} span(s) from {', '.join(sample.sources) or '?'}"
    )
    lines, pos = [head], 0
    for k, ((a, b), src) in enumerate(zip(runs, sources, strict=True), start=1):
        context = tokenizer.decode(sample.input_ids[pos:a])
        lines.append(f"--- context (not trained, {a - pos} tokens) ---")
        lines.append(_tail(context, context_chars))
        lines.append(f"--- trained span {k} (from {src}, {b - a} tokens) ---")
        lines.append(tokenizer.decode(sample.input_ids[a:b]))
        pos = b
    lines.append("--- end of sample ---")
    return "\n".join(lines)


def _counts_line(phase: str, enc: EncodeReport) -> str:
    c = enc.counts()
    info = {"action_tokens", "longest_sequence", "longest_completion"}  # sizes, not flags
    flags = ", ".join(
        f"{k} {v}" for k, v in c.items() if v and not k.startswith("turns_") and k not in info
    )
    line = (
        f"{phase}: turns from ids {c['turns_from_ids']}, from text {c['turns_from_text']}, "
        f"from the template {c['turns_from_template']}, dropped {c['turns_dropped']}"
        + (f"; {flags}" if flags else "")
    )
    dropped = [n for n in enc.notes if "dropped" in n][:3]
    return "\n".join([line, *(f"  {n}" for n in dropped)])


def explain(
    trajectories: pd.DataFrame,
    band: pd.DataFrame,
    tokenizer,
    cfg: TrainConfig,
    n: int,
    context_chars: int = 300,
    parser: ToolCallParser | None = None,
) -> str:
    """The first `n` training sequences of the configured phases, decoded; then the counts.
    `parser`: the agent's tool-call parser, as `train_stage` gets it (template fallback)."""
    from clawloop.training.grpo import grpo_samples
    from clawloop.training.sft import sft_samples

    blocks: list[str] = []
    summary: list[str] = []
    left = n
    for phase, run, build in (
        ("sft", cfg.run_sft, sft_samples),
        ("grpo", cfg.run_grpo, grpo_samples),
    ):
        if not run:
            continue
        samples, report = build(trajectories, band, tokenizer, cfg, parser)
        summary.append(f"{_counts_line(phase, report.encode)}; {len(samples)} sequence(s)")
        for s in samples[: max(0, left)]:
            blocks.append(explain_sample(tokenizer, s, phase, context_chars))
        left -= min(left, len(samples))
    if not blocks:
        blocks.append("(no training sequence: nothing would be trained)")
    return "\n\n".join([*blocks, "\n".join(summary)])
