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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clawloop.generators.candidates import candidate_row
from clawloop.harness.llm import ChatFn
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.grader import values_equal
from clawloop.harness.taskfolder.state_predicates import check_predicate, schema_of_dump
from clawloop.synthesis.domain import execute
from clawloop.synthesis.domain.alternatives import (
    accept_all,
    candidates,
    chosen,
    found_steps,
)
from clawloop.synthesis.domain.derivable import Underivable, underivable, unstated_inputs
from clawloop.synthesis.domain.ground import (
    FOLD,
    ISO_DATE,
    Admission,
    Grounded,
    Index,
    Recovery,
    Step,
    Wide,
    all_refs,
    corrected,
    coverage_problems,
    every_write_plan,
    found_fix,
    ground,
    key_params,
    learnable,
    probe_calls,
    recovery_candidates,
    refusal_candidates,
    refusal_kind,
    unsupported,
    untaught,
)
from clawloop.synthesis.domain.instruct import llm_instruction, write_instruction
from clawloop.synthesis.domain.llm_analysis import refine_with_llm
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.model import Domain, Skill
from clawloop.synthesis.domain.predicates import (
    Taught,
    arguments,
    diff,
    goal,
    literals,
    predicates,
    same_value,
)
from clawloop.synthesis.domain.render import TOLERANCE, contract, render_generator
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.structure import (
    Structure,
    ablations,
    absent,
    carried,
    certain_problems,
    measure,
    planned,
    shares,
)
from clawloop.synthesis.domain.taskgraph import Knobs, TaskGraph, features_of, sample_task_graph
from clawloop.synthesis.domain.workspace import skill_of, snapshot_file, workspace_files

CAPABILITY = "domain_grounded"
GRAPH_DRAWS = 5  # abstract graphs drawn per task asked for (some find no grounding)
MIN_GRAPHS = 8
ATTEMPTS = 3  # tasks made (kept or dropped afterwards) per task asked for, at most
ROUNDS = 3  # sampling rounds (each draws fresh graphs and runs them in one sandbox call)
RELAX_ROUNDS = 2  # further rounds once features no graph could carry are relaxed
RELAX_AFTER = 4  # graphs wanting a feature, none kept, before it is relaxed
Told = tuple[str, bool]  # a task's instruction, and whether its fix is left to the refusal
# A task made, asked whether it stays (the CLI forges and verifies it): (kept, reason if not).
Accept = Callable[[dict[str, Any]], tuple[bool, str]]
DECISIONS = [
    "Records are identified by their business keys (codes, emails), as the instruction names them.",
    "A record the instruction does not ask to change, create or remove must stay exactly as it is.",
]


