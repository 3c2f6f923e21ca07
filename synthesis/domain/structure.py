"""Measured structure of a domain-grounded task: what its reference run and instruction show,
not what the sampler aimed for (issue 24, item 4).

The sampler's labels (taskgraph.features_of) say which node kinds a graph has; these say whether
the task really has the structure:

- `long_range`: on the reference run, step k is passed a value step j < k-1 produced (the
  trace shows both), where j read a record the instruction does not name but reached through
  an earlier step's result (a chain from a named record), and the value is not stated: the
  agent must carry it across steps, not look up a record it was told about;
- `error_recovery`: the plan's first attempt was refused at run time (the trace holds its error),
  the retry succeeded, and without the fix the retry is refused too (an ablation run shows it);
- `subgoals`: at least two sub-goals, each of which changes the final state (the plan without
  that sub-goal's writes ends elsewhere); a write step whose removal changes nothing is `idle`;
- `branch_from_state`: the branch's condition value is one the state holds for that field, and
  the condition evaluated on the starting state picks the arm the plan took;
- `convergence`: one write step takes values that two or more distinct earlier steps produced
  (`$ref`s to different steps, each of which the run's trace resolved): two lines of work meet.

Ablation plans (the plan with some writes removed, every step "any") run in the sandbox like any
plan; `measure` is pure: it reads the runs. A claim the measurement lacks is `unmet` (a warning);
an idle sub-goal or step is certain (execution is deterministic) and `certain_problems` names it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from clawloop.synthesis.domain import reach
from clawloop.synthesis.domain.derivable import mentions
from clawloop.synthesis.domain.ground import Grounded, Step
from clawloop.synthesis.domain.taskgraph import features_of

Tables = dict[str, list[dict[str, Any]]]
MEASURED = ("long_range", "convergence", "error_recovery", "subgoals", "branch_from_state")


@dataclass
class Structure:
    long_range: bool = False
    long_range_hops: list[list[int]] = field(default_factory=list)  # [j, k] pairs that qualify
    convergence: bool = False
    converging: list[int] = field(default_factory=list)  # write steps fed by >= 2 earlier steps
    error_recovery: bool = False
    # The instruction states every literal the fix passes: the fix is then a listed goal, and an
    # agent doing the goals in their listed order may never meet the refusal (issue 24).
    fix_told: bool = False
    subgoals: bool = False
    goals: int = 0  # sub-goals with at least one write step
    idle_goals: list[int] = field(default_factory=list)  # sub-goals whose writes change nothing
    idle_steps: list[int] = field(default_factory=list)  # write steps whose removal changes nothing
    branched: bool = False
    branch_from_state: bool = False
    # lookups whose record the instruction neither names nor reaches through a chain: the agent
    # cannot know which record to read (a warning: the value may not matter to the end state)
    unnamed_lookups: list[int] = field(default_factory=list)
    unknown: int = 0  # ablation runs that failed: their steps count as changing the state
    claimed: list[str] = field(default_factory=list)  # the sampler's labels for the graph
    unmet: list[str] = field(default_factory=list)  # claimed but not measured
    planned: list[str] = field(default_factory=list)  # what the plan's shape carried (`planned`)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _goal_of(g: Grounded) -> dict[int, int]:
    return {n.id: n.goal for n in g.graph.nodes}


def _writes(g: Grounded) -> list[int]:
    """Indices of the plan's write steps that must take effect: acts, fixes and retries (a
    lookup is a read; a refused attempt changes nothing by design)."""
    kinds = {n.id: n.kind for n in g.graph.nodes}
    return [
        i
        for i, s in enumerate(g.steps)
        if kinds.get(s.node) in ("act", "recover") and s.expect != "error"
    ]


def _without(steps: list[Step], drop: set[int]) -> dict[str, Any] | None:
    """The plan minus the steps `drop`, every step "any", refs renumbered; None when a kept step
    needs a removed step's value."""
    new_index: dict[int, int] = {}
    out: list[dict[str, Any]] = []
    for i in range(len(steps)):
        if i not in drop:
            new_index[i] = len(new_index)
    for i, s in enumerate(steps):
        if i in drop:
            continue
        params: dict[str, Any] = {}
        for k, v in s.params.items():
            if isinstance(v, dict) and "$ref" in v:
                j, f = v["$ref"]
                if j not in new_index:
                    return None
                v = {"$ref": [new_index[j], f]}
            params[k] = v
        out.append({"tool": s.tool, "params": params, "expect": "any"})
    return {"steps": out}


