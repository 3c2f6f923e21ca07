"""Rollout, train and diagnose, adapted to the engine: which policy to serve, task folders, checkpoints.

The policy of iteration k is the checkpoint that train wrote in iteration k-1 (iteration 1: the
configured base model, or the tiny offline model). Without `llm.base_url` the policy folder is
served locally by `transformers serve` for the duration of the stage. With it (vLLM, cluster) a
server someone else runs answers, and `llm.reload` says how it gets the new checkpoint: `lora`
loads train's adapter at runtime and asks for it by name, `restart` stops the stage until the
server serves the checkpoint folder (vLLM's /v1/models `root`), `none` keeps the old weights and
says so in the log and the stage summary. Verified task folders are unpacked from their Parquet tar blobs into a temp
folder per stage. Checkpoints are written inside the train stage's folder and every file of them is
listed in its manifest, so a deleted or damaged checkpoint re-runs training like any other artifact
(this needs a local `storage.root`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from clawloop.flows.config import RunConfig
from clawloop.flows.engine import StageContext, StageError, StageResult
from clawloop.storage import artifacts, fs, schemas

log = logging.getLogger("clawloop.agent_stages")
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
    from clawloop.training.tiny_model import ensure_tiny_model

    return ensure_tiny_model(seed=cfg.seed)


def checkpoint_after(ctx: StageContext, iteration: int) -> Path | None:
    """The model folder train wrote in `iteration`, if that stage is committed."""
    if iteration < 1 or ctx.manifest("train", iteration) is None:
        return None
    row = ctx.rows("train", "checkpoint", iteration)[0]
    return Path(row["checkpoint_path"])


def policy_dir(ctx: StageContext, after_iteration: int) -> Path:
    return checkpoint_after(ctx, after_iteration) or base_model_dir(ctx.config)


def trained_checkpoint(
    ctx: StageContext, after_iteration: int
) -> tuple[int, dict[str, Any]] | None:
    """(iteration, CHECKPOINT row) of the newest trained weights the policy after `after_iteration`
    is made of; None while it is still the base model. An iteration that trained nothing (kind
    "base") passes its start model on, so the search walks back past it."""
    for k in range(after_iteration, 0, -1):
        if ctx.manifest("train", k) is None:
            return None
        row = ctx.rows("train", "checkpoint", k)[0]
        if row["kind"] != "base":
            return k, row
    return None


def lora_name(run_id: str, iteration: int) -> str:
    """The name an iteration's adapter is served under (unique per run and iteration)."""
    return f"clawloop-{run_id}-iter-{iteration}"


def _same_model(a: str, b: str) -> bool:
    if not a or not b:
        return False
    pa_, pb = Path(a).expanduser(), Path(b).expanduser()
    if str(pa_).rstrip("/") == str(pb).rstrip("/"):
        return True
    return pa_.exists() and pb.exists() and pa_.resolve() == pb.resolve()


