"""Which policy a stage talks to, and where the checkpoints are.

The policy of iteration k is the checkpoint that train wrote in iteration k-1 (iteration 1: the
configured base model, or the tiny offline model). Without `llm.base_url` the policy folder is
served locally by clawloop's own server (harness/local_server.py: token ids and logprobs, like
vLLM) for the duration of the stage, or, with `llm.server: vllm`, by a vLLM server clawloop starts
and owns (harness/vllm.py), shared by the run's stages and stopped when the run ends: a new full or
merged checkpoint restarts it, an unmerged LoRA adapter is loaded into it at runtime (in place),
and rollouts talk to it token in, token out (one exact sequence per episode). With it (vLLM,
cluster) a
server someone else runs answers, and `llm.reload` says how it gets the new checkpoint: `lora`
loads train's adapter at runtime and asks for it by name, `restart` stops the stage until the
server serves the checkpoint folder (vLLM's /v1/models `root`), `none` keeps the old weights and
says so in the log and the stage summary. Checkpoints are written inside the train stage's folder
and every file of them is listed in its manifest, so a deleted or damaged checkpoint re-runs
training like any other artifact. With an object-store `storage.root` train writes them in its
folder's local copy (storage.fs.local_path), they are uploaded when the stage commits, and a stage
that serves or continues them fetches them back into this machine's copy first.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawloop.harness.llm import PolicyConfig
from clawloop.harness.serve import (
    AdapterLoadError,
    ServeError,
    load_lora_adapter,
    local_policy_server,
    served_models,
    vllm_command,
)
from clawloop.harness.vllm import close_shared, has_gpu, model_len, shared_server
from clawloop.storage import fs
from clawloop.tasks.stage import StageContext, StageError

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig
    from clawloop.tasks.settings import LLMSettings

log = logging.getLogger("clawloop.policy")
MODEL_DIR = "model"  # the train stage's checkpoint folder, inside its stage folder


def local_stage_dir(
    ctx: StageContext, stage: str | None = None, iteration: int | None = None
) -> Path:
    """A stage folder as a local path; checkpoints and model serving need a local file system.

    For an object-store root it is the folder's local copy (storage.fs.local_path): what the stage
    writes there in a `StageResult.dirs` subfolder is uploaded when the stage commits."""
    path = fs.local_path(ctx.stage_url(stage or ctx.stage, iteration))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _in_train_stage(ctx: StageContext, iteration: int, path: str) -> str | None:
    """`path` (a folder train of `iteration` wrote, as recorded on the machine that trained) as
    a path relative to that stage folder; None when it lies outside it (the base model)."""
    key = fs.resolve(ctx.stage_url("train", iteration))[1].strip("/")
    text = Path(path).as_posix()
    at = text.find(f"/{key}/")
    return text[at + len(key) + 2 :] if at >= 0 else None


def _local(ctx: StageContext, iteration: int, path: str, fetch: bool) -> str:
    """A checkpoint path of train of `iteration` as a path on this machine. A local storage root
    keeps it as is; an object-store root maps it into this machine's copy of the stage folder,
    and with `fetch` downloads the stage's model files that copy lacks (checked against the
    manifest's sha256), so it can be served or trained on here."""
    if not path or fs.is_local(ctx.root):
        return path
    rel = _in_train_stage(ctx, iteration, path)
    if rel is None:
        return path
    url = ctx.stage_url("train", iteration)
    local = fs.local_path(url)
    manifest = ctx.manifest("train", iteration) if fetch else None
    for entry in manifest.files if manifest is not None else []:
        if not entry.name.startswith(f"{MODEL_DIR}/"):
            continue
        dest = local / entry.name
        if (dest, entry.sha256) in _FETCHED and dest.is_file():
            continue
        if not (dest.is_file() and fs.file_sha256(dest) == entry.sha256):
            log.info("fetching %s into %s", fs.join(url, entry.name), dest)
            fs.download_file(fs.join(url, entry.name), dest, entry.sha256)
        _FETCHED.add((dest, entry.sha256))
    return str(local / rel)


_FETCHED: set[tuple[Path, str]] = set()  # local copies checked against their manifest here


