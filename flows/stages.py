"""The stages of one iteration, in order, as `StageSpec`s wired to each stage's core function.

Each `_run_<stage>` adapts one core function (generators/, harness/, training/) to the engine: read
the upstream tables through the context, call the function (per-task work through `ctx.map`, so
Prefect can turn it into retried tasks), and return the tables to write. Only stages whose code
exists are in the pipeline: `pipeline_stages()` looks for their modules.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

from clawloop.flows.config import RunConfig
from clawloop.flows.engine import StageContext, StageResult, StageSpec
from clawloop.generators.synthesize import llm_picks, synthesize
from clawloop.storage import fs, schemas
from clawloop.storage.artifacts import empty_row
from clawloop.tasks.retry import is_transient

log = logging.getLogger("clawloop.stages")
ORDER = ("synthesize", "forge", "verify", "rollout", "train", "diagnose")


# ---- synthesize ---------------------------------------------------------------------------------


def _user_files_digest(paths: list[str]) -> dict[str, str]:
    """Content hashes of user generator files, so editing one re-runs synthesis."""
    out: dict[str, str] = {}
    for p in paths:
        path = Path(p).expanduser()
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _synthesize_slice(cfg: RunConfig, k: int) -> dict[str, Any]:
    s = cfg.synthesize
    out = {
        "seed": cfg.seed,
        "iteration": k,
        "synthesize": s.model_dump(mode="json"),
        "user_files": _user_files_digest(s.generator_paths),
    }
    if s.llm_share > 0:
        # Written generators depend on who writes them and the sandbox that forges and verifies them.
        out["writer"] = s.llm.model_dump(mode="json") if s.llm else cfg.llm.model_dump(mode="json")
        out["sandbox"] = _sandbox_slice(cfg)
    return out


def _guidance(ctx: StageContext) -> dict[str, Any] | None:
    """The previous iteration's diagnosis guidance, if a diagnose stage wrote one."""
    if ctx.iteration <= 1 or ctx.manifest("diagnose", ctx.iteration - 1) is None:
        return None
    url = fs.join(ctx.stage_url("diagnose", ctx.iteration - 1), "guidance.json")
    return json.loads(fs.read_bytes(url)) if fs.exists(url) else None


def writer_endpoint(ctx: StageContext) -> tuple[Any, str]:
    """(harness.llm.LLMEndpoint | None, where): `synthesize.llm`, else the policy endpoint as it
    serves this iteration's policy (`llm.reload` applies), else None (the built-in library)."""
    from clawloop.harness.llm import LLMEndpoint

    cfg = ctx.config
    w = cfg.synthesize.llm
    if w is not None:
        return LLMEndpoint(w.base_url, w.model, w.api_key_env, request_timeout_s=600.0), (
            f"synthesize.llm {w.model} at {w.base_url}"
        )
    if not cfg.llm.base_url:
        return None, "no generator-writer endpoint: llm.base_url is null and synthesize.llm unset"
    from clawloop.flows.agent_stages import endpoint_policy

    policy, note = endpoint_policy(ctx, ctx.iteration - 1)
    ep = policy.endpoint()
    return LLMEndpoint(ep.base_url, ep.model, ep.api_key_env, request_timeout_s=600.0), (
        f"the policy ({note})"
    )


def _writer_guidance(guidance: dict[str, Any] | None, capabilities: set[str]) -> dict[str, Any]:
    """The diagnosis patterns for the writer prompt: each capability's own, else the whole text."""
    g = guidance or {}
    text = str(g.get("pattern_text") or "")
    patterns = {str(c): str(t) for c, t in (g.get("patterns") or {}).items()}
    caps = set(patterns) | set(g.get("capability_weights") or {}) | capabilities
    return {"patterns": {c: patterns.get(c) or text for c in caps}} if text or patterns else {}


