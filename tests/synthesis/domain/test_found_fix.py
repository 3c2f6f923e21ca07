"""A fix whose record the agent finds from the refusal is not told (issue 36): on tau-bench's
retail domain, a gift card too low to pay an order is fixed by cancelling the one other pending
order the card paid for. Nothing the refusal says names that order, so the fix was stated as a
goal (its order id in the instruction); but the order is the only record holding the card that
a cancel is accepted on, so the agent can find it: the instruction leaves it unnamed, states only
what no state teaches (the cancel's reason), and derivability accepts the record through the
card the instruction names. The end state is written as data (no domain code runs)."""

from __future__ import annotations

import random

from _sabotage import FIXTURES, make

from clawloop.generators.verify.derivable import embedded_task
from clawloop.synthesis.domain.derivable import underivable
from clawloop.synthesis.domain.ground import Index, Step, _recover, found_fix
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.taskgraph import Node

RETAIL = FIXTURES / "tau_retail"
CARD, A, B = "gift_card_7794233", "#W5442520", "#W3657213"  # olivia_ito_3591's card, 56.00 left
REFUSAL = "Error: insufficient gift card balance to pay for the order"
PAY = Step("modify_pending_order_payment", {"order_id": A, "payment_method_id": CARD})
CANCEL = Step("cancel_pending_order", {"order_id": B, "reason": "no longer needed"})


def _recovery(card: str = CARD, a: str = A, b: str = B):
    pay = Step(PAY.tool, {"order_id": a, "payment_method_id": card})
    return (Step(pay.tool, pay.params, "error", refusal=REFUSAL),
            Step(CANCEL.tool, {**CANCEL.params, "order_id": b}), pay)  # fmt: skip


def test_the_fix_record_is_one_holding_the_refused_calls_value_and_the_others_are_tried():
    domain = load_domain(RETAIL)
    tables = load_tables(domain)
    # mia_sanchez_3401's card paid a pending order and one no longer pending
    value, others = found_fix(
        domain, tables, _recovery("gift_card_3488934", "#W4096800", "#W7170967")
    )
    assert value == "gift_card_3488934"
    assert [o.params["order_id"] for o in others] == ["#W9279351"]
    assert all(o.tool == CANCEL.tool and o.params["reason"] == "no longer needed" for o in others)
    value, others = found_fix(domain, tables, _recovery())
    assert value == CARD and others == []  # no other order holds olivia's card
    # A fix on a record holding nothing the call passed is never found.
    assert found_fix(domain, tables, _recovery(b="#W1067251")) == ("", [])


def test_a_found_recovery_marks_its_fix_and_the_plain_draws_are_unchanged():
    domain = load_domain(RETAIL)
    ix = Index.of(load_tables(domain), domain.keys)
    r = _recovery()
    node = Node(3, "recover", 0)
    steps = _recover(node, random.Random(0), [r], ix, 1.0, [(r, CARD)])
    assert steps[1].found == CARD and steps[1].node == 3 and not steps[0].found
    plain, again = random.Random(4), random.Random(4)
    assert not any(s.found for s in _recover(node, plain, [r], ix, 1.0))
    _recover(node, again, [r], ix, 1.0, [])
    assert plain.getstate() == again.getstate()


def _paid_after_cancel(t):
    orders = {o["order_id"]: o for o in t["orders"]}
    user = next(u for u in t["users"] if u["_key"] == "olivia_ito_3591")
    card = user["payment_methods"][CARD]
    b = orders[B]
    b.update(status="cancelled", cancel_reason="no longer needed")
    for p in list(b["payment_history"]):
        b["payment_history"].append({**p, "transaction_type": "refund"})
        card["balance"] = round(card["balance"] + p["amount"], 2)
    a = orders[A]
    first = a["payment_history"][0]
    a["payment_history"] += [{"transaction_type": "payment", "amount": first["amount"],
                              "payment_method_id": CARD}, {**first, "transaction_type": "refund"}]  # fmt: skip
    card["balance"] = round(card["balance"] - first["amount"], 2)


def test_a_found_fix_is_left_unnamed_its_untaught_values_stated_and_still_derivable(tmp_path):
    first, cancel, retry = _recovery()
    made = make(RETAIL, [first, Step(cancel.tool, cancel.params, found=CARD), retry],
                _paid_after_cancel, tmp_path / "found")  # fmt: skip
    text = made.built["instruction"]
    assert B not in text and A in text and CARD in text, text
    assert "what fixes it is not listed above" in text
    assert "Where the fix takes `reason`, give `no longer needed`." in text
    assert "the fix is left to the refusal" in made.note
    stored = embedded_task(made.code)["plan"]
    preds = made.built["answer"]["state"]["predicates"]
    assert stored[1]["found"] == CARD and underivable(stored, preds, text) == []
    # The tests still demand the cancelled order (the fix's end state).
    assert any(p.get("match") == {"_key": B} and p.get("value") == "cancelled" for p in preds)
    # Unmarked, the order is nowhere to find: derivability names it ...
    bare = [{k: v for k, v in s.items() if k != "found"} for s in stored]
    assert any(B in x for x in underivable(bare, preds, text))
    # ... and the task states the fix, as before.
    told = make(RETAIL, [first, cancel, retry], _paid_after_cancel, tmp_path / "told")
    assert B in told.built["instruction"] and "left to the refusal" not in told.note


def test_a_fix_another_record_also_accepts_is_not_found():
    """mia_jackson_2250's card paid two pending orders: cancelling either frees it, so the agent
    could not tell which one the task wants; olivia's card paid one (found). Run in the sandbox."""
    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.synthesis.domain.skills import cluster_skills
    from clawloop.synthesis.domain.synth import _found
    from clawloop.synthesis.domain.workspace import workspace_files

    domain = load_domain(RETAIL)
    files = workspace_files(domain, cluster_skills(domain))
    ambiguous = _recovery("gift_card_5715854", "#W1205816", "#W6236251")
    found = _found(domain, load_tables(domain), files, SandboxConfig(backend="auto"),
                   [_recovery(), ambiguous])  # fmt: skip
    assert found == [(_recovery(), CARD)]
