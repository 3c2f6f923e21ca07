"""End-state tests are complete (issue 24, item 2): a sabotaged end state that holds every change
the task asks for plus collateral damage is not rewarded 1.0, and another correct path is.

On the built-in apiary_coop (json) and seed_library (sqlite) domains and a third-party-style
retail domain (tests/fixtures/domains/retail_cls: users, orders, products as objects keyed by id,
tools as classes). Each task is made by synth.make_task from a reference end state written as
data (no domain code runs); each end state is written as a workspace and graded by the grader.
Before this change every sabotage below was rewarded 1.0.
"""

from __future__ import annotations

import re

import pytest
from _sabotage import end_state, make, reward, row

from clawloop.synthesis.domain.ground import Step

BUYER, BATCH = "orders.the-honey@deli.example", "HB-2025-003"  # balance 0, wildflower 13.5/kg


def _apiary_reference(t, order="ORD-0022", payment="PY-0010"):
    """place_order(BUYER, BATCH, 2 kg) then record_payment(BUYER, 12.15), as the tools leave it."""
    t["orders"].append(
        {"_key": order, "code": order, "buyer": BUYER, "batch": BATCH, "kg": 2.0,
         "price_per_kg": 13.5, "total": 27.0, "date": "2025-07-08", "status": "open",
         "cancel_reason": None}
    )  # fmt: skip
    row(t, "harvests", batch=BATCH)["kg_available"] = 8.7
    t["payments"].append({"code": payment, "buyer": BUYER, "amount": 12.15, "date": "2025-07-09"})
    row(t, "buyers", email=BUYER)["balance"] = 14.85


APIARY_STEPS = [
    Step(
        "place_order", {"buyer_email": BUYER, "batch_code": BATCH, "kg": 2.0, "date": "2025-07-08"}
    ),
    Step("record_payment", {"buyer_email": BUYER, "amount": 12.15, "date": "2025-07-09"}),
]


@pytest.fixture(scope="module")
def apiary(tmp_path_factory):
    return make("apiary_coop", APIARY_STEPS, _apiary_reference, tmp_path_factory.mktemp("apiary"))


def _sabotaged(made, edit):
    import copy

    t = copy.deepcopy(made.final)
    edit(t)
    return end_state(made, t)


def test_the_reference_end_state_of_apiary_passes(apiary, tmp_path):
    got, failed = reward(apiary, end_state(apiary), tmp_path)
    assert got == 1.0, failed


def test_another_path_with_other_assigned_ids_passes(apiary, tmp_path):
    """Another run assigns other codes (ORD-0040, PY-0031): tests never locate a new record by
    the id a tool gave it, and the ids stay free."""
    import copy

    from _sabotage import records

    t = copy.deepcopy(records(apiary.domain, apiary.files, tmp_path / "start"))
    _apiary_reference(t, order="ORD-0040", payment="PY-0031")
    t["orders"].reverse()  # and the records in another order
    got, failed = reward(apiary, end_state(apiary, t), tmp_path / "ws")
    assert got == 1.0, failed


APIARY_SABOTAGE = {
    "touched buyer's credit_limit 1e9": lambda t: row(t, "buyers", email=BUYER).update(
        credit_limit=1e9
    ),
    "touched buyer's name changed": lambda t: row(t, "buyers", email=BUYER).update(name="Mallory"),
    "touched batch's status rejected": lambda t: row(t, "harvests", batch=BATCH).update(
        status="rejected"
    ),
    "touched batch gains a field": lambda t: row(t, "harvests", batch=BATCH).update(note="x"),
    "payment amount as the string 12.15": lambda t: row(t, "payments", code="PY-0010").update(
        amount="12.15"
    ),
    "new order with an extra field": lambda t: row(t, "orders", code="ORD-0022").update(
        discount=0.5
    ),
    "new order missing a field": lambda t: row(t, "orders", code="ORD-0022").pop("cancel_reason"),
    "new order's id a number": lambda t: row(t, "orders", code="ORD-0022").update(code=22),
}


@pytest.mark.parametrize("name", sorted(APIARY_SABOTAGE))
def test_apiary_collateral_damage_is_not_rewarded(apiary, tmp_path, name):
    got, failed = reward(apiary, _sabotaged(apiary, APIARY_SABOTAGE[name]), tmp_path)
    assert got < 1.0 and failed, name


def test_an_extra_table_is_not_rewarded(apiary, tmp_path):
    junk = {"state/zz_junk.json": '{"x": {"note": "left behind"}}'}
    got, failed = reward(apiary, end_state(apiary), tmp_path, extra=junk)
    assert got < 1.0 and any("zz_junk" in f for f in failed), failed


