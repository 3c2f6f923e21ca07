"""Rollout, train and diagnose, adapted to the engine: which policy to serve, task folders, checkpoints.

The policy of iteration k is the checkpoint that train wrote in iteration k-1 (iteration 1: the
configured base model, or the tiny offline model). With `llm.base_url` set (vLLM, cluster) rollouts
go to that endpoint; without it the policy folder is served locally by `transformers serve` for the
duration of the stage. Verified task folders are unpacked from their Parquet tar blobs into a temp
folder per stage. Checkpoints are written inside the train stage's folder and every file of them is
listed in its manifest, so a deleted or damaged checkpoint re-runs training like any other artifact
(this needs a local `storage.root`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from flows.config import RunConfig
from flows.engine import StageContext, StageError, StageResult
from storage import artifacts, fs, schemas

MODEL_DIR = "model"  # the train stage's checkpoint folder, inside its stage folder
DIAGNOSE_FILES = ("report.md", "pass_rates.png", "guidance.json")


def local_stage_dir(
    ctx: StageContext, stage: str | None = None, iteration: int | None = None
) -> Path:
    """A stage folder as a local path; checkpoints and model serving need a local file system."""
    url = ctx.stage_url(stage or ctx.stage, iteration)
    f_sys, path = fs.resolve(url)
    if "file" not in (f_sys.protocol if isinstance(f_sys.protocol, tuple) else (f_sys.protocol,)):
        raise StageError(
            f"{ctx.stage} keeps model checkpoints on local disk, but storage.root is {ctx.root}: use a local or mounted path"
        )
    return Path(path)


def base_model_dir(cfg: RunConfig) -> Path:
    if cfg.train.base_model:
        return Path(cfg.train.base_model).expanduser()
    from training.tiny_model import ensure_tiny_model

    return ensure_tiny_model(Path.home() / ".cache" / "clawloop" / "models", seed=cfg.seed)


def checkpoint_after(ctx: StageContext, iteration: int) -> Path | None:
    """The model folder train wrote in `iteration`, if that stage is committed."""
    if iteration < 1 or ctx.manifest("train", iteration) is None:
        return None
    row = ctx.rows("train", "checkpoint", iteration)[0]
    return Path(row["checkpoint_path"])


def policy_dir(ctx: StageContext, after_iteration: int) -> Path:
    return checkpoint_after(ctx, after_iteration) or base_model_dir(ctx.config)


@contextmanager
def serve_policy(ctx: StageContext, model_dir: Path) -> Iterator[Any]:
    """A `harness.rollout.PolicyConfig` for `model_dir`: the configured endpoint, or a local server."""
    from harness.rollout import PolicyConfig

    llm = ctx.config.llm
    if llm.base_url:
        yield PolicyConfig(
            base_url=llm.base_url,
            model=llm.model,
            api_key_env=llm.api_key_env,
            policy_id=str(model_dir),
        )
        return
    from harness.serve import local_policy_server

    with local_policy_server(model_dir) as url:
        yield PolicyConfig(
            base_url=url,
            model=str(model_dir),
            api_key_env="",
            policy_id=str(model_dir),
            tokenizer=str(model_dir),
        )


def verified_tasks(ctx: StageContext, split: str, into: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Kept tasks of one split, unpacked into task folders under `into`."""
    from generators.taskfolder import unpack_tar

    kept = {
        v["task_id"] for v in ctx.rows("verify", "verdicts") if v["kept"] and v["split"] == split
    }
    out = []
    for row in ctx.rows("forge", "tasks"):
        if row["task_id"] in kept:
            out.append(
                (
                    unpack_tar(row["task_tar"], into / row["task_id"]),
                    {k: v for k, v in row.items() if k != "task_tar"},
                )
            )
    return out


def _rollout_cfg(cfg: RunConfig, section: dict[str, Any]) -> Any:
    from harness.rollout import RolloutConfig

    try:
        return RolloutConfig.from_settings(section)
    except (TypeError, ValueError) as exc:
        raise StageError(f"rollout settings: {exc}") from exc


