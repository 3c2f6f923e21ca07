"""Every value the reference writes is derivable (issue 24, item 3): stated in the instruction
(booleans included) or read from a record it names; a task whose instruction loses one is
dropped with the value named. On the built-in apiary_coop domain; no domain code runs (the
reference end state is written as data, as in test_end_state_complete.py)."""

from __future__ import annotations

import pytest
from _sabotage import make, row

from clawloop.synthesis.domain import synth
from clawloop.synthesis.domain.derivable import (
    Underivable,
    mentions,
    underivable,
    unstated_inputs,
)
from clawloop.synthesis.domain.ground import Step

INSPECTION = {
    "hive_code": "HV-0021", "date": "2025-05-13", "inspector": "Ada Finch", "brood_frames": 3,
    "disease": "varroa", "temperament": "calm", "queen_seen": False, "notes": "brood patchy",
}  # fmt: skip


def _inspected(t):
    """record_inspection(queen_seen=false), as the tool leaves it (the tool's default is true)."""
    t["inspections"].append(
        {"code": "IN-0135", "hive": "HV-0021", "date": "2025-05-13", "inspector": "Ada Finch",
         "brood_frames": 3, "disease": "varroa", "temperament": "calm", "queen_seen": False,
         "notes": "brood patchy"}
    )  # fmt: skip


@pytest.fixture(scope="module")
def inspection(tmp_path_factory):
    steps = [Step("record_inspection", INSPECTION)]
    return make("apiary_coop", steps, _inspected, tmp_path_factory.mktemp("inspection"))


def test_a_boolean_the_plan_passes_is_stated_not_left_to_the_tool_default(inspection):
    text = inspection.built["instruction"]
    assert "`queen_seen` = `false`" in text, text
    assert "queen_seen` as the domain's rules" not in text
    (created,) = [p for p in inspection.built["answer"]["state"]["predicates"]
                  if p["kind"] == "count" and p["table"] == "inspections"]  # fmt: skip
    assert created["match"]["queen_seen"] is False and False not in created["hidden"]


def _plan(made):
    return [{"tool": "record_inspection", "params": INSPECTION, "expect": "ok"}]


def test_the_instruction_as_written_passes_the_check(inspection):
    preds = inspection.built["answer"]["state"]["predicates"]
    assert underivable(_plan(inspection), preds, inspection.built["instruction"]) == []


def test_an_instruction_that_leaves_the_boolean_out_is_named(inspection):
    preds = inspection.built["answer"]["state"]["predicates"]
    text = inspection.built["instruction"].replace(", `queen_seen` = `false`", "")
    lost = underivable(_plan(inspection), preds, text)
    assert len(lost) == 1 and "inspections.queen_seen = false" in lost[0], lost
    assert "record_inspection --queen_seen" in lost[0]


def test_make_task_drops_a_task_whose_instruction_loses_a_value(tmp_path, monkeypatch):
    real = synth.write_instruction
    monkeypatch.setattr(
        synth, "write_instruction", lambda aim: real(aim).replace(", `queen_seen` = `false`", "")
    )
    with pytest.raises(Underivable, match="queen_seen = false"):
        make("apiary_coop", [Step("record_inspection", INSPECTION)], _inspected, tmp_path)


def test_an_llm_instruction_that_loses_a_value_falls_back_to_the_stated_one(tmp_path):
    class Chat:  # names every identifier, drops the boolean
        model = "stub"

        def __call__(self, messages):
            return ("Please log an inspection of HV-0021 by Ada Finch on 2025-05-13: 3 brood "
                    "frames, varroa, calm, notes 'brood patchy'.")  # fmt: skip

    steps = [Step("record_inspection", INSPECTION)]
    made = make("apiary_coop", steps, _inspected, tmp_path, chat=Chat())
    assert "lost inspections.queen_seen = false" in made.note, made.note
    assert "`queen_seen` = `false`" in made.built["instruction"]


def _ordered_harvest(t):
    """get_order(ORD-0006) then record_harvest(date = that order's date): a lookup's value."""
    day = row(t, "orders", code="ORD-0006")["date"]
    t["harvests"].append(
        {"batch": "HB-2025-041", "hive": "HV-0009", "date": day, "kg": 4.0, "variety": "heather",
         "status": "pending_lab", "moisture_pct": None, "lab_date": None, "kg_available": 4.0}
    )  # fmt: skip


HARVEST = [
    Step("get_order", {"order_code": "ORD-0006"}),
    Step("record_harvest", {"hive_code": "HV-0009", "date": {"$ref": [0, "date"]}, "kg": 4.0,
                            "variety": "heather"}),
]  # fmt: skip


