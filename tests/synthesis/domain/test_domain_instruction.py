"""The instruction behind the barrier: the deterministic writer and the LLM rewrite (over real
HTTP, a scripted server) see only the Goal; a rewrite that names a tool or drops an entity is
refused and the deterministic text kept."""

from __future__ import annotations

from doubles.fake_openai import FakeOpenAI

from clawloop.harness.llm import LLMEndpoint, endpoint_chat
from clawloop.synthesis.domain.instruct import llm_instruction, write_instruction
from clawloop.synthesis.domain.predicates import Goal

GOAL = Goal(
    domain="apiary_coop",
    description="A beekeeping cooperative.",
    changes=[
        {"kind": "changed", "table": "hives", "key_field": "code", "key": "HV-0007",
         "stated": {"status": "quarantined"}, "referenced": {}, "derived": ["quarantined_since"]},
    ],
    condition={"table": "buyers", "key_field": "email", "key": "a@x.example",
               "field": "tier", "value": "member"},
    then_changes=[{"kind": "created", "table": "orders", "stated": {"kg": 2.0},
                   "referenced": {}, "derived": ["total"]}],
)  # fmt: skip


def test_the_deterministic_writer_states_outcomes_not_derived_values():
    text = write_instruction(GOAL)
    assert "HV-0007" in text and "`quarantined`" in text and "a@x.example" in text
    assert "`quarantined_since`" in text and "`total`" in text  # named, not valued
    assert "Otherwise" in text


def _rewrite(reply: str) -> tuple[str, str]:
    with FakeOpenAI(mode="routed", router=lambda messages: reply) as fake:
        chat = endpoint_chat(LLMEndpoint(fake.base_url, "fake"))
        return llm_instruction(GOAL, chat, ["quarantine_hive", "place_order"])


def test_an_llm_rewrite_that_keeps_every_entity_is_used():
    reply = "Please quarantine hive HV-0007. If buyer a@x.example is a member, order 2 kg for them."
    text, note = _rewrite(reply)
    assert note == "llm instruction" and text.startswith(reply)


def test_an_llm_rewrite_naming_a_tool_or_dropping_an_entity_is_refused():
    text, note = _rewrite("Run quarantine_hive on HV-0007, then place_order for a@x.example.")
    assert "rejected" in note and text == write_instruction(GOAL)
    text, note = _rewrite("Quarantine the hive and order some honey.")
    assert "dropped identifiers" in note and text == write_instruction(GOAL)


def test_a_nested_key_passed_as_a_literal_is_stated_once_not_also_as_a_lookup():
    """tau_retail, seed 1: one step set a user's address with `country` = "USA" and another read
    `country` from a record; the writer said both for the same key of the same address."""
    from clawloop.synthesis.domain.instruct import change_line
    from clawloop.synthesis.domain.predicates import Change, _describe

    ref = {"table": "users", "key_field": "_key", "key": "isabella", "field": "address.country"}
    args = [
        ("address1", "615 Cedar Avenue", None),
        ("country", "USA", {**ref, "value": "USA"}),  # another step read it
        ("country", "USA", None),  # this step passed it
    ]
    new = {"address": {"address1": "615 Cedar Avenue", "country": "USA"}}
    c = Change(kind="changed", table="users", key_field="_key", key="mia", new=new)
    line = change_line(_describe(c, [], [{**ref, "value": "USA"}], args))
    assert line.count("`country` =") == 1 and "`country` = `USA`" in line, line
    assert "recorded on" not in line, line
    # a key only read from a record keeps its lookup
    only_ref = [("address1", "615 Cedar Avenue", None), ("country", "USA", {**ref, "value": "USA"})]
    line = change_line(_describe(c, [], [{**ref, "value": "USA"}], only_ref))
    assert "`country` = the `address.country` recorded on `users` `isabella`" in line, line
