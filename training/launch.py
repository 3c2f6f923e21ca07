"""The train stage under a launcher: `accelerate launch` (or `torchrun`) as a subprocess on the
trainer's host, its checkpoint and metrics read back.

    if needs_launcher(cfg) and not inside_launcher():
        result = launched_train_stage(trajectories, band, cfg, base_model, out_dir)

With `train.num_processes > 1`, `train.deepspeed` (a DeepSpeed JSON) or `train.accelerate_config`
(an accelerate config YAML, e.g. training/configs/zero3.yaml) one Python process cannot train: the
stage writes its inputs under `out_dir/launch/`, runs

    python -m accelerate.commands.launch [--config_file F] --num_processes N ... \\
        -m clawloop.flows.cli.train train --trajectories ... --train-config ... --out out_dir

(the same as `accelerate launch ...`; `torchrun --standalone --nproc_per_node N -m ...` with
`train.launcher: torchrun`, and on a host without CUDA, where accelerate starts one process unless
MPI is set up), waits for it, and reads `out_dir/launch/result.json` (the TrainResult rank 0
wrote). Its output goes to `out_dir/launch/train.log`; a failure raises TrainError with the log's
tail, where the log is and the command. The launched processes see `CLAWLOOP_LAUNCHED=1` (and
torchrun's `LOCAL_RANK`), so they train in-process instead of launching again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

from clawloop.training.config import TrainConfig

TRAIN_MODULE = "clawloop.flows.cli.train"  # the entry every launched process runs
LAUNCHED_ENV = "CLAWLOOP_LAUNCHED"
LOG_TAIL_LINES = 40


def needs_launcher(cfg: TrainConfig) -> bool:
    """True when one in-process Trainer cannot run `cfg`: several processes, or DeepSpeed."""
    return cfg.num_processes > 1 or bool(cfg.deepspeed) or bool(cfg.accelerate_config)


def inside_launcher(env: dict[str, str] | None = None) -> bool:
    """True in a process a launcher started (ours, or a user's `accelerate launch`/`torchrun`
    of several processes): train here, never launch again."""
    env = os.environ if env is None else env
    return env.get(LAUNCHED_ENV) == "1" or "LOCAL_RANK" in env


def is_rank_zero(env: dict[str, str] | None = None) -> bool:
    """True in the process that writes the stage's result files (rank 0, or not distributed)."""
    env = os.environ if env is None else env
    return env.get("RANK", "0") == "0"


def choose_launcher(cfg: TrainConfig, cuda: bool) -> str:
    """`accelerate` or `torchrun` for `cfg` on a host with (`cuda`) or without GPUs; raises
    ValueError for a combination that cannot run, naming the fix."""
    if cfg.accelerate_config and cfg.launcher == "torchrun":
        raise ValueError(
            f"train.accelerate_config={cfg.accelerate_config} is read by `accelerate launch` "
            "only: set train.launcher: accelerate (or auto), or drop accelerate_config"
        )
    if not cuda and _wants_deepspeed(cfg):
        raise ValueError(
            "DeepSpeed (train.deepspeed, or an accelerate_config with distributed_type "
            "DEEPSPEED) needs CUDA GPUs on the trainer's host and none is visible here "
            "(torch.cuda.is_available() is False): run the train stage on a GPU host, or drop "
            "DeepSpeed to train without it"
        )
    launcher = cfg.launcher
    if launcher == "auto":
        # accelerate's CPU launch (`--cpu`) starts ONE process unless an MPI hostfile is
        # given; torchrun starts N with the gloo backend
        cpu_many = not cuda and cfg.num_processes > 1 and not cfg.accelerate_config
        launcher = "torchrun" if cpu_many else "accelerate"
    if launcher == "accelerate" and not cuda and cfg.num_processes > 1:
        raise ValueError(
            f"train.num_processes={cfg.num_processes} on a host without CUDA: `accelerate "
            "launch --cpu` starts one process (several need MPI); set train.launcher: torchrun "
            "(gloo) or train.num_processes: 1"
        )
    return launcher


