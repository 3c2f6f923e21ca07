"""Synthesize: candidate tasks (generator code + seed + split) for one iteration, weighted by the
previous iteration's diagnosis guidance.

`synthesize.llm_share` of the train candidates get a generator the LLM writes for the same spec
(parsed and statically checked here; run only by forge and verify, in sandboxes). A written
generator that the previous iteration's forge or verify rejected goes back to the writer with
that error (up to 3 repairs per lineage) and returns as an extra train candidate.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.diagnosis.guidance import read_guidance
from clawloop.harness.llm import ChatFn, LLMEndpoint, PolicyConfig
from clawloop.storage import schemas
from clawloop.synthesis.llm_writer import (
    WriterError,
    forge_failure,
    normalized_hash,
    repair_candidates,
    verify_failure,
    write_candidates,
    writer_chat,
)
from clawloop.synthesis.synthesize import SynthesizeConfig, llm_picks, synthesize
from clawloop.tasks.domain_source import add_domain_tasks, domains_digest
from clawloop.tasks.external_source import add_external_tasks, external_digest
from clawloop.tasks.policy import endpoint_policy, probe_endpoint
from clawloop.tasks.skill_source import add_skill_graph_tasks, skills_digest
from clawloop.tasks.stage import StageContext, StageResult, StageSpec

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.synthesize")
SynthesizeSettings = SynthesizeConfig  # the section is the core config itself
Row = dict[str, Any]
Written = tuple[list[Row], list[str]]  # (rows, notes)


def _user_files_digest(paths: list[str]) -> dict[str, str]:
    """Content hashes of user generator files, so editing one re-runs synthesis."""
    out: dict[str, str] = {}
    for p in paths:
        path = Path(p).expanduser()
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    s = cfg.synthesize
    out = {
        "seed": cfg.seed,
        "iteration": iteration,
        "synthesize": s.model_dump(mode="json"),
        "user_files": _user_files_digest(s.generator_paths),
        "domains": domains_digest(s),
        "skills": skills_digest(s),
        "external": external_digest(s),
    }
    if s.llm_share > 0 or skills_digest(s):  # written generators depend on who writes them
        out["writer"] = s.llm.model_dump(mode="json") if s.llm else cfg.llm.model_dump(mode="json")
    return out


def writer_endpoint(ctx: StageContext) -> tuple[LLMEndpoint | None, str]:
    """(endpoint, where): `synthesize.llm`, else the policy endpoint as it serves this iteration's
    policy (`llm.reload` applies), else None (the built-in library)."""
    cfg = ctx.config
    w = cfg.synthesize.llm
    if w is not None:
        endpoint = LLMEndpoint(w.base_url, w.model, w.api_key_env, request_timeout_s=600.0)
        return endpoint, f"synthesize.llm {w.model} at {w.base_url}"
    if not cfg.llm.base_url:
        return None, "no generator-writer endpoint: llm.base_url is null and synthesize.llm unset"
    policy, note = endpoint_policy(ctx, ctx.iteration - 1)
    ep = policy.endpoint()
    endpoint = LLMEndpoint(ep.base_url, ep.model, ep.api_key_env, request_timeout_s=600.0)
    return endpoint, f"the policy ({note})"


def writer_guidance(guidance: dict[str, Any] | None, capabilities: set[str]) -> dict[str, Any]:
    """The diagnosis patterns for the writer prompt: each capability's own, else the whole text."""
    g = guidance or {}
    text = str(g.get("pattern_text") or "")
    patterns = {str(c): str(t) for c, t in (g.get("patterns") or {}).items()}
    caps = set(patterns) | set(g.get("capability_weights") or {}) | capabilities
    return {"patterns": {c: patterns.get(c) or text for c in caps}} if text or patterns else {}


@task(name="write-generators", cache_policy=NO_CACHE, persist_result=False)
def write_batch(batch: list[Row], chat: ChatFn, guidance: dict[str, Any]) -> Written:
    """One batch of picked candidates -> LLM-written rows (or the built-in row kept, with a note)."""
    return write_candidates(batch, chat, guidance=guidance)


def _batch_failed(batch: list[Row], exc: BaseException) -> Written:
    log.warning("synthesize: a writer batch raised: %s", exc)
    return list(batch), [f"a writer batch raised {type(exc).__name__}: {exc}; built-in kept"]


def previous_failures(ctx: StageContext) -> list[tuple[Row, str, str]]:
    """(candidate, stage, error) for last iteration's LLM-written generators that forge or
    verify rejected: what the repair loop sends back to the writer."""
    k = ctx.iteration - 1
    if k < 1 or ctx.manifest("verify", k) is None:
        return []
    written = {
        r["task_id"]: r
        for r in ctx.rows("synthesize", "candidates", k)
        if str(r["origin"]).startswith("llm:")
    }
    forged = {r["task_id"]: r for r in ctx.rows("forge", "tasks", k) if r["task_id"] in written}
    checks: dict[str, list[Row]] = {}
    for c in ctx.rows("verify", "checks", k):
        checks.setdefault(c["task_id"], []).append(c)
    out = []
    for v in ctx.rows("verify", "verdicts", k):
        if v["task_id"] not in written or v["kept"]:
            continue
        f = forged.get(v["task_id"])
        if f is not None and f["status"] != "ok":
            if f["error_kind"] != "sandbox":  # the sandbox's fault, not the generator's
                out.append((written[v["task_id"]], "forge", forge_failure(f)))
        else:
            failure = verify_failure(v, checks.get(v["task_id"], []))
            out.append((written[v["task_id"]], "verify", failure))
    return out


