"""The synthesize stage's SkillSynth source: a share of the train candidates made from skill
folders (`synthesize.skills_dirs`) through the scenario-mediated skill graph.

Per iteration: the graph (synthesis/skillgraph) is built once per corpus hash and scenario
source and cached under `synthesize.cache_dir`/skill-graphs; paths are sampled by inverse visit
frequency with the visit counts carried from the previous iteration's `skill_visits` table, skills
whose tasks the policy failed in the previous rollout weighted up; each path is planned,
constructed, forged, verified and judged (up to `skill_max_repairs` repairs) in its own task run.
The writer endpoint (`synthesize.llm`, else the policy) plays Planner, Constructor and judge, so
without one the source is off and the summary says so. An endpoint or sandbox that fails a path
past its retries fails the stage (the path is not a result); a path that fails its repairs is a
row with its reasons.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import networkx as nx
from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.harness.llm import ChatFn, LLMEndpoint, PolicyConfig, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.storage import schemas
from clawloop.synthesis.llm_writer import writer_chat
from clawloop.synthesis.skillgraph.corpus import CorpusError, corpus_sha256, load_corpus, usable
from clawloop.synthesis.skillgraph.graph import (
    GRAPH_VERSION,
    GraphConfig,
    GraphError,
    build_from_corpus,
    load_graph,
    save_graph,
)
from clawloop.synthesis.skillgraph.instantiate import PATH_KEY, Instantiated, instantiate
from clawloop.synthesis.skillgraph.model import SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.sample import (
    Visits,
    entropy_report,
    sample_paths,
    visit_rows,
    visits_from_rows,
)
from clawloop.synthesis.synthesize import SynthesizeConfig, failure_rate_weights, share_of
from clawloop.tasks.mapping import InfraFault, retry_transient
from clawloop.tasks.policy import probe_endpoint
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.stage import StageContext, StageError, fail_on_infra

log = logging.getLogger("clawloop.synthesize")
Row = dict[str, Any]
Tables = dict[str, tuple[Any, list[Row]]]
EndpointOf = Callable[[StageContext], tuple[LLMEndpoint | None, str]]
TABLES = {  # what the source writes, beside the candidates
    "skill_paths": schemas.SKILL_PATHS,
    "skill_plans": schemas.SKILL_PLANS,
    "skill_attempts": schemas.SKILL_ATTEMPTS,
    "skill_visits": schemas.SKILL_VISITS,
}


def active(s: SynthesizeConfig) -> bool:
    return bool(s.skills_dirs) and s.skill_graph_share > 0


def skills_digest(s: SynthesizeConfig) -> str:
    """The corpus hash (folder names and content hashes): editing a skill re-synthesizes."""
    if not active(s):
        return ""
    try:
        return corpus_sha256(load_corpus(s.skills_dirs))
    except CorpusError as exc:
        raise ValueError(f"synthesize.skills_dirs: {exc}") from exc


def empty_tables() -> Tables:
    return {name: (schema, []) for name, schema in TABLES.items()}


def graph_key(corpus_sha: str, scenarios_by: str) -> str:
    """The graph cache key: the corpus, who inferred the scenarios, the graph code's version."""
    config = json.dumps(asdict(GraphConfig()), sort_keys=True)
    text = f"{GRAPH_VERSION}\0{corpus_sha}\0{scenarios_by}\0{config}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def cached_graph(
    s: SynthesizeConfig, chat: ChatFn | None, model: str
) -> tuple[nx.MultiDiGraph, bool]:
    """(graph, was cached). Built at most once per key; written to a temp folder and renamed
    into place, so a killed build leaves no half graph and two runs may race safely."""
    cache = Path(s.cache_dir).expanduser() / "skill-graphs"
    records = load_corpus(s.skills_dirs)
    by = model if chat is not None else "heuristic"
    where = cache / graph_key(corpus_sha256(records), by)
    if where.is_dir():
        try:
            return load_graph(where), True
        except GraphError as exc:  # a damaged cache entry is rebuilt
            log.warning("synthesize: rebuilding the skill graph at %s: %s", where, exc)
            shutil.rmtree(where, ignore_errors=True)
    built = build_from_corpus(s.skills_dirs, chat=chat, model=model, cache_dir=cache / "scenarios")
    tmp = cache / f".tmp-{uuid.uuid4().hex}"
    save_graph(built.graph, tmp)
    try:
        os.rename(tmp, where)
    except OSError:  # another run put the same graph there first
        shutil.rmtree(tmp, ignore_errors=True)
    return built.graph, False


def _visits_before(ctx: StageContext) -> Visits:
    """ν from the previous iteration's `skill_visits` (empty at iteration 1 or without one)."""
    m = ctx.manifest("synthesize", ctx.iteration - 1) if ctx.iteration > 1 else None
    if m is None or "skill_visits.parquet" not in {f.name for f in m.files}:
        return Visits()
    return visits_from_rows(ctx.rows("synthesize", "skill_visits", ctx.iteration - 1))


def failure_weights(candidates: list[Row], trajectories: list[Row]) -> dict[str, float]:
    """Skill -> 1 + the failure rate of the episodes on tasks whose path used it."""
    uses = {
        r["task_id"]: [st["skill"] for st in json.loads(r[PATH_KEY])["steps"]]
        for r in candidates
        if r.get(PATH_KEY)
    }
    return failure_rate_weights(uses, trajectories)


def _weights_before(ctx: StageContext) -> dict[str, float]:
    k = ctx.iteration - 1
    if k < 1 or ctx.manifest("rollout", k) is None:
        return {}
    return failure_weights(
        ctx.rows("synthesize", "candidates", k), ctx.rows("rollout", "trajectories", k)
    )


