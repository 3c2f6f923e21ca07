"""Trained-context tokens per episode of a rollout: what training's sequences cost, against one
sequence per episode.

Every episode of the given trajectories files (the `--split`, default train; every episode, passed
or not, so a run whose policy solves nothing still measures) is encoded as the train stage encodes
it (`training.sequences.encode_episode`, the agent's parser for the template fallback, the default
`train.max_seq_len`, or `--max-len`). Printed: the episodes, their turns by source (ids / text / template /
dropped), the prefix breaks, the sequences, the trained-context tokens (the sum of every
sequence's length: what a forward pass over them computes), and the same as one sequence per
episode (each episode's last turn's prompt + completion: the whole episode in one context), with
their ratio.

    .venv/bin/python benchmarks/trained_context.py RUN/iter-1/rollout/trajectories.parquet [...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from clawloop.training.config import TrainConfig
from clawloop.training.sequences import (
    EncodeReport,
    _loads,
    encode_episode,
    episode_turns,
)


def measure(rows: pd.DataFrame, tokenizer, cfg: TrainConfig, parser) -> dict[str, int]:
    """Totals over `rows`: episodes, sequences, trained-context tokens, one-sequence tokens."""
    report = EncodeReport()
    sequences = tokens = one_sequence = 0
    for row in rows.to_dict("records"):
        samples, enc = encode_episode(tokenizer, row, cfg.max_seq_len, True, parser)
        report.add(enc)
        sequences += len(samples)
        tokens += sum(len(s.input_ids) for s in samples)
        turns, _ = episode_turns(
            tokenizer,
            _loads(row.get("messages_json"), []),
            _loads(row.get("tools_json"), None),
            _loads(row.get("turns_json"), []),
            True,
            parser,
        )
        if turns:
            last = turns[-1]
            one_sequence += min(len(last.prompt_ids) + len(last.completion_ids), cfg.max_seq_len)
    return {
        "episodes": len(rows),
        "sequences": sequences,
        "tokens": tokens,
        "one_sequence": one_sequence,
        **{k: report.counts()[k] for k in ("turns_from_ids", "turns_from_text")},
        **{k: report.counts()[k] for k in ("turns_from_template", "turns_dropped")},
        "prefix_breaks": report.prefix_breaks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trajectories", type=Path, nargs="+", help="trajectories.parquet files")
    parser.add_argument("--split", default="train", help="episodes of this split ('' = all)")
    parser.add_argument("--model", type=Path, help="the policy's folder (default: tiny model)")
    parser.add_argument(
        "--max-len", type=int, default=TrainConfig().max_seq_len, help="max_seq_len"
    )
    args = parser.parse_args()
    from clawloop.tasks.train import agent_tool_call_parser
    from clawloop.training.tiny_model import ensure_tiny_model
    from clawloop.training.trainer_base import load_tokenizer

    rows = pd.concat([pd.read_parquet(p) for p in args.trajectories], ignore_index=True)
    if args.split:
        rows = rows[rows["split"] == args.split]
    if not len(rows):
        print(f"no {args.split or ''} episode in {', '.join(map(str, args.trajectories))}")
        return 1
    tok = load_tokenizer(args.model or ensure_tiny_model())
    m = measure(rows, tok, TrainConfig(max_seq_len=args.max_len), agent_tool_call_parser())
    n = m["episodes"]
    print(
        f"{n} episodes: turns from ids {m['turns_from_ids']}, text {m['turns_from_text']}, "
        f"template {m['turns_from_template']}, dropped {m['turns_dropped']}; "
        f"prefix breaks {m['prefix_breaks']}; {m['sequences']} sequences"
    )
    print(
        f"trained-context tokens: {m['tokens']:,} ({m['tokens'] / n:,.1f} per episode); "
        f"as one sequence per episode: {m['one_sequence']:,} ({m['one_sequence'] / n:,.1f} per "
        f"episode); ratio {m['tokens'] / max(m['one_sequence'], 1):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