@dataclass
class Probed:
    """What execution showed of a domain before grounding: the recoveries that ran (refused,
    fixed, accepted) for the plain grounding and, beyond them, for the wide one (`wide`), which
    records each write tool accepts (`Admission`), and the refusals met (kind -> how often;
    ground.refusal_kind)."""

    recoveries: list[Recovery] = field(default_factory=list)
    wide: list[Recovery] = field(default_factory=list)
    admitted: Admission = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)
    taught: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # ground.corrected
    # wide recoveries whose fix's record the agent finds from the refusal (ground.found_fix),
    # with the value of the refused call it holds
    found: list[tuple[Recovery, str]] = field(default_factory=list)

    def every(self) -> list[Recovery]:
        return self.recoveries + self.wide


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
    asked: int = 0  # the n asked for
    attempts: int = 0  # tasks made, kept or dropped after
    rounds: int = 0  # sampling rounds run
    short: str = ""  # why fewer than `asked` tasks were kept ("" when none short)
    probed: Probed | None = None  # what execution showed before grounding (_probe)
    relaxed: dict[str, str] = field(default_factory=dict)  # feature -> why no longer sampled

    def refusals(self) -> dict[str, Any]:
        """The domain's refusal kinds (ground.refusal_kind): how often the probes met each,
        whether a recovery (refused, fixed, accepted) ran for it, and how many kept tasks
        recover from it."""
        if self.probed is None:
            return {}
        fixed = {refusal_kind(r[0].tool, r[0].refusal) for r in self.probed.every()}
        tasks: dict[str, int] = {}
        for g in self.graphs:
            for st in json.loads(g["plan"]) if g["kept"] and g["plan"] else []:
                if st.get("refusal"):
                    k = refusal_kind(st["tool"], st["refusal"])
                    tasks[k] = tasks.get(k, 0) + 1
        kinds = sorted(set(self.probed.refusals) | fixed)
        return {
            "kinds": len(kinds),
            "fixed": len(fixed),
            "in_tasks": len(tasks),
            "by_kind": {k: {"seen": self.probed.refusals.get(k, 0), "fixed": k in fixed,
                            "tasks": tasks.get(k, 0)} for k in kinds},
        }  # fmt: skip

    def absent(self) -> dict[str, str]:
        """Per feature no kept task measurably has, why (structure.absent); for error recovery
        also what the probes met (refusal kinds, how many had a fix that let the call through)."""
        out = absent(self.structure, self.relaxed, _unmade(self))
        if "error_recovery" in out and (r := self.refusals()):
            out["error_recovery"] += (
                f" (the probes met {r['kinds']} refusal kind(s), {r['fixed']} with a fix that"
                " then let the refused call through)"
            )
        return out

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
            "asked": self.asked,
            "attempts": self.attempts,
            "rounds": self.rounds,
            **({"short": self.short} if self.short else {}),
            **({"relaxed": self.relaxed} if self.relaxed else {}),
            # per feature no kept task measurably has: why (structure.absent)
            "absent": self.absent(),
            **({"refusals": self.refusals()} if self.probed is not None else {}),
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
    """The reference plan as a task stores it; a refused step keeps the refusal's text (what
    the agent meets at run time: derivable.py reads a taught fix's values there)."""
    return [
        {"skill": skills[s.tool], "tool": s.tool, "params": s.params, "expect": s.expect,
         **({"refusal": s.refusal} if s.refusal else {}), **({"found": s.found} if s.found else {})}
        for s in g.steps
    ]  # fmt: skip


def _probe(
    domain: Domain, tables: execute.Tables, files: dict[str, str], sandbox: SandboxConfig,
    rng: random.Random, recover: bool, seed: int,
) -> Probed:  # fmt: skip
    """One sandbox run tries, with `recover`, calls likely to be refused (drawn from `rng`, as
    the plain grounding always drew them) and each write tool on some of its records (the
    admission probe, on a generator of its own); a second run tries fixes for the refusals met:
    the plain ones (from `rng`, on the records each refusal names) and, on a generator of their
    own, wide ones for every refusal met, the admission probe's too (on records beside them and
    holding the call's values, with the values the refusal teaches). Error-recovery paths that
    ran as planned (refused, fixed, then accepted) on the snapshot are kept; a seed draws the
    graphs it drew before the probes."""
    out = Probed()
    calls = refusal_candidates(domain, tables, rng) if recover else []
    probes = probe_calls(domain, tables, random.Random(f"{domain.name}:probe"))
    if not calls and not probes:
        return out
    plans = [_plan(c) for c in calls] + [_plan(c) for c, _ in probes]
    _, runs = execute.run_plans(files, plans, sandbox)
    refused = [(c, str(r.trace[0].get("error") or r.trace[0].get("result") or ""))
               for c, r in zip(calls, runs[: len(calls)], strict=True) if r.ok and r.trace]  # fmt: skip
    met = list(refused)
    for (call, key), r in zip(probes, runs[len(calls) :], strict=True):
        ok, no = out.admitted.setdefault(call.tool, (set(), set()))
        error = str(r.trace[0].get("error") or "") if r.ok and r.trace else ""
        (no if error else ok).add(key)
        if error:
            met.append((replace(call, expect="error"), error))
    # Calls the refusals teach (a booking paying the total price its refusal states): run once;
    # those accepted show the wide grounding how the tool is called, the rest are refusals met.
    taught: list[Step] = []
    for call, error in met:
        taught += [c for c in corrected(domain.tool(call.tool), call, error) if c not in taught]
    if taught:
        _, runs = execute.run_plans(files, [_plan(c) for c in taught], sandbox)
        for call, r in zip(taught, runs, strict=True):
            error = str(r.trace[0].get("error") or "") if r.ok and r.trace else ""
            if r.ok and r.trace and not error:
                out.taught.setdefault(call.tool, []).append(call.params)
            elif error:
                met.append((replace(call, expect="error"), error))
    for call, error in met:
        kind = refusal_kind(call.tool, error)
        out.refusals[kind] = out.refusals.get(kind, 0) + 1
    if not recover:
        return out
    plain = recovery_candidates(domain, tables, refused, rng) if refused else []
    wrng = random.Random(f"{domain.name}:{seed}:wide-recovery")
    wide = [g for g in recovery_candidates(domain, tables, met, wrng, wide=True)
            if g not in plain]  # fmt: skip
    if plain or wide:
        _, runs = execute.run_plans(files, [_plan(*g) for g in plain + wide], sandbox)
        out.recoveries = [g for g, r in zip(plain, runs, strict=False) if r.ok]
        out.wide = [g for g, r in zip(wide, runs[len(plain) :], strict=True) if r.ok]
    out.found = _found(domain, tables, files, sandbox, out.wide)
    return out