def _wants_deepspeed(cfg: TrainConfig) -> bool:
    if cfg.deepspeed:
        return True
    return accelerate_distributed_type(cfg.accelerate_config) == "DEEPSPEED"


def accelerate_distributed_type(path: str | None) -> str:
    """The `distributed_type` an accelerate config YAML names ("" without one)."""
    if not path:
        return ""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"train.accelerate_config {path} does not exist: pass an accelerate config YAML "
            "(e.g. training/configs/zero3.yaml, or one `accelerate config` wrote)"
        )
    data = yaml.safe_load(p.read_text()) or {}
    return str(data.get("distributed_type", "NO")).upper()


def launch_command(
    cfg: TrainConfig,
    script_args: list[str],
    cuda: bool,
    mixed_precision: str,
    python: str = sys.executable,
) -> list[str]:
    """The launcher's command line for `cfg`, ending in `-m TRAIN_MODULE *script_args`.

    `mixed_precision` ("bf16" or "no") is the precision plan's: accelerate exports it as
    ACCELERATE_MIXED_PRECISION, which TrainingArguments falls back to when its own bf16 flag is
    off, so a config file's `mixed_precision: bf16` must not outvote `train.bf16: false`."""
    launcher = choose_launcher(cfg, cuda)
    n = str(cfg.num_processes)
    if launcher == "torchrun":
        cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1"]
        cmd += ["--nproc_per_node", n]
    else:
        cmd = [python, "-m", "accelerate.commands.launch"]
        if cfg.accelerate_config:
            cmd += ["--config_file", str(Path(cfg.accelerate_config).resolve())]
        else:
            cmd += ["--num_machines", "1", "--dynamo_backend", "no"]
            if cfg.deepspeed:
                cmd += ["--use_deepspeed", "--deepspeed_config_file"]
                cmd += [str(Path(cfg.deepspeed).resolve())]
            elif cuda and cfg.num_processes > 1:
                cmd += ["--multi_gpu"]
            elif not cuda:
                cmd += ["--cpu"]
        # train.num_processes is the truth (the memory plan reads it too): it overrides the file's
        cmd += ["--num_processes", n, "--mixed_precision", mixed_precision]
        cmd += ["--main_process_port", "0"]  # 0: accelerate picks a free port (two runs, one host)
    return [*cmd, "-m", TRAIN_MODULE, *script_args]


def script_args(
    trajectories: Path,
    band: Path,
    base_model: str,
    out_dir: Path,
    config_file: Path,
    result_file: Path,
    init_adapter: Path | None,
) -> list[str]:
    """`clawloop train`'s arguments for one launched stage (flows/cli/train.py reads them)."""
    args = ["train", "--trajectories", str(trajectories), "--band", str(band)]
    args += ["--base-model", str(base_model), "--out", str(out_dir)]
    args += ["--train-config", str(config_file), "--result-json", str(result_file)]
    if init_adapter is not None:
        args += ["--init-adapter", str(init_adapter)]
    return args


