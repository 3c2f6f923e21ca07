"""Measured structure (synthesis/domain/structure.py): the properties a domain task claims are
read off its reference run and instruction, not the sampler's labels. A sub-goal whose writes
change nothing is found by an ablation run; error recovery counts only when the first attempt was
refused at run time and the retry needs the fix; long range only when the carried value's record
is not named in the instruction; a branch only when its condition holds on the starting state as
the arm taken says."""

from __future__ import annotations

import json

import pytest

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain.execute import PlanRun
from clawloop.synthesis.domain.ground import Grounded, Step
from clawloop.synthesis.domain.load import builtin_domains
from clawloop.synthesis.domain.structure import ablations, certain_problems, measure, shares
from clawloop.synthesis.domain.synth import synthesize_domain
from clawloop.synthesis.domain.taskgraph import Node, TaskGraph

INITIAL = {"hives": [{"code": "H1", "status": "ok"}, {"code": "H2", "status": "ok"}]}
AFTER_1 = {"hives": [{"code": "H1", "status": "sold"}, {"code": "H2", "status": "ok"}]}
AFTER_2 = {"hives": [{"code": "H1", "status": "sold"}, {"code": "H2", "status": "sold"}]}


def _two_goals() -> Grounded:
    graph = TaskGraph(nodes=(Node(0, "act", goal=0), Node(1, "act", goal=1)), wanted=("subgoals",))
    steps = [
        Step("sell", {"code": "H1", "status": "sold"}, node=0),
        Step("sell", {"code": "H2", "status": "sold"}, node=1),
    ]
    return Grounded(graph=graph, steps=steps)


def _ablated(g: Grounded, finals: dict[frozenset[int], dict]) -> dict[frozenset[int], PlanRun]:
    return {drop: PlanRun(True, "", [], finals[drop]) for drop, _ in ablations(g)}


def test_a_sub_goal_that_changes_nothing_is_detected_and_certain():
    g = _two_goals()
    # Goal 1's write sets H2 to what it already is in the final state without it: idle.
    idle = _ablated(g, {frozenset({0}): {"hives": [INITIAL["hives"][0], AFTER_2["hives"][1]]},
                        frozenset({1}): AFTER_2})  # fmt: skip
    s = measure(g, [], INITIAL, AFTER_2, "sell H1 and H2", idle)
    assert s.idle_goals == [1] and s.idle_steps == [1] and not s.subgoals
    assert "subgoals" in s.unmet
    assert certain_problems(s) == ["sub-goal 1 changes nothing", "step 1 changes nothing"]
    # The sound input: each goal's removal ends elsewhere -> real sub-goals, nothing to drop.
    real = _ablated(g, {frozenset({0}): {"hives": [INITIAL["hives"][0], AFTER_2["hives"][1]]},
                        frozenset({1}): AFTER_1})  # fmt: skip
    s = measure(g, [], INITIAL, AFTER_2, "sell H1 and H2", real)
    assert s.subgoals and s.goals == 2 and not certain_problems(s) and not s.unmet
    # An ablation that failed proves nothing: counted, never a reason to drop.
    broken = {k: PlanRun(False, "exited 137", [], {}) for k in idle}
    s = measure(g, [], INITIAL, AFTER_2, "sell H1 and H2", broken)
    assert s.unknown == len(broken) and not certain_problems(s)


def _recovery(refused_at_run_time: bool, fix_needed: bool) -> tuple[Grounded, list, dict]:
    graph = TaskGraph(nodes=(Node(0, "recover", goal=0),), wanted=("error_recovery",))
    call = {"code": "H1"}
    steps = [
        Step("harvest", call, "error", node=0),
        Step("clear", {"code": "H1"}, node=0),
        Step("harvest", call, node=0),
    ]
    g = Grounded(graph=graph, steps=steps)
    trace = [
        {"step": 0, "error": "hive H1 is quarantined" if refused_at_run_time else ""},
        {"step": 1, "error": ""},
        {"step": 2, "error": ""},
    ]
    no_fix = [{"step": 0, "error": "quarantined"}, {"step": 1, "error": ""}]
    if fix_needed:
        no_fix[1]["error"] = "hive H1 is quarantined"
    ablated = {drop: PlanRun(True, "", no_fix if drop == frozenset({1}) else [], AFTER_1)
               for drop, _ in ablations(g)}  # fmt: skip
    return g, trace, ablated