def run_rollout(ctx: StageContext) -> StageResult:
    from harness.rollout import rollout_stage

    cfg = ctx.config
    rcfg = _rollout_cfg(cfg, cfg.rollout.model_dump(exclude={"eval_n"}))
    with tempfile.TemporaryDirectory(prefix="clawloop-rollout-") as tmp:
        tasks = verified_tasks(ctx, "train", Path(tmp))
        if not tasks:
            empty = {
                "trajectories": (schemas.TRAJECTORIES, []),
                "band": (schemas.BAND, []),
                "pass_rates": (schemas.ROLLOUT_PASS_RATES, []),
            }
            return StageResult(
                empty, summary={"tasks": 0, "note": "no verified train task to roll out"}
            )
        with serve_policy(ctx, policy_dir(ctx, ctx.iteration - 1)) as policy:
            traj, band, rates = rollout_stage(tasks, policy, rcfg, cfg.sandbox.to_sandbox_config())
    summary = {
        "tasks": len(tasks),
        "episodes": len(traj),
        "passed": sum(bool(r["passed"]) for r in traj),
        "kept_tasks": sum(bool(b["kept"]) for b in band),
    }
    return StageResult(
        {
            "trajectories": (schemas.TRAJECTORIES, traj),
            "band": (schemas.BAND, band),
            "pass_rates": (schemas.ROLLOUT_PASS_RATES, rates),
        },
        summary=summary,
    )


def run_train(ctx: StageContext) -> StageResult:
    from training.config import TrainConfig, TrainConfigError
    from training.stage import train_stage

    section = ctx.config.train.model_dump(exclude={"base_model"})
    try:
        tcfg = TrainConfig.from_dict({k: v for k, v in section.items() if v is not None})
    except TrainConfigError as exc:
        raise StageError(f"train settings: {exc}") from exc
    traj = artifacts.read_table(ctx.stage_url("rollout"), "trajectories")
    band = artifacts.read_table(ctx.stage_url("rollout"), "band")
    out_dir = local_stage_dir(ctx) / MODEL_DIR
    result = train_stage(traj, band, tcfg, policy_dir(ctx, ctx.iteration - 1), out_dir)
    metrics = result.metrics_frame().to_dict("records")
    return StageResult(
        {
            "checkpoint": (schemas.CHECKPOINT, [result.checkpoint_row()]),
            "metrics": (schemas.TRAIN_METRICS, metrics),
        },
        dirs=[MODEL_DIR],
        summary={
            "status": result.status,
            "reason": result.reason.splitlines()[0] if result.reason else "",
            "steps": len(metrics),
            "checkpoint": str(result.checkpoint_dir),
        },
    )


def _history(ctx: StageContext) -> pd.DataFrame | None:
    frames = [
        artifacts.read_table(ctx.stage_url("diagnose", k), "pass_rates")
        for k in range(1, ctx.iteration)
        if ctx.manifest("diagnose", k) is not None
    ]
    return pd.concat(frames, ignore_index=True) if frames else None


def run_diagnose(ctx: StageContext) -> StageResult:
    from generators.diagnose import DiagnoseConfig, diagnose_stage
    from harness.rollout import rollout_stage

    cfg = ctx.config
    dsection = cfg.diagnose.model_dump(exclude={"eval_n"})
    dcfg = DiagnoseConfig(**dsection)
    rcfg = _rollout_cfg(
        cfg,
        {
            **cfg.rollout.model_dump(exclude={"eval_n", "band", "n"}),
            "n": cfg.diagnose.eval_n,
            "band": (0, cfg.diagnose.eval_n),
        },
    )
    prev_url = (
        fs.join(ctx.stage_url("diagnose", ctx.iteration - 1), "guidance.json")
        if ctx.iteration > 1
        else ""
    )
    prev_guidance = (
        json.loads(fs.read_bytes(prev_url)) if prev_url and fs.exists(prev_url) else None
    )
    with tempfile.TemporaryDirectory(prefix="clawloop-diagnose-") as tmp:
        tasks = verified_tasks(ctx, "eval", Path(tmp) / "tasks")
        with serve_policy(ctx, policy_dir(ctx, ctx.iteration)) as policy:
            evals, _, _ = (
                rollout_stage(tasks, policy, rcfg, cfg.sandbox.to_sandbox_config())
                if tasks
                else ([], [], [])
            )
            eval_df = pd.DataFrame(evals, columns=schemas.TRAJECTORIES.names)
            res = diagnose_stage(
                eval_df,
                _history(ctx),
                dcfg,
                policy.endpoint(),
                Path(tmp) / "out",
                ctx.iteration,
                prev_guidance=prev_guidance,
            )
        files = {
            name: (Path(tmp) / "out" / name).read_bytes()
            for name in DIAGNOSE_FILES
            if (Path(tmp) / "out" / name).is_file()
        }
    tables = {"eval_trajectories": (schemas.TRAJECTORIES, evals), **res.tables()}
    return StageResult(tables, files=files, summary={"eval_tasks": len(tasks), **res.summary})
