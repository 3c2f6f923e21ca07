"""Command line for the train stage, outside the Prefect flow (and under `accelerate launch`).

    python -m clawloop.flows.cli.train tiny-model OUT_DIR
    python -m clawloop.flows.cli.train train --trajectories T.parquet --band B.parquet \
        --base-model MODEL_DIR --out OUT_DIR [--phases sft --lora true ...]
    python -m clawloop.flows.cli.train train ... --explain 3   # what would be trained, decoded
    accelerate launch --config_file training/configs/zero3.yaml -m clawloop.flows.cli.train train ...

Every `TrainConfig` field is a flag (`--sft-learning-rate 1e-5`). `register(subparsers)` adds the
same verbs to the `clawloop` command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clawloop.flows.cli import config_flags
from clawloop.training.config import TrainConfig, TrainConfigError


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Every TrainConfig field as a flag (base_model: the verb's own required --base-model)."""
    config_flags.add_config_flags(parser, TrainConfig, skip={"base_model"})


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The flags' TrainConfig; with `--train-config FILE` (a TrainConfig as JSON, what a launched
    stage passes) the file's, with any flag that differs from its default applied over it."""
    path = getattr(args, "train_config", None)
    if path:
        flags = {
            name: getattr(args, name) for name in TrainConfig.model_fields if name != "base_model"
        }
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise TrainConfigError(
                f"--train-config {path}: cannot read it as JSON ({exc})"
            ) from exc
        if not isinstance(data, dict):
            raise TrainConfigError(
                f"--train-config {path}: expected a JSON object of train settings"
            )
        defaults = {name: info.default for name, info in TrainConfig.model_fields.items()}
        data.pop("base_model", None)
        data.update({k: v for k, v in flags.items() if v != defaults[k]})
        return TrainConfig.from_dict({**data, "base_model": getattr(args, "base_model", None)})
    return config_flags.config_from_args(
        args, TrainConfig, skip={"base_model"}, base_model=getattr(args, "base_model", None)
    )


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    from clawloop.training.tiny_model import build_tiny_model

    out = Path(args.out_dir)
    if out.exists() and not out.is_dir():
        print(f"clawloop tiny-model: {out} is a file, not a folder", file=sys.stderr)
        return 2
    try:
        print(build_tiny_model(out, seed=args.seed))
    except FileExistsError as exc:  # a folder holding something else: said, nothing replaced
        print(f"clawloop tiny-model: {exc}", file=sys.stderr)
        return 2
    return 0


def _parquet_problem(path: Path) -> str | None:
    """What keeps `path` from being read as a Parquet file (None: nothing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is a folder, not a Parquet file"
    try:
        pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        return f"is not a Parquet file ({str(exc).splitlines()[0]})"
    return None


def _cmd_train(args: argparse.Namespace) -> int:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clawloop.storage.schemas import CHECKPOINT, TRAIN_METRICS
    from clawloop.tasks.train import agent_tool_call_parser
    from clawloop.training.launch import is_rank_zero
    from clawloop.training.stage import TrainError, train_stage

    try:
        cfg = config_from_args(args)
    except ValueError as exc:  # a TrainConfigError, or a flag value TrainConfig refuses
        print(f"clawloop train: {exc}", file=sys.stderr)
        return 2
    frames = []
    for flag, p in (("--trajectories", args.trajectories), ("--band", args.band)):
        problem = _parquet_problem(Path(p))
        if problem is not None:
            print(f"clawloop train: {flag} {p} {problem}", file=sys.stderr)
            return 2
        frames.append(pd.read_parquet(p))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"clawloop train: --out {out} is a file, not a folder", file=sys.stderr)
        return 2
    traj, band = frames
    if args.explain:
        from clawloop.training.explain import explain
        from clawloop.training.trainer_base import load_tokenizer

        tok = load_tokenizer(Path(args.base_model))
        print(explain(traj, band, tok, cfg, args.explain, parser=agent_tool_call_parser()))
        return 0
    try:
        result = train_stage(
            traj,
            band,
            cfg,
            args.base_model,
            out,
            init_adapter=Path(args.init_adapter) if args.init_adapter else None,
            tool_call_parser=agent_tool_call_parser(),
        )
    except (TrainError, ValueError, OSError) as exc:  # no checkpoint written: one line, exit 1
        print(f"clawloop train: {exc}", file=sys.stderr)
        return 1
    if not is_rank_zero():  # under a launcher rank 0 writes the files; the others only trained
        return 0
    if args.result_json:
        Path(args.result_json).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    metrics = pa.Table.from_pandas(
        result.metrics_frame(), schema=TRAIN_METRICS, preserve_index=False
    )
    pq.write_table(metrics, out / "metrics.parquet")
    pq.write_table(
        pa.Table.from_pylist([result.checkpoint_row()], schema=CHECKPOINT),
        out / "checkpoint.parquet",
    )
    print(json.dumps({k: str(v) for k, v in result.checkpoint_row().items()}, indent=2))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    """The memory plan per GPU of a run config's train section (training/memory.py)."""
    from clawloop.tasks.config import load_config
    from clawloop.training.memory import GiB, memory_plan, plan_table, shape_of, zero_stage
    from clawloop.training.tiny_model import ensure_tiny_model

    train = load_config(args.config).train
    model = args.base_model or train.base_model or str(ensure_tiny_model())
    gpus = args.gpus or train.num_processes
    zero3 = zero_stage(train.deepspeed) == 3
    shape = shape_of(model, train.lora_r, train.lora_target_modules)
    # plans are for CUDA, where None means on for both (trainer_base, precision.py)
    ckpt = True if train.gradient_checkpointing is None else train.gradient_checkpointing
    bf16 = True if train.bf16 is None else train.bf16
    common = {
        "seq_len": train.max_seq_len,
        "batch": train.per_device_batch_size,
        "checkpointing": ckpt,
        "bf16": bf16,
        "gpu_bytes": args.gpu_memory_gb * GiB,
    }
    name = Path(model).name.removesuffix(".json").removesuffix(".config")
    if args.matrix:
        plans = [
            memory_plan(shape, lora=lora, gpus=n, zero3=z, label=f"{name} {kind}", **common)
            for lora, kind in ((False, "full"), (True, f"LoRA r{train.lora_r}"))
            for n, z in ((1, False), (gpus, False), (gpus, True))
        ]
    else:
        kind = f"LoRA r{train.lora_r}" if train.lora else "full"
        plans = [memory_plan(shape, lora=train.lora, gpus=gpus, zero3=zero3,
                             label=f"{name} {kind}", **common)]  # fmt: skip
    if args.json:
        print(json.dumps([p.as_dict() for p in plans], indent=2))
        return 0
    print(
        f"{name}: {shape.params / 1e9:.2f}B parameters (LoRA r{train.lora_r}: "
        f"{shape.lora_params / 1e6:.1f}M); {train.max_seq_len} tokens x "
        f"{train.per_device_batch_size} per GPU, bf16 {bf16}, gradient checkpointing {ckpt}"
    )
    print(plan_table(plans))
    return 0 if all(p.fits for p in plans) or args.matrix else 1