def base_model_dir(cfg: RunConfig) -> Path:
    if cfg.train.base_model:  # a GGUF file (or a folder holding one): its converted folder
        from clawloop.training.gguf import model_folder

        return model_folder(cfg.train.base_model)
    from clawloop.training.tiny_model import ensure_tiny_model

    return ensure_tiny_model(seed=cfg.seed)


def _converted(base: str) -> str:
    """The folder a GGUF base model was converted into (what adapters record), else `base`."""
    from clawloop.training.gguf import gguf_file, model_folder

    return str(model_folder(base)) if base and gguf_file(base) else base


def checkpoint_after(ctx: StageContext, iteration: int) -> Path | None:
    """The model folder train wrote in `iteration`, if that stage is committed."""
    if iteration < 1 or ctx.manifest("train", iteration) is None:
        return None
    row = ctx.rows("train", "checkpoint", iteration)[0]
    return Path(_local(ctx, iteration, str(row["checkpoint_path"]), fetch=True))


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
            for col in ("checkpoint_path", "adapter_path"):  # as paths on this machine
                row[col] = _local(ctx, k, str(row.get(col) or ""), fetch=False)
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
    return (
        f"restart vLLM on it:\n    {vllm_command(path, ctx.config.llm.model)}\n"
        f"then resume this run: {ctx.resume}"
    )


def endpoint_config(llm: LLMSettings, url: str, model: str, policy_id: str) -> PolicyConfig:
    """The PolicyConfig of `model` at the configured endpoint `url`, recorded as `policy_id`,
    with the llm section's key variable, token-id mode and per-request timeout."""
    return PolicyConfig(
        url,
        model,
        llm.api_key_env,
        policy_id=policy_id,
        token_ids=llm.token_ids,
        request_timeout_s=llm.request_timeout_s,
    )


def endpoint_policy(ctx: StageContext, after_iteration: int) -> tuple[PolicyConfig, str]:
    """(PolicyConfig, note) for the configured endpoint serving the policy after `after_iteration`.

    Applies `llm.reload`; raises StageError (what, where, what to do) when the endpoint cannot
    serve that policy and the config says it must."""
    llm = ctx.config.llm
    url = llm.base_url or ""
    found = trained_checkpoint(ctx, after_iteration)
    if found is None:
        served = ctx.config.train.base_model or llm.model
        return (
            endpoint_config(llm, url, llm.model, served),
            f"policy: {llm.model} at {url} (the base model: nothing trained yet)",
        )
    k, row = found
    if llm.reload == "lora":
        return _lora_policy(ctx, k, row)
    if llm.reload == "restart":
        return _restarted_policy(ctx, k, _local(ctx, k, str(row["checkpoint_path"]), fetch=True))
    path = str(row["checkpoint_path"])
    warning = (
        f"llm.reload is 'none': {url} keeps serving {llm.model} with the OLD weights, not "
        f"iteration {k}'s checkpoint {path}; these episodes are off-policy for training. To use the "
        f"new weights, {_restart_hint(ctx, path)} (or set llm.reload: lora with train.lora: true)"
    )
    log.warning(warning)
    return (
        endpoint_config(llm, url, llm.model, f"{llm.model}@{url}"),
        f"policy: STALE, {llm.model} at {url} still serves the old weights, not {path} "
        "(llm.reload: none; see the log for what to do)",
    )


def probe_endpoint(ctx: StageContext, policy: PolicyConfig) -> None:
    """Ask the endpoint what it serves, once, before any episode: StageError (what, where, what
    to do) if nothing answers or it does not serve the policy's model."""
    try:
        key = os.environ.get(policy.api_key_env, "") if policy.api_key_env else ""
        models = served_models(policy.base_url, key, timeout_s=15.0)
    except ServeError as exc:
        raise StageError(
            f"nothing answers at {policy.base_url} ({exc}): start the policy server or set "
            f"llm.base_url, then resume: {ctx.resume}"
        ) from exc
    ids = sorted(str(m.get("id")) for m in models)
    if ids and policy.model not in ids:
        raise StageError(
            f"{policy.base_url} serves {ids}, not {policy.model!r}: set llm.model to the name "
            f"it serves, then resume: {ctx.resume}"
        )


def _api_key(ctx: StageContext) -> str:
    env = ctx.config.llm.api_key_env
    return os.environ.get(env, "") if env else ""


