"""Does the loop make an agent better? K iterations with a named model, then the table the seed
reports: per iteration the held-out pass rate and the external benchmark's (ClawGym-Bench) pass
rate and mean score, each with its 95 % interval, beside what train did. Row "base" is the
untrained policy on the same tasks (diagnose.baseline); every iteration grades the same held-out
tasks (synthesize.fixed_eval).

    # CPU, the smallest useful scale: a GGUF (or HF folder) as the policy, LoRA, a ClawGym sample
    python benchmarks/learning.py --base-model /work/models/qwen-0.5b.gguf --lora \\
        --eval-tasks /work/clawgym-data/RL/data/clawgym_eval --iterations 2 --root /tmp/learn
    # a GPU host: the same command with a vLLM endpoint serving --base-model, which gets each
    # iteration's LoRA adapter at runtime (vllm serve M --enable-lora, with
    # VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; or --reload restart), and your cluster config
    python benchmarks/learning.py --config cluster --base-url http://vllm:8000/v1 \\
        --model Qwen/Qwen2.5-Coder-1.5B-Instruct --base-model Qwen/Qwen2.5-Coder-1.5B-Instruct \\
        --lora --reload lora --eval-tasks DIR --iterations 3

It runs `clawloop run` (so a killed benchmark resumes with the same --run-id) and reads the run's
figures the way `clawloop report` does; the run's report.md and report.png are written beside it.
Nothing here is timed against a baseline: the output is the learning table and the wall time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

from clawloop.diagnosis.external import wilson_interval
from clawloop.diagnosis.paired import PairedPasses, PairedScores
from clawloop.flows.cli import main as clawloop
from clawloop.flows.cli.report import run_figures, write_report
from clawloop.flows.report import (
    EXTERNAL_COLUMNS,
    EXTERNAL_PAIRED_COLUMNS,
    PAIRED_COLUMN,
    IterationFigures,
    RunFigures,
    external_cells,
)
from clawloop.tasks.config import config_file


def heldout_cell(it: IterationFigures) -> str:
    """passed/n, the rate and its 95 % Wilson interval."""
    n = sum(e for _, e in it.heldout.values())
    passed = sum(p for p, _ in it.heldout.values())
    if not n:
        return "-"
    lo, hi = wilson_interval(passed, n)
    return f"{passed}/{n} {passed / n:.1%} [{lo:.1%}, {hi:.1%}]"


def _test(test: PairedPasses | PairedScores | None) -> str:
    return "-" if test is None else test.cell()


def table(figures: RunFigures) -> str:
    """The learning table, one row per iteration (markdown); the external cells are the report's,
    each pass rate followed by its paired test against row base (diagnosis/paired.py)."""
    head = ["iteration", "held-out pass [95% Wilson]", PAIRED_COLUMN, EXTERNAL_COLUMNS[0],
            EXTERNAL_PAIRED_COLUMNS[0], EXTERNAL_COLUMNS[1], EXTERNAL_PAIRED_COLUMNS[1], "train",
            "steps", "SFT loss", "GRPO loss"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for it in figures.iterations:
        sft, grpo = it.mean_loss("sft"), it.mean_loss("grpo")
        ext_pass, ext_score = external_cells(it)
        cells = [
            it.label,
            heldout_cell(it),
            _test(it.heldout_test),
            ext_pass,
            _test(it.external_test),
            ext_score,
            _test(it.score_test),
            it.train_status or "-",
            "-" if it.train_steps is None else str(it.train_steps),
            "-" if sft is None else f"{sft:.4f}",
            "-" if grpo is None else f"{grpo:.4f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_config(args: argparse.Namespace) -> dict:
    """The run's YAML: --config (a file or a shipped profile's name; none: the local profile,
    which lies under every config) with the benchmark's choices."""
    cfg = yaml.safe_load(config_file(args.config).read_text()) if args.config else {}
    cfg["iterations"] = args.iterations
    # One measurement, not K: the same held-out tasks in every iteration and a row 0 of the base
    # policy on them, so a change in the pass rate is the training's doing, not the draw's.
    cfg.setdefault("synthesize", {})["fixed_eval"] = True
    diagnose = cfg.setdefault("diagnose", {})
    diagnose["baseline"] = not args.no_baseline
    if args.heldout is not None:
        cfg["synthesize"]["n_eval"] = args.heldout
    if args.eval_n is not None:
        diagnose["eval_n"] = args.eval_n
    if args.eval_tasks:
        diagnose["eval_tasks"] = [str(Path(p).resolve()) for p in args.eval_tasks]
    if args.base_model:
        cfg.setdefault("train", {})["base_model"] = args.base_model
    if args.lora:
        cfg.setdefault("train", {})["lora"] = True
    if args.base_url:
        cfg.setdefault("llm", {}).update({"base_url": args.base_url, "model": args.model})
    if args.reload:
        cfg.setdefault("llm", {})["reload"] = args.reload
    llm = cfg.get("llm") or {}
    if llm.get("reload") == "lora" and (cfg.get("train") or {}).get("lora"):
        # runtime LoRA applies adapters to the base the server serves: keep them unmerged
        cfg["train"].setdefault("merge_lora", False)
    if llm.get("base_url") and llm.get("reload", "none") == "none":
        raise SystemExit(
            f"learning.py: the policy endpoint {llm['base_url']} would keep serving the base "
            "weights (llm.reload is none), so no iteration would measure what train made: pass "
            "--reload lora (with --lora; vLLM started with --enable-lora and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) or --reload restart (restart vLLM on each "
            "printed checkpoint, then rerun with the same --run-id)"
        )
    return cfg


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--config",
        help="a run config YAML or a shipped profile's name (default: the local profile)",
    )
    p.add_argument("--iterations", type=int, default=2, help="K")
    p.add_argument("--eval-tasks", nargs="*", default=[], help="ClawGym or Harbor eval set folders")
    p.add_argument(
        "--heldout",
        type=int,
        help="held-out candidates (synthesize.n_eval), the same every iteration",
    )
    p.add_argument("--eval-n", type=int, help="episodes per held-out task (diagnose.eval_n)")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip row 0 (the base policy on the same held-out tasks, before any training)",
    )
    p.add_argument(
        "--base-model", help="the policy: a GGUF file or a model folder (train.base_model)"
    )
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter (train.lora)")
    p.add_argument("--base-url", help="an OpenAI-compatible policy endpoint (vLLM) instead")
    p.add_argument("--model", default="policy", help="the model name the endpoint serves")
    p.add_argument(
        "--reload",
        choices=["lora", "restart"],
        help="with --base-url: how the endpoint gets each checkpoint (llm.reload); lora with "
        "--lora keeps the adapters unmerged (train.merge_lora: false)",
    )
    p.add_argument("--root", default="runs", help="storage root")
    p.add_argument("--run-id", default=f"learning-{time.strftime('%Y%m%d-%H%M%S')}")
    p.add_argument(
        "--no-prefect",
        action="store_true",
        help="run the loop without Prefect (same artifacts; no temporary API server to start, "
        "which can time out on a loaded machine)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(run_config(args), f)
    t0 = time.time()
    run = ["run", "--config", f.name, "--root", args.root, "--run-id", args.run_id]
    rc = clawloop(run + (["--no-prefect"] if args.no_prefect else []))
    wall = time.time() - t0
    figures = run_figures(args.root, args.run_id)
    md, png = write_report(args.root, figures)
    print(f"\nlearning: run {args.run_id}, K={args.iterations}, {wall:.0f} s wall (exit {rc})")
    print(table(figures))
    print(f"report: {md}  plot: {png}")
    if rc:
        print(
            f"the loop stopped (see above); to resume it, rerun this command with --run-id {args.run_id}"
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
