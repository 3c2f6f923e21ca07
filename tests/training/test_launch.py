"""The train stage under a launcher (training/launch.py).

Fast: the GPU commands are put through accelerate's and torchrun's own parsers and preparation
code (what `accelerate launch` does before it execs), the rules that pick the launcher, and the
failure message. Slow (`-m slow`): real launches on the tiny model on CPU — torchrun with two
gloo processes, accelerate with a CPU config (same weights as in-process), and a launched
training that fails."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from doubles.episodes import band_frame, episode_row
from safetensors.torch import load_file

from clawloop.flows.cli.train import build_parser, config_from_args
from clawloop.training.config import TrainConfig
from clawloop.training.launch import (
    TRAIN_MODULE,
    choose_launcher,
    failure_message,
    inside_launcher,
    launch_command,
    needs_launcher,
    root_cause,
    run_logged,
    script_args,
)
from clawloop.training.stage import TrainError, TrainResult, train_stage

ROOT = Path(__file__).resolve().parents[2]
ZERO3_YAML = ROOT / "training" / "configs" / "zero3.yaml"
ZERO3_JSON = ROOT / "training" / "configs" / "zero3.json"
CPU_ACCELERATE = """compute_environment: LOCAL_MACHINE
distributed_type: 'NO'
mixed_precision: 'no'
num_machines: 1
num_processes: 1
use_cpu: true
"""


def _args(tmp_path: Path) -> list[str]:
    return script_args(
        tmp_path / "t.parquet",
        tmp_path / "b.parquet",
        "/models/Qwen3-8B",
        tmp_path / "out",
        tmp_path / "cfg.json",
        tmp_path / "result.json",
        None,
    )


def _accelerate_prepared(cmd: list[str]):
    """accelerate's own reading of `cmd` (after `python -m accelerate.commands.launch`): its
    parser, its validation (the config file merged in), then its launcher's choice."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    assert cmd[1:3] == ["-m", "accelerate.commands.launch"]
    args = launch_command_parser().parse_args(cmd[3:])
    args, defaults, from_config = _validate_launch_command(args)
    if args.use_deepspeed:  # as accelerate's launch_command does before deepspeed_launcher
        fields = list(defaults.deepspeed_config) if defaults else []
        args.deepspeed_fields_from_accelerate_config = ",".join(
            fields + (["mixed_precision"] if from_config else [])
        )
    return args


def _torchrun_view(args):
    """What accelerate hands torchrun (`_run_torchrun`'s filtering of its args)."""
    import torch.distributed.run as distrib_run
    from accelerate.utils.launch import _filter_args

    return _filter_args(
        args,
        distrib_run.get_args_parser(),
        ["--training_script", args.training_script, "--training_script_args",
         args.training_script_args],
    )  # fmt: skip


def _launched_cli(script: list[str], tmp_path: Path, cfg: TrainConfig) -> TrainConfig:
    """The TrainConfig the launched `clawloop.flows.cli.train` would build from `script`."""
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.model_dump()))
    launched = config_from_args(build_parser().parse_args(script))
    assert launched.base_model == "/models/Qwen3-8B"  # the stage's --base-model
    return launched.model_copy(update={"base_model": cfg.base_model})