def _found(
    domain: Domain, tables: execute.Tables, files: dict[str, str], sandbox: SandboxConfig,
    recoveries: list[Recovery],
) -> list[tuple[Recovery, str]]:  # fmt: skip
    """The recoveries whose fix's record the agent can find from the refusal (ground.found_fix):
    one sandbox run tries each such fix on every other record holding the same value of the
    refused call; a fix no other record accepts is found (with the value), one another accepts
    is not (the agent could not tell which record the task wants)."""
    ix = Index.of(tables, domain.keys)
    asked = [(r, *found_fix(domain, tables, r)) for r in recoveries if not learnable(r, ix)]
    asked = [(r, v, others) for r, v, others in asked if v]
    plans = [_plan(replace(o, expect="any")) for _, _, others in asked for o in others]
    runs = iter(execute.run_plans(files, plans, sandbox)[1] if plans else [])
    out = []
    for r, v, others in asked:
        accepted = [x for x in (next(runs) for _ in others)
                    if x.ok and x.trace and not x.trace[0].get("error")]  # fmt: skip
        if not accepted:
            out.append((r, v))
    return out


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
    told: list[Told] | None = None,
    sandbox: SandboxConfig | None = None,
) -> tuple[str, str]:
    """(generator code, note) for one grounded plan whose reference run went as expected;
    ValueError when the run changed nothing or its tests pass the "every write tool" state.
    (instruction, fix left to the refusal) is appended to `told` when given (structure.py
    measures against it). A fix the refusal teaches (taught_fixes) is left out of the goal,
    unless that would leave a value the agent cannot know: then it is stated as before. With
    `sandbox`, a fix the agent finds (ground.found_fix) is graded by its effect: the tests
    accept the end state of every other fix that lets the refused call through
    (alternatives.py), and the instruction states only the fix values every accepted fix
    passes too (or one derivability needs)."""
    taken, alt = runs
    changes = diff(initial, taken.final, domain.keys)
    if not changes:
        raise ValueError("the reference run changes nothing")
    other = diff(initial, alt.final, domain.keys) if alt is not None else None
    # What the agent is told or can read off a named record is no secret; the rest is "hidden".
    known = literals(g.steps) + [r["value"] for r in all_refs(g)]
    start_schema = None
    if domain.state_format == "sqlite":  # the end state keeps the starting schema
        start_schema = schema_of_dump(files[snapshot_file(domain)])
    preds = predicates(
        initial, taken.final, changes, known, domain.keys, arguments(g), start_schema
    )
    if all_writes is not None and all_writes.final and passes(preds, all_writes.final):
        raise ValueError("applying every write tool once passes the tests")
    plan = _plan_steps(g, skills)
    taught = taught_fixes(domain, g, initial)
    strict, others = preds, 0  # others: the other fixes whose end state the tests accept
    left = [i for i in found_steps(g) if i in taught.steps]  # found fixes left to the agent
    if sandbox is not None and left and (tried := candidates(domain, initial, g, left)):
        _, ran = execute.run_plans(files, [g.plan(s) for _, s in tried], sandbox)
        accepted = [(s[i], r.final) for (i, s), r in zip(tried, ran, strict=True) if r.ok]
        preds, others = accept_all(preds, taken.final, [f for _, f in accepted]), len(accepted)
        loose = [t for t in (initial, all_writes.final if all_writes else {}) if t]
        if others and any(passes(preds, t) for t in loose):  # doing nothing (or everything)
            preds, others = strict, 0  # would pass: too loose, the reference's fix is checked
        if others:  # a value some accepted fix does without is the agent's choice: unstated
            kept = chosen(taught.choices, [f for f, _ in accepted])
            taught = replace(taught, choices=kept, any_fix=True)
    aim = goal(domain.name, domain.description, g, changes, other, taught)
    every = taught_fixes(domain, g, initial).choices if taught.any_fix else taught.choices
    if every != taught.choices and underivable(plan, preds, write_instruction(aim)):
        # derivability needs a value left unstated: state it again (other fixes still pass)
        taught = replace(taught, choices=every)
        aim = goal(domain.name, domain.description, g, changes, other, taught)
    if taught.steps and underivable(plan, preds, write_instruction(aim)):
        taught = Taught(frozenset(), frozenset())  # leaving the fix out loses a value: state it
        preds, others = strict, 0  # the fix is stated: its end state is the one checked
        aim = goal(domain.name, domain.description, g, changes, other)
    note = "deterministic instruction" + (
        "; the fix is left to the refusal" if taught.steps else ""
    ) + (f"; the tests accept {others} other fix(es) that let the refused call through"
         if others else "")  # fmt: skip
    if chat is not None:
        instruction, note = llm_instruction(aim, chat, [t.name for t in domain.tools])
    else:
        instruction = write_instruction(aim)
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
        told.append((instruction, bool(taught.steps)))
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


