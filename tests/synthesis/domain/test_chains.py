"""Chained lookups (issue 24, item 4): grounding reaches a record the instruction never names by
following a reference field of one it names (a lot's `donor_member_no` leads to the member), the
instruction describes that record only through the chain, and the chained reads run first so the
reached value is carried across steps. Pure: grounding reads the state as data, nothing runs."""

from __future__ import annotations

import random

import pytest
from _sabotage import DOMAINS

from clawloop.synthesis.domain.derivable import underivable
from clawloop.synthesis.domain.ground import Index, chains, ground
from clawloop.synthesis.domain.instruct import write_instruction
from clawloop.synthesis.domain.load import load_domain
from clawloop.synthesis.domain.predicates import Change, goal
from clawloop.synthesis.domain.state import load_tables
from clawloop.synthesis.domain.taskgraph import Node, TaskGraph


@pytest.fixture(scope="module")
def seeds():
    domain = load_domain(DOMAINS["seed_library"])
    return domain, load_tables(domain)


def test_reference_fields_are_found_by_their_values(seeds):
    domain, tables = seeds
    links = Index.of(tables, domain.keys).links
    assert ("members", "member_no") in links[("lots", "donor_member_no")]
    assert ("varieties", "sku") in links[("lots", "sku")]
    assert ("lots", "status") not in links  # a status is no record's key


def test_a_chain_reads_a_named_record_then_the_one_its_reference_leads_to(seeds):
    domain, tables = seeds
    ix = Index.of(tables, domain.keys)
    training = chains(domain, domain.tool("record_training"), ix)
    assert any(
        (c.hop.name, c.link, c.read.name, c.field, c.param)
        == ("get_lot", "donor_member_no", "get_member", "member_no", "member_no")
        for c in training
    )


# Two goals: goal 0's lookup feeds its act, which runs last; goal 1 acts in between.
GRAPH = TaskGraph(
    nodes=(Node(0, "lookup", 0), Node(1, "act", 1), Node(2, "act", 0, inputs=(0,))),
    wanted=("long_range", "subgoals"),
)


def test_grounding_chains_a_lookup_and_the_instruction_names_only_the_chain_start(seeds):
    domain, tables = seeds
    variants, why = ground(domain, GRAPH, tables, random.Random(3), variants=10)
    chained = [v for v in variants if any(r.get("via") for r in v.references.values())]
    assert chained, why
    for g in chained:
        (j,) = [j for j, r in g.references.items() if r.get("via")]
        first, second = g.steps[j - 1], g.steps[j]
        assert j == 1 and g.references[0]["field"] == g.references[1]["via"]["field"]
        (key,) = [v for v in second.params.values() if isinstance(v, dict)]
        assert key == {"$ref": [0, g.references[0]["field"]]}  # read 2 takes read 1's reference
        assert first.params and all(not isinstance(v, dict) for v in first.params.values())
        consumer = [k for k, s in enumerate(g.steps) if any(
            v == {"$ref": [j, g.references[j]["field"]]} for v in s.params.values())]  # fmt: skip
        assert consumer and consumer[0] > j + 1  # carried past another step: long range
    g = chained[0]
    ref = g.references[1]
    reached = ref["key"]
    change = Change("changed", ref["table"], ref["key_field"], reached, {"status": "x"})
    text = write_instruction(goal("seed_library", "", g, [change], None))
    assert str(reached) not in text, text  # the member is never named: the chain leads there
    start = g.references[0]
    assert f"the `{start['field']}` recorded on `{start['table']}` `{start['key']}`" in text
    plan = [{"tool": s.tool, "params": s.params} for s in g.steps]
    preds = [{"kind": "rest", "table": ref["table"], "match": {ref["key_field"]: reached},
              "fields": [], "values": {}}]  # fmt: skip
    assert underivable(plan, preds, text) == []
    lost = underivable(plan, preds, text.replace(f"`{start['key']}`", "a lot"))
    assert lost and f"{ref['key_field']}={reached}" in lost[0], lost