def ablations(g: Grounded) -> list[tuple[frozenset[int], dict[str, Any]]]:
    """(removed step indices, plan) for each write step alone and each sub-goal's writes."""
    goal = _goal_of(g)
    writes = _writes(g)
    sets = {frozenset({i}) for i in writes}
    by_goal: dict[int, set[int]] = {}
    for i in writes:
        by_goal.setdefault(goal.get(g.steps[i].node, 0), set()).add(i)
    sets |= {frozenset(s) for s in by_goal.values()}
    out = []
    for drop in sorted(sets, key=lambda s: sorted(s)):
        plan = _without(g.steps, set(drop))
        if plan is not None:
            out.append((drop, plan))
    return out


def _recovery(g: Grounded, trace: list[dict[str, Any]], ablated: dict[frozenset[int], Any]) -> bool:
    for i, s in enumerate(g.steps):
        if s.expect != "error" or i + 2 >= len(g.steps) or i >= len(trace):
            continue
        fix, retry = i + 1, i + 2
        same = g.steps[retry].tool == s.tool and g.steps[retry].params == s.params
        refused = bool(trace[i].get("error"))
        retried = retry < len(trace) and not trace[retry].get("error")
        run = ablated.get(frozenset({fix}))
        # Without the fix, the retry sits at index retry-1 of the ablated plan's trace.
        still = run is not None and run.ok and len(run.trace) > retry - 1
        needed = still and bool(run.trace[retry - 1].get("error"))
        if same and refused and retried and needed:
            return True
    return False


def _fix_told(g: Grounded, instruction: str) -> bool:
    fixes = [g.steps[i + 1] for i, s in enumerate(g.steps[:-1]) if s.expect == "error"]
    return any(
        all(_named(v, instruction) for v in f.params.values() if not isinstance(v, dict | list))
        for f in fixes
    )


def _named(value: Any, instruction: str) -> bool:
    """Does the instruction state it (derivable's reading: word boundaries, any number form)?"""
    return value is not None and mentions(instruction, value)


def _refs(step: Step) -> list[tuple[int, str]]:
    return [
        (int(v["$ref"][0]), str(v["$ref"][1]))
        for v in step.params.values()
        if isinstance(v, dict) and "$ref" in v
    ]