def _adapter_base(adapter_path: str) -> str:
    """The model an adapter was trained on top of (peft's adapter_config.json), "" if unknown."""
    try:
        meta = json.loads((Path(adapter_path) / "adapter_config.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(meta.get("base_model_name_or_path") or "")


def _restart_hint(ctx: StageContext, path: str) -> str:
    from clawloop.harness.serve import vllm_command

    return (
        f"restart vLLM on it:\n    {vllm_command(path, ctx.config.llm.model)}\n"
        f"then resume this run: clawloop run --run-id {ctx.run_id}"
    )


def endpoint_policy(ctx: StageContext, after_iteration: int) -> tuple[Any, str]:
    """(PolicyConfig, note) for the configured endpoint serving the policy after `after_iteration`.

    Applies `llm.reload`; raises StageError (what, where, what to do) when the endpoint cannot
    serve that policy and the config says it must."""
    from clawloop.harness.rollout import PolicyConfig
    from clawloop.harness.serve import (
        AdapterLoadError,
        ServeError,
        load_lora_adapter,
        served_models,
    )

    llm = ctx.config.llm
    url = llm.base_url or ""
    key = os.environ.get(llm.api_key_env, "") if llm.api_key_env else ""
    found = trained_checkpoint(ctx, after_iteration)
    if found is None:
        served = ctx.config.train.base_model or llm.model
        return (
            PolicyConfig(url, llm.model, llm.api_key_env, policy_id=served),
            f"policy: {llm.model} at {url} (the base model: nothing trained yet)",
        )
    k, row = found
    path = str(row["checkpoint_path"])
    if llm.reload == "lora":
        adapter = str(row.get("adapter_path") or "")
        if row["kind"] != "lora" or not adapter:
            raise StageError(
                f"llm.reload is 'lora' but train of iteration {k} wrote full weights ({path}), no "
                "adapter: set train.lora: true so it writes a LoRA adapter, or set llm.reload: restart"
            )
        trained_on, base = _adapter_base(adapter), ctx.config.train.base_model or ""
        if trained_on and not _same_model(trained_on, base):
            raise StageError(
                f"llm.reload is 'lora' but the adapter of iteration {k} ({adapter}) was trained on top "
                f"of {trained_on}, not on the base model vLLM serves (train.base_model = {base or 'unset'}): "
                "runtime LoRA only applies adapters to the served base. Set train.base_model to the "
                "model vLLM serves and train.merge_lora: false (adapters then stay relative to it), or use "
                "llm.reload: restart"
            )
        name = lora_name(ctx.run_id, k)
        try:
            listed = {m.get("id") for m in served_models(url, key)}
        except ServeError:
            listed = set()  # not fatal: loading says what is wrong if the server is
        if name in listed:
            what = f"adapter {name} already loaded"
        else:
            try:
                what = load_lora_adapter(url, name, adapter, key)
            except AdapterLoadError as exc:
                raise StageError(str(exc)) from exc
        log.info("llm.reload lora: %s", what)
        return (
            PolicyConfig(url, name, llm.api_key_env, policy_id=adapter),
            f"policy: LoRA adapter of iteration {k} ({adapter}) on {url} as model {name} ({what})",
        )
    if llm.reload == "restart":
        try:
            models = served_models(url, key)
        except ServeError as exc:
            raise StageError(
                f"llm.reload is 'restart': cannot ask {url} what it serves ({exc}); once the "
                f"server is up on iteration {k}'s checkpoint {path}, resume: clawloop run --run-id {ctx.run_id}"
            ) from exc
        entry = next((m for m in models if m.get("id") == llm.model), {})
        root = str(entry.get("root") or "")
        if not _same_model(root, path):
            raise StageError(
                f"llm.reload is 'restart': iteration {k} trained a new checkpoint, {path}, but "
                f"{url} serves {llm.model!r} from {root or 'an unknown folder'}; "
                + _restart_hint(ctx, path)
            )
        return (
            PolicyConfig(url, llm.model, llm.api_key_env, policy_id=path),
            f"policy: iteration {k}'s checkpoint {path}, served by {url} as {llm.model}",
        )
    warning = (
        f"llm.reload is 'none': {url} keeps serving {llm.model} with the OLD weights, not "
        f"iteration {k}'s checkpoint {path}; these episodes are off-policy for training. To use the "
        f"new weights, {_restart_hint(ctx, path)} (or set llm.reload: lora with train.lora: true)"
    )
    log.warning(warning)
    return (
        PolicyConfig(url, llm.model, llm.api_key_env, policy_id=f"{llm.model}@{url}"),
        f"policy: STALE, {llm.model} at {url} still serves the old weights, not {path} "
        "(llm.reload: none; see the log for what to do)",
    )


@contextmanager
def serve_policy(ctx: StageContext, after_iteration: int) -> Iterator[tuple[Any, str]]:
    """(harness.rollout.PolicyConfig, note) for the policy after `after_iteration`: the configured
    endpoint (see `endpoint_policy`), or its checkpoint folder served locally for the block."""
    from clawloop.harness.rollout import PolicyConfig

    if ctx.config.llm.base_url:
        yield endpoint_policy(ctx, after_iteration)
        return
    from clawloop.harness.serve import local_policy_server

    model_dir = policy_dir(ctx, after_iteration)
    with local_policy_server(model_dir) as url:
        yield (
            PolicyConfig(
                base_url=url,
                model=str(model_dir),
                api_key_env="",
                policy_id=str(model_dir),
                tokenizer=str(model_dir),
            ),
            f"policy: {model_dir}, served locally by transformers serve",
        )


def verified_tasks(ctx: StageContext, split: str, into: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Kept tasks of one split, unpacked into task folders under `into`."""
    from clawloop.harness.taskfolder.folder import unpack_tar

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


def run_rollout(ctx: StageContext) -> StageResult:
    from clawloop.harness.rollout import rollout_stage

    cfg = ctx.config
    rcfg = cfg.rollout_config()  # checked when the config was loaded
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
        with serve_policy(ctx, ctx.iteration - 1) as (policy, served):
            traj, band, rates = rollout_stage(tasks, policy, rcfg, cfg.sandbox.to_sandbox_config())
    summary = {
        "policy": served,
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


def policy_adapter(ctx: StageContext, after_iteration: int) -> Path | None:
    """The LoRA adapter the policy after `after_iteration` is made of, when it is one: an adapter
    not merged into its checkpoint (train.merge_lora false), which the next train continues."""
    found = trained_checkpoint(ctx, after_iteration)
    if found is None:
        return None
    _, row = found
    adapter = str(row.get("adapter_path") or "")
    if row["kind"] != "lora" or not adapter:
        return None
    # Merged: the checkpoint holds the adapter's weights, and a new adapter trains on top of it.
    merged = not _same_model(_adapter_base(adapter), str(row["checkpoint_path"]))
    return None if merged else Path(adapter)


def run_train(ctx: StageContext) -> StageResult:
    from clawloop.training.stage import train_stage

    tcfg = ctx.config.train_config()  # checked when the config was loaded
    traj = artifacts.read_table(ctx.stage_url("rollout"), "trajectories")
    band = artifacts.read_table(ctx.stage_url("rollout"), "band")
    out_dir = local_stage_dir(ctx) / MODEL_DIR
    adapter = policy_adapter(ctx, ctx.iteration - 1) if tcfg.lora else None
    result = train_stage(
        traj, band, tcfg, policy_dir(ctx, ctx.iteration - 1), out_dir, init_adapter=adapter
    )
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
            "continued_adapter": str(adapter) if adapter else "",
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
    from clawloop.generators.diagnosis.diagnose import diagnose_stage
    from clawloop.harness.rollout import rollout_stage

    cfg = ctx.config
    # Difficulty starts at synthesize.multihop/dirtiness (checked when the config was loaded).
    dcfg = cfg.diagnose_config()
    rcfg = cfg.eval_rollout_config()
    # Every capability synthesized this iteration gets a weight, the user's own included.
    capabilities = sorted({str(r["capability"]) for r in ctx.rows("synthesize", "candidates")})
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
        with serve_policy(ctx, ctx.iteration) as (policy, served):
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
                capabilities=capabilities,
            )
        files = {
            name: (Path(tmp) / "out" / name).read_bytes()
            for name in DIAGNOSE_FILES
            if (Path(tmp) / "out" / name).is_file()
        }
    tables = {"eval_trajectories": (schemas.TRAJECTORIES, evals), **res.tables()}
    return StageResult(
        tables, files=files, summary={"policy": served, "eval_tasks": len(tasks), **res.summary}
    )