def _lora_policy(ctx: StageContext, k: int, row: dict[str, Any]) -> tuple[PolicyConfig, str]:
    """llm.reload lora: load iteration k's adapter into the running server, roll out with it."""
    llm = ctx.config.llm
    url, path = llm.base_url or "", str(row["checkpoint_path"])
    adapter = _local(ctx, k, str(row.get("adapter_path") or ""), fetch=True)
    if row["kind"] != "lora" or not adapter:
        raise StageError(
            f"llm.reload is 'lora' but train of iteration {k} wrote full weights ({path}), no "
            "adapter: set train.lora: true so it writes a LoRA adapter, or set llm.reload: restart"
        )
    trained_on, base = _adapter_base(adapter), ctx.config.train.base_model or ""
    if trained_on and not (
        _same_model(trained_on, base) or _same_model(trained_on, _converted(base))
    ):
        raise StageError(
            f"llm.reload is 'lora' but the adapter of iteration {k} ({adapter}) was trained on top "
            f"of {trained_on}, not on the base model vLLM serves (train.base_model = {base or 'unset'}): "
            "runtime LoRA only applies adapters to the served base. Set train.base_model to the "
            "model vLLM serves and train.merge_lora: false (adapters then stay relative to it), or use "
            "llm.reload: restart"
        )
    name = lora_name(ctx.run_id, k)
    try:
        # always (re)loaded in place: a re-run train stage writes new weights under the same
        # name and path, and an adapter listed by the server may be the old one
        what = load_lora_adapter(url, name, adapter, _api_key(ctx))
    except AdapterLoadError as exc:
        raise StageError(str(exc)) from exc
    log.info("llm.reload lora: %s", what)
    return (
        endpoint_config(llm, url, name, adapter),
        f"policy: LoRA adapter of iteration {k} ({adapter}) on {url} as model {name} ({what})",
    )


def _restarted_policy(ctx: StageContext, k: int, path: str) -> tuple[PolicyConfig, str]:
    """llm.reload restart: go on only once the server serves iteration k's checkpoint folder."""
    llm = ctx.config.llm
    url = llm.base_url or ""
    try:
        models = served_models(url, _api_key(ctx))
    except ServeError as exc:
        raise StageError(
            f"llm.reload is 'restart': cannot ask {url} what it serves ({exc}); once the "
            f"server is up on iteration {k}'s checkpoint {path}, resume: {ctx.resume}"
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
        endpoint_config(llm, url, llm.model, path),
        f"policy: iteration {k}'s checkpoint {path}, served by {url} as {llm.model}",
    )


def vllm_log_path(ctx: StageContext) -> Path:
    """runs/<run_id>/vllm.log (this machine's copy of the run folder for an object-store root)."""
    return fs.local_path(fs.join(ctx.root, ctx.run_id)) / "vllm.log"


def served_lora_rank(cfg: RunConfig) -> int | None:
    """The --max-lora-rank the managed vLLM starts with: None unless the policy is base model +
    an unmerged adapter (train.lora, not merge_lora); else the smallest vLLM rank >= lora_r."""
    if not (cfg.train.lora and not cfg.train.merge_lora):
        return None
    return next(r for r in (8, 16, 32, 64, 128, 256, 512) if r >= cfg.train.lora_r)


def managed_policy(ctx: StageContext, after_iteration: int) -> tuple[PolicyConfig, str]:
    """(PolicyConfig, note) for the policy after `after_iteration` on the run's managed vLLM:
    started on (or restarted onto) its weights, or its LoRA adapter loaded in place."""
    cfg, llm = ctx.config, ctx.config.llm
    rank = served_lora_rank(cfg)
    base = base_model_dir(cfg)
    server = shared_server(
        vllm_log_path(ctx),
        context_len=model_len(base, cfg.rollout.context_len),
        startup_timeout_s=llm.vllm_startup_timeout_s,
        extra_args=tuple(llm.vllm_args),
        eager=llm.vllm_eager,
    )
    adapter = policy_adapter(ctx, after_iteration) if rank is not None else None
    try:
        if adapter is not None:
            found = trained_checkpoint(ctx, after_iteration)
            k = found[0] if found else after_iteration
            url = server.serve(base, lora_rank=rank)
            name = lora_name(ctx.run_id, k)
            what = server.load_adapter(name, adapter)
            model, folder, policy_id = name, base, str(adapter)
            note = f"policy: LoRA adapter of iteration {k} ({adapter}) on the managed vLLM as {name} ({what})"
        else:
            folder = policy_dir(ctx, after_iteration)
            url = server.serve(folder, lora_rank=rank)
            model, policy_id = server.name, str(folder)
            note = f"policy: {folder}, served by the managed vLLM (token in, token out)"
    except ServeError as exc:
        raise StageError(f"{exc} (llm.server: vllm; log: {server.log_path})") from exc
    return (
        PolicyConfig(
            base_url=url,
            model=model,
            api_key_env="",
            policy_id=policy_id,
            tokenizer=str(folder),
            token_ids=llm.token_ids,
            request_timeout_s=llm.request_timeout_s,
            api="tokens",
            tool_choice=cfg.rollout.tool_choice,
        ),
        note,
    )