def taught_fixes(domain: Domain, g: Grounded, initial: execute.Tables) -> Taught:
    """The plan's fixes whose every value the refusal before them teaches (ground.learnable)
    or whose record the agent finds from it (a fix step marked `found`, ground.found_fix: that
    record is left unnamed, and the values the fix chooses that nothing teaches, a cancel's
    reason, are stated as the fix's), the tables only they write, and whether one is dated the
    refused call's day."""
    ix = Index.of(initial, domain.keys)
    steps, records, choices = [], set(), {}
    for i, s in enumerate(g.steps[:-2]):
        fix = g.steps[i + 1]
        if s.expect != "error":
            continue
        if learnable((s, fix, g.steps[i + 2]), ix):
            steps.append(i + 1)
            continue
        keys = [p.name for p, _, _ in key_params(domain.tool(fix.tool), ix) if p.name in fix.params]
        rest = [v for j, o in enumerate(g.steps) if j != i + 1 for v in o.params.values()]
        if not fix.found or not keys or any(same_value(v, fix.params[keys[0]]) for v in rest):
            continue  # not found, or another step names its record: the goal states it
        steps.append(i + 1)
        records.add(fix.params[keys[0]])
        choices.update({k: v for k, v in untaught(s, fix, ix).items() if k != keys[0]})
    others = {
        t for i, s in enumerate(g.steps) if i not in steps for t in domain.tool(s.tool).writes
    }
    mine = {t for i in steps for t in domain.tool(g.steps[i].tool).writes}
    day = any(
        v == c and isinstance(v, str) and ISO_DATE.match(v)
        for i in steps
        for v in g.steps[i].params.values()
        for c in g.steps[i - 1].params.values()
    )
    return Taught(frozenset(steps), frozenset(mine - others), day, frozenset(records), choices)


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
    accept: Accept | None = None,
) -> DomainSynth:
    """Up to n candidate rows from one domain folder; DomainError if the folder breaks the
    contract, SandboxError/ExecutionError if the reference executor cannot run at all.

    `skill_weights` (skill -> weight, 1 = neutral; the loop passes 1 + the failure rate of the
    policy's episodes on tasks that used the skill) orders the grounded graphs before the first n
    are kept: graphs whose plans use the skills the policy fails are made first. With `chat`, the
    LLM also reads each tool's source for edges the AST missed (llm_analysis.py, cached in
    `analysis_cache`) and writes the instructions.

    A task dropped after it was made (by the structure check, or by `accept`: the CLI forges and
    verifies each one) is replaced: the graphs already run but not yet needed come first, then
    fresh rounds of graphs (at most ROUNDS in all), until n are kept or ATTEMPTS x n tasks were
    made; `short` on the result says why fewer than n came back. The same seed draws the same."""
    start = time.monotonic()
    knobs = knobs or Knobs()
    domain = load_domain(root)
    analysis: list[dict[str, Any]] = []
    if chat is not None:
        domain, analysis = refine_with_llm(domain, chat, analysis_cache, _model_of(chat))
    tables = load_tables(domain)
    skills = cluster_skills(domain)
    out = DomainSynth(domain=domain.name, skills=skills, analysis=analysis, asked=n,
                      plan_memory_mb=execute.plan_memory_mb(sandbox))  # fmt: skip
    files = workspace_files(domain, skills)
    by_tool = skill_of(skills)
    rng = random.Random(f"{domain.name}:{seed}")
    probed = _probe(domain, tables, files, sandbox, rng, knobs.error_recovery, seed)
    out.probed = probed
    sampled = {"long_range", "convergence"} | (
        {"error_recovery"} if knobs.error_recovery else set()
    )
    out.relaxed = {f: why for f, why in unsupported(domain, tables, probed.every()).items()
                   if f in sampled and f not in knobs.exclude}  # fmt: skip
    knobs = replace(knobs, exclude=knobs.exclude | set(out.relaxed))
    ctx = _Round(domain, tables, files, skills, by_tool, sandbox, knobs, seed, probed.recoveries,
                 dict(skill_weights or {}), probed)  # fmt: skip
    pending: list[tuple[dict[str, Any], list[Grounded], list[Any]]] = []  # ran, not yet made
    initial: execute.Tables = {}
    all_writes: execute.PlanRun | None = None
    attempts, rounds, limit = 0, 0, ROUNDS
    budget = ATTEMPTS * n
    carrying: dict[str, set[str]] = {}  # task id -> the features its plan carries (_pick)
    while len(out.candidates) < n:
        if not pending:
            if rounds == limit and limit == ROUNDS and (more := _relax(out, ctx.knobs)):
                out.relaxed.update(more)  # sample the shapes the domain can carry, and say so
                ctx = replace(ctx, knobs=replace(ctx.knobs, exclude=ctx.knobs.exclude | set(more)))
                limit += RELAX_ROUNDS
            if rounds == limit:
                out.short = f"no graph left to try after {rounds} round(s) of sampling"
                break
            need = n - len(out.candidates)
            draws = max(MIN_GRAPHS, n * GRAPH_DRAWS) if not rounds else need * GRAPH_DRAWS
            rounds += 1
            fresh, start_state, probe_run = _sample_round(ctx, out, rng, draws, skill_weights)
            if fresh:  # every round runs on the same snapshot: its starting state is the same
                initial, all_writes = start_state, probe_run
            pending += fresh
            if not pending:
                continue
        if attempts >= budget:
            break
        batch: list[tuple[dict[str, Any], Grounded, execute.PlanRun, Told, dict[str, Any]]] = []
        while pending and len(out.candidates) < n and attempts < budget:
            kept = Counter(f for c in out.candidates for f in carrying.get(c["task_id"], ()))
            row, fit, runs = pending.pop(_pick([_offer(ctx, r) for _, _, r in pending], kept))
            task = _make_one(ctx, out, row, fit, runs, initial, chat, split, all_writes)
            if task is not None:
                attempts += 1
                batch.append(task)
                carrying[task[4]["task_id"]] = carried(task[1])
        measured = _measure_structure(out, batch, initial, files, sandbox)
        if accept is not None:
            _accept(out, batch, accept, measured)
    for row, _, _ in pending:
        row["reason"] = f"not needed: {n} task(s) made"
    out.attempts, out.rounds = attempts, rounds
    if len(out.candidates) < n:
        made_then_dropped: dict[str, int] = {}
        for row in out.graphs:
            stage = row["reason"].split(":")[0]
            if not row["kept"] and row["structure"]:  # measured, so made; then dropped
                made_then_dropped[stage] = made_then_dropped.get(stage, 0) + 1
        after = ", ".join(f"{k} {v}" for k, v in sorted(made_then_dropped.items()))
        why = "; ".join(f"no {f} task kept: {r}" for f, r in sorted(_unmade(out).items()))
        out.short = (
            f"{len(out.candidates)} of {n} kept: "
            + (out.short or f"attempts ran out ({attempts} made, at most {ATTEMPTS} x {n})")
            + (f"; dropped after they were made: {after}" if after else "")
            + (f"; {why}" if why else "")
        )
    out.seconds = time.monotonic() - start
    return out


