"""`domain synth --n N` reaches N or says why, per feature (issue 36, items 2 and 3): shapes no
graph could carry are relaxed with the reason, the reason a feature has no kept task is its
graphs' most common drop, and the domain's refusal kinds are counted with how many had a fix
that ran and how many kept tasks recover from. On synthetic graph rows: no sandbox."""

from __future__ import annotations

import json

from clawloop.synthesis.domain.ground import Step, refusal_kind
from clawloop.synthesis.domain.synth import (
    RELAX_AFTER,
    DomainSynth,
    Probed,
    _relax,
    _unmade,
)
from clawloop.synthesis.domain.taskgraph import Knobs


def _row(wanted: list[str], kept: bool, reason: str, plan: list[dict] | None = None) -> dict:
    return {"wanted": json.dumps(wanted), "features": json.dumps(wanted), "kept": kept,
            "reason": reason, "plan": json.dumps(plan) if plan else ""}  # fmt: skip


def test_a_feature_no_kept_task_has_is_reported_with_its_most_common_drop():
    out = DomainSynth(domain="d")
    out.graphs = [
        _row(["long_range", "subgoals"], False, "grounding: no write tool fits node 3 (2 inputs)"),
        _row(["long_range"], False, "grounding: no write tool fits node 4 (2 inputs)"),
        _row(["long_range"], False, "execution: step 0 x: expected ok: Error: order 12"),
        _row(["subgoals"], True, "deterministic instruction"),
        _row(["convergence"], False, "not needed: 6 task(s) made"),
    ]
    why = _unmade(out)
    assert set(why) == {"long_range"}  # subgoals has a kept task; "not needed" is no drop
    assert why["long_range"].startswith("3 graph(s) dropped, most often: grounding: no write")
    assert "node N (N inputs)" in why["long_range"]  # ids and figures folded: one rule, one kind


def test_only_features_enough_graphs_wanted_are_relaxed_and_never_an_excluded_one():
    out = DomainSynth(domain="d")
    reason = "grounding: no error-recovery path (refused, fixed, accepted) ran"
    out.graphs = [_row(["error_recovery"], False, reason) for _ in range(RELAX_AFTER)]
    out.graphs += [_row(["convergence"], False, reason) for _ in range(RELAX_AFTER - 1)]
    relaxed = _relax(out, Knobs())
    assert (
        set(relaxed) == {"error_recovery"} and "no error-recovery path" in relaxed["error_recovery"]
    )
    assert _relax(out, Knobs(exclude=frozenset({"error_recovery"}))) == {}


def test_refusal_kinds_are_counted_with_the_fixes_that_ran_and_the_kept_tasks_using_them():
    cancel = Step("cancel_pending_order", {"order_id": "#W1"}, "error",
                  refusal="Error: non-pending order cannot be cancelled")  # fmt: skip
    pay = Step("modify_pending_order_payment", {"order_id": "#W2"}, "error",
               refusal="Error: insufficient gift card balance to pay for the order #W2")  # fmt: skip
    fix = Step("cancel_pending_order", {"order_id": "#W3"})
    probed = Probed(wide=[(pay, fix, Step(pay.tool, pay.params))])
    probed.refusals = {refusal_kind(cancel.tool, cancel.refusal): 5,
                       refusal_kind(pay.tool, pay.refusal): 2}  # fmt: skip
    out = DomainSynth(domain="d", probed=probed)
    plan = [{"tool": pay.tool, "refusal": "Error: insufficient gift card balance to pay for the "
             "order #W9"}, {"tool": fix.tool}, {"tool": pay.tool}]  # fmt: skip
    out.graphs = [
        _row(["error_recovery"], True, "ok", plan),
        _row(["error_recovery"], False, "x", plan),
    ]
    got = out.refusals()
    assert (got["kinds"], got["fixed"], got["in_tasks"]) == (2, 1, 1)
    kind = refusal_kind(pay.tool, pay.refusal)
    assert "order N" in kind and kind == refusal_kind(pay.tool, plan[0]["refusal"])
    assert got["by_kind"][kind] == {"seen": 2, "fixed": True, "tasks": 1}  # the dropped one: no
    assert got["by_kind"][refusal_kind(cancel.tool, cancel.refusal)]["tasks"] == 0
    assert out.summary()["refusals"] == got


def test_a_feature_no_kept_task_measures_is_explained_even_when_n_was_reached():
    """tau_airline keeps 6 of 6 with no long range and no recovery: the report says why, per
    feature: relaxed (never sampled), claimed by kept tasks but not measured (how many plans had
    the shape), dropped graphs' most common reason, or never wanted."""
    from clawloop.synthesis.domain.structure import Structure, absent

    rows = [
        Structure(claimed=["long_range", "subgoals"], planned=["long_range"], subgoals=True),
        Structure(claimed=["long_range", "convergence"], convergence=True),
    ]
    relaxed = {"error_recovery": "no refused call had a fix that then let it through"}
    unmade = {"branching": "2 graph(s) dropped, most often: grounding: no categorical field"}
    why = absent(rows, relaxed, unmade)
    assert set(why) == {"long_range", "error_recovery", "branching"}  # convergence is measured
    assert why["error_recovery"] == f"not sampled: {relaxed['error_recovery']}"
    assert why["long_range"].startswith("2 kept task(s) claimed it, 1 of their plans had the shape")
    assert why["branching"] == unmade["branching"]
    assert absent([], {}, {})["convergence"] == "no graph drawn wanted it"
    out = DomainSynth(domain="d", structure=rows, relaxed=relaxed)
    out.probed = Probed(refusals={"book: Error: not enough seats on flight N": 2})
    assert out.absent()["error_recovery"].endswith(
        "(the probes met 1 refusal kind(s), 0 with a fix that then let the refused call through)"
    )
    assert out.summary()["absent"] == out.absent()
