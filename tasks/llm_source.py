"""The synthesize stage's LLM-written source: `synthesize.llm.share` of the train candidates get
a generator the LLM writes for the same spec (parsed and statically checked here; run only by
forge and verify, in sandboxes). A written generator that the previous iteration's forge or
verify rejected goes back to the writer with that error (up to 3 repairs per lineage) and
returns as an extra train candidate.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.harness.llm import ChatFn, PolicyConfig
from clawloop.synthesis.llm_writer import (
    WriterError,
    forge_failure,
    normalized_hash,
    repair_candidates,
    verify_failure,
    write_candidates,
    writer_chat,
)
from clawloop.synthesis.synthesize import llm_picks
from clawloop.tasks.policy import probe_endpoint
from clawloop.tasks.source import Product, Row, Source, previous_guidance
from clawloop.tasks.stage import StageContext
from clawloop.tasks.writer import writer_endpoint, writer_slice

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.synthesize")
Written = tuple[list[Row], list[str]]  # (rows, notes)
OFF_NOTE = "built-in library (synthesize.llm.share is 0)"


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    return {
        "seed": cfg.seed,
        "iteration": iteration,
        "llm": cfg.synthesize.llm.model_dump(mode="json"),
        "writer": writer_slice(cfg),  # written generators depend on who writes them
        "writer_workers": cfg.synthesize.writer.workers,
    }


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


def ask(cfg: RunConfig, iteration: int, rows: list[Row]) -> dict[str, Any]:
    """The train candidates the LLM rewrites (llm_picks), and what they are."""
    picks = llm_picks(rows, cfg.synthesize.llm.share, cfg.seed, iteration)
    return {"picks": picks, "chosen": [rows[i] for i in picks]}


def _kept(summary: dict[str, Any]) -> Product:
    return Product([], summary, extra={"picks": [], "repaired": []})


def make(ctx: StageContext, asked: dict[str, Any]) -> Product:
    """The picked candidates written by the LLM (each at its pick), and the repairs of last
    iteration's rejected ones."""
    s = ctx.config.synthesize
    picks, chosen = asked["picks"], asked["chosen"]
    failures = previous_failures(ctx) if s.llm.share > 0 else []
    if not picks and not failures:
        return _kept({"synthesis": OFF_NOTE})
    endpoint, where = writer_endpoint(ctx)
    if endpoint is None:
        msg = (
            f"built-in library: {where}, so the {len(picks)} candidate(s) synthesize.llm.share="
            f"{s.llm.share:g} asked the LLM to write keep their built-in generator"
        )
        log.warning("synthesize iter %d: %s", ctx.iteration, msg)
        return _kept({"synthesis": msg, "llm_written": 0, "llm_asked": len(picks)})
    probe_endpoint(ctx, PolicyConfig(endpoint.base_url, endpoint.model, endpoint.api_key_env))
    chat = writer_chat(endpoint)
    wguide = writer_guidance(previous_guidance(ctx), {str(r["capability"]) for r in chosen})
    n_chunks = max(1, min(s.writer.workers, len(chosen)))
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
    repaired, repair_notes = (
        repair_candidates(failures, chat, guidance=wguide) if failures else ([], [])
    )
    n_llm = sum(str(r.get("origin", "")).startswith("llm:") for r in written)
    summary = {
        "synthesis": f"LLM writer, {where}: {n_llm}/{len(picks)} picked train candidate(s) "
        f"written (forge and verify run them), {len(repaired)}/{len(failures)} rejected "
        "generator(s) of the last iteration repaired",
        "llm_written": n_llm,
        "llm_asked": len(picks),
        "llm_repaired": len(repaired),
        "llm_cross_batch_duplicates": duplicates,
        "writer_notes": notes + repair_notes,
    }
    return Product(written, summary, extra={"picks": picks, "repaired": repaired})


def place(rows: list[Row], product: Product) -> list[Row]:
    """Each written generator at its pick; the repairs after every other candidate."""
    out = list(rows)
    for i, row in zip(product.extra["picks"], product.candidates, strict=True):
        out[i] = row
    return out + product.extra["repaired"]


SOURCE = Source(
    "llm",
    __name__,
    enabled=lambda cfg: cfg.synthesize.llm.share > 0,
    config_slice=config_slice,
    make=make,
    place=place,
    off=lambda cfg: _kept({"synthesis": OFF_NOTE}),
    ask=ask,
    # diagnose: the writer's guidance; synthesize, forge, verify: the rejected generators to
    # repair; train: the writer may be the policy
    previous=("diagnose", "synthesize", "forge", "verify", "train"),
)