def _unmade(out: DomainSynth) -> dict[str, str]:
    """Per feature some graph wanted but no kept task has: how many graphs wanted it and
    their most common drop reason (ids folded)."""
    wanted: dict[str, list[str]] = {}
    kept: set[str] = set()
    for g in out.graphs:
        for f in json.loads(g["wanted"]):
            if g["kept"]:
                kept.add(f)
            elif not g["reason"].startswith("not needed"):
                wanted.setdefault(f, []).append(FOLD.sub("N", g["reason"].split("; warning")[0]))
    out_: dict[str, str] = {}
    for f, reasons in sorted(wanted.items()):
        if f not in kept and reasons:
            top = max(sorted(set(reasons)), key=reasons.count)
            out_[f] = f"{len(reasons)} graph(s) dropped, most often: {top[:120]}"
    return out_


def _relax(out: DomainSynth, knobs: Knobs) -> dict[str, str]:
    """Features that RELAX_AFTER graphs or more wanted and none of them made a kept task: the
    domain cannot carry them (the reason says why); sampling goes on without them."""
    tried: dict[str, int] = {}
    for g in out.graphs:
        for f in json.loads(g["wanted"]):
            tried[f] = tried.get(f, 0) + 1
    unmade = _unmade(out)
    return {f: f"relaxed after {unmade[f]}" for f in unmade
            if f not in knobs.exclude and tried.get(f, 0) >= RELAX_AFTER}  # fmt: skip


