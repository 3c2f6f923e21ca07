"""Domain-grounded synthesis: one executable domain -> candidate tasks (generators) with reasons.

    load + analyse (host, ast) -> skills -> abstract task graphs -> grounded variants
      -> coverage check -> reference runs (one sandbox, every variant) -> predicates + goal
      -> instruction (behind the barrier) -> a generator per task (render.py)

Every graph that yields no task is a row saying why (no tool fits, a transition no skill
supports, the run broke an expectation, the plan changes nothing), so `clawloop domain synth`
and the synthesize stage can report what was dropped.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawloop.generators.candidates import candidate_row
from clawloop.harness.llm import ChatFn
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.grader import values_equal
from clawloop.harness.taskfolder.state_predicates import check_predicate, schema_of_dump
from clawloop.synthesis.domain import execute
from clawloop.synthesis.domain.derivable import Underivable, underivable, unstated_inputs
from clawloop.synthesis.domain.ground import (
    Grounded,
    Recovery,
    Step,
    coverage_problems,
    every_write_plan,
    ground,
    recovery_candidates,
    refusal_candidates,
)
from clawloop.synthesis.domain.instruct import llm_instruction, write_instruction
from clawloop.synthesis.domain.llm_analysis import refine_with_llm
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.model import Domain, Skill
from clawloop.synthesis.domain.predicates import arguments, diff, goal, literals, predicates
from clawloop.synthesis.domain.render import TOLERANCE, contract, render_generator
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.structure import (
    Structure,
    ablations,
    certain_problems,
    measure,
    shares,
)
from clawloop.synthesis.domain.taskgraph import Knobs, TaskGraph, features_of, sample_task_graph
from clawloop.synthesis.domain.workspace import skill_of, snapshot_file, workspace_files

CAPABILITY = "domain_grounded"
GRAPH_DRAWS = 5  # abstract graphs drawn per task asked for (some find no grounding)
MIN_GRAPHS = 8
DECISIONS = [
    "Records are identified by their business keys (codes, emails), as the instruction names them.",
    "A record the instruction does not ask to change, create or remove must stay exactly as it is.",
]


@dataclass
class DomainSynth:
    domain: str
    candidates: list[dict[str, Any]] = field(default_factory=list)
    graphs: list[dict[str, Any]] = field(default_factory=list)  # one row per abstract graph
    skills: list[Skill] = field(default_factory=list)
    seconds: float = 0.0
    analysis: list[dict[str, Any]] = field(default_factory=list)  # the LLM's additions per tool
    plan_memory_mb: int = 0  # what one reference plan may use beyond the snapshot (execute.py)
    plan_peak_mb: float = 0.0  # the largest peak resident memory a reference plan's process had
    structure: list[Structure] = field(default_factory=list)  # measured, one per kept task

    @property
    def dropped(self) -> list[dict[str, Any]]:
        return [g for g in self.graphs if not g["kept"]]

    def summary(self) -> dict[str, Any]:
        covered: dict[str, int] = {}
        for g in self.graphs:
            for f in json.loads(g["features"]) if g["kept"] else []:
                covered[f] = covered.get(f, 0) + 1
        return {
            "domain": self.domain,
            "graphs": len(self.graphs),
            "tasks": len(self.candidates),
            "dropped": len(self.dropped),
            "features": covered,
            "seconds_per_task": round(self.seconds / max(1, len(self.candidates)), 3),
            "plan_memory_mb": self.plan_memory_mb,
            "plan_peak_mb": self.plan_peak_mb,
            "structure": shares(self.structure),  # measured (structure.py), not the labels
            **({"llm_added_edges": sum(len(r["added_reads"]) + len(r["added_writes"])
                                       for r in self.analysis)} if self.analysis else {}),
        }  # fmt: skip


def passes(preds: list[dict[str, Any]], tables: execute.Tables) -> bool:
    """Do these predicates accept this state (the grader's own check, on JSON records; a run's
    records carry no SQL schema, and no tool changes one, so the schema predicate is left out)?"""

    def equal(e: Any, g: Any) -> bool:
        return values_equal(e, g, TOLERANCE)

    return all(check_predicate(p, tables, equal)[0] for p in preds if p.get("kind") != "schema")


def _graph_row(domain: str, i: int, g: TaskGraph, seed: int) -> dict[str, Any]:
    gid = hashlib.sha256(f"{domain}:{seed}:{i}".encode()).hexdigest()[:12]
    return {
        "graph_id": gid,
        "domain": domain,
        "nodes": json.dumps(g.to_dict()["nodes"]),
        "wanted": json.dumps(list(g.wanted)),
        "features": json.dumps(sorted(features_of(g))),
        "kept": False,
        "reason": "",
        "task_id": "",
        "plan": "",
        "structure": "",  # JSON: the measured structure (structure.py), kept tasks only
    }


def _plan_steps(g: Grounded, skills: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"skill": skills[s.tool], "tool": s.tool, "params": s.params, "expect": s.expect}
        for s in g.steps
    ]


def _verified_recoveries(
    domain: Domain, tables: execute.Tables, files: dict[str, str], sandbox: SandboxConfig,
    rng: random.Random,
) -> list[Recovery]:  # fmt: skip
    """Error-recovery paths that ran as planned (refused, fixed, then accepted) on the snapshot,
    found by execution before any graph is grounded: one sandbox run finds calls a rule refuses,
    a second tries fixes on the records each refusal names."""
    calls = refusal_candidates(domain, tables, rng)
    if not calls:
        return []
    _, runs = execute.run_plans(files, [_plan(c) for c in calls], sandbox)
    refused = [(c, str(r.trace[0].get("result", ""))) for c, r in zip(calls, runs, strict=True)
               if r.ok and r.trace]  # fmt: skip
    guesses = recovery_candidates(domain, tables, refused, rng)
    if not guesses:
        return []
    _, runs = execute.run_plans(files, [_plan(*g) for g in guesses], sandbox)
    return [g for g, r in zip(guesses, runs, strict=True) if r.ok]


def _plan(*steps: Step) -> dict[str, Any]:
    return Grounded(graph=TaskGraph(nodes=()), steps=list(steps)).plan()


def _model_of(chat: ChatFn) -> str:
    """The model a ChatFn names (writer_chat and the stage set `.model`), for cache keys."""
    return str(getattr(chat, "model", ""))


def plan_weight(g: Grounded, skills: dict[str, str], weights: dict[str, float]) -> float:
    """The mean weight of the skills a grounded plan calls (1.0 for a skill without one)."""
    used = [weights.get(skills[s.tool], 1.0) for s in g.steps]
    return sum(used) / len(used) if used else 1.0


def _title(domain: Domain, g: Grounded) -> str:
    feats = ", ".join(sorted(features_of(g.graph))) or "a single change"
    return f"Bring the {domain.name} records to a required end state ({feats})."


def make_task(
    domain: Domain,
    g: Grounded,
    initial: execute.Tables,
    runs: tuple[execute.PlanRun, execute.PlanRun | None],
    files: dict[str, str],
    skills: dict[str, str],
    chat: ChatFn | None,
    all_writes: execute.PlanRun | None = None,
    told: list[str] | None = None,
) -> tuple[str, str]:
    """(generator code, note) for one grounded plan whose reference run went as expected;
    ValueError when the run changed nothing or its tests pass the "every write tool" state.
    The instruction is appended to `told` when given (structure.py measures against it)."""
    taken, alt = runs
    changes = diff(initial, taken.final, domain.keys)
    if not changes:
        raise ValueError("the reference run changes nothing")
    other = diff(initial, alt.final, domain.keys) if alt is not None else None
    # What the agent is told or can read off a named record is no secret; the rest is "hidden".
    known = literals(g.steps) + [r["value"] for r in g.references.values()]
    start_schema = None
    if domain.state_format == "sqlite":  # the end state keeps the starting schema
        start_schema = schema_of_dump(files[snapshot_file(domain)])
    preds = predicates(
        initial, taken.final, changes, known, domain.keys, arguments(g), start_schema
    )
    if all_writes is not None and all_writes.final and passes(preds, all_writes.final):
        raise ValueError("applying every write tool once passes the tests")
    aim = goal(domain.name, domain.description, g, changes, other)
    note = "deterministic instruction"
    if chat is not None:
        instruction, note = llm_instruction(aim, chat, [t.name for t in domain.tools])
    else:
        instruction = write_instruction(aim)
    plan = _plan_steps(g, skills)
    lost = underivable(plan, preds, instruction)
    if lost and chat is not None:  # the rewrite lost a value: the deterministic text states it
        instruction, note = (
            write_instruction(aim),
            f"llm instruction lost {lost[0]}: deterministic kept",
        )
        lost = underivable(plan, preds, instruction)
    if lost:
        raise Underivable("; ".join(lost[:3]))
    if unsure := unstated_inputs(plan, preds, instruction):
        note += f"; warning: arguments the instruction does not state: {', '.join(unsure[:3])}"
    if told is not None:
        told.append(instruction)
    schema: dict[str, Any] = {"store": domain.state_format}
    if domain.state_format == "sqlite":
        schema["file"] = Path(snapshot_file(domain)).name
    meta = {
        "capability": CAPABILITY,
        "domain": domain.name,
        "multihop": min(3, len(g.references)),
        "dirtiness": 0,
        "output_format": "state",
    }
    code = render_generator(
        _title(domain, g),
        meta,
        instruction,
        files,
        preds,
        plan,
        contract(schema, DECISIONS),
    )
    return code, note


def synthesize_domain(
    root: Path,
    n: int,
    seed: int,
    sandbox: SandboxConfig,
    knobs: Knobs | None = None,
    chat: ChatFn | None = None,
    split: str = "train",
    skill_weights: dict[str, float] | None = None,
    analysis_cache: Path | None = None,
) -> DomainSynth:
    """Up to n candidate rows from one domain folder; DomainError if the folder breaks the
    contract, SandboxError/ExecutionError if the reference executor cannot run at all.

    `skill_weights` (skill -> weight, 1 = neutral; the loop passes 1 + the failure rate of the
    policy's episodes on tasks that used the skill) orders the grounded graphs before the first n
    are kept: graphs whose plans use the skills the policy fails are made first. With `chat`, the
    LLM also reads each tool's source for edges the AST missed (llm_analysis.py, cached in
    `analysis_cache`) and writes the instructions."""
    start = time.monotonic()
    knobs = knobs or Knobs()
    domain = load_domain(root)
    analysis: list[dict[str, Any]] = []
    if chat is not None:
        domain, analysis = refine_with_llm(domain, chat, analysis_cache, _model_of(chat))
    tables = load_tables(domain)
    skills = cluster_skills(domain)
    out = DomainSynth(domain=domain.name, skills=skills, analysis=analysis,
                      plan_memory_mb=execute.plan_memory_mb(sandbox))  # fmt: skip
    files = workspace_files(domain, skills)
    by_tool = skill_of(skills)
    rng = random.Random(f"{domain.name}:{seed}")
    recoveries = (
        _verified_recoveries(domain, tables, files, sandbox, rng) if knobs.error_recovery else []
    )
    tried: list[tuple[dict[str, Any], list[Grounded]]] = []
    for i in range(max(MIN_GRAPHS, n * GRAPH_DRAWS)):
        graph = sample_task_graph(rng, knobs)
        row = _graph_row(domain.name, i, graph, seed)
        out.graphs.append(row)
        variants, why = ground(domain, graph, tables, rng, recoveries=recoveries)
        fit = [v for v in variants if not coverage_problems(v, domain, skills)]
        if not fit:
            problems = [p for v in variants for p in coverage_problems(v, domain, skills)]
            row["reason"] = "grounding: " + "; ".join(sorted(set(why + problems))[:3] or ["none"])
            continue
        tried.append((row, fit))
    if skill_weights:
        tried.sort(key=lambda t: -plan_weight(t[1][0], by_tool, skill_weights))  # stable
    plans = [v.plan(s) for _, fit in tried for v in fit for s in (v.steps, v.alt_steps) if s]
    probe = Grounded(graph=TaskGraph(nodes=()), steps=every_write_plan(domain, tables, rng))
    if not plans:
        out.seconds = time.monotonic() - start
        return out
    initial, results = execute.run_plans(files, [*plans, probe.plan()], sandbox)
    all_writes = results.pop()
    out.plan_peak_mb = max([r.peak_mb for r in results] + [all_writes.peak_mb])
    at = iter(results)
    made: list[tuple[dict[str, Any], Grounded, execute.PlanRun, str, dict[str, Any]]] = []
    for row, fit in tried:
        runs = [(v, next(at), next(at) if v.alt_steps else None) for v in fit]
        if len(out.candidates) >= n:
            row["reason"] = f"not needed: {n} task(s) made"
            continue
        good = [(v, a, b) for v, a, b in runs if a.ok and (b is None or b.ok)]
        if not good:
            row["reason"] = "execution: " + next(
                x.why for _, a, b in runs for x in (a, b) if x and not x.ok
            )
            continue
        v, a, b = good[0]
        told: list[str] = []
        try:
            code, note = make_task(
                domain, v, initial, (a, b), files, by_tool, chat, all_writes, told
            )
        except ValueError as exc:
            stage = "derivability" if isinstance(exc, Underivable) else "end state"
            row["reason"] = f"{stage}: {exc}"
            continue
        cand = candidate_row(code, seed, origin=f"domain:{domain.name}", split=split)
        row.update(
            kept=True,
            reason=note,
            task_id=cand["task_id"],
            features=json.dumps(sorted(features_of(v.graph))),
            plan=json.dumps(_plan_steps(v, by_tool), default=str),
        )
        out.candidates.append(cand)
        made.append((row, v, a, told[0], cand))
    _measure_structure(out, made, initial, files, sandbox)
    out.seconds = time.monotonic() - start
    return out


def _measure_structure(
    out: DomainSynth,
    made: list[tuple[dict[str, Any], Grounded, execute.PlanRun, str, dict[str, Any]]],
    initial: execute.Tables,
    files: dict[str, str],
    sandbox: SandboxConfig,
) -> None:
    """Measure each kept task's structure (one sandbox call runs every ablation plan), record it
    on its graph row, warn where a claimed structure is not measured, and drop a task where
    execution proves a sub-goal or step changes nothing."""
    cuts = [ablations(v) for _, v, _, _, _ in made]
    plans = [plan for c in cuts for _, plan in c]
    runs = iter(execute.run_plans(files, plans, sandbox)[1] if plans else [])
    for (row, v, a, instruction, cand), c in zip(made, cuts, strict=True):
        ablated = {drop: next(runs) for drop, _ in c}
        s = measure(v, a.trace, initial, a.final, instruction, ablated)
        row["structure"] = json.dumps(s.to_dict())
        if problems := certain_problems(s):
            row.update(kept=False, task_id="", reason="structure: " + "; ".join(problems[:3]))
            out.candidates.remove(cand)
            continue
        if s.unmet:
            row["reason"] += f"; warning: claimed but not measured: {', '.join(s.unmet)}"
        if s.unnamed_lookups:
            steps = ", ".join(map(str, s.unnamed_lookups))
            row["reason"] += f"; warning: step(s) {steps} read a record the instruction never names"
        out.structure.append(s)