def path_seed(run_seed: int, iteration: int, path_id: str) -> int:
    return int(hashlib.sha256(f"{run_seed}:{iteration}:{path_id}".encode()).hexdigest()[:8], 16)


@task(
    name="skill-path",
    retries=2,
    retry_delay_seconds=[2, 5],
    retry_condition_fn=retry_transient,
    cache_policy=NO_CACHE,
    persist_result=False,
)
def instantiate_path(
    item: tuple[SkillPath, int],
    skills: dict[str, SkillRecord],
    chat: ChatFn,
    sandbox: SandboxConfig,
    max_repairs: int,
) -> Instantiated:
    """Plan, construct, forge, verify and judge one path; an endpoint or sandbox fault raises
    InfraFault (retried; the rows travel with it)."""
    path, seed = item
    result = instantiate(path, skills, chat, sandbox, seed, max_repairs)
    if result.fault:
        raise InfraFault(result.fault, row={"result": result})
    return result


def _lost(item: tuple[SkillPath, int], exc: BaseException) -> Instantiated:
    path, _ = item
    if isinstance(exc, InfraFault) and exc.row is not None:
        return exc.row["result"]
    return Instantiated(path.path_id, fault=f"{type(exc).__name__}: {exc}")


def path_row(path: SkillPath, res: Instantiated) -> Row:
    last = res.attempts[-1] if res.attempts else {}
    return {
        "path_id": path.path_id,
        "steps": json.dumps([asdict(s) for s in path.steps], ensure_ascii=False, sort_keys=True),
        "length": len(path.steps),
        "kept": res.kept,
        "task_id": str((res.candidate or {}).get("task_id", "")),
        "attempts": sum(a["stage"] != "plan" for a in res.attempts),
        "reason": res.fault or str(last.get("reason", "")),
    }


def add_skill_graph_tasks(
    ctx: StageContext, rows: list[Row], endpoint_of: EndpointOf
) -> tuple[list[Row], dict[str, Any], Tables]:
    """(rows with `skill_graph_share` of the train rows swapped for SkillSynth tasks, summary,
    the skill_* tables)."""
    s = ctx.config.synthesize
    if not active(s):
        why = "synthesize.skill_graph_share is 0" if s.skills_dirs else "no synthesize.skills_dirs"
        return rows, {"skill_graph": 0, "skill_graph_note": why}, empty_tables()
    train = [i for i, r in enumerate(rows) if r["split"] == "train"]
    slots = [i for i in train if rows[i]["origin"] == "builtin"]
    n = min(len(slots), share_of(len(train), s.skill_graph_share))
    endpoint, where = endpoint_of(ctx)
    if n == 0 or endpoint is None:
        why = f"{where}: SkillSynth needs an LLM for its Planner and Constructor"
        if n == 0:
            why = "no built-in train candidate left to replace"
        log.warning("synthesize iter %d: skill graph source off: %s", ctx.iteration, why)
        return rows, {"skill_graph": 0, "skill_graph_note": why}, empty_tables()
    probe_endpoint(ctx, PolicyConfig(endpoint.base_url, endpoint.model, endpoint.api_key_env))
    sandbox = sandbox_for(ctx)
    scen_chat = None
    if s.skill_scenarios == "llm":
        scen_chat = endpoint_chat(endpoint, max_tokens=600, temperature=0.0)
    try:
        graph, cached = cached_graph(s, scen_chat, endpoint.model)
        records = {r.name: r for r in usable(load_corpus(s.skills_dirs))}
    except (CorpusError, GraphError) as exc:
        raise StageError(f"synthesize: skill graph from {s.skills_dirs}: {exc}") from exc
    lo, hi = s.skill_path_len
    paths, visits = sample_paths(
        graph, n, path_seed(ctx.config.seed, ctx.iteration, "sample"), s.skill_sampler,
        lo, hi, _visits_before(ctx), _weights_before(ctx),
    )  # fmt: skip
    paths = list({p.path_id: p for p in paths}.values())  # a path drawn twice is one task
    items = [(p, path_seed(ctx.config.seed, ctx.iteration, p.path_id)) for p in paths]
    results: list[Instantiated] = ctx.map(
        instantiate_path, items, _lost, workers=s.llm_workers,
        skills=records, chat=writer_chat(endpoint), sandbox=sandbox,
        max_repairs=s.skill_max_repairs,
    )  # fmt: skip
    faults = [f"path {r.path_id}: {r.fault}" for r in results if r.fault]
    fail_on_infra(
        ctx,
        "skill paths",
        faults,
        len(results),
        f"check the writer endpoint ({where}) and the sandbox engine",
    )
    made = [r.candidate for r in results if r.candidate is not None]
    out_rows = list(rows)
    for i, cand in zip(slots, made, strict=False):
        out_rows[i] = cand
    rows_of = {
        "skill_paths": [path_row(p, r) for p, r in zip(paths, results, strict=True)],
        "skill_plans": [
            {"path_id": r.path_id, "plan": r.plan.to_json()} for r in results if r.plan
        ],
        "skill_attempts": [a for r in results for a in r.attempts],
        "skill_visits": visit_rows(visits),
    }
    tables: Tables = {name: (schema, rows_of[name]) for name, schema in TABLES.items()}
    report = entropy_report(paths, graph)
    summary = {
        "skill_graph": len(made),
        "skill_graph_asked": n,
        "skill_graph_share": round(len(made) / max(1, len(train)), 3),
        "skill_graph_paths": len(paths),
        "skill_graph_cached": cached,
        "skill_graph_attempts": sum(len(r.attempts) for r in results),
        "skill_graph_repairs": sum(max(0, len(r.attempts) - 1) for r in results),
        "skill_graph_entropy": {k: report[k] for k in ("scenario_entropy", "skill_entropy")},
    }
    return out_rows, summary, tables