@dataclass(frozen=True)
class _Round:
    """What every sampling round of one synthesize_domain call shares."""

    domain: Domain
    tables: execute.Tables
    files: dict[str, str]
    skills: list[Skill]
    by_tool: dict[str, str]
    sandbox: SandboxConfig
    knobs: Knobs
    seed: int
    recoveries: list[Recovery]
    weights: dict[str, float] = field(default_factory=dict)  # skill_weights
    probed: Probed = field(default_factory=Probed)  # the probes' findings (the wide grounding)
    # the "every write tool" probe, drawn once after the first round's graphs (so a seed grounds
    # the graphs it always did)
    probe: list[Grounded] = field(default_factory=list)


def _usable(ctx: _Round, v: Grounded) -> bool:
    """A plain variant that can carry its graph: every transition in some skill, and the long
    range or convergence the graph wanted in its steps (structure.planned)."""
    return not coverage_problems(v, ctx.domain, ctx.skills) and _shaped(v) <= planned(v)


def _shaped(v: Grounded) -> set[str]:
    """The shape a graph wanted that a plan's steps show before it runs (structure.planned)."""
    return set(v.graph.wanted) & {"long_range", "convergence"}


def _sample_round(
    ctx: _Round, out: DomainSynth, rng: random.Random, draws: int,
    skill_weights: dict[str, float] | None,
) -> tuple[list[tuple[dict[str, Any], list[Grounded], list[Any]]], execute.Tables,
           execute.PlanRun | None]:  # fmt: skip
    """Draw `draws` abstract graphs, ground them, and run every variant's plan (one sandbox
    call, with the "every write tool" probe): (graph row, variants, their runs) per grounded
    graph, the starting state, and the probe's run."""
    domain, skills = ctx.domain, ctx.skills
    tried: list[tuple[dict[str, Any], list[Grounded]]] = []
    for _ in range(draws):
        graph = sample_task_graph(rng, ctx.knobs)
        row = _graph_row(domain.name, len(out.graphs), graph, ctx.seed)
        out.graphs.append(row)
        wide = Wide(
            random.Random(f"{domain.name}:{ctx.seed}:wide:{row['graph_id']}"),
            ctx.probed.wide,
            ctx.probed.admitted,
            ctx.probed.taught,
            ctx.probed.found,
        )  # the plain draws stay as they were
        variants, why = ground(domain, graph, ctx.tables, rng, recoveries=ctx.recoveries,
                               wide=wide, usable=lambda v: _usable(ctx, v))  # fmt: skip
        fit = [v for v in variants if not coverage_problems(v, domain, skills)]
        if not fit:
            problems = [p for v in variants for p in coverage_problems(v, domain, skills)]
            row["reason"] = "grounding: " + "; ".join(sorted(set(why + problems))[:3] or ["none"])
            continue
        tried.append((row, fit))
    if skill_weights:
        tried.sort(key=lambda t: -plan_weight(t[1][0], ctx.by_tool, skill_weights))  # stable
    plans = [v.plan(s) for _, fit in tried for v in fit for s in (v.steps, v.alt_steps) if s]
    if not ctx.probe:
        steps = every_write_plan(domain, ctx.tables, rng)
        ctx.probe.append(Grounded(graph=TaskGraph(nodes=()), steps=steps))
    if not plans:
        return [], {}, None
    initial, results = execute.run_plans(ctx.files, [*plans, ctx.probe[0].plan()], ctx.sandbox)
    all_writes = results.pop()
    out.plan_peak_mb = max([out.plan_peak_mb, all_writes.peak_mb] + [r.peak_mb for r in results])
    at = iter(results)
    ran = []
    for row, fit in tried:
        ran.append((row, fit, [(v, next(at), next(at) if v.alt_steps else None) for v in fit]))
    if skill_weights:  # by the heaviest variant that ran as expected: that one makes the task

        def heaviest(runs: list[Any]) -> float:
            ok = [v for v, a, b in runs if a.ok and (b is None or b.ok)]
            return max((plan_weight(v, ctx.by_tool, skill_weights) for v in ok), default=0.0)

        ran.sort(key=lambda r: -heaviest(r[2]))  # stable
    return ran, initial, all_writes


