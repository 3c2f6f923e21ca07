"""tau-bench's retail and airline domains (tests/fixtures/domains/tau_*, MIT, rebuilt by
benchmarks/tau_domains.py): third-party executable domains no clawloop code was written against,
read and grounded as published."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawloop.synthesis.domain.load import load_domain

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "domains"
RETAIL, AIRLINE = FIXTURES / "tau_retail", FIXTURES / "tau_airline"


def test_the_tau_fixtures_load_as_published_and_credit_their_source():
    retail, airline = load_domain(RETAIL), load_domain(AIRLINE)
    assert retail.tables == ("orders", "products", "users")
    assert airline.tables == ("flights", "reservations", "users")
    writes = {t.name for t in retail.tools if t.writes}
    assert {"cancel_pending_order", "modify_pending_order_payment", "modify_user_address"} <= writes
    assert {t.name for t in airline.tools if t.writes} >= {"update_reservation_baggages"}
    for d in (RETAIL, AIRLINE):
        notice = (d / "NOTICE").read_text()
        assert "MIT" in notice and "Copyright (c) 2024 Sierra" in notice
        assert "tau_bench" not in "".join(p.read_text() for p in (d / "tools").glob("*.py"))


def _retail():
    from clawloop.synthesis.domain.ground import Index
    from clawloop.synthesis.domain.state import load_tables

    domain = load_domain(RETAIL)
    tables = load_tables(domain)
    return domain, tables, Index.of(tables, domain.keys)


def test_an_object_keyed_table_is_picked_by_its_id_parameter():
    from clawloop.synthesis.domain.ground import key_params

    domain, _, ix = _retail()
    picks = {p.name: (t, f) for p, t, f in key_params(domain.tool("modify_user_address"), ix)}
    assert picks == {"user_id": ("users", "_key")}
    # A table with a field of that name keeps the field, not the object key.
    picks = {p.name: (t, f) for p, t, f in key_params(domain.tool("get_order_details"), ix)}
    assert picks == {"order_id": ("orders", "order_id")}


def test_nested_values_feed_parameters_along_shared_paths_never_through_a_records_own_ids():
    from clawloop.synthesis.domain import reach
    from clawloop.synthesis.domain.ground import names_field, producers

    domain, _, ix = _retail()
    paths = ix.nested("orders")
    assert "address.city" in paths and "payment_history.0.payment_method_id" in paths
    assert not any(p.startswith("payment_methods.") for p in ix.nested("users"))  # own ids
    assert reach.feeds("payment_method_id", "payment_methods.gift_card_1.id", names_field)
    assert reach.feeds("item_ids", "items.0.item_id", names_field)
    assert not reach.feeds("zip", "address.city", names_field)
    fed = {(r.name, path, param) for r, _, path, param in
           producers(domain, domain.tool("modify_pending_order_payment"), ix)}  # fmt: skip
    assert ("get_order_details", "payment_history.0.payment_method_id", "payment_method_id") in fed
    # Every address line of a pending order's new address can come from one user's record.
    fed = {param for r, t, path, param in
           producers(domain, domain.tool("modify_pending_order_address"), ix)
           if r.name == "get_user_details"}  # fmt: skip
    assert fed == {"address1", "address2", "city", "state", "country", "zip"}


def test_a_call_takes_what_its_record_and_its_neighbours_hold():
    import random

    from clawloop.synthesis.domain.ground import fill

    domain, tables, ix = _retail()
    order = next(o for o in tables["orders"] if o["status"] == "delivered")
    user = next(u for u in tables["users"] if u["_key"] == order["user_id"])
    assert any(r is user for _, r in ix.near("orders", order))
    for seed in range(5):
        params = fill(domain.tool("return_delivered_order_items"), ix, random.Random(seed),
                      entity=("orders", order), wide=True)  # fmt: skip
        assert params is not None and params["order_id"] == order["order_id"]
        assert params["item_ids"][0] in {i["item_id"] for i in order["items"]}  # its own items
        held = {p["payment_method_id"] for p in order["payment_history"]} | set(
            user["payment_methods"]
        )
        assert params["payment_method_id"] in held  # the order's or its user's methods


def test_a_refusal_is_fixed_on_a_record_that_holds_what_the_call_passed():
    """A gift card too low to pay an order: cancelling another pending order the card paid
    for refunds it. The fix sits on a record the call never names, found because it holds the
    card's id; a fix is tried there before any run decides."""
    import random

    from clawloop.synthesis.domain.ground import Step, recovery_candidates

    domain, tables, ix = _retail()
    orders = {o["order_id"]: o for o in tables["orders"]}
    user = next(u for u in tables["users"] if u["_key"] == "olivia_ito_3591")
    card = next(k for k, m in user["payment_methods"].items() if m["source"] == "gift_card")
    paid = [o for o in user["orders"] if orders[o]["status"] == "pending"
            and orders[o]["payment_history"][0]["payment_method_id"] == card]  # fmt: skip
    other = next(o for o in user["orders"] if orders[o]["status"] == "pending" and o not in paid)
    call = Step("modify_pending_order_payment", {"order_id": other, "payment_method_id": card},
                "error")  # fmt: skip
    error = "Error: insufficient gift card balance to pay for the order"
    tried = recovery_candidates(domain, tables, [(call, error)], random.Random(0), wide=True)
    fixes = {(f.tool, f.params.get("order_id")) for _, f, _ in tried}
    assert any(("cancel_pending_order", o) in fixes for o in paid)
    assert all(first.refusal == error and retry == Step(call.tool, call.params)
               for first, _, retry in tried)  # fmt: skip


