"""A found fix is graded by what it is for, not by which fix the reference chose (issue 36).

On tau-bench's retail domain, paying order A with olivia_ito_3591's gift card is refused (56.00
left); the card is held by one other pending order, B. The instruction names neither B nor the
fix: the agent finds them from the refusal. Cancelling B frees the card, and so does paying B
with another of olivia's methods (the card is refunded at once). The task's goal is A paid with
the card, so the tests must accept every fix that lets that call through, and still fail an
agent that did not get it through or that changed records no such fix needed.

The task is made by synth.make_task from a reference run in the sandbox; every end state below
is what the domain's own tools leave (one sandbox call), graded by the task's own predicates.
"""

from __future__ import annotations

from typing import Any

import pytest
from _sabotage import FIXTURES

from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.synthesis.domain import execute
from clawloop.synthesis.domain.alternatives import accept_all
from clawloop.synthesis.domain.ground import Grounded, Step
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.skills import cluster_skills
from clawloop.synthesis.domain.synth import make_task, passes
from clawloop.synthesis.domain.taskgraph import TaskGraph
from clawloop.synthesis.domain.workspace import skill_of, workspace_files

RETAIL = FIXTURES / "tau_retail"
CARD, A, B = "gift_card_7794233", "#W5442520", "#W3657213"  # B paid 3570.34 with the card
OTHER = "#W7941031"  # olivia's third pending order: paid by credit card, holds nothing of A's
CREDIT, PAYPAL = "credit_card_9753331", "paypal_8049766"
REFUSAL = "Error: insufficient gift card balance to pay for the order"


def pay(order: str, method: str, expect: str = "ok") -> Step:
    return Step("modify_pending_order_payment", {"order_id": order, "payment_method_id": method},
                expect)  # fmt: skip


def cancel(order: str, reason: str = "no longer needed") -> Step:
    return Step("cancel_pending_order", {"order_id": order, "reason": reason})


REFERENCE = [
    Step(pay(A, CARD).tool, pay(A, CARD).params, "error", refusal=REFUSAL),
    Step(cancel(B).tool, cancel(B).params, found=CARD),
    pay(A, CARD),
]
REPAY = [REFERENCE[0], Step(pay(B, CREDIT).tool, pay(B, CREDIT).params, found=CARD), pay(A, CARD)]


@pytest.fixture(scope="module")
def task() -> dict[str, Any]:
    """The task made in the sandbox, and the end states of the paths graded below."""
    domain = load_domain(RETAIL)
    skills = cluster_skills(domain)
    files = workspace_files(domain, skills)
    sandbox = SandboxConfig(backend="auto")
    made = {}
    for name, steps in (("cancel", REFERENCE), ("repay", REPAY)):
        g = Grounded(graph=TaskGraph(nodes=()), steps=steps)
        initial, (run,) = execute.run_plans(files, [g.plan()], sandbox)
        assert run.ok, run.why
        code, note = make_task(domain, g, initial, (run, None), files, skill_of(skills), None,
                               sandbox=sandbox)  # fmt: skip
        ns: dict[str, Any] = {}
        exec(compile(code, "generator.py", "exec"), ns)  # our own rendered generator: data only
        made[name] = (ns["build"](0), note)
    built, note = made["cancel"]
    paths = {
        "reference": [cancel(B), pay(A, CARD)],
        "other reason": [cancel(B, "ordered by mistake"), pay(A, CARD)],
        "B paid by credit card": [pay(B, CREDIT), pay(A, CARD)],
        "B paid by paypal": [pay(B, PAYPAL), pay(A, CARD)],
        "nothing": [],
        "fix only": [cancel(B)],
        "every other pending order cancelled": [cancel(B), cancel(OTHER), pay(A, CARD)],
        "every pending order cancelled": [cancel(B), cancel(OTHER), cancel(A)],
        "B also moved": [
            pay(B, CREDIT),
            Step("modify_pending_order_address", {
                "order_id": B, "address1": "1 Elm St", "address2": "", "city": "Austin",
                "state": "TX", "country": "USA", "zip": "78701"}),
            pay(A, CARD),
        ],
    }  # fmt: skip
    plans = [{"steps": [{"tool": s.tool, "params": s.params, "expect": "ok"} for s in p]}
             for p in paths.values()]  # fmt: skip
    _, runs = execute.run_plans(files, plans, sandbox)
    finals = {}
    for name, r in zip(paths, runs, strict=True):
        assert r.ok, f"{name}: {r.why}"
        finals[name] = r.final if paths[name] else initial
    return {"built": built, "note": note, "finals": finals, "repay": made["repay"][0]}


def _grade(task: dict[str, Any], name: str, built: str = "built") -> bool:
    return passes(task[built]["answer"]["state"]["predicates"], task["finals"][name])


