"""Training tokens/s of clawloop's masked SFT against plain TRL SFTTrainer, same data, same run.

Both train the tiny offline model for one epoch on the same synthetic multi-turn tool episodes,
same batch size and learning rate; TRL gets the conversations (assistant_only_loss=True, its own
tokenisation), ours gets the trajectory rows. Each side counts the non-pad tokens it processed and
divides by the wall time of `trainer.train()`. Runs alternate (ours, TRL, ours, TRL...) and the
best of each is reported, since the machine is shared. Prints the ratio ours / TRL (target >= 0.9).

    .venv/bin/python benchmarks/train_throughput.py [--episodes 32] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd  # noqa: E402

from clawloop.training.config import TrainConfig  # noqa: E402
from clawloop.training.tiny_model import ensure_tiny_model  # noqa: E402

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


def run_ours(
    model_dir: Path, rows: pd.DataFrame, band: pd.DataFrame, batch: int, out: Path
) -> float:
    from clawloop.training.sft import sft_samples
    from clawloop.training.stage import run_phase
    from clawloop.training.trainer_base import PolicyRef, load_tokenizer

    cfg = TrainConfig(phases="sft", per_device_batch_size=batch, max_seq_len=8192)
    tok = load_tokenizer(model_dir)
    samples, _ = sft_samples(rows, band, tok, cfg)
    tokens = sum(len(s.input_ids) for s in samples)
    t0 = time.perf_counter()
    _, metrics = run_phase("sft", samples, PolicyRef(model_dir), tok, cfg, out)
    wall = time.perf_counter() - t0
    seen = sum(r["tokens"] for r in metrics)  # includes only logged steps; equals `tokens`
    return (seen or tokens) / wall


def run_trl(model_dir: Path, convs: list[list[dict]], batch: int, out: Path) -> float:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ds = Dataset.from_list([{"messages": c, "tools": json.dumps(TOOLS)} for c in convs])
    args = SFTConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=batch,
        learning_rate=1e-4,
        num_train_epochs=1,
        assistant_only_loss=True,
        max_length=8192,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        lr_scheduler_type="constant",
        dataloader_num_workers=0,
        bf16=False,
    )
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    tokens = sum(len(x) for x in trainer.train_dataset["input_ids"])
    t0 = time.perf_counter()
    trainer.train()
    return tokens / (time.perf_counter() - t0)  # one epoch: every token of the dataset once


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir = ensure_tiny_model(work / "models")
        convs = [episode(i) for i in range(args.episodes)]
        rows = pd.DataFrame(
            [
                {
                    "episode_id": f"e{i}",
                    "task_id": f"t{i}",
                    "split": "train",
                    "attempt": 0,
                    "messages_json": json.dumps(c),
                    "tools_json": json.dumps(TOOLS),
                    "turns_json": "[]",
                    "reward": 1.0,
                    "passed": True,
                    "end_reason": "finished",
                }
                for i, c in enumerate(convs)
            ]
        )
        band = pd.DataFrame({"task_id": rows["task_id"], "kept": True})
        ours, trl = [], []
        for r in range(args.repeats):
            ours.append(run_ours(model_dir, rows, band, args.batch, work / f"ours{r}"))
            trl.append(run_trl(model_dir, convs, args.batch, work / f"trl{r}"))
    print(f"ours  tokens/s: {' '.join(f'{x:,.0f}' for x in ours)}  best {max(ours):,.0f}")
    print(f"trl   tokens/s: {' '.join(f'{x:,.0f}' for x in trl)}  best {max(trl):,.0f}")
    print(f"ratio ours/trl (best of {args.repeats}): {max(ours) / max(trl):.2f}x  (target >= 0.9x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
