"""Training throughput of clawloop's masked SFT against plain TRL SFTTrainer, on the same work.

Both sides train the tiny offline model for one epoch on the *same token sequences*: the sequences
the train stage builds from synthetic multi-turn tool episodes (recorded as a server without token
ids records them: the sampled text of every turn, so each episode chains into one sequence while
the prefix property holds). TRL gets them pre-tokenised (`input_ids` + `labels`, -100 off the
action tokens), so both sides see the same number of sequences, the same supervised tokens, the
same batch in sequences, the same max length, learning rate, scheduler and seed. Each timer
covers `trainer.train()` only (model loading, dataset preparation and saving are outside it).
Reported per side: sequences, tokens, supervised tokens, tokens/s and episodes/s; then the ratio
ours / TRL. Runs alternate (ours, TRL, ours, TRL...) and the best of each is reported, since the
machine is shared. Target: ratio >= 0.9.

`--trajectories T.parquet --band B.parquet` uses a real rollout's episodes instead (a run's
`iter-K/rollout/` files: not a best case), encoded as the train stage encodes them (with the
agent's tool-call parser for the template fallback). `--all-episodes` trains on every episode of
the train split, passed or not, kept by the band or not (a run of the tiny model passes nothing,
so SFT's own choice would leave nothing to time). `--pack` runs our side with `train.pack`
(TRL's side is its default padded batches either way).

    .venv/bin/python benchmarks/train_throughput.py [--episodes 32] [--batch 4] [--repeats 2]
    .venv/bin/python benchmarks/train_throughput.py --trajectories T.parquet --band B.parquet
    .venv/bin/python benchmarks/train_throughput.py --trajectories T.parquet [T2.parquet] \
        --band B.parquet [B2.parquet] --all-episodes [--pack]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from clawloop.training.config import TrainConfig
from clawloop.training.tiny_model import ensure_tiny_model

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def episode(i: int, turns: int = 4) -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a careful agent working in /workspace."},
        {"role": "user", "content": f"Reconcile the logs in data/ into output/report_{i}.csv."},
    ]
    for t in range(turns):
        args = json.dumps({"command": f"grep -rn 'hive {i * 7 + t}' data/ | head -n {t + 5}"})
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {t}: checking hive {i}.",
                "tool_calls": [
                    {
                        "id": f"c{t}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": args},
                    }
                ],
            }
        )
        rows = "\n".join(f"data/log_{k}.csv:{k}:hive {i},{k * 3.5},kg" for k in range(12))
        msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": rows})
    msgs.append({"role": "assistant", "content": f"Wrote output/report_{i}.csv with 12 rows."})
    return msgs


def sampled_turns(msgs: list[dict]) -> list[dict]:
    """Turn records of a server without token ids whose tool calls came in the text."""
    out = []
    for m in msgs:
        if m["role"] != "assistant":
            continue
        blocks = [
            '<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>'  # noqa: UP031
            % (c["function"]["name"], c["function"]["arguments"])
            for c in m.get("tool_calls") or []
        ]
        text = "\n".join(([m["content"]] if m["content"] else []) + blocks)
        out.append({"raw_content": text, "tool_calls_native": False, "finish_reason": "stop"})
    return out


@dataclass
class Work:
    sequences: int
    tokens: int
    supervised: int
    episodes: int


@dataclass
class Speed:
    tokens_s: float
    episodes_s: float


def _cfg(batch: int, max_len: int, pack: bool = False) -> TrainConfig:
    return TrainConfig(
        phases="sft",
        per_device_batch_size=batch,
        max_seq_len=max_len,
        sft_learning_rate=1e-4,
        pack=pack,
    )


def run_ours(
    model_dir: Path, samples, work: Work, batch: int, max_len: int, out: Path, pack: bool = False
) -> Speed:
    from clawloop.training.stage import make_trainer
    from clawloop.training.trainer_base import PolicyRef, load_tokenizer

    tok = load_tokenizer(model_dir)
    cfg = _cfg(batch, max_len, pack)
    trainer = make_trainer("sft", samples, PolicyRef(model_dir), tok, cfg, out)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    seen = sum(r["tokens"] for r in trainer.metric_rows)
    assert seen == work.tokens, (seen, work.tokens)  # every token of every sequence, once
    return Speed(work.tokens / wall, work.episodes / wall)


def run_trl(model_dir: Path, samples, work: Work, batch: int, max_len: int, out: Path) -> Speed:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rows = [
        {
            "input_ids": s.input_ids,
            "labels": [t if m else -100 for t, m in zip(s.input_ids, s.action_mask, strict=True)],
        }
        for s in samples
    ]
    cfg = _cfg(batch, max_len)
    args = SFTConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=batch,
        learning_rate=cfg.sft_learning_rate,
        num_train_epochs=1,
        max_length=max_len,
        max_grad_norm=cfg.max_grad_norm,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        lr_scheduler_type="constant",
        dataloader_num_workers=0,
        bf16=False,
    )
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok
    )
    ds = trainer.train_dataset
    tokens = sum(len(x) for x in ds["input_ids"])
    supervised = sum(sum(1 for t in lab[1:] if t != -100) for lab in ds["labels"])
    assert (len(ds), tokens, supervised) == (work.sequences, work.tokens, work.supervised), (
        "TRL would not train the same sequences",
        (len(ds), tokens, supervised),
        work,
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    return Speed(tokens / wall, work.episodes / wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4, help="sequences per step, both sides")
    parser.add_argument("--max-len", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--trajectories", type=Path, nargs="+", help="rollouts' trajectories.parquet files"
    )
    parser.add_argument("--band", type=Path, nargs="+", help="the same rollouts' band.parquet")
    parser.add_argument(
        "--all-episodes",
        action="store_true",
        help="train every train-split episode of --trajectories, passed or not",
    )
    parser.add_argument("--pack", action="store_true", help="our side with train.pack")
    args = parser.parse_args()
    if (args.trajectories is None) != (args.band is None):
        parser.error("--trajectories and --band go together (both files of one rollout stage)")
    from clawloop.tasks.train import agent_tool_call_parser
    from clawloop.training.sft import sft_samples
    from clawloop.training.trainer_base import load_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        model_dir = ensure_tiny_model(tmpdir / "models")
        convs = [episode(i) for i in range(args.episodes)]
        synthetic = pd.DataFrame(
            [
                {
                    "episode_id": f"e{i}",
                    "task_id": f"t{i}",
                    "split": "train",
                    "attempt": 0,
                    "messages_json": json.dumps(c),
                    "tools_json": json.dumps(TOOLS),
                    "turns_json": json.dumps(sampled_turns(c)),
                    "reward": 1.0,
                    "passed": True,
                    "end_reason": "finished",
                }
                for i, c in enumerate(convs)
            ]
        )
        rows, band = synthetic, pd.DataFrame({"task_id": synthetic["task_id"], "kept": True})
        if args.trajectories is not None:
            rows = pd.concat([pd.read_parquet(p) for p in args.trajectories], ignore_index=True)
            band = pd.concat([pd.read_parquet(p) for p in args.band], ignore_index=True)
            if args.all_episodes:
                rows = rows.assign(passed=True)
                band = pd.DataFrame({"task_id": rows["task_id"].unique(), "kept": True})
        samples, rep = sft_samples(
            rows, band, load_tokenizer(model_dir), _cfg(1, args.max_len), agent_tool_call_parser()
        )
        if not samples:
            print("no SFT sequence in these trajectories (no passed episode of a kept task)")
            return 1
        work = Work(
            sequences=len(samples),
            tokens=sum(len(s.input_ids) for s in samples),
            supervised=sum(sum(s.action_mask[1:]) for s in samples),
            episodes=rep.episodes,
        )
        print(
            f"work, both sides: {work.episodes} episodes -> {work.sequences} sequences, "
            f"{work.tokens:,} tokens, {work.supervised:,} supervised; batch {args.batch} "
            f"sequences, max length {args.max_len}, ours packed: {args.pack}; turns from ids {rep.encode.turns_from_ids}, "
            f"text {rep.encode.turns_from_text}, template {rep.encode.turns_from_template}, "
            f"dropped {rep.encode.turns_dropped}, prefix breaks {rep.encode.prefix_breaks}"
        )
        ours: list[Speed] = []
        trl: list[Speed] = []
        for r in range(args.repeats):
            ours.append(
                run_ours(
                    model_dir, samples, work, args.batch, args.max_len, tmpdir / f"o{r}", args.pack
                )
            )
            trl.append(
                run_trl(model_dir, samples, work, args.batch, args.max_len, tmpdir / f"t{r}")
            )
    best_o = max(ours, key=lambda x: x.tokens_s)
    best_t = max(trl, key=lambda x: x.tokens_s)
    for name, runs, best in (("ours", ours, best_o), ("trl ", trl, best_t)):
        each = " ".join(f"{x.tokens_s:,.0f}" for x in runs)
        print(
            f"{name} tokens/s: {each}  best {best.tokens_s:,.0f}  "
            f"(episodes/s {best.episodes_s:.2f})"
        )
    print(
        f"ratio ours/trl (best of {args.repeats}, same sequences): "
        f"{best_o.tokens_s / best_t.tokens_s:.2f}x tokens/s, "
        f"{best_o.episodes_s / best_t.episodes_s:.2f}x episodes/s  (target >= 0.9x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