def close_policy_servers() -> None:
    """Stop the managed vLLM of this process (the run is over)."""
    close_shared()


GPU_SHARE_FLAG = "--gpu-memory-utilization"  # a managed vLLM sized to share its GPU with training


def release_for_training(cfg: RunConfig) -> None:
    """Before train: stop the managed vLLM when the trained weights will need a restart anyway
    (a full or merged checkpoint), so training has the memory it held. With an unmerged adapter
    it stays up on CPU (the adapter is loaded into it). On a GPU host it stops then too, unless
    `llm.vllm_args` sizes its share with --gpu-memory-utilization: vLLM 0.32 takes 92 % of its
    GPU's memory by default (CacheConfig.gpu_memory_utilization), so a trainer on the same GPU
    would run out of memory; the next stage starts it again and loads the new adapter."""
    if cfg.llm.server != "vllm" or cfg.llm.base_url:
        return
    shares_gpu = any(a.split("=")[0] == GPU_SHARE_FLAG for a in cfg.llm.vllm_args)
    if served_lora_rank(cfg) is None or (has_gpu() and not shares_gpu):
        close_shared()


@contextmanager
def serve_policy(ctx: StageContext, after_iteration: int) -> Iterator[tuple[PolicyConfig, str]]:
    """(harness.rollout.PolicyConfig, note) for the policy after `after_iteration`: the configured
    endpoint (see `endpoint_policy`), the run's managed vLLM (llm.server: vllm; it outlives the
    block, shared by the run's stages), or its checkpoint folder served locally for the block."""
    if ctx.config.llm.base_url:
        policy, note = endpoint_policy(ctx, after_iteration)
        policy = dataclasses.replace(policy, tool_choice=ctx.config.rollout.tool_choice)
        probe_endpoint(ctx, policy)
        yield policy, note
        return
    if ctx.config.llm.server == "vllm":
        yield managed_policy(ctx, after_iteration)
        return
    model_dir = policy_dir(ctx, after_iteration)
    with local_policy_server(model_dir) as url:
        yield (
            PolicyConfig(
                base_url=url,
                model=str(model_dir),
                api_key_env="",
                policy_id=str(model_dir),
                tokenizer=str(model_dir),
                token_ids=ctx.config.llm.token_ids,
                request_timeout_s=ctx.config.llm.request_timeout_s,
                tool_choice=ctx.config.rollout.tool_choice,
            ),
            f"policy: {model_dir}, served locally (harness.local_server: token ids + logprobs)",
        )


def policy_adapter(ctx: StageContext, after_iteration: int) -> Path | None:
    """The LoRA adapter the policy after `after_iteration` is made of, when it is one: an adapter
    not merged into its checkpoint (train.merge_lora false), which the next train continues."""
    found = trained_checkpoint(ctx, after_iteration)
    if found is None:
        return None
    k, row = found
    adapter = _local(ctx, k, str(row.get("adapter_path") or ""), fetch=True)
    if row["kind"] != "lora" or not adapter:
        return None
    # Merged: the checkpoint holds the adapter's weights, and a new adapter trains on top of it.
    merged = not _same_model(_adapter_base(adapter), str(row["checkpoint_path"]))
    return None if merged else Path(adapter)


def policy_slice(cfg: RunConfig) -> dict[str, Any]:
    """What decides which policy answers (rollout, diagnose, and train's start model)."""
    return {
        "llm": cfg.llm.model_dump(mode="json"),
        "base_model": cfg.train.base_model,
        "seed": cfg.seed,
    }