def test_a_missing_table_is_not_rewarded(apiary, tmp_path):
    files = {r: t for r, t in end_state(apiary).items() if not r.endswith("apiaries.json")}
    got, failed = reward(apiary, files, tmp_path)
    assert got < 1.0 and any("apiaries" in f for f in failed), failed


# ---------------------------------------------------------------- retail (third-party style)

RETAIL_STEPS = [
    Step("cancel_pending_order", {"order_id": "#W0001", "reason": "no longer needed"}),
    Step("modify_user_address", {"user_id": "ben_ortiz_202", "address1": "1 New St",
                                 "city": "Denver", "zip": "80203"}),
]  # fmt: skip


def _retail_reference(t):
    order = row(t, "orders", _key="#W0001")
    order["status"], order["cancel_reason"] = "cancelled", "no longer needed"
    order["payment_history"].append(
        {"transaction_type": "refund", "amount": 12.15, "payment_method_id": "gift_card_1001"}
    )
    row(t, "users", _key="ava_kim_101")["payment_methods"]["gift_card_1001"]["balance"] = 52.15
    row(t, "users", _key="ben_ortiz_202")["address"] = {
        "address1": "1 New St", "city": "Denver", "zip": "80203"
    }  # fmt: skip


@pytest.fixture(scope="module")
def retail(tmp_path_factory):
    return make("retail", RETAIL_STEPS, _retail_reference, tmp_path_factory.mktemp("retail"))


def _move_order(t):
    """The cancelled order moved to another user (and off its user's list of orders)."""
    row(t, "orders", _key="#W0001")["user_id"] = "cara_lee_303"
    row(t, "users", _key="ava_kim_101")["orders"].remove("#W0001")
    row(t, "users", _key="cara_lee_303")["orders"].append("#W0001")


RETAIL_SABOTAGE = {
    "cancelled order moved to another user": _move_order,
    "cancelled order moved, its user's list kept": lambda t: row(t, "orders", _key="#W0001").update(
        user_id="cara_lee_303"
    ),
    "cancelled order's items wiped": lambda t: row(t, "orders", _key="#W0001").update(items=[]),
    "refund amount as the string 12.15": lambda t: row(t, "orders", _key="#W0001")[
        "payment_history"
    ][-1].update(amount="12.15"),
    "touched user's name changed": lambda t: row(t, "users", _key="ava_kim_101").update(
        name={"first_name": "Eve", "last_name": "Kim"}
    ),
}


def test_the_reference_end_state_of_retail_passes_in_either_order_of_calls(retail, tmp_path):
    """The two calls commute: the reference and the other order leave one end state."""
    got, failed = reward(retail, end_state(retail), tmp_path)
    assert got == 1.0, failed


@pytest.mark.parametrize("name", sorted(RETAIL_SABOTAGE))
def test_retail_collateral_damage_is_not_rewarded(retail, tmp_path, name):
    got, failed = reward(retail, _sabotaged(retail, RETAIL_SABOTAGE[name]), tmp_path)
    assert got < 1.0 and failed, name


def test_retail_extra_table_is_not_rewarded(retail, tmp_path):
    got, failed = reward(retail, end_state(retail), tmp_path, extra={"state/zz_junk.json": "[]"})
    assert got < 1.0 and failed


# ---------------------------------------------------------------- seed_library (sqlite)