def test_error_recovery_is_measured_only_when_the_first_attempt_was_refused_and_the_fix_needed():
    g, trace, ablated = _recovery(refused_at_run_time=True, fix_needed=True)
    s = measure(g, trace, INITIAL, AFTER_2, "harvest H1", ablated)
    assert s.error_recovery and "error_recovery" not in s.unmet
    assert s.fix_told  # "clear --code H1": every literal of the fix is in the instruction
    assert not measure(g, trace, INITIAL, AFTER_2, "harvest hive H2", ablated).fix_told
    # The instruction left out what the fix changes (the refusal teaches it): not told, even
    # though the fix's only value, the hive, is the goal's own.
    left = measure(g, trace, INITIAL, AFTER_2, "harvest H1", ablated, fix_left_out=True)
    assert left.error_recovery and not left.fix_told
    g, trace, ablated = _recovery(refused_at_run_time=False, fix_needed=True)
    s = measure(g, trace, INITIAL, AFTER_2, "harvest H1", ablated)
    assert not s.error_recovery and "error_recovery" in s.unmet
    g, trace, ablated = _recovery(refused_at_run_time=True, fix_needed=False)  # order only
    s = measure(g, trace, INITIAL, AFTER_2, "harvest H1", ablated)
    assert not s.error_recovery and "error_recovery" in s.unmet


def _lookup_then_acts(chained: bool) -> Grounded:
    """Step 0 reads H1, step 1 reads a hive (by H1's `sister` when chained, else by code H2),
    step 2 sells H3, step 3 moves H3 to the apiary step 1 read."""
    graph = TaskGraph(
        nodes=(Node(0, "lookup", 0), Node(1, "lookup", 0), Node(2, "act", 0),
               Node(3, "act", 0, inputs=(1,))),
        wanted=("long_range",),
    )  # fmt: skip
    second = {"code": {"$ref": [0, "sister"]}} if chained else {"code": "H2"}
    steps = [
        Step("get_hive", {"code": "H1"}, node=0),
        Step("get_hive", second, node=1),
        Step("sell", {"code": "H3", "status": "sold"}, node=2),
        Step("move", {"code": "H3", "apiary": {"$ref": [1, "apiary"]}}, node=3),
    ]
    trace = [
        {"step": 0, "error": "", "result": json.dumps({"code": "H1", "sister": "H2"})},
        {"step": 1, "error": "", "result": json.dumps({"code": "H2", "apiary": "A7"})},
        {"step": 2, "params": steps[2].params, "error": "", "result": "{}"},
        {"step": 3, "params": {"code": "H3", "apiary": "A7"}, "error": "", "result": "{}"},
    ]
    return Grounded(graph=graph, steps=steps), trace


def test_long_range_is_a_carried_value_reached_through_a_chain_not_a_named_lookup():
    g, trace = _lookup_then_acts(chained=True)
    hidden = measure(
        g, trace, INITIAL, AFTER_1, "Move H3 to where hive H1's sister is; sell H3.", {}
    )
    assert hidden.long_range and hidden.long_range_hops == [[1, 3]]
    told = measure(g, trace, INITIAL, AFTER_1, "Move H3 (H1's sister) to A7; sell H3.", {})
    assert not told.long_range  # the value itself is stated
    g, trace = _lookup_then_acts(chained=False)
    named = measure(g, trace, INITIAL, AFTER_1, "Move H3 to the apiary hive H2 is in.", {})
    assert not named.long_range  # a one-hop lookup of a record the instruction names
    unnamed = measure(g, trace, INITIAL, AFTER_1, "Move H3 next to hive H22.", {})
    assert not unnamed.long_range  # H2 is not named (H22 is not H2) and nothing leads there
    assert unnamed.unnamed_lookups == [1] and named.unnamed_lookups == []
    g, trace = _lookup_then_acts(chained=True)
    short = measure(g, trace[:3], INITIAL, AFTER_1, "Move H3 to where H1's sister is.", {})
    assert not short.long_range  # the run never reached the step that takes the value


def test_a_branch_counts_only_when_its_condition_is_read_off_the_starting_state():
    g = _two_goals()
    g.condition = {"table": "hives", "key_field": "code", "key": "H1", "field": "status",
                   "value": "ok", "holds": True}  # fmt: skip
    assert measure(g, [], INITIAL, AFTER_2, "", {}).branch_from_state
    g.condition = {**g.condition, "holds": False}  # the arm taken contradicts the state
    assert not measure(g, [], INITIAL, AFTER_2, "", {}).branch_from_state
    g.condition = {**g.condition, "value": "on-fire", "holds": False}  # no record holds it
    assert not measure(g, [], INITIAL, AFTER_2, "", {}).branch_from_state


def test_ablation_plans_renumber_refs_and_skip_removing_a_needed_lookup():
    g, _ = _lookup_then_acts(chained=True)
    plans = dict(ablations(g))  # lookups are never removed; every write alone and per goal
    assert set(plans) == {frozenset({2}), frozenset({3}), frozenset({2, 3})}
    assert plans[frozenset({2})]["steps"][2]["params"]["apiary"] == {"$ref": [1, "apiary"]}
    assert all(s["expect"] == "any" for p in plans.values() for s in p["steps"])
    graph = TaskGraph(nodes=(Node(0, "act", 0), Node(1, "lookup", 0), Node(2, "act", 0)))
    g = Grounded(graph, [Step("sell", {"code": "H3"}, node=0), Step("get_hive", {"code": "H1"}, node=1),
                         Step("move", {"apiary": {"$ref": [1, "apiary"]}}, node=2)])  # fmt: skip
    plans = dict(ablations(g))
    assert plans[frozenset({0})]["steps"][1]["params"]["apiary"] == {"$ref": [0, "apiary"]}