BALANCED = ("long_range", "convergence", "error_recovery", "branching")


def _pick(offers: list[tuple[bool, set[str]]], kept: Counter[str]) -> int:
    """Which pending graph to make next, given per pending graph (in sampling order) whether
    its task comes from a wide variant and the features its plan carries (structure.carried),
    and how many kept tasks carry each feature. A plain task is made in sampling order, so a
    domain the plain grounding serves keeps exactly the tasks it drew. The wide grounding opens
    features at rates that differ by domain (every refusal met can make a recovery; a
    convergence needs a write two reads fit), so in sampling order the feature it opens most
    easily would fill the set and push out the others: where a wide task is next, the one made
    is the pending wide task whose least-kept feature is kept least (then the one carrying more
    features, then sampling order), so a gain in one feature does not push out another."""
    if not offers or not offers[0][0]:
        return 0
    wide = [(i, f & set(BALANCED)) for i, (w, f) in enumerate(offers) if w]
    wide = [(i, f) for i, f in wide if f]
    if not wide:
        return 0
    return min(wide, key=lambda t: (min(kept[f] for f in t[1]), -len(t[1]), t[0]))[0]


def _offer(ctx: _Round, runs: list[Any]) -> tuple[bool, set[str]]:
    """(wide, features carried) of the variant a pending graph would make its task from;
    (False, no features) where none would."""
    chosen, _ = _choose(ctx, runs)
    return (chosen[0].wide, carried(chosen[0])) if chosen else (False, set())