def test_zero3_accelerate_config_becomes_deepspeed_torchrun_on_8_gpus(tmp_path):
    cfg = TrainConfig(accelerate_config=str(ZERO3_YAML), num_processes=8, lora=True)
    script = _args(tmp_path)
    cmd = launch_command(cfg, script, cuda=True, mixed_precision="bf16", python="python3")
    args = _accelerate_prepared(cmd)
    assert args.use_deepspeed and not args.multi_gpu and not args.cpu
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    launcher_cmd, env = prepare_deepspeed_cmd_env(args)
    assert launcher_cmd is None  # one node: accelerate runs torchrun itself
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == "3"
    assert env["ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    run = _torchrun_view(args)
    assert run.nproc_per_node == "8"  # train.num_processes, over the file's own value
    assert run.module and run.training_script == TRAIN_MODULE
    assert run.training_script_args == script
    assert _launched_cli(run.training_script_args, tmp_path, cfg) == cfg


def test_deepspeed_json_launch_passes_the_file_to_accelerate_and_the_trainer(tmp_path):
    cfg = TrainConfig(deepspeed=str(ZERO3_JSON), num_processes=4)
    script = _args(tmp_path)
    cmd = launch_command(cfg, script, cuda=True, mixed_precision="bf16", python="python3")
    args = _accelerate_prepared(cmd)
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    _, env = prepare_deepspeed_cmd_env(args)
    assert env["ACCELERATE_DEEPSPEED_CONFIG_FILE"] == str(ZERO3_JSON)
    assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    run = _torchrun_view(args)
    assert (run.nproc_per_node, run.training_script) == ("4", TRAIN_MODULE)
    launched = _launched_cli(run.training_script_args, tmp_path, cfg)
    assert launched.deepspeed == str(ZERO3_JSON)  # TrainingArguments(deepspeed=...) gets it too


def test_several_gpus_without_deepspeed_is_accelerate_multi_gpu(tmp_path):
    cfg = TrainConfig(num_processes=4, bf16=False)
    cmd = launch_command(cfg, _args(tmp_path), cuda=True, mixed_precision="no", python="py")
    args = _accelerate_prepared(cmd)
    assert args.multi_gpu and not args.use_deepspeed
    from accelerate.utils.launch import prepare_multi_gpu_env

    env = prepare_multi_gpu_env(args)
    assert env["ACCELERATE_MIXED_PRECISION"] == "no"  # train.bf16: false is not outvoted
    assert _torchrun_view(args).nproc_per_node == "4"


def test_cpu_host_uses_torchrun_for_several_processes(tmp_path):
    import torch.distributed.run as distrib_run

    cfg = TrainConfig(num_processes=2)
    assert choose_launcher(cfg, cuda=False) == "torchrun"
    cmd = launch_command(cfg, _args(tmp_path), cuda=False, mixed_precision="no", python="py")
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    run = distrib_run.get_args_parser().parse_args(cmd[3:])
    assert run.standalone and run.nproc_per_node == "2" and run.module
    assert (run.training_script, run.training_script_args) == (TRAIN_MODULE, _args(tmp_path))


def test_launcher_rules_refuse_what_cannot_run():
    assert not needs_launcher(TrainConfig())
    assert needs_launcher(TrainConfig(num_processes=2))
    assert needs_launcher(TrainConfig(deepspeed="x.json"))
    assert choose_launcher(TrainConfig(num_processes=8), cuda=True) == "accelerate"
    with pytest.raises(ValueError, match="needs CUDA GPUs"):
        choose_launcher(TrainConfig(deepspeed=str(ZERO3_JSON)), cuda=False)
    with pytest.raises(ValueError, match="needs CUDA GPUs"):
        choose_launcher(TrainConfig(accelerate_config=str(ZERO3_YAML)), cuda=False)
    with pytest.raises(ValueError, match="launcher: torchrun"):
        choose_launcher(TrainConfig(num_processes=2, launcher="accelerate"), cuda=False)
    with pytest.raises(ValueError, match="read by `accelerate launch` only"):
        choose_launcher(TrainConfig(accelerate_config="a.yaml", launcher="torchrun"), cuda=True)
    with pytest.raises(ValueError, match="launcher"):
        TrainConfig(launcher="mpirun")
    assert inside_launcher({"CLAWLOOP_LAUNCHED": "1"}) and inside_launcher({"LOCAL_RANK": "0"})
    assert not inside_launcher({})


def test_a_failed_launch_says_why_where_and_what_to_do(tmp_path):
    log = tmp_path / "train.log"
    code = (
        "import sys; print('loading'); "
        "print('clawloop train: train stage: the sft phase crashed with OSError: no weights', "
        "file=sys.stderr); sys.exit(3)"
    )
    cmd = [sys.executable, "-c", code]
    rc = run_logged(cmd, {}, log)
    assert rc == 3
    msg = failure_message(rc, cmd, log)
    assert "exited 3: clawloop train: train stage: the sft phase crashed with OSError" in msg
    assert f"log {log}" in msg and "Last lines of the log:\n$ " in msg and "\nloading\n" in msg
    assert "pip install 'clawloop[gpu]'" in msg
    assert root_cause("x\nValueError: bad\nChildFailedError: summary\n") == "ValueError: bad"


def test_train_config_file_round_trips_through_the_cli(tmp_path):
    cfg = TrainConfig(lora=True, tis_cap=2.0, bf16=None, deepspeed=str(ZERO3_JSON), seed=7)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.model_dump()))
    argv = _args(tmp_path)
    got = config_from_args(build_parser().parse_args(argv))
    assert got.model_copy(update={"base_model": None}) == cfg
    over = config_from_args(build_parser().parse_args([*argv, "--seed", "3"]))
    assert over.seed == 3 and over.tis_cap == 2.0  # a flag given applies over the file
    result = TrainResult("trained", "r", tmp_path / "m", tmp_path / "a", "b", "lora",
                         ["sft"], [{"step": 1}], {"sft_samples": 2}, 1.5, "float32")  # fmt: skip
    assert TrainResult.from_json(json.loads(json.dumps(result.to_json()))) == result