LIBRARY_REFERENCE = """
UPDATE members SET trained = 1, trained_on = '2025-03-01' WHERE member_no = 'M-0004';
UPDATE lots SET packets_available = packets_available - 2 WHERE lot_code = (
  SELECT lot_code FROM lots WHERE status = 'available' AND packets_available >= 2
  ORDER BY lot_code LIMIT 1);
INSERT INTO loans (loan_code, member_no, lot_code, packets, checkout_date, due_date)
  SELECT 'LN-9001', 'M-0004', lot_code, 2, '2025-03-02', '2025-06-30' FROM lots
  WHERE status = 'available' ORDER BY lot_code LIMIT 1;
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    steps = [Step("record_training", {"member_no": "M-0004", "date": "2025-03-01"})]
    return make("seed_library", steps, LIBRARY_REFERENCE, tmp_path_factory.mktemp("library"))


def test_the_reference_end_state_of_seed_library_passes(library, tmp_path):
    got, failed = reward(library, end_state(library), tmp_path)
    assert got == 1.0, failed


def test_a_new_loan_under_another_code_passes(library, tmp_path):
    other = "UPDATE loans SET loan_code = 'LN-9777' WHERE loan_code = 'LN-9001';"
    got, failed = reward(library, end_state(library, sql=other), tmp_path)
    assert got == 1.0, failed


def _strip_checks(dump: str) -> str:
    """Every CHECK constraint taken out of the schema; the data left as it is."""
    return re.sub(r"\s*CHECK\s*\((?:[^()]|\([^()]*\))*\)", "", dump)


LIBRARY_SABOTAGE = {
    "touched member's name changed": "UPDATE members SET name = 'Mallory' WHERE member_no = 'M-0004';",
    "touched member's status set to hold": (
        "UPDATE members SET status = 'hold', hold_reason = 'x' WHERE member_no = 'M-0004';"
    ),
    "an extra table": "CREATE TABLE zz_junk (note TEXT); INSERT INTO zz_junk VALUES ('left');",
    "an extra index": "CREATE INDEX zz_idx ON members (name);",
    "a table dropped": "DROP TABLE germination_tests;",
}


@pytest.mark.parametrize("name", sorted(LIBRARY_SABOTAGE))
def test_seed_library_collateral_damage_is_not_rewarded(library, tmp_path, name):
    got, failed = reward(library, end_state(library, sql=LIBRARY_SABOTAGE[name]), tmp_path)
    assert got < 1.0 and failed, name


def test_check_constraints_stripped_from_the_schema_are_not_rewarded(library, tmp_path):
    stripped = _strip_checks(library.final_sql)
    assert stripped != library.final_sql and "CHECK" not in stripped
    got, failed = reward(library, {library.snapshot: stripped}, tmp_path)
    assert got < 1.0 and any("schema" in f for f in failed), failed


def test_a_reindented_dump_of_the_same_schema_passes(library, tmp_path):
    """The schema is compared without comments and spacing: the same tables, columns and
    constraints written another way are the same schema."""
    spaced = re.sub(r"--[^\n]*", "", library.final_sql).replace("  ", " ")
    got, failed = reward(library, {library.snapshot: spaced}, tmp_path)
    assert got == 1.0, failed


# ---------------------------------------------------------------- through the real tools


@pytest.mark.slow
def test_the_tools_called_in_another_order_reach_a_state_the_tests_accept(tmp_path):
    """Two orders placed the other way round (the real tools, in the sandbox): each order gets
    the other's code, and the reference's tests still give 1.0; a sabotage of it does not."""
    import _sabotage as S

    from clawloop.harness.sandbox.base import SandboxConfig
    from clawloop.synthesis.domain import execute
    from clawloop.synthesis.domain.ground import Grounded
    from clawloop.synthesis.domain.skills import cluster_skills
    from clawloop.synthesis.domain.synth import make_task
    from clawloop.synthesis.domain.taskgraph import TaskGraph
    from clawloop.synthesis.domain.workspace import skill_of, workspace_files

    domain = S.load_domain(S.DOMAINS["apiary_coop"])
    skills = cluster_skills(domain)
    files = workspace_files(domain, skills)
    first = Step("place_order", {"buyer_email": BUYER, "batch_code": BATCH, "kg": 2.0,
                                 "date": "2025-07-08"})  # fmt: skip
    second = Step("place_order", {"buyer_email": "orders.crumb-and@bakery.example",
                                  "batch_code": BATCH, "kg": 1.5, "date": "2025-07-09"})  # fmt: skip
    plans = [Grounded(TaskGraph(nodes=()), s).plan() for s in ([first, second], [second, first])]
    initial, (ref, other) = execute.run_plans(files, plans, SandboxConfig())
    assert ref.ok and other.ok, (ref.why, other.why)
    g = Grounded(TaskGraph(nodes=()), [first, second])
    code, _ = make_task(domain, g, initial, (ref, None), files, skill_of(skills), None)
    ns: dict = {}
    exec(compile(code, "generator.py", "exec"), ns)
    made = S.Made(domain, files, ns["build"](0), ref.final)
    codes = lambda t: {o["buyer"]: o["code"] for o in t["orders"] if o["date"] >= "2025-07-08"}  # noqa: E731
    assert codes(ref.final) != codes(other.final)  # the ids differ between the two paths
    got, failed = reward(made, end_state(made, other.final), tmp_path / "other")
    assert got == 1.0, failed
    row(other.final, "buyers", email=BUYER)["credit_limit"] = 1e9
    got, failed = reward(made, end_state(made, other.final), tmp_path / "sabotaged")
    assert got < 1.0 and failed