def test_a_lookup_result_is_read_along_a_dotted_path_at_run_time():
    from clawloop.synthesis.domain import runtime

    results = [{"address": {"city": "Austin"}, "payment_history": [{"payment_method_id": "pm_1"}]}]
    assert runtime.resolve({"$ref": [0, "address.city"]}, results) == "Austin"
    got = runtime.resolve({"$ref": [0, "payment_history.0.payment_method_id"]}, results)
    assert got == "pm_1"
    with pytest.raises(runtime.ToolFailed, match="no field 'address.zip'"):
        runtime.resolve({"$ref": [0, "address.zip"]}, results)


def test_shapes_a_domain_cannot_carry_are_relaxed_with_the_reason():
    import random

    from clawloop.synthesis.domain.ground import unsupported
    from clawloop.synthesis.domain.taskgraph import Knobs, sample_task_graph

    domain, tables, _ = _retail()
    why = unsupported(domain, tables, recoveries=[])
    assert set(why) == {"error_recovery"} and "fix" in why["error_recovery"]
    knobs = Knobs(exclude=frozenset(why))
    rng = random.Random(0)
    drawn = [sample_task_graph(rng, knobs) for _ in range(40)]
    assert all("error_recovery" not in g.wanted for g in drawn)
    assert all(n.kind != "recover" for g in drawn for n in g.nodes)
    everything = Knobs(
        exclude=frozenset({"long_range", "convergence", "branching", "error_recovery"})
    )
    assert sample_task_graph(rng, everything).wanted == ("subgoals",)


def test_of_a_nested_derived_value_only_what_is_new_and_not_passed_is_hidden():
    """A payment change appends to an order's history: the ids and the amount it already held
    and the method the task passes are no answer (an instruction may name them); the new
    entry's type, which the tool derives, is."""
    from clawloop.synthesis.domain.predicates import diff, predicates

    paid = {"type": "payment", "amount": 10.5, "method": "card_1"}
    initial = {"orders": [{"order_id": "W1", "history": [paid]}]}
    after = [paid, {"type": "payment", "amount": 10.5, "method": "gift_2"},
             {"type": "refund", "amount": 10.5, "method": "card_1"}]  # fmt: skip
    final = {"orders": [{"order_id": "W1", "history": after}]}
    keys = {"orders": "order_id"}
    args = [("order_id", "W1", None), ("payment_method_id", "gift_2", None)]
    preds = predicates(initial, final, diff(initial, final, keys), ["W1", "gift_2"], keys, args)
    (history,) = [p for p in preds if p.get("field") == "history"]
    assert history["hidden"] == [{"type": "refund"}]


def test_the_plain_grounding_never_reads_nested_values_the_wide_one_does():
    import random

    from clawloop.synthesis.domain.ground import fill

    domain, tables, ix = _retail()
    order = next(o for o in tables["orders"] if o["status"] == "delivered")
    tool = domain.tool("return_delivered_order_items")
    assert fill(tool, ix, random.Random(0), entity=("orders", order)) is None  # as before
    assert fill(tool, ix, random.Random(0), entity=("orders", order), wide=True) is not None


