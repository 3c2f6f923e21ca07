"""Training speed on the same tokens: ours vs TRL, fp32 vs bf16, LoRA vs full, padded vs packed.

Every row trains the same SFT sequences, in the same order (sequential sampler), in the same
batches, for one epoch, in its own fresh process (so each row's memory and threads start clean),
and reports real (non-pad) tokens per CPU-second of its process (all threads) and per wall
second over the steps after the first (the first step builds the kernels), with the row's peak
RSS. On a shared host wall time measures the share of the cores the row got as much as the
training: the CPU-second ratio is the comparison. Ratios are against `ours fp32 full padded` of
the same invocation; the table is printed again after every row. The sequences are the train stage's encoding (`sft_samples`,
the agent's parser) of synthetic multi-turn tool episodes of 1-4 turns, so lengths differ and
padding is real.

The model is a real one cut down to fit a 2-core, ~5 GB budget: Qwen2.5-Coder-0.5B-Instruct
(`scripts/setup-model.sh 0.5b`), its first `--layers` decoder layers with their real weights,
the final norm, and the input embedding tied to the output head as in the published model
(`tie_word_embeddings`; the GGUF conversion holds a separate de-quantised head, dropped here).
A full fine-tune of all 24 layers in fp32 needs ~8 GB of weights, gradients and AdamW state
before activations.

Rows (`--rows` picks a subset, by the short names):
  base        ours, fp32, full, padded             (the baseline)
  trl         TRL SFTTrainer, fp32, full, padded   (same tokens, batches, optimizer, lr)
  bf16        ours, bf16 autocast over fp32 master weights, full, padded
  lora        ours, fp32, LoRA r16 all-linear, padded
  lora-bf16   ours, LoRA with a bf16 frozen base and bf16 autocast (adapters fp32)
  trl-lora    TRL SFTTrainer with the same peft LoRA config, fp32
  packed      ours, fp32, full, train.pack (one row per micro-batch, no pad tokens)
  trl-pf      TRL SFTTrainer padding_free=True (its packed micro-batch), fp32, full

`--profile` adds one torch.profiler capture of step 2 of `base` and of `lora`: the ops that take
the most self CPU time, and forward/backward/optimizer shares.

    .venv/bin/python benchmarks/train_throughput.py [--layers 4] [--episodes 12] [--batch 2]
        [--rows base,trl,...] [--profile] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = {
    # name: (side, bf16, lora, pack)
    "base": ("ours", False, False, False),
    "trl": ("trl", False, False, False),
    "bf16": ("ours", True, False, False),
    "lora": ("ours", False, True, False),
    "lora-bf16": ("ours", True, True, False),
    "trl-lora": ("trl", False, True, False),
    "packed": ("ours", False, False, True),
    "trl-pf": ("trl", False, False, True),
}
ORDER = ("base", "trl", "lora", "packed", "bf16", "trl-pf", "lora-bf16", "trl-lora")
LABELS = {
    "base": "ours fp32 full padded",
    "trl": "TRL  fp32 full padded",
    "bf16": "ours bf16 full padded",
    "lora": "ours fp32 LoRA padded",
    "lora-bf16": "ours bf16 LoRA padded (bf16 base)",
    "trl-lora": "TRL  fp32 LoRA padded",
    "packed": "ours fp32 full packed",
    "trl-pf": "TRL  fp32 full padding-free",
}
LR = 1e-5
DEFAULT_MODEL = Path.home() / ".cache" / "clawloop" / "models" / "qwen2.5-coder-0.5b"
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


# --- the work: the same sequences for every row ---------------------------------------------


def episode(i: int) -> list[dict]:
    """A multi-turn tool episode of 1-4 turns (so sequence lengths differ)."""
    msgs = [
        {"role": "system", "content": "You are a careful agent working in /workspace."},
        {"role": "user", "content": f"Reconcile the logs in data/ into output/report_{i}.csv."},
    ]
    for t in range(1 + i % 4):
        args = json.dumps({"command": f"grep -rn 'hive {i * 7 + t}' data/ | head -n {t + 5}"})
        call = {"id": f"c{t}", "type": "function", "function": {"name": "bash", "arguments": args}}
        msgs.append(
            {"role": "assistant", "content": f"Step {t}: checking hive {i}.", "tool_calls": [call]}
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


def build_work(model_dir: Path, episodes: int) -> list[dict]:
    """The SFT sequences (`input_ids`, `action_mask`) the train stage builds from the episodes."""
    import pandas as pd

    from clawloop.tasks.train import agent_tool_call_parser
    from clawloop.training.config import TrainConfig
    from clawloop.training.sft import sft_samples
    from clawloop.training.trainer_base import load_tokenizer

    rows = pd.DataFrame(
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
            for i, c in enumerate(episode(i) for i in range(episodes))
        ]
    )
    band = pd.DataFrame({"task_id": rows["task_id"], "kept": True})
    cfg = TrainConfig(phases="sft", max_seq_len=8192)
    samples, _ = sft_samples(rows, band, load_tokenizer(model_dir), cfg, agent_tool_call_parser())
    return [{"input_ids": s.input_ids, "action_mask": s.action_mask} for s in samples]


def cut_model(src: Path, layers: int, out: Path) -> Path:
    """`src`'s first `layers` decoder layers (real weights), final norm and embedding, with the
    output head tied to the embedding, saved to `out`."""
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    keep = {}
    with safe_open(str(src / "model.safetensors"), "pt") as f:
        for key in f.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
            if key == "lm_head.weight":
                continue
            if key.startswith("model.layers.") and int(key.split(".")[2]) >= layers:
                continue
            keep[key] = f.get_tensor(key).contiguous()
    save_file(keep, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((src / "config.json").read_text())
    config["num_hidden_layers"] = layers
    config["tie_word_embeddings"] = True
    if "layer_types" in config:
        config["layer_types"] = config["layer_types"][:layers]
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for f in src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "config.json":
            shutil.copy(f, out / f.name)
    return out


# --- one row, in its own process --------------------------------------------------------------


def _step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.cpu: list[float] = []  # process CPU seconds (all threads) per step
            self._t = self._c = 0.0

        def on_step_begin(self, args, state, control, **kw):
            self._t, self._c = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self._t)
            self.cpu.append(time.process_time() - self._c)

    return StepTimer()


def _profiler_callback(step: int):
    import torch
    from transformers import TrainerCallback

    class Profile(TrainerCallback):
        def __init__(self) -> None:
            self.prof = None

        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == step - 1:
                self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
                self.prof.__enter__()

        def on_step_end(self, args, state, control, **kw):
            if self.prof is not None and state.global_step == step:
                self.prof.__exit__(None, None, None)

    return Profile()


def _ours(name: str, model_dir: Path, samples, batch: int, out: Path):
    from clawloop.training.config import TrainConfig
    from clawloop.training.sequences import TokenSample
    from clawloop.training.stage import make_trainer
    from clawloop.training.trainer_base import PolicyRef, load_tokenizer

    _, bf16, lora, pack = ROWS[name]
    cfg = TrainConfig(
        phases="sft",
        per_device_batch_size=batch,
        max_seq_len=8192,
        sft_learning_rate=LR,
        bf16=bf16,
        lora=lora,
        pack=pack,
        merge_lora=False,
    )
    tok = load_tokenizer(model_dir)
    tsamples = [
        TokenSample(s["input_ids"], s["action_mask"], [math.nan] * len(s["input_ids"]))
        for s in samples
    ]
    return make_trainer("sft", tsamples, PolicyRef(model_dir), tok, cfg, out)


def _trl(name: str, model_dir: Path, samples, batch: int, out: Path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    _, bf16, lora, pack = ROWS[name]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rows = [
        {
            "input_ids": s["input_ids"],
            "labels": [
                t if m else -100 for t, m in zip(s["input_ids"], s["action_mask"], strict=True)
            ],
        }
        for s in samples
    ]
    args = SFTConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=batch,
        learning_rate=LR,
        num_train_epochs=1,
        max_length=None if pack else 8192,  # TRL: padding_free without packing enforces none
        max_grad_norm=1.0,
        seed=0,
        data_seed=0,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        lr_scheduler_type="constant",
        dataloader_num_workers=0,
        bf16=bf16,
        padding_free=pack,
        use_cpu=True,
    )
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=16,
            lora_alpha=32,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="float32")
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        peft_config=peft_config,
    )


def run_row(name: str, model_dir: Path, work_file: Path, batch: int, profile: bool) -> dict:
    """Train one row for one epoch; its timing, tokens and peak memory."""
    import torch

    samples = json.loads(work_file.read_text())
    out = Path(tempfile.mkdtemp(prefix=f"tt-{name}-"))
    side = ROWS[name][0]
    trainer = (_ours if side == "ours" else _trl)(name, model_dir, samples, batch, out)
    trainer.args.train_sampling_strategy = "sequential"  # every row: the same batches in order
    timer = _step_timer()
    trainer.add_callback(timer)
    prof = _profiler_callback(2) if profile else None
    if prof is not None:
        trainer.add_callback(prof)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    lens = [len(s["input_ids"]) for s in samples]
    batches = [lens[i : i + batch] for i in range(0, len(lens), batch)]
    assert len(timer.times) == len(batches), (len(timer.times), len(batches))
    timed = timer.times[1:]  # after the first step
    real = sum(sum(b) for b in batches[1:])
    padded = sum(max(b) * len(b) for b in batches[1:])
    row = {
        "name": name,
        "steps": len(timer.times),
        "first_step_s": timer.times[0],
        "timed_s": sum(timed),
        "tokens": real,
        "padded_tokens": padded,
        "tokens_s": real / sum(timed),
        "cpu_s": sum(timer.cpu[1:]),
        "tokens_cpu_s": real / sum(timer.cpu[1:]),
        "wall_s": wall,
        "trainable": trainable,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "threads": torch.get_num_threads(),
    }
    if prof is not None and prof.prof is not None:
        row["profile"] = prof.prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
    return row


# --- the table --------------------------------------------------------------------------------


def print_table(results: list[dict]) -> None:
    """The rows so far, with ratios against `base` (the first row if base did not run): tokens
    per CPU-second of the training process (all its threads; robust to a shared host giving
    the process a varying share of the cores) and, beside it, per wall-second."""
    base = next((r for r in results if r["name"] == "base"), results[0])
    print(f"\n| row | tok/CPU-s | vs {LABELS[base['name']]} | tok/s wall | vs base (wall) "
          "| CPU-s/step | pad share | trainable | peak RSS GB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        pad = 0.0 if ROWS[r["name"]][3] else 1 - r["tokens"] / r["padded_tokens"]
        print(
            f"| {LABELS[r['name']]} | {r['tokens_cpu_s']:.1f} "
            f"| {r['tokens_cpu_s'] / base['tokens_cpu_s']:.2f}x | {r['tokens_s']:.1f} "
            f"| {r['tokens_s'] / base['tokens_s']:.2f}x | {r['cpu_s'] / (r['steps'] - 1):.1f} "
            f"| {pad:.0%} | {r['trainable'] / 1e6:.1f}M | {r['peak_rss_gb']:.1f} |",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="HF folder to cut")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers kept (real weights)")
    parser.add_argument("--episodes", type=int, default=12, help="sequences (one per episode)")
    parser.add_argument("--batch", type=int, default=2, help="sequences per step, every row")
    parser.add_argument("--rows", default=",".join(ORDER), help=f"subset of {','.join(ORDER)}")
    parser.add_argument("--profile", action="store_true", help="profile step 2 of base and lora")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # internal: run one row, print JSON
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        print(
            "ROW " + json.dumps(run_row(args.row, args.model, args.work, args.batch, args.profile))
        )
        return 0
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {list(ROWS)}")
    if not (args.model / "config.json").is_file():
        parser.error(f"{args.model} is not a model folder: run `bash scripts/setup-model.sh 0.5b`")
    with tempfile.TemporaryDirectory(prefix="train-throughput-") as tmp:
        tmpdir = Path(tmp)
        model_dir = cut_model(args.model, args.layers, tmpdir / "model")
        samples = build_work(model_dir, args.episodes)
        work = tmpdir / "work.json"
        work.write_text(json.dumps(samples))
        lens = [len(s["input_ids"]) for s in samples]
        sup = sum(sum(s["action_mask"][1:]) for s in samples)
        print(
            f"model: {args.model.name} cut to {args.layers} layers (tied head); "
            f"{len(samples)} sequences, {sum(lens):,} tokens ({min(lens)}-{max(lens)} each), "
            f"{sup:,} supervised; batch {args.batch}, sequential order, one epoch per row; "
            f"{os.cpu_count()} cores; timed: steps 2..N"
        )
        results = []
        for name in rows:
            cmd = [sys.executable, __file__, "--row", name, "--model", str(model_dir)]
            cmd += ["--work", str(work), "--batch", str(args.batch)]
            if args.profile and name in ("base", "lora"):
                cmd.append("--profile")
            proc = subprocess.run(cmd, capture_output=True, text=True)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("ROW ")), None)
            if proc.returncode != 0 or line is None:
                print(f"{name}: FAILED (exit {proc.returncode})\n{proc.stderr[-3000:]}")
                continue
            results.append(json.loads(line[4:]))
            print_table(results)  # after every row: a long run still leaves a table behind
    if not results:
        return 1
    for r in results:
        if "profile" in r:
            print(f"\nprofile, step 2 of {LABELS[r['name']]} (self CPU time):\n{r['profile']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