def _dedupe(rows: list[Row], fallback: list[Row]) -> tuple[list[Row], int]:
    """A generator two batches both wrote keeps one copy; the other slot gets its built-in row."""
    seen: set[str] = set()
    out, duplicates = list(rows), 0
    for pos, row in enumerate(rows):
        if not str(row.get("origin", "")).startswith("llm:"):
            continue
        try:
            h = normalized_hash(row["generator_code"])
        except WriterError:
            h = row["generator_sha256"]
        if h in seen:
            out[pos], duplicates = fallback[pos], duplicates + 1
        seen.add(h)
    return out, duplicates


def llm_write(
    ctx: StageContext, rows: list[Row], guidance: dict[str, Any] | None
) -> tuple[list[Row], dict[str, Any]]:
    """Swap `synthesize.llm_share` of the train candidates for LLM-written generators, and add
    the repairs of last iteration's rejected ones."""
    s = ctx.config.synthesize
    picks = llm_picks(rows, s.llm_share, ctx.config.seed, ctx.iteration)
    failures = previous_failures(ctx) if s.llm_share > 0 else []
    if not picks and not failures:
        return rows, {"synthesis": "built-in library (synthesize.llm_share is 0)"}
    endpoint, where = writer_endpoint(ctx)
    if endpoint is None:
        msg = (
            f"built-in library: {where}, so the {len(picks)} candidate(s) synthesize.llm_share="
            f"{s.llm_share:g} asked the LLM to write keep their built-in generator"
        )
        log.warning("synthesize iter %d: %s", ctx.iteration, msg)
        return rows, {"synthesis": msg, "llm_written": 0, "llm_asked": len(picks)}
    probe_endpoint(ctx, PolicyConfig(endpoint.base_url, endpoint.model, endpoint.api_key_env))
    chat = writer_chat(endpoint)
    chosen = [rows[i] for i in picks]
    wguide = writer_guidance(guidance, {str(r["capability"]) for r in chosen})
    n_chunks = max(1, min(s.llm_workers, len(chosen)))
    chunks = [chosen[j::n_chunks] for j in range(n_chunks)] if chosen else []
    results = ctx.map(
        write_batch, chunks, _batch_failed, workers=n_chunks, chat=chat, guidance=wguide
    )
    written: list[Row] = [{}] * len(chosen)
    notes: list[str] = []
    for j, (out, chunk_notes) in enumerate(results):
        for pos, row in zip(range(j, len(chosen), n_chunks), out, strict=True):
            written[pos] = row
        notes += chunk_notes
    written, duplicates = _dedupe(written, chosen)
    out_rows = list(rows)
    for i, row in zip(picks, written, strict=True):
        out_rows[i] = row
    repaired, repair_notes = (
        repair_candidates(failures, chat, guidance=wguide) if failures else ([], [])
    )
    n_llm = sum(str(r.get("origin", "")).startswith("llm:") for r in written)
    return out_rows + repaired, {
        "synthesis": f"LLM writer, {where}: {n_llm}/{len(picks)} picked train candidate(s) "
        f"written (forge and verify run them), {len(repaired)}/{len(failures)} rejected "
        "generator(s) of the last iteration repaired",
        "llm_written": n_llm,
        "llm_asked": len(picks),
        "llm_repaired": len(repaired),
        "llm_cross_batch_duplicates": duplicates,
        "writer_notes": notes + repair_notes,
    }


def run(ctx: StageContext) -> StageResult:
    k = ctx.iteration
    has_guidance = k > 1 and ctx.manifest("diagnose", k - 1) is not None
    guidance = read_guidance(ctx.stage_url("diagnose", k - 1)) if has_guidance else None
    rows, summary = synthesize(ctx.config.synthesize, ctx.config.seed, k, guidance)
    rows, written = llm_write(ctx, rows, guidance)
    rows, domain_summary, graphs, skills = add_domain_tasks(ctx, rows)
    rows, skill_summary, skill_tables = add_skill_graph_tasks(ctx, rows, writer_endpoint)
    rows, external_summary = add_external_tasks(ctx, rows)
    outputs = {
        "candidates": (schemas.CANDIDATES, rows),
        "domain_graphs": (schemas.DOMAIN_GRAPHS, graphs),
        "domain_skills": (schemas.DOMAIN_SKILLS, skills),
        **skill_tables,
    }
    summary = {**summary, **domain_summary, **skill_summary, **external_summary, **written}
    return StageResult(outputs, summary=summary)


STAGE = StageSpec(
    "synthesize",
    run,
    config_slice,
    module=__name__,
    previous=(
        "diagnose",
        "synthesize",
        "forge",
        "verify",
        "train",
        "rollout",
    ),  # train: the writer is the policy; rollout: the skills whose tasks failed
    workers=lambda cfg: cfg.synthesize.llm_workers,
)