def test_a_value_read_from_a_named_record_is_derivable_and_an_unnamed_one_is_not(tmp_path):
    refs = {0: {"table": "orders", "key_field": "code", "key": "ORD-0006", "field": "date",
                "value": "2025-05-13"}}  # the lookup's record, as grounding records it  # fmt: skip
    made = make("apiary_coop", HARVEST, _ordered_harvest, tmp_path, references=refs)
    text = made.built["instruction"]
    assert "the `date` recorded on `orders` `ORD-0006`" in text, text
    plan = [{"tool": s.tool, "params": s.params, "expect": "ok"} for s in HARVEST]
    preds = made.built["answer"]["state"]["predicates"]
    assert underivable(plan, preds, text) == []
    lost = underivable(plan, preds, text.replace("`ORD-0006`", "an order"))
    assert lost and "harvests.date" in lost[0] and "record_harvest --date" in lost[0], lost


def test_values_the_tools_derive_and_arguments_that_do_not_land_are_not_asked_for():
    """A balance the rules compute, and a lift_quarantine inspection code that no field holds
    (any clean inspection does), need nothing from the instruction."""
    plan = [
        {"tool": "lift_quarantine", "params": {"hive_code": "HV-0031", "inspection_code": "IN-0120"}},
        {"tool": "record_payment", "params": {"buyer_email": "b@x.example", "amount": 5.0,
                                              "date": "2025-07-03"}},
    ]  # fmt: skip
    preds = [
        {"kind": "field", "table": "hives", "match": {"code": "HV-0031"}, "field": "status",
         "value": "active"},
        {"kind": "field", "table": "buyers", "match": {"email": "b@x.example"}, "field": "balance",
         "value": 9.5},
        {"kind": "count", "table": "payments", "count": 1, "fields": {},
         "match": {"buyer": "b@x.example", "amount": 5.0, "date": "2025-07-03"}},
    ]  # fmt: skip
    text = "Hive `HV-0031` active again; a payment of `5.0` by b@x.example on 2025-07-03."
    assert underivable(plan, preds, text) == []
    # the fix's inspection is the agent's to find: a warning, not a drop
    assert unstated_inputs(plan, preds, text) == ["lift_quarantine --inspection_code IN-0120"]
    assert underivable(plan, preds, text.replace("2025-07-03", "early July"))


def test_mentions_reads_values_as_written_and_not_list_numbers():
    assert mentions("`queen_seen` = `false`", False) and not mentions("queen seen", False)
    assert mentions("pay 74.25 now", 74.25) and mentions("7 kg", 7.0)
    assert not mentions("3. a new record", 3) and not mentions("HV-0031", 31)
    assert mentions("variety Clover", "clover") and not mentions("cloverleaf", "clover")


@pytest.mark.slow
def test_apiary_synthesis_states_every_boolean_its_plans_pass():
    """The built-in apiary domain, end to end (seed 1 grounds record_inspection with
    queen_seen=false, which the old writer left to the tool's default of true): every kept task
    states each boolean its plan passes, and every drop for derivability names the value."""
    import ast
    import json
    import re

    from _sabotage import DOMAINS

    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.synthesis.domain.load import load_domain
    from clawloop.synthesis.domain.synth import synthesize_domain

    made = synthesize_domain(DOMAINS["apiary_coop"], 4, 1, SandboxConfig())
    writes = {t.name for t in load_domain(DOMAINS["apiary_coop"]).tools if t.writes}
    assert made.candidates, [g["reason"] for g in made.graphs]
    booleans = 0
    for cand in made.candidates:
        blob = re.search(r"TASK = json.loads\((.*)\)\n", cand["generator_code"]).group(1)
        task = json.loads(ast.literal_eval(blob))
        for step in (s for s in task["plan"] if s["tool"] in writes):
            for name, v in step["params"].items():
                if isinstance(v, bool):
                    booleans += 1
                    assert f"`{name}` = `{json.dumps(v)}`" in task["instruction"], name
        assert underivable(task["plan"], task["predicates"], task["instruction"]) == []
    assert booleans  # the queen_seen task is among them
    for g in made.dropped:
        if g["reason"].startswith("derivability"):
            assert " = " in g["reason"] and "--" in g["reason"], g["reason"]