def _graph(rng_seed: int, wanted: str, domain, tables):
    """The first graph a seeded generator draws that wants `wanted`."""
    import random

    from clawloop.synthesis.domain.taskgraph import Knobs, sample_task_graph

    rng = random.Random(rng_seed)
    while True:
        g = sample_task_graph(rng, Knobs(error_recovery=False))
        if wanted in g.wanted:
            return g


def test_a_graph_the_plain_grounding_cannot_carry_is_grounded_the_wide_way_on_its_own_draws():
    """Convergence on retail: no write tool fits two plain lookups, so every plain try fails;
    the wide grounding (nested values, neighbouring records) carries it, from a generator of
    its own: the shared generator ends where the plain grounding alone leaves it."""
    import random

    from clawloop.synthesis.domain.ground import Wide, ground

    domain, tables, _ = _retail()
    graph = _graph(0, "convergence", domain, tables)
    plain_rng, rng = random.Random(5), random.Random(5)
    plain, why = ground(domain, graph, tables, plain_rng)
    assert not plain and any("no write tool fits" in w for w in why)
    wide, _ = ground(domain, graph, tables, rng, wide=Wide(random.Random(9)))
    assert wide and rng.getstate() == plain_rng.getstate()
    acts = [s for s in wide[0].steps if domain.tool(s.tool).writes]
    refs = [v for s in acts for v in s.params.values() if isinstance(v, dict) and "$ref" in v]
    assert len(refs) >= 2  # the act takes values from two reads: it converges


def test_a_domain_the_plain_grounding_serves_draws_what_it_drew_without_the_wide_one():
    """The built-in domains: every graph the plain grounding carries is grounded exactly as
    before (same variants, same generator state after), wide grounding or not."""
    import random

    from clawloop.synthesis.domain.ground import Wide, ground
    from clawloop.synthesis.domain.state import load_tables
    from clawloop.synthesis.domain.taskgraph import Knobs, sample_task_graph

    root = Path(__file__).resolve().parents[3] / "synthesis" / "domain" / "builtin"
    for name in ("apiary_coop", "seed_library"):
        domain = load_domain(root / name)
        tables = load_tables(domain)
        a, b = random.Random(f"{name}:1"), random.Random(f"{name}:1")
        for _ in range(12):
            graph = sample_task_graph(a, Knobs(error_recovery=False))
            assert sample_task_graph(b, Knobs(error_recovery=False)) == graph
            plain, _ = ground(domain, graph, tables, a, variants=3)
            both, _ = ground(domain, graph, tables, b, variants=3, wide=Wide(random.Random(0)))
            if plain:
                assert [v.steps for v in both] == [v.steps for v in plain]
            assert a.getstate() == b.getstate()


def test_the_admission_probe_tries_every_write_tool_a_wide_call_can_fill():
    """Third-party write tools take values nested in their records (a payment method id in an
    order's user's `payment_methods`): the probe fills them the wide way, so it meets the
    refusals of every write tool, not only of those whose parameters are top-level fields."""
    import random

    from clawloop.synthesis.domain.ground import probe_calls

    domain, tables, _ = _retail()
    tried = {c.tool for c, _ in probe_calls(domain, tables, random.Random(0))}
    assert {"modify_pending_order_payment", "return_delivered_order_items",
            "modify_pending_order_address", "cancel_pending_order"} <= tried  # fmt: skip


def test_the_shape_a_plan_can_carry_is_read_off_its_steps():
    """Long range: a read reached through an earlier result feeds a step two or more later;
    convergence: a write takes values from two earlier steps. Adjacent or named reads carry
    neither."""
    from clawloop.synthesis.domain.ground import Grounded, Step
    from clawloop.synthesis.domain.structure import planned
    from clawloop.synthesis.domain.taskgraph import Node, TaskGraph

    graph = TaskGraph(nodes=(Node(0, "lookup", 0), Node(1, "lookup", 1), Node(2, "act", 1),
                             Node(3, "act", 0, inputs=(0,))))  # fmt: skip
    hop = Step("get_order_details", {"order_id": "#W1"}, node=0)
    reached = Step("get_user_details", {"user_id": {"$ref": [0, "user_id"]}}, node=0)
    named = Step("get_user_details", {"user_id": "u_2"}, node=1)
    act = Step("modify_user_address", {"user_id": "u_3", "city": {"$ref": [2, "address.city"]}}, node=2)  # fmt: skip
    late = Step("modify_user_address", {"user_id": "u_4", "city": {"$ref": [1, "address.city"]}}, node=3)  # fmt: skip
    assert planned(Grounded(graph=graph, steps=[hop, reached, named, act, late])) == {"long_range"}
    assert planned(Grounded(graph=graph, steps=[hop, reached, late])) == set()  # adjacent
    both = Step("modify_user_address", {"user_id": {"$ref": [0, "user_id"]},
                                        "city": {"$ref": [1, "address.city"]}}, node=3)  # fmt: skip
    assert planned(Grounded(graph=graph, steps=[hop, reached, both])) == {"convergence"}