def register(subparsers) -> None:
    """Add `tiny-model` and `train` to a parent parser's subcommands."""
    tiny = subparsers.add_parser("tiny-model", help="build the tiny offline Qwen3 model")
    tiny.add_argument("out_dir")
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(func=_cmd_tiny_model)
    train = subparsers.add_parser(
        "train", help="SFT and/or GRPO on a rollout stage's Parquet files"
    )
    train.add_argument("--trajectories", required=True, help="trajectories.parquet (rollout stage)")
    train.add_argument("--band", required=True, help="band.parquet (rollout stage)")
    train.add_argument(
        "--base-model", required=True, help="model folder (or hub name) to start from"
    )
    train.add_argument("--out", required=True, help="folder for checkpoints and metrics.parquet")
    train.add_argument(
        "--init-adapter",
        default=None,
        help="a LoRA adapter folder (a LoRA train stage's `adapter`) to continue (needs --lora true)",
    )
    train.add_argument(
        "--train-config",
        default=None,
        metavar="FILE",
        help="train settings as JSON (a TrainConfig; what a launched stage passes); flags given "
        "with a non-default value apply over it",
    )
    train.add_argument(
        "--result-json",
        default=None,
        metavar="FILE",
        help="also write the stage's whole result (status, reason, checkpoint, counts, metrics) "
        "as JSON here (rank 0 only under a launcher)",
    )
    train.add_argument(
        "--explain",
        type=int,
        default=0,
        metavar="N",
        help="print the first N training sequences with their trained spans decoded (and the "
        "turns per path: sampled ids, sampled text, dropped), then exit without training",
    )
    add_config_flags(train)
    train.set_defaults(func=_cmd_train)
    plan = subparsers.add_parser(
        "plan",
        help="GPU memory per GPU of a run config's training: weights, grads, optimizer, "
        "activations, logits",
    )
    plan.add_argument("--config", default=None, help="run YAML (default: the embedded defaults)")
    plan.add_argument("--base-model", default=None, help="model folder or config.json instead "
                      "of train.base_model")  # fmt: skip
    plan.add_argument("--gpus", type=int, default=None, help="GPUs (default: train.num_processes)")
    plan.add_argument("--gpu-memory-gb", type=float, default=80.0, help="memory of one GPU")
    plan.add_argument("--matrix", action="store_true",
                      help="full vs LoRA, 1 GPU vs --gpus, ZeRO-3 or not")  # fmt: skip
    plan.add_argument("--json", action="store_true", help="the plans as JSON")
    plan.set_defaults(func=_cmd_plan)


def build_parser() -> argparse.ArgumentParser:
    """The parser of `python -m clawloop.flows.cli.train` (what a launcher runs)."""
    parser = argparse.ArgumentParser(
        prog="python -m clawloop.flows.cli.train", description=__doc__.split("\n")[0]
    )
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