# Issue 24, item 4: a chain. The instruction names order ORD-0004; its `buyer` leads to the buyer
# (never named: the agent reads the order, then that buyer); the payment is that buyer's.
HARTLEY = "orders.hartley-farm@shop.example"
CHAINED = [
    Step("get_order", {"order_code": "ORD-0004"}),
    Step("get_buyer", {"buyer_email": {"$ref": [0, "buyer"]}}),
    Step("record_payment", {"buyer_email": {"$ref": [1, "email"]}, "amount": 50.0,
                            "date": "2025-07-03"}),
]  # fmt: skip
CHAIN_REFS = {
    0: {"table": "orders", "key_field": "code", "key": "ORD-0004", "field": "buyer",
        "value": HARTLEY},
    1: {"table": "buyers", "key_field": "email", "key": HARTLEY, "field": "email",
        "value": HARTLEY,
        "via": {"table": "orders", "key_field": "code", "key": "ORD-0004", "field": "buyer"}},
}  # fmt: skip


def _paid(t):
    row(t, "buyers", email=HARTLEY)["balance"] = 166.0
    t["payments"].append({"code": "PY-0010", "buyer": HARTLEY, "amount": 50.0,
                          "date": "2025-07-03"})  # fmt: skip


def test_a_value_read_from_a_record_reached_through_a_chain_is_derivable_and_never_named(tmp_path):
    made = make("apiary_coop", CHAINED, _paid, tmp_path, references=CHAIN_REFS)
    text = made.built["instruction"]
    assert HARTLEY not in text, text  # the reached record is not named: the chain leads there
    assert "`buyer` = the `buyer` recorded on `orders` `ORD-0004`" in text, text
    assert (
        "the `buyers` record whose `email` is the `buyer` recorded on `orders` `ORD-0004`" in text
    )
    plan = [{"tool": s.tool, "params": s.params, "expect": "ok"} for s in CHAINED]
    preds = made.built["answer"]["state"]["predicates"]
    assert underivable(plan, preds, text) == []
    # The chain's start unnamed: no chain reaches the buyer, and the value is named.
    lost = underivable(plan, preds, text.replace("`ORD-0004`", "an order"))
    assert any(x.startswith(f"payments.buyer = {HARTLEY} (read by step") for x in lost), lost
    assert any("the buyers record email=" + HARTLEY in x for x in lost), lost


def test_identified_follows_refs_from_a_stated_key_and_nothing_else():
    from clawloop.synthesis.domain.derivable import identified, plan_args

    plan = [
        {"tool": "get_order", "params": {"order_code": "ORD-0004"}},
        {"tool": "get_buyer", "params": {"buyer_email": {"$ref": [0, "buyer"]}}},
        {"tool": "get_order", "params": {"order_code": "ORD-0009"}},
        {"tool": "get_buyer", "params": {"buyer_email": {"$ref": [2, "buyer"]}}},
    ]
    assert identified(plan_args(plan), "Settle what order ORD-0004's buyer owes.") == {0, 1}
    assert identified(plan_args(plan), "Orders ORD-0004 and ORD-0009.") == {0, 1, 2, 3}


def test_the_verify_check_follows_the_chain_in_a_stored_task(tmp_path, monkeypatch):
    import _sabotage

    from clawloop.generators.verify.derivable import derivable_verdict

    codes = []
    real = _sabotage.make_task
    monkeypatch.setattr(_sabotage, "make_task",
                        lambda *a, **k: codes.append(real(*a, **k)[0]) or (codes[-1], ""))  # fmt: skip
    made = make("apiary_coop", CHAINED, _paid, tmp_path, references=CHAIN_REFS)
    answer, text = made.built["answer"], made.built["instruction"]
    assert HARTLEY not in text, text
    ok, reason = derivable_verdict(codes[0], answer, text)
    assert ok, reason
    ok, reason = derivable_verdict(codes[0], answer, text.replace("`ORD-0004`", "an order"))
    assert not ok and f"payments.buyer = {HARTLEY}" in reason, reason


def test_a_record_keyed_by_its_json_object_key_is_reached_by_the_table_id_parameter():
    """A JSON table without a declared key (tau-bench's users) is matched by `_key`: the
    certificate's user, reached from a named reservation, is passed as `user_id`."""
    plan = [
        {"tool": "get_reservation_details", "params": {"reservation_id": "TRS3YM"}},
        {"tool": "get_user_details", "params": {"user_id": {"$ref": [0, "user_id"]}}},
        {"tool": "send_certificate", "params": {"user_id": {"$ref": [1, "user_id"]},
                                                "amount": 100}},
    ]  # fmt: skip
    preds = [{"kind": "rest", "table": "users", "match": {"_key": "mia_li_1001"},
              "fields": ["payment_methods"], "values": {}}]  # fmt: skip
    text = "Send `100` to the `users` record keyed by the `user_id` recorded on `TRS3YM`."
    assert underivable(plan, preds, text) == []
    lost = underivable(plan, preds, text.replace("TRS3YM", "a reservation"))
    assert lost == [
        "the users record _key=mia_li_1001 is neither named in the instruction nor reached "
        "from a record it names"
    ]