def test_plain_variants_the_caller_cannot_use_come_first_and_the_wide_ones_follow():
    """A graph whose plain variants all look doomed keeps them, first (one that runs after all
    makes the task it always made), then the wide ones; the shared generator ends where the
    plain grounding alone leaves it."""
    import random

    from clawloop.synthesis.domain.ground import Wide, ground
    from clawloop.synthesis.domain.state import load_tables

    root = Path(__file__).resolve().parents[3] / "synthesis" / "domain" / "builtin"
    domain = load_domain(root / "apiary_coop")
    tables = load_tables(domain)
    graph = _graph(3, "long_range", domain, tables)
    plain, _ = ground(domain, graph, tables, random.Random(5), variants=3)
    assert plain
    rng = random.Random(5)
    both, _ = ground(domain, graph, tables, rng, variants=3, wide=Wide(random.Random(9)),
                     usable=lambda v: False)  # fmt: skip
    assert [v.steps for v in both[: len(plain)]] == [v.steps for v in plain]
    assert len(both) > len(plain)
    again = random.Random(5)
    ground(domain, graph, tables, again, variants=3)
    assert rng.getstate() == again.getstate()


def test_a_list_of_objects_takes_records_of_the_shape_its_schema_declares():
    """A booking's `payment_methods` is a list of {payment_id, amount}: the user's own
    `payment_methods` (an object keyed by id) is no such list; a reservation's
    `payment_history` is. Every list-of-objects parameter gets objects with only the declared
    fields, never a scalar or an object; the plain grounding, which reads no nested values,
    finds none."""
    import random

    from clawloop.synthesis.domain.ground import Index, fill, item_fields
    from clawloop.synthesis.domain.state import load_tables

    domain = load_domain(AIRLINE)
    tables = load_tables(domain)
    ix = Index.of(tables, domain.keys)
    book = domain.tool("book_reservation")
    assert item_fields(book, "payment_methods") == (("payment_id", "amount"),) * 2
    assert item_fields(book, "user_id") == ((), ())
    for seed in range(4):
        user = random.Random(seed).choice(tables["users"])
        params = fill(book, ix, random.Random(seed), entity=("users", user), wide=True)
        assert params is not None
        for name in ("flights", "passengers", "payment_methods"):
            fields, required = item_fields(book, name)
            assert isinstance(params[name], list) and params[name]
            assert all(set(required) <= set(x) <= set(fields) or name == "flights"
                       for x in params[name])  # fmt: skip
        assert all(p["payment_id"] in user["payment_methods"] for p in params["payment_methods"])
        assert fill(book, ix, random.Random(seed), entity=("users", user)) is None


def test_a_refusal_that_states_the_figure_to_pay_teaches_the_call():
    """`total price is 1234, but paid 100`: the booking again, paying 1234 with its first
    method; a figure the call already passed (the 100 it paid) teaches nothing."""
    from clawloop.synthesis.domain.ground import Step, corrected

    book = load_domain(AIRLINE).tool("book_reservation")
    pay = [
        {"payment_id": "credit_card_1", "amount": 60},
        {"payment_id": "gift_card_2", "amount": 40},
    ]
    call = Step("book_reservation", {"user_id": "u", "payment_methods": pay, "nonfree_baggages": 0})
    error = "Error: payment amount does not add up, total price is 1234, but paid 100"
    (again,) = corrected(book, call, error)
    assert again.params["payment_methods"] == [{"payment_id": "credit_card_1", "amount": 1234.0}]
    assert {k: v for k, v in again.params.items() if k != "payment_methods"} == {
        "user_id": "u", "nonfree_baggages": 0}  # fmt: skip
    assert corrected(book, call, "Error: not enough balance in payment method gift_card_2") == []