def launch_env(cfg: TrainConfig, cuda: bool, env: dict[str, str] | None = None) -> dict[str, str]:
    """The launched processes' environment: this one, plus the marker that stops a second launch,
    the folder `import clawloop` resolves to here, unbuffered output and (CPU) threads split
    between the processes."""
    out = dict(os.environ if env is None else env)
    out[LAUNCHED_ENV] = "1"
    out["PYTHONUNBUFFERED"] = "1"
    import clawloop

    roots = [str(Path(p).parent) for p in clawloop.__path__]
    old = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + old))
    if not cuda:  # TrainingArguments joins the gloo group only when told it is on the CPU
        out["ACCELERATE_USE_CPU"] = "true"
    if not cuda and "OMP_NUM_THREADS" not in out:
        out["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // cfg.num_processes))
    return out


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log ("" when it is missing)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def root_cause(text: str) -> str:
    """The line that says why a launched training failed: the `clawloop train:` line a rank
    printed, else the last exception line that is not the launcher's own summary ("")."""
    lines = text.splitlines()
    ours = [ln.strip() for ln in lines if ln.startswith("clawloop train: ")]
    if ours:
        return ours[0]
    errors = [
        ln.strip()
        for ln in lines
        if re.match(r"^\s*[\w.]+(Error|Exception|Interrupt)\b:?", ln)
        and "ChildFailedError" not in ln
    ]
    return errors[-1] if errors else ""


def failure_message(rc: int, cmd: list[str], log: Path) -> str:
    """What a failed launch says: exit status, the cause, the log's tail, where the log is, what
    to do."""
    how = f"killed by signal {-rc}" if rc < 0 else f"exited {rc}"
    try:
        cause = root_cause(log.read_text(errors="replace"))
    except OSError:
        cause = ""
    tail = log_tail(log)
    return (
        f"the launched training {how}: {cause or 'no error line in its log'} "
        f"(log {log}; command: {shlex.join(cmd)}). "
        f"Last lines of the log:\n{tail or '(the log is empty)'}\n"
        "Fix what the log names (a missing package: `pip install 'clawloop[gpu]'` on the "
        "trainer's host; out of memory: `clawloop plan --config ...`, fewer tokens per GPU, "
        "LoRA or ZeRO-3), or run the same command by hand to see it live"
    )


def run_logged(cmd: list[str], env: dict[str, str], log: Path) -> int:
    """Run `cmd` in its own session, all its output to `log`; on an exception in this process
    (Ctrl-C, a cancelled flow) its whole process group is stopped before re-raising, so no
    launched trainer outlives the stage."""
    with log.open("ab") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            return proc.wait()
        except BaseException:
            _stop_group(proc)
            raise


def _stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def launched_train_stage(
    trajectories: pd.DataFrame,
    band: pd.DataFrame,
    cfg: TrainConfig,
    base_model: str | Path,
    out_dir: Path,
    init_adapter: Path | None = None,
):
    """`train_stage` run by the launcher `cfg` asks for; returns the TrainResult it wrote.

    The launched processes parse tool calls with the agent's parser (tasks/train.py's)."""
    import torch

    from clawloop.training.precision import plan_for
    from clawloop.training.result import TrainError, TrainResult

    cuda = torch.cuda.is_available()
    out_dir = Path(out_dir).resolve()
    work = out_dir / "launch"
    work.mkdir(parents=True, exist_ok=True)
    traj_file, band_file = work / "trajectories.parquet", work / "band.parquet"
    trajectories.to_parquet(traj_file, index=False)
    band.to_parquet(band_file, index=False)
    config_file, result_file, log = (
        work / "train_config.json",
        work / "result.json",
        work / "train.log",
    )
    config_file.write_text(json.dumps(cfg.model_dump(), indent=2) + "\n")
    result_file.unlink(missing_ok=True)
    try:
        mp = "bf16" if plan_for(cfg.bf16, cfg.lora).autocast_bf16 else "no"
        args = script_args(
            traj_file, band_file, str(base_model), out_dir, config_file, result_file, init_adapter
        )
        cmd = launch_command(cfg, args, cuda, mp)
    except (ValueError, FileNotFoundError) as exc:
        raise TrainError(f"train stage: cannot launch training: {exc}") from exc
    rc = run_logged(cmd, launch_env(cfg, cuda), log)
    if rc != 0:
        raise TrainError(f"train stage: {failure_message(rc, cmd, log)}")
    if not result_file.is_file():
        raise TrainError(
            f"train stage: the launched training exited 0 but wrote no {result_file} (log {log}); "
            f"its last lines:\n{log_tail(log)}"
        )
    traj_file.unlink()  # copies of the stage's inputs; the log and result stay beside the model
    band_file.unlink()
    return TrainResult.from_json(json.loads(result_file.read_text()))