def _llm_write(
    ctx: StageContext, rows: list[dict[str, Any]], guidance: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Swap `synthesize.llm_share` of the train candidates for LLM-written generators."""
    from clawloop.generators.llm_writer import WriterError, llm_candidates, normalized_hash

    s = ctx.config.synthesize
    picks = llm_picks(rows, s.llm_share, ctx.config.seed, ctx.iteration)
    if not picks:
        return rows, {"synthesis": "built-in library (synthesize.llm_share is 0)"}
    endpoint, where = writer_endpoint(ctx)
    if endpoint is None:
        msg = (
            f"built-in library: {where}, so the {len(picks)} candidate(s) synthesize.llm_share="
            f"{s.llm_share:g} asked the LLM to write keep their built-in generator"
        )
        log.warning("synthesize iter %d: %s", ctx.iteration, msg)
        return rows, {"synthesis": msg, "llm_written": 0, "llm_asked": len(picks)}
    chosen = [rows[i] for i in picks]
    n_chunks = min(s.llm_workers, len(chosen))
    chunks = [chosen[j::n_chunks] for j in range(n_chunks)]  # order restored below
    box = ctx.config.sandbox.to_sandbox_config()
    wguide = _writer_guidance(guidance, {str(r["capability"]) for r in chosen})

    def one(chunk: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        return llm_candidates(chunk, endpoint, box, guidance=wguide)

    def failed(chunk: list[dict[str, Any]], exc: BaseException) -> tuple[list, list[str]]:
        log.warning("synthesize: a writer batch raised: %s", exc)
        return list(chunk), [f"a writer batch raised {type(exc).__name__}: {exc}; built-in kept"]

    results = ctx.map("synthesize-llm", one, chunks, failed, workers=n_chunks, retries=0)
    written: list[dict[str, Any]] = [{}] * len(chosen)
    notes: list[str] = []
    for j, (out, chunk_notes) in enumerate(results):
        for pos, row in zip(range(j, len(chosen), n_chunks), out, strict=True):
            written[pos] = row
        notes += chunk_notes
    # Batches dedupe within themselves; a generator two batches both wrote keeps one copy.
    seen: set[str] = set()
    duplicates = 0
    for pos, row in enumerate(written):
        if not str(row.get("origin", "")).startswith("llm:"):
            continue
        try:
            h = normalized_hash(row["generator_code"])
        except WriterError:
            h = row["generator_sha256"]
        if h in seen:
            written[pos], duplicates = chosen[pos], duplicates + 1
        seen.add(h)
    out_rows = list(rows)
    for i, row in zip(picks, written, strict=True):
        out_rows[i] = row
    n_llm = sum(str(r.get("origin", "")).startswith("llm:") for r in written)
    return out_rows, {
        "synthesis": f"LLM writer, {where}: {n_llm}/{len(picks)} picked train candidate(s) "
        "written, forged and verified; the rest keep their built-in generator",
        "llm_written": n_llm,
        "llm_asked": len(picks),
        "llm_cross_batch_duplicates": duplicates,
        "writer_notes": notes,
    }


def _run_synthesize(ctx: StageContext) -> StageResult:
    guidance = _guidance(ctx)
    rows, summary = synthesize(ctx.config.synthesize, ctx.config.seed, ctx.iteration, guidance)
    rows, written = _llm_write(ctx, rows, guidance)
    return StageResult({"candidates": (schemas.CANDIDATES, rows)}, summary={**summary, **written})


# ---- forge --------------------------------------------------------------------------------------


def _sandbox_slice(cfg: RunConfig) -> dict[str, Any]:
    return cfg.sandbox.model_dump(mode="json", exclude={"docker_host"})


def _forge_failed_row(row: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    log.warning("forge of %s raised instead of returning a failed row: %s", row["task_id"], exc)
    return empty_row(
        schemas.FORGED,
        task_id=row["task_id"],
        status="failed",
        error=f"generator {row['generator_sha256'][:12]}, seed {row['seed']}: {type(exc).__name__}: {exc}",
        error_kind="sandbox" if is_transient(exc) else "crash",
        attempts=1,
        capability=row["capability"],
        domain=row["domain"],
        split=row["split"],
    )


def _run_forge(ctx: StageContext) -> StageResult:
    from clawloop.generators.forge import forge_candidate

    cands = ctx.rows("synthesize", "candidates")
    box = ctx.config.sandbox.to_sandbox_config()
    retries = ctx.config.forge.retries

    def one(row: dict[str, Any]) -> dict[str, Any]:
        return forge_candidate(row, box, retries=retries)

    rows = ctx.map(
        "forge", one, cands, _forge_failed_row, workers=ctx.config.forge.workers, retries=retries
    )
    ok = sum(r["status"] == "ok" for r in rows)
    kinds: dict[str, int] = {}
    for r in rows:
        if r["status"] != "ok":
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    return StageResult(
        {"tasks": (schemas.FORGED, rows)},
        summary={"forged": ok, "failed": len(rows) - ok, "failures": kinds},
    )


# ---- verify -------------------------------------------------------------------------------------


def _verify_error(
    row: dict[str, Any], exc: BaseException
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    reason = f"verify could not run: {type(exc).__name__}: {exc}"
    log.warning("verify of %s raised: %s", row["task_id"], reason)
    check = empty_row(
        schemas.CHECKS, task_id=row["task_id"], check="verify", passed=False, reason=reason
    )
    verdict = empty_row(
        schemas.VERDICTS,
        task_id=row["task_id"],
        kept=False,
        reason=reason,
        capability=row["capability"],
        domain=row["domain"],
        split=row["split"],
    )
    return [check], verdict


def _run_verify(ctx: StageContext) -> StageResult:
    from clawloop.generators.verify import verify_task

    forged = ctx.rows("forge", "tasks")
    box = ctx.config.sandbox.to_sandbox_config()
    results = ctx.map(
        "verify",
        lambda r: verify_task(r, box),
        forged,
        _verify_error,
        workers=ctx.config.verify.workers,
        retries=1,
    )
    checks = [c for cs, _ in results for c in cs]
    verdicts = [v for _, v in results]
    kept = sum(v["kept"] for v in verdicts)
    return StageResult(
        {"checks": (schemas.CHECKS, checks), "verdicts": (schemas.VERDICTS, verdicts)},
        summary={
            "kept": kept,
            "dropped": len(verdicts) - kept,
            "kept_train": sum(v["kept"] and v["split"] == "train" for v in verdicts),
        },
    )


# ---- the pipeline -------------------------------------------------------------------------------

_CODE_SANDBOX = ("generators", "harness/sandbox", "storage/schemas.py")


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def pipeline_stages() -> list[StageSpec]:
    """The stages that exist in this checkout, in pipeline order."""
    stages = [
        StageSpec(
            "synthesize",
            _run_synthesize,
            _synthesize_slice,
            previous=("diagnose",),
            code=("generators", "storage/schemas.py"),
        ),
    ]
    if _exists("clawloop.generators.forge"):
        stages.append(
            StageSpec(
                "forge",
                _run_forge,
                lambda c, k: {"sandbox": _sandbox_slice(c), "retries": c.forge.retries},
                upstream=("synthesize",),
                code=_CODE_SANDBOX,
            )
        )
    if _exists("clawloop.generators.verify") and stages[-1].name == "forge":
        stages.append(
            StageSpec(
                "verify",
                _run_verify,
                lambda c, k: {"sandbox": _sandbox_slice(c)},
                upstream=("forge",),
                code=_CODE_SANDBOX,
            )
        )
    if stages[-1].name != "verify":
        return stages
    from clawloop.flows import agent_stages as ag

    def policy_slice(c: RunConfig) -> dict[str, Any]:
        return {
            "llm": c.llm.model_dump(mode="json"),
            "base_model": c.train.base_model,
            "seed": c.seed,
        }

    if _exists("clawloop.harness.rollout"):
        stages.append(
            StageSpec(
                "rollout",
                ag.run_rollout,
                lambda c, k: {
                    "rollout": c.rollout.model_dump(mode="json"),
                    "sandbox": _sandbox_slice(c),
                    **policy_slice(c),
                },
                upstream=("verify",),
                previous=("train",),
                code=("harness", "flows/agent_stages.py", "storage/schemas.py"),
            )
        )
    if _exists("clawloop.training.stage") and stages[-1].name == "rollout":
        stages.append(
            StageSpec(
                "train",
                ag.run_train,
                lambda c, k: {"train": c.train.model_dump(mode="json"), **policy_slice(c)},
                upstream=("rollout",),
                previous=("train",),
                code=("training", "flows/agent_stages.py", "storage/schemas.py"),
            )
        )
    if _exists("clawloop.generators.diagnosis.diagnose") and stages[-1].name == "train":
        stages.append(
            StageSpec(
                "diagnose",
                ag.run_diagnose,
                lambda c, k: {
                    "diagnose": c.diagnose.model_dump(mode="json"),
                    # guidance difficulty starts where synthesis starts
                    "start_levels": [c.synthesize.multihop, c.synthesize.dirtiness],
                    "rollout": c.rollout.model_dump(mode="json"),
                    "sandbox": _sandbox_slice(c),
                    **policy_slice(c),
                },
                upstream=("synthesize", "verify", "train"),  # candidates name the capabilities
                previous=("diagnose",),
                code=("generators", "harness", "flows/agent_stages.py", "storage/schemas.py"),
            )
        )
    return stages
