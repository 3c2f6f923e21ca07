"""The synthesize stage's SkillSynth source (tasks/source.py): a share of the train candidates made from skill
folders (`synthesize.skills.dirs`) through the scenario-mediated skill graph.

Per iteration: the graph (synthesis/skillgraph) is built once per corpus hash and scenario
source and cached under `synthesize.cache_dir`/skill-graphs; paths are sampled by inverse visit
frequency with the visit counts carried from the previous iteration's `skill_visits` table, skills
whose tasks the policy failed in the previous rollout weighted up; each path is planned,
constructed, forged, verified and judged (up to `synthesize.skills.max_repairs` repairs) in its own task run.
The writer endpoint (`synthesize.writer.endpoint`, else the policy) plays Planner, Constructor and judge, so
without one the source is off and the summary says so. An endpoint or sandbox that fails a path
past its retries fails the stage (the path is not a result); a path that fails its repairs is a
row with its reasons. How it shares the candidates out (weights, seeds, slots, the graph cache's
key) is synthesis/skillgraph/weights.py.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
from prefect import task
from prefect.cache_policies import NO_CACHE

from clawloop.harness.llm import ChatFn, PolicyConfig, endpoint_chat
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.storage import schemas
from clawloop.synthesis.config import SynthesizeConfig
from clawloop.synthesis.llm_writer import writer_chat
from clawloop.synthesis.skillgraph.corpus import CorpusError, corpus_sha256, load_corpus, usable
from clawloop.synthesis.skillgraph.graph import (
    GraphError,
    build_from_corpus,
    load_graph,
    save_graph,
)
from clawloop.synthesis.skillgraph.instantiate import Instantiated, instantiate
from clawloop.synthesis.skillgraph.model import SkillPath, SkillRecord
from clawloop.synthesis.skillgraph.sample import (
    Visits,
    entropy_report,
    sample_paths,
    visit_rows,
    visits_from_rows,
)
from clawloop.synthesis.skillgraph.weights import (
    failure_weights,
    graph_key,
    path_row,
    path_seed,
    place_skill_tasks,
    skill_asks,
    skill_slots,
)
from clawloop.tasks.mapping import InfraFault, retry_transient
from clawloop.tasks.policy import probe_endpoint
from clawloop.tasks.sandbox import sandbox_for
from clawloop.tasks.source import Product, Source
from clawloop.tasks.stage import StageContext, StageError, fail_on_infra
from clawloop.tasks.writer import writer_endpoint, writer_slice

if TYPE_CHECKING:
    from clawloop.tasks.config import RunConfig

log = logging.getLogger("clawloop.synthesize")
Row = dict[str, Any]
TABLES = {  # what the source writes, beside the candidates
    "skill_paths": schemas.SKILL_PATHS,
    "skill_plans": schemas.SKILL_PLANS,
    "skill_attempts": schemas.SKILL_ATTEMPTS,
    "skill_visits": schemas.SKILL_VISITS,
}


def active(cfg: RunConfig) -> bool:
    return _active(cfg.synthesize)


def _active(s: SynthesizeConfig) -> bool:
    return bool(s.skills.dirs) and s.skills.share > 0


def skills_digest(s: SynthesizeConfig) -> str:
    """The corpus hash (folder names and content hashes): editing a skill re-synthesizes."""
    if not _active(s):
        return ""
    try:
        return corpus_sha256(load_corpus(s.skills.dirs))
    except CorpusError as exc:
        raise ValueError(f"synthesize.skills.dirs: {exc}") from exc


def cached_graph(
    s: SynthesizeConfig, chat: ChatFn | None, model: str
) -> tuple[nx.MultiDiGraph, bool]:
    """(graph, was cached). Built at most once per key; written to a temp folder and renamed
    into place, so a killed build leaves no half graph and two runs may race safely."""
    cache = Path(s.cache_dir).expanduser() / "skill-graphs"
    records = load_corpus(s.skills.dirs)
    by = model if chat is not None else "heuristic"
    where = cache / graph_key(corpus_sha256(records), by)
    if where.is_dir():
        try:
            return load_graph(where), True
        except GraphError as exc:  # a damaged cache entry is rebuilt
            log.warning("synthesize: rebuilding the skill graph at %s: %s", where, exc)
            shutil.rmtree(where, ignore_errors=True)
    built = build_from_corpus(s.skills.dirs, chat=chat, model=model, cache_dir=cache / "scenarios")
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


def _weights_before(ctx: StageContext) -> dict[str, float]:
    k = ctx.iteration - 1
    if k < 1 or ctx.manifest("rollout", k) is None:
        return {}
    return failure_weights(
        ctx.rows("synthesize", "candidates", k), ctx.rows("rollout", "trajectories", k)
    )


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


def config_slice(cfg: RunConfig, iteration: int) -> dict[str, Any]:
    s = cfg.synthesize
    return {
        "seed": cfg.seed,
        "iteration": iteration,
        "skills": s.skills.model_dump(mode="json"),
        "skill_files": skills_digest(s),
        "writer": writer_slice(cfg),  # the Planner and Constructor
        "writer_workers": s.writer.workers,
        "cache_dir": s.cache_dir,
    }


def _none(why: str) -> Product:
    return Product([], {"skill_graph": 0, "skill_graph_note": why}, dict.fromkeys(TABLES, []))


def off(cfg: RunConfig) -> Product:
    s = cfg.synthesize
    return _none("synthesize.skills.share is 0" if s.skills.dirs else "no synthesize.skills.dirs")


def ask(cfg: RunConfig, iteration: int, rows: list[Row]) -> list[int]:
    """[train candidates, built-in ones]: the share is of the first, the slots are the second."""
    n_train, slots = skill_slots(rows)
    return [n_train, len(slots)]


def make(ctx: StageContext, asked: list[int]) -> Product:
    """`synthesize.skills.share` of the train candidates' worth of SkillSynth tasks (at most one per
    built-in train candidate), and the skill_* tables."""
    s = ctx.config.synthesize
    n_train, n_slots = asked
    n = skill_asks(n_train, n_slots, s.skills.share)
    endpoint, where = writer_endpoint(ctx)
    if n == 0 or endpoint is None:
        why = f"{where}: SkillSynth needs an LLM for its Planner and Constructor"
        if n == 0:
            why = "no built-in train candidate left to replace"
        log.warning("synthesize iter %d: skill graph source off: %s", ctx.iteration, why)
        return _none(why)
    probe_endpoint(ctx, PolicyConfig(endpoint.base_url, endpoint.model, endpoint.api_key_env))
    sandbox = sandbox_for(ctx)
    scen_chat = None
    if s.skills.scenarios == "llm":
        scen_chat = endpoint_chat(endpoint, max_tokens=600, temperature=0.0)
    try:
        graph, cached = cached_graph(s, scen_chat, endpoint.model)
        records = {r.name: r for r in usable(load_corpus(s.skills.dirs))}
    except (CorpusError, GraphError) as exc:
        raise StageError(f"synthesize: skill graph from {s.skills.dirs}: {exc}") from exc
    lo, hi = s.skills.path_len
    paths, visits = sample_paths(
        graph, n, path_seed(ctx.config.seed, ctx.iteration, "sample"), s.skills.sampler,
        lo, hi, _visits_before(ctx), _weights_before(ctx),
    )  # fmt: skip
    paths = list({p.path_id: p for p in paths}.values())  # a path drawn twice is one task
    items = [(p, path_seed(ctx.config.seed, ctx.iteration, p.path_id)) for p in paths]
    results: list[Instantiated] = ctx.map(
        instantiate_path, items, _lost, workers=s.writer.workers,
        skills=records, chat=writer_chat(endpoint), sandbox=sandbox,
        max_repairs=s.skills.max_repairs,
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
    tables = {
        "skill_paths": [path_row(p, r) for p, r in zip(paths, results, strict=True)],
        "skill_plans": [
            {"path_id": r.path_id, "plan": r.plan.to_json()} for r in results if r.plan
        ],
        "skill_attempts": [a for r in results for a in r.attempts],
        "skill_visits": visit_rows(visits),
    }
    report = entropy_report(paths, graph)
    summary = {
        "skill_graph": len(made),
        "skill_graph_asked": n,
        "skill_graph_share": round(len(made) / max(1, n_train), 3),
        "skill_graph_paths": len(paths),
        "skill_graph_cached": cached,
        "skill_graph_attempts": sum(len(r.attempts) for r in results),
        "skill_graph_repairs": sum(max(0, len(r.attempts) - 1) for r in results),
        "skill_graph_entropy": {k: report[k] for k in ("scenario_entropy", "skill_entropy")},
    }
    return Product(made, summary, tables)


SOURCE = Source(
    "skills",
    __name__,
    enabled=active,
    config_slice=config_slice,
    make=make,
    place=lambda rows, product: place_skill_tasks(rows, product.candidates),
    off=off,
    ask=ask,
    # synthesize: the visit counts and the paths of the tasks; rollout: which failed; train: the
    # writer may be the policy
    previous=("synthesize", "rollout", "train"),
    tables=TABLES,
)