@pytest.mark.parametrize("name", ["reference", "other reason", "B paid by credit card",
                                  "B paid by paypal"])  # fmt: skip
def test_every_fix_that_lets_the_refused_call_through_passes(task, name):
    """The reference fix, and the fixes the domain offers beside it: each frees the card, and
    A ends paid with it. An agent that paid B another way did the task."""
    assert _grade(task, name), name
    assert "other fix(es) that let the refused call through" in task["note"]


def test_doing_nothing_or_only_the_fix_fails(task):
    """The goal is A paid with the card: without that call's effect the task is not done, even
    where the card was freed."""
    assert not _grade(task, "nothing")
    assert not _grade(task, "fix only")


def test_a_destructive_fix_fails(task):
    """Cancelling every other pending order also frees the card and lets A be paid, but it
    cancels #W7941031, which holds nothing of the refused call's (it was paid by credit card):
    no fix that lets the call through needed it, so it is damage and the guard keeps it. And
    cancelling every pending order, A included, never gets the refused call through."""
    assert not _grade(task, "every other pending order cancelled")
    assert not _grade(task, "every pending order cancelled")


def test_the_fix_record_is_free_only_where_a_valid_fix_changes_it(task):
    """B may end cancelled or paid another way (status, payment history, cancel reason), but
    its other fields stay checked: moving B's address is no part of any fix."""
    assert not _grade(task, "B also moved")
    preds = task["built"]["answer"]["state"]["predicates"]
    on_b = {p["field"] for p in preds if p.get("match") == {"_key": B} and p["kind"] == "field"}
    assert "address" in on_b and "items" in on_b and "status" not in on_b


def test_the_instruction_leaves_the_fix_open_and_names_no_record_of_it(task):
    text = task["built"]["instruction"]
    assert B not in text and A in text and CARD in text, text
    assert "Any fix the policy allows that lets the refused change through is accepted" in text
    # the cancel's reason is no longer checked (a fix need not cancel): it is not demanded
    assert "no longer needed" not in text


def test_accept_all_keeps_the_guard_on_records_no_fix_changes():
    """Pure: a guard drops only the records an accepted end state changed, and a freed record
    keeps the fields every accepted end state holds alike."""
    from clawloop.harness.taskfolder.state_predicates import key_ident, record_digest

    start = [{"id": "x", "s": "open", "n": 1}, {"id": "y", "s": "open", "n": 2}]
    ref = [{"id": "x", "s": "shut", "n": 1}, {"id": "y", "s": "open", "n": 2}]
    alt = [{"id": "x", "s": "held", "n": 1}, {"id": "y", "s": "open", "n": 2}]
    odd = [{"id": "x", "s": "open", "n": 1}, {"id": "y", "s": "shut", "n": 2}]
    preds = [
        {"kind": "field", "table": "t", "match": {"id": "x"}, "field": "s", "value": "shut"},
        {"kind": "rest", "table": "t", "match": {"id": "x"}, "fields": ["id", "n", "s"],
         "values": {"id": "x", "n": 1}},
        {"kind": "unchanged", "table": "t", "key": "id", "total": 2,
         "digests": {key_ident("y"): record_digest(start[1])}},
    ]  # fmt: skip
    out = accept_all(preds, {"t": ref}, [{"t": alt}])
    assert [p["kind"] for p in out] == ["rest", "unchanged", "field"] and out[1]["digests"]
    assert (out[2]["match"], out[2]["field"], out[2]["value"]) == ({"id": "x"}, "n", 1)
    assert passes(out, {"t": alt}) and passes(out, {"t": ref}) and not passes(out, {"t": odd})
    out = accept_all(preds, {"t": ref}, [{"t": odd}])  # an end state that changed y
    (guard,) = [p for p in out if p["kind"] == "unchanged"]
    assert not guard["digests"] and guard["total"] == 2  # y is no longer guarded ...
    assert {"kind": "field", "table": "t", "match": {"id": "y"}, "field": "n", "value": 2,
            "hidden": [], "unchanged": True} in out  # ... but its field no end state changed is  # fmt: skip


def test_a_reference_that_repaid_the_order_accepts_the_cancel_too(task):
    """The same recovery, its reference fix paying B by credit card: cancelling B, or paying
    it by paypal, passes too. The instruction still states the card for a fix that takes a
    payment method: derivability reads the card inside A's payment history (A's own refund to
    it) as the fix's value and would drop the task otherwise; following it is a valid fix."""
    for name in ("reference", "other reason", "B paid by credit card", "B paid by paypal"):
        assert _grade(task, name, "repay"), name
    for name in ("nothing", "fix only", "every other pending order cancelled", "B also moved"):
        assert not _grade(task, name, "repay"), name
    text = task["repay"]["instruction"]
    assert "Any fix the policy allows" in text and B not in text, text
    assert "Where your fix takes `payment_method_id`, give `credit_card_9753331`." in text