@pytest.mark.slow
def test_synth_records_measured_structure_per_kept_task_and_reports_shares():
    root = next(p for p in builtin_domains() if p.name == "apiary_coop")
    out = synthesize_domain(root, 3, 0, SandboxConfig(backend="auto"))
    kept = [g for g in out.graphs if g["kept"]]
    assert kept and len(out.structure) == len(kept) == len(out.candidates)
    for g in kept:
        s = json.loads(g["structure"])
        assert not s["idle_goals"] and not s["idle_steps"]
    summary = out.summary()["structure"]
    assert summary["tasks"] == len(kept)
    assert summary == shares(out.structure)


@pytest.mark.slow
def test_synth_drops_a_task_whose_sub_goal_is_overwritten_by_the_next_one():
    """Run in the sandbox on apiary: moving a hive to AP-03 and then to AP-05 the same day leaves
    the same end state as the second move alone, so sub-goal 0 changes nothing: dropped with
    that reason. Two moves of different hives (the sound input) are kept and measured real."""
    from clawloop.synthesis.domain import execute
    from clawloop.synthesis.domain.load import load_domain
    from clawloop.synthesis.domain.skills import cluster_skills
    from clawloop.synthesis.domain.synth import DomainSynth, _measure_structure
    from clawloop.synthesis.domain.workspace import workspace_files

    root = next(p for p in builtin_domains() if p.name == "apiary_coop")
    domain = load_domain(root)
    files = workspace_files(domain, cluster_skills(domain))
    sandbox = SandboxConfig(backend="auto")
    graph = TaskGraph(nodes=(Node(0, "act", goal=0), Node(1, "act", goal=1)), wanted=("subgoals",))

    def move(hive: str, apiary: str, node: int) -> Step:
        return Step("move_hive", {"hive_code": hive, "apiary_code": apiary,
                                  "date": "2026-05-02"}, node=node)  # fmt: skip

    overwritten = Grounded(graph, [move("HV-0001", "AP-03", 0), move("HV-0001", "AP-05", 1)])
    sound = Grounded(graph, [move("HV-0001", "AP-03", 0), move("HV-0002", "AP-05", 1)])
    initial, runs = execute.run_plans(files, [overwritten.plan(), sound.plan()], sandbox)
    assert all(r.ok for r in runs), [r.why for r in runs]
    out = DomainSynth(domain=domain.name)
    rows = [
        {"kept": True, "reason": "note", "task_id": "t0"},
        {"kept": True, "reason": "note", "task_id": "t1"},
    ]
    out.candidates = [{"task_id": "t0"}, {"task_id": "t1"}]
    told = ("x", False)  # (instruction, fix left to the refusal)
    made = [(rows[0], overwritten, runs[0], told, out.candidates[0]),
            (rows[1], sound, runs[1], told, out.candidates[1])]  # fmt: skip
    _measure_structure(out, made, initial, files, sandbox)
    assert not rows[0]["kept"] and rows[0]["reason"].startswith(
        "structure: sub-goal 0 changes nothing"
    )
    assert rows[1]["kept"] and json.loads(rows[1]["structure"])["subgoals"]
    assert out.candidates == [{"task_id": "t1"}] and len(out.structure) == 1


def test_convergence_is_a_write_fed_by_two_distinct_steps_whose_results_hold_the_values():
    graph = TaskGraph(
        nodes=(Node(0, "lookup", 0), Node(1, "lookup", 0), Node(2, "act", 0, inputs=(0, 1))),
        wanted=("convergence",),
    )
    act = Step("pay", {"order": {"$ref": [0, "order_id"]}, "card": {"$ref": [1, "id"]}}, node=2)
    g = Grounded(graph=graph, steps=[Step("get_order", {"o": "W1"}, node=0),
                                     Step("get_user", {"u": "U1"}, node=1), act])  # fmt: skip
    trace = [{"step": 0, "result": json.dumps({"order_id": "W1"})},
             {"step": 1, "result": json.dumps({"id": "card_1"})}, {"step": 2, "error": ""}]  # fmt: skip
    ablated = _ablated(g, {frozenset({2}): INITIAL})
    s = measure(g, trace, INITIAL, AFTER_1, "pay W1 with the card", ablated)
    assert s.convergence and s.converging == [2] and "convergence" not in s.unmet
    # Both values from one step is no meeting of two lines of work: claimed, not measured.
    same = Step("pay", {"order": {"$ref": [0, "order_id"]}, "card": {"$ref": [0, "id"]}}, node=2)
    one = Grounded(graph=graph, steps=[*g.steps[:2], same])
    s = measure(one, trace, INITIAL, AFTER_1, "pay W1", ablated)
    assert not s.convergence and s.unmet == ["convergence"]
    assert shares([s])["claimed_unmet"]["convergence"] == 1