def _choose(
    ctx: _Round, runs: list[Any]
) -> tuple[tuple[Grounded, execute.PlanRun, execute.PlanRun | None] | None, str]:
    """The variant of an executed graph that makes its task (the first that ran as expected,
    as ordered below), or None and why none does."""
    good = [(v, a, b) for v, a, b in runs if a.ok and (b is None or b.ok)]
    if not good:
        return None, "execution: " + next(
            x.why for _, a, b in runs for x in (a, b) if x and not x.ok
        )
    # The wide grounding is there to carry structure: a wide variant that lacks the long range
    # or convergence its graph wanted makes no task (a plain one makes what it always made).
    good = [t for t in good if not t[0].wide or _shaped(t[0]) <= planned(t[0])]
    if not good:
        return None, "grounding: no wide variant that ran carries " + ", ".join(
            sorted(_shaped(runs[0][0]))
        )
    if ctx.weights:  # of the variants that ran, the one heaviest on the skills the policy fails
        good.sort(key=lambda t: -plan_weight(t[0], ctx.by_tool, ctx.weights))  # stable
    else:  # else the first that carries the most of the shape its graph wanted
        good.sort(key=lambda t: -len(_shaped(t[0]) & planned(t[0])))  # stable
    return good[0], ""


def _make_one(
    ctx: _Round, out: DomainSynth, row: dict[str, Any], fit: list[Grounded], runs: list[Any],
    initial: execute.Tables, chat: ChatFn | None, split: str,
    all_writes: execute.PlanRun | None,
) -> tuple[dict[str, Any], Grounded, execute.PlanRun, Told, dict[str, Any]] | None:  # fmt: skip
    """The task of one executed graph (the variant `_choose` picks), appended to
    `out.candidates`; None with the reason on the row when none makes a task."""
    chosen, why = _choose(ctx, runs)
    if chosen is None:
        row["reason"] = why
        return None
    v, a, b = chosen
    told: list[Told] = []
    try:
        code, note = make_task(ctx.domain, v, initial, (a, b), ctx.files, ctx.by_tool, chat,
                               all_writes, told, ctx.sandbox)  # fmt: skip
    except ValueError as exc:
        stage = "derivability" if isinstance(exc, Underivable) else "end state"
        row["reason"] = f"{stage}: {exc}"
        return None
    cand = candidate_row(code, ctx.seed, origin=f"domain:{ctx.domain.name}", split=split)
    row.update(
        kept=True,
        reason=note,
        task_id=cand["task_id"],
        features=json.dumps(sorted(features_of(v.graph))),
        plan=json.dumps(_plan_steps(v, ctx.by_tool), default=str),
    )
    out.candidates.append(cand)
    return row, v, a, told[0], cand


def _accept(
    out: DomainSynth,
    batch: list[tuple[dict[str, Any], Grounded, execute.PlanRun, Told, dict[str, Any]]],
    accept: Accept,
    measured: dict[str, Structure],
) -> None:
    """Ask `accept` (the CLI forges and verifies) about each task of the batch still kept; a
    refused one is dropped with its reason, so the next round tops the count back up."""
    for row, _, _, _, cand in batch:
        if cand not in out.candidates:
            continue
        ok, why = accept(cand)
        if not ok:
            row.update(kept=False, task_id="", reason=why)
            out.candidates.remove(cand)
            gone = measured.get(cand["task_id"])
            out.structure = [s for s in out.structure if s is not gone]


def _measure_structure(
    out: DomainSynth,
    made: list[tuple[dict[str, Any], Grounded, execute.PlanRun, Told, dict[str, Any]]],
    initial: execute.Tables,
    files: dict[str, str],
    sandbox: SandboxConfig,
) -> dict[str, Structure]:
    """Measure each kept task's structure (one sandbox call runs every ablation plan), record it
    on its graph row, warn where a claimed structure is not measured, and drop a task where
    execution proves a sub-goal or step changes nothing. Returns task id -> its measurement."""
    kept: dict[str, Structure] = {}
    cuts = [ablations(v) for _, v, _, _, _ in made]
    plans = [plan for c in cuts for _, plan in c]
    runs = iter(execute.run_plans(files, plans, sandbox)[1] if plans else [])
    for (row, v, a, (instruction, left_out), cand), c in zip(made, cuts, strict=True):
        ablated = {drop: next(runs) for drop, _ in c}
        s = measure(v, a.trace, initial, a.final, instruction, ablated, left_out)
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
        kept[cand["task_id"]] = s
    return kept