def _result_field(trace: list[dict[str, Any]], j: int, name: str) -> Any:
    """The value step j's result held for `name`, as the run recorded it (None if unreadable)."""
    try:
        got = json.loads(trace[j]["result"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    got = got[0] if isinstance(got, list) and got else got
    if isinstance(got, dict) and name in got:
        return got[name]
    return reach.at(got, name)


def _chains(g: Grounded, instruction: str) -> tuple[dict[int, bool], dict[int, bool]]:
    """Per step: (named: a literal argument is stated, reached: not named but its key is a
    `$ref` to a named or reached step)."""
    named = {
        i: any(_named(v, instruction) for v in s.params.values() if not isinstance(v, dict | list))
        for i, s in enumerate(g.steps)
    }
    reached: dict[int, bool] = {}
    for i, s in enumerate(g.steps):
        via = _refs(s)
        reached[i] = not named[i] and any(named[p] or reached.get(p, False) for p, _ in via)
    return named, reached


def _long_range(g: Grounded, trace: list[dict[str, Any]], instruction: str) -> list[list[int]]:
    """[j, k] where, on the reference run, step k was passed a value step j's result held
    (the trace shows both), j < k-1, step j read a record the instruction does not name (none
    of its literal arguments is stated) but reached through an earlier step's result (its key
    is itself a `$ref` to a named or so-reached record), and the value itself is not stated. A
    lookup of an unnamed record by a literal key is not long range: nothing leads the agent
    there (derivable.py's concern); a hop the run does not show is not measured."""

    _, reached = _chains(g, instruction)
    hops = []
    for k, s in enumerate(g.steps):
        for param, v in s.params.items():
            if not (isinstance(v, dict) and "$ref" in v) or k >= len(trace):
                continue
            j, name = int(v["$ref"][0]), str(v["$ref"][1])
            produced = _result_field(trace, j, name)
            passed = (trace[k].get("params") or {}).get(param)
            carried = produced is not None and passed == produced
            if carried and j < k - 1 and reached.get(j) and not _named(produced, instruction):
                hops.append([j, k])
    return hops


def planned(g: Grounded) -> set[str]:
    """What a plan's shape can carry before it runs: `long_range` where a read whose key came
    from an earlier step (a record reached, not named) feeds a step two or more later, and
    `convergence` where a write takes values from two or more earlier steps. Of the variants
    of one graph that ran, synthesis makes the task from one carrying what the graph wanted."""
    out = set()
    writes = set(_writes(g))
    for k, s in enumerate(g.steps):
        fed = {j for j, _ in _refs(s)}
        if any(j < k - 1 and _refs(g.steps[j]) for j in fed):
            out.add("long_range")
        if k in writes and len(fed) >= 2:
            out.add("convergence")
    return out


def carried(g: Grounded) -> set[str]:
    """The features a plan's shape carries before it runs (what synthesis balances the kept set
    on): `planned`'s long range and convergence, `error_recovery` where a step expects a
    refusal, `branching` where the plan branches on a condition."""
    out = planned(g)
    if any(s.expect == "error" for s in g.steps):
        out.add("error_recovery")
    if g.condition is not None:
        out.add("branching")
    return out


def _converging(g: Grounded, trace: list[dict[str, Any]]) -> list[int]:
    """Write steps that take values from two or more distinct earlier steps, each value one
    the run produced (the producer's result holds it)."""
    out = []
    for k in _writes(g):
        fed = {
            j
            for j, name in _refs(g.steps[k])
            if j < k and (j in g.references or _result_field(trace, j, name) is not None)
        }
        if len(fed) >= 2:
            out.append(k)
    return out


def _branch(g: Grounded, initial: Tables) -> bool:
    c = g.condition
    if not c:
        return False
    rows = initial.get(c["table"], [])
    rec = next((r for r in rows if r.get(c["key_field"]) == c["key"]), None)
    held = any(r.get(c["field"]) == c["value"] for r in rows)
    return rec is not None and held and (rec.get(c["field"]) == c["value"]) == bool(c["holds"])


def _same(a: Tables, b: Tables) -> bool:
    def canon(t: Tables) -> dict[str, list[str]]:
        return {
            k: sorted(json.dumps(r, sort_keys=True, default=str) for r in v) for k, v in t.items()
        }

    return canon(a) == canon(b)


def measure(
    g: Grounded,
    trace: list[dict[str, Any]],
    initial: Tables,
    final: Tables,
    instruction: str,
    ablated: dict[frozenset[int], Any],
    fix_left_out: bool = False,
) -> Structure:
    """The structure one task really has. `ablated` maps removed step indices to that ablation's
    PlanRun (ok, trace, final); a missing or failed ablation counts as "changes the state".
    `fix_left_out`: the instruction omits what the fix changes (the refusal teaches it), so the
    fix is not told even where its values (the call's own buyer and day) are stated."""
    goal = _goal_of(g)
    out = Structure(claimed=sorted(features_of(g.graph)), planned=sorted(planned(g)))
    out.long_range_hops = _long_range(g, trace, instruction)
    out.long_range = bool(out.long_range_hops)
    out.converging = _converging(g, trace)
    out.convergence = bool(out.converging)
    named, reached = _chains(g, instruction)
    used = {j for st in g.steps for j, _ in _refs(st)}
    out.unnamed_lookups = sorted(j for j in used if not named[j] and not reached[j])
    out.error_recovery = _recovery(g, trace, ablated)
    out.fix_told = out.error_recovery and not fix_left_out and _fix_told(g, instruction)
    writes = _writes(g)
    by_goal: dict[int, set[int]] = {}
    for i in writes:
        by_goal.setdefault(goal.get(g.steps[i].node, 0), set()).add(i)
    out.goals = len(by_goal)

    def idle(drop: frozenset[int]) -> bool:
        run = ablated.get(drop)
        return run is not None and run.ok and bool(run.final) and _same(run.final, final)

    out.unknown = sum(1 for r in ablated.values() if not r.ok)
    out.idle_steps = [i for i in writes if idle(frozenset({i}))]
    out.idle_goals = sorted(gl for gl, s in by_goal.items() if idle(frozenset(s)))
    out.subgoals = out.goals >= 2 and not out.idle_goals
    out.branched = g.condition is not None
    out.branch_from_state = _branch(g, initial)
    checks = {
        "long_range": out.long_range,
        "convergence": out.convergence,
        "error_recovery": out.error_recovery,
        "subgoals": out.subgoals,
        "branching": out.branch_from_state,
    }
    out.unmet = [f for f in out.claimed if f in checks and not checks[f]]
    return out


# Per measured feature, what no task showing it means (absent's reason when tasks claimed it).
UNMET = {
    "long_range": "no reference run carried a value read from a record reached through an "
    "earlier result (not named) to a step two or more later, unstated",
    "convergence": "no reference run fed one write with values two earlier steps produced",
    "error_recovery": "no reference run was refused, fixed, then let through, with the fix needed",
    "branching": "no branch condition held on the starting state as the arm taken says",
}
ABSENT = {"long_range": "long_range", "convergence": "convergence",
          "error_recovery": "error_recovery", "branching": "branch_from_state"}  # fmt: skip


def absent(
    rows: list[Structure], relaxed: dict[str, str], unmade: dict[str, str]
) -> dict[str, str]:
    """Why no kept task measurably has a feature, per feature none has: not sampled (the domain
    cannot carry it: `relaxed`), claimed by kept tasks but not measured (how many, how many
    plans had the shape, what the measure looks for), the graphs that wanted it dropped
    (`unmade`: their most common reason), or no graph drawn wanted it."""
    out = {}
    for f, measured in ABSENT.items():
        if any(getattr(r, measured) for r in rows):
            continue
        claimed = [r for r in rows if f in r.claimed]
        if f in relaxed:
            out[f] = f"not sampled: {relaxed[f]}"
        elif claimed:
            shaped = sum(f in r.planned for r in claimed)
            plans = f", {shaped} of their plans had the shape" if f in PLANNED else ""
            out[f] = f"{len(claimed)} kept task(s) claimed it{plans}, none measured it: {UNMET[f]}"
        elif f in unmade:
            out[f] = unmade[f]
        else:
            out[f] = "no graph drawn wanted it"
    return out


PLANNED = ("long_range", "convergence")


def certain_problems(s: Structure) -> list[str]:
    """What execution proves wrong (a reason to drop): a sub-goal or write step that changes
    nothing. The rest of `unmet` is a warning only."""
    out = [f"sub-goal {gl} changes nothing" for gl in s.idle_goals]
    out += [f"step {i} changes nothing" for i in s.idle_steps]
    return out


def shares(rows: list[Structure]) -> dict[str, Any]:
    """Per measured property, the share of tasks that have it (branch: of the branched ones),
    and how many tasks claimed a structure their measurement lacks."""
    n = len(rows)
    branched = [r for r in rows if r.branched]

    def share(k: int, of: int) -> float:
        return round(k / of, 3) if of else 0.0

    return {
        "tasks": n,
        "long_range": share(sum(r.long_range for r in rows), n),
        "convergence": share(sum(r.convergence for r in rows), n),
        "error_recovery": share(sum(r.error_recovery for r in rows), n),
        "error_recovery_fix_told": share(sum(r.fix_told for r in rows), n),
        "subgoals": share(sum(r.subgoals for r in rows), n),
        "branch_from_state": share(sum(r.branch_from_state for r in branched), len(branched)),
        "claimed_unmet": {
            f: sum(f in r.unmet for r in rows)
            for f in ("long_range", "convergence", "error_recovery", "subgoals", "branching")
        },
    }