# --- real launches on CPU (tiny model) ---------------------------------------------------------


def _frames():
    rows = [episode_row("t1", i, r, variant=i) for i, r in enumerate([1.0, 0.0, 1.0, 0.0])]
    return pd.DataFrame(rows), band_frame(["t1"], [True])


def _steps(**kw) -> TrainConfig:
    return TrainConfig(per_device_batch_size=1, sft_max_steps=2, grpo_max_steps=2, **kw)


@pytest.mark.slow
def test_torchrun_two_cpu_processes_train_and_hand_back_the_checkpoint(tiny_model_dir, tmp_path):
    traj, band = _frames()
    result = train_stage(traj, band, _steps(num_processes=2), tiny_model_dir, tmp_path)
    assert result.status == "trained" and result.phases_run == ["grpo", "sft"]
    assert result.checkpoint_dir == tmp_path / "sft" / "model"
    assert (result.checkpoint_dir / "model.safetensors").is_file()
    assert [r["phase"] for r in result.metrics] == ["grpo", "grpo", "sft", "sft"]
    assert result.counts["kept_groups"] == 1 and result.dtype == "float32"
    assert result.counts["processes"] == 2  # one gloo group (DDP), not two lone trainers
    log = (tmp_path / "launch" / "train.log").read_text()
    assert "torch.distributed.run --standalone --nnodes 1 --nproc_per_node 2" in log
    assert not (tmp_path / "launch" / "trajectories.parquet").exists()  # input copies removed


@pytest.mark.slow
def test_accelerate_launch_trains_the_weights_in_process_training_does(tiny_model_dir, tmp_path):
    traj, band = _frames()
    conf = tmp_path / "cpu.yaml"
    conf.write_text(CPU_ACCELERATE)
    launched = train_stage(
        traj, band, _steps(phases="sft", accelerate_config=str(conf)), tiny_model_dir,
        tmp_path / "launched",
    )  # fmt: skip
    here = train_stage(traj, band, _steps(phases="sft"), tiny_model_dir, tmp_path / "here")
    log = (tmp_path / "launched" / "launch" / "train.log").read_text()
    assert "accelerate.commands.launch --config_file" in log
    assert launched.status == here.status == "trained"
    assert [r["loss"] for r in launched.metrics] == pytest.approx(
        [r["loss"] for r in here.metrics], rel=1e-4
    )
    a = load_file(str(launched.checkpoint_dir / "model.safetensors"))
    b = load_file(str(here.checkpoint_dir / "model.safetensors"))
    base = load_file(str(tiny_model_dir / "model.safetensors"))
    moved = sum((b[k] - base[k]).abs().sum().item() for k in b)
    apart = sum((a[k] - b[k]).abs().sum().item() for k in b)
    assert moved > 0 and apart < 0.01 * moved  # the same update (thread counts may differ)


@pytest.mark.slow
def test_a_launched_training_that_fails_raises_with_its_log(tiny_model_dir, tmp_path):
    traj, band = _frames()
    with pytest.raises(TrainError) as err:
        train_stage(traj, band, _steps(num_processes=2), tmp_path / "no-model", tmp_path / "o")
    msg = str(err.value)
    assert "the launched training exited 1: clawloop train:" in msg
    assert str(tmp_path / "no-model") in msg
    assert f"log {tmp_path / 'o' / 'launch' / 'train.log'}" in msg


@pytest.mark.slow
def test_launched_cli_writes_result_only_on_rank_zero(tiny_model_dir, tmp_path, monkeypatch):
    """Under a launcher every rank runs the CLI; only rank 0 writes the result files."""
    from clawloop.flows.cli.train import main

    traj, band = _frames()
    traj.to_parquet(tmp_path / "t.parquet")
    band.to_parquet(tmp_path / "b.parquet")
    cfg = TrainConfig(phases="sft", sft_max_steps=1, per_device_batch_size=1)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.model_dump()))
    argv = _args(tmp_path)
    argv[argv.index("--base-model") + 1] = str(tiny_model_dir)
    monkeypatch.setenv("CLAWLOOP_LAUNCHED", "1")
    monkeypatch.setenv("RANK", "1")
    assert main(argv) == 0
    assert (tmp_path / "out" / "sft" / "model").is_dir()  # rank 1 trained (alone, here)
    assert not (tmp_path / "result.json").exists()
    assert not (tmp_path / "out" / "checkpoint.parquet").exists()
    monkeypatch.setenv("RANK", "0")
    assert main(argv) == 0
    written = TrainResult.from_json(json.loads((tmp_path / "result.json").read_text()))
    assert written.status == "trained" and (tmp_path / "out" / "checkpoint.parquet").is_file()
